//! The same sequence of group operations against a real redis-server and the in-memory
//! store: both must answer alike, so simulations on the in-memory store run the
//! protocol Redis runs. Clocks differ by nature: times are compared coarsely, and fences
//! by their order (each fence seen is replaced by its rank among all fences seen).
//!
//! One test per section (a group's life, a restore, the move budget, load reports,
//! preferences, reservations, server lifetimes), each with its own [`Cx`]; one more
//! checks that the sections answer what they claim. Every operation has a test of its
//! own besides, comparing its typed replies: [`ops`].

use std::collections::BTreeMap;
use std::time::Duration;

mod ops;

use leasehold_election::{Fence, RedisStore};
use leasehold_testkit::RedisServer;

use super::ops::read::StatusHead;
use super::ops::restore::Restored;
use super::ops::{
    Add, Drain, Held, Leave, ListPage, Moves, Owner, Prefer, ReadSetPage, ReadStatusHead, Release,
    Remove, Report, SetVersion, SetWeight, StatusPage, TakeBudget, TakeHandOffs,
};
use super::protocol::{
    Adopt, AdoptStep, Change, ClaimReply, ClaimRequest, GivenBack, MemberInfo, Move, MoveCause,
    Protocol, ReplicaState, RestoreStep, Taken, Term, TickReply, TickRequest, VersionStep,
};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;

const TTL: Duration = Duration::from_secs(5);
/// How long a partition handed to a named receiver is reserved for it.
const HOLD: Duration = Duration::from_millis(500);

/// What the script's replicas name in their ticks and claims, as replicas do: the
/// group's incarnation and the server lifetime the last tick reply named, and the roster
/// as the ticks last read it with its version ([`shape`] fills in the kept one when a
/// reply does not carry it). Redis counts the roster's changes and the in-memory store
/// hashes the roster, so a change a script forgets to count shows as a stale roster
/// here. Each section starts with its own.
#[derive(Debug, Default)]
struct Cx {
    inc: String,
    lifetime: String,
    roster: (String, Vec<MemberInfo>),
}

/// A tick that says it is quiet: on Redis every one (but a join) is sent as a
/// heartbeat first, so every answer here is also the heartbeat's where it found the
/// tick quiet, and the whole tick's where it did not. Replica `b` advertises an
/// address (its `INFO` value is `host pid`, a tab, the address); the others do not.
fn tick(cx: &Cx, replica: &str, token: &str, join: bool, state: ReplicaState) -> TickRequest {
    let plain = TickRequest::of(replica, token, join, state, TTL);
    TickRequest {
        instance: if replica == "b" {
            format!("{}\t10.0.0.7:8080", plain.instance)
        } else {
            plain.instance.clone()
        },
        quiet: true,
        incarnation: cx.inc.clone(),
        lifetime: cx.lifetime.clone(),
        roster: cx.roster.0.clone(),
        ..plain
    }
}

/// Forgets what the last group's ticks named, then joins each (replica, token) to the
/// group `k`, as replicas starting afresh do.
async fn join_afresh<B: Protocol>(cx: &mut Cx, b: &B, k: &GroupKeys, members: &[(&str, &str)]) {
    *cx = Cx::default();
    for &(r, t) in members {
        let join = TickRequest {
            quiet: false,
            ..tick(cx, r, t, true, ReplicaState::Active)
        };
        seen(cx, &b.run(k, &join).await.unwrap());
    }
}

fn claim(cx: &Cx, replica: &str, token: &str, seq: u64, count: usize) -> ClaimRequest {
    ClaimRequest::of(replica, token, seq, count, TTL, &cx.inc)
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

fn strict(op: &str) -> Change {
    Change::Strict { op: op.into() }
}

/// Fences replaced by their rank among every fence seen so far (first seen, first
/// ranked; a fence equal to one seen before gets its rank).
#[derive(Default)]
struct Ranks(BTreeMap<u64, usize>);

impl Ranks {
    fn of(&mut self, f: Fence) -> String {
        let n = self.0.len();
        format!("f{}", self.0.entry(f.get()).or_insert(n))
    }
}

/// A tick reply without its clocks: session, resumed, set, (replica, state, held) by
/// replica, unowned, grant wait (whether any), ending, drained, revoked (sorted),
/// expired, loads, weights.
/// Ticks and claims from now on name the incarnation `r` reports.
fn seen(cx: &mut Cx, r: &TickReply) {
    r.lifetime.clone_into(&mut cx.lifetime);
    if let Some(set) = &r.set {
        set.incarnation.clone_into(&mut cx.inc);
    }
}

fn shape(cx: &mut Cx, r: &TickReply, ranks: &mut Ranks) -> String {
    seen(cx, r);
    let kept = &mut cx.roster;
    r.roster.apply(&mut kept.1);
    kept.0.clone_from(&r.roster_version);
    let mut members: Vec<_> = kept
        .1
        .iter()
        .map(|m| (m.replica.clone(), m.state, m.held, m.load, m.capacity))
        .collect();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    let set = r.set.as_ref().map(|s| {
        format!(
            "({}, v{}, {:?}, w={}/{}/{}/{}, life={}, sver={}, fmax={}, {:?}, rcount={})",
            s.count,
            s.version,
            s.digest,
            s.weighted,
            s.total_weight,
            s.max_weight,
            s.weights_version,
            !s.life.is_empty(),
            s.set_version,
            ranks.of(s.highest_fence),
            s.origin,
            s.restore_count
        )
    });
    let mut revoked = r.revoked.clone();
    revoked.sort();
    format!(
        "{:?} resumed={:?} set={set:?} {members:?} unowned={} waits={} ending={} drained={} \
         revoked={revoked:?} expired={} holdings={:?}",
        r.session,
        r.resumed.as_ref().map(String::len),
        r.unowned,
        !r.grant_wait.is_zero(),
        r.ending,
        r.drained,
        r.expired,
        r.holdings.as_ref().map(Vec::len)
    )
}

fn claimed(r: &ClaimReply, ranks: &mut Ranks) -> String {
    match r {
        ClaimReply::Claimed {
            partitions,
            returned,
            unowned,
            moves,
            fell_back,
        } => {
            let p: Vec<_> = partitions
                .iter()
                .map(|(n, f, w)| format!("{n}:{}:{w}", ranks.of(*f)))
                .collect();
            let m: Vec<_> = moves
                .iter()
                .map(|p| {
                    format!(
                        "{}:{}:{:?}:{:?}",
                        p.cause,
                        p.unowned.is_some(),
                        p.fence.map(|f| ranks.of(f)),
                        p.state_bytes
                    )
                })
                .collect();
            let fell = if *fell_back { " fell_back" } else { "" };
            format!("{p:?} returned={returned:?} unowned={unowned} moves={m:?}{fell}")
        }
        ClaimReply::Wait(d) => format!("Wait(waits={})", !d.is_zero()),
        other => format!("{other:?}"),
    }
}

/// The move budget of a group of its own: one window (a day, so that the takes never
/// straddle two) of 2.
async fn budget<B: Protocol>(b: &B) -> Vec<String> {
    let k = GroupKeys::new("leasehold", "budgeted");
    let day = Duration::from_secs(86_400);
    let none = b.run(&k, &TakeBudget::new(1, 2, day)).await.unwrap();
    let seed = Change::Seed {
        life: "life-b".into(),
        grant_delay: Duration::from_millis(60),
        lease: TTL,
        gather: Duration::from_millis(60),
    };
    b.run(&k, &Add::new(&seed, &names(&["p0"]))).await.unwrap();
    let first = b.run(&k, &TakeBudget::new(3, 2, day)).await.unwrap();
    let second = b.run(&k, &TakeBudget::new(1, 2, day)).await.unwrap();
    vec![
        format!("budget: of a group that does not exist: {none}"),
        format!("budget: 3 moves wanted of a budget of 2: {first}"),
        format!("budget: 1 more in the same window: {second}"),
    ]
}

/// Load reports in a group of their own: a replica reports weights for its terms (the
/// first makes the group weighted), a stale term's and another session's are skipped,
/// a retry changes nothing, and the loads and totals follow.
async fn loads<B: Protocol>(b: &B) -> Vec<String> {
    let cx = &mut Cx::default();
    let k = GroupKeys::new("leasehold", "loaded");
    let mut out = Vec::new();
    let mut ranks = Ranks::default();
    let (a, c) = (
        "a:00000000000000000000000000000002",
        "c:00000000000000000000000000000002",
    );
    let none = b
        .run(&k, &Report::new(a, &[("p0".into(), Fence(1), 4)]))
        .await
        .unwrap();
    out.push(format!("report: a group that does not exist: {none:?}"));
    let seed = Change::Seed {
        life: "life-l".into(),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    b.run(&k, &Add::new(&seed, &names(&["p0", "p1", "p2", "p3"])))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    *cx = Cx::default();
    for (r, t) in [("a", a), ("c", c)] {
        let join = TickRequest {
            quiet: false,
            ..tick(cx, r, t, true, ReplicaState::Active)
        };
        seen(cx, &b.run(&k, &join).await.unwrap());
    }
    let mine = fences_of(&b.run(&k, &claim(cx, "a", a, 1, 2)).await.unwrap());
    let theirs = fences_of(&b.run(&k, &claim(cx, "c", c, 1, 2)).await.unwrap());
    let head = |h: Option<StatusHead>| {
        let h = h.expect("the group exists");
        format!(
            "weighted={} total={} max={} loads={:?}",
            h.set.weighted,
            h.set.total_weight,
            h.set.max_weight,
            h.members
                .iter()
                .map(|m| (&m.replica, m.load))
                .collect::<Vec<_>>()
        )
    };
    let sver = async || {
        let page = b.run(&k, &ReadSetPage::new(0, 1)).await.unwrap();
        page.expect("the group exists").set_version
    };
    let before = sver().await;
    let (p, f) = mine[0].clone();
    let report = vec![
        (p.clone(), f, 7),
        (mine[1].0.clone(), mine[1].1, 1),
        (theirs[0].0.clone(), theirs[0].1, 9),
        (p.clone(), Fence(f.get() - 1), 3),
        ("zz".to_owned(), f, 3),
    ];
    let r = b.run(&k, &Report::new(a, &report)).await.unwrap();
    out.push(format!(
        "report: a's own, another's, a stale fence, an unknown: {r:?} (fence {})",
        ranks.of(f)
    ));
    let moved = sver().await != before;
    out.push(format!(
        "report: the first weight makes the group weighted: {} (set version moved: {moved})",
        head(b.run(&k, &ReadStatusHead).await.unwrap())
    ));
    let before = sver().await;
    let r = b
        .run(&k, &Report::new(a, &[(p.clone(), f, 7)]))
        .await
        .unwrap();
    out.push(format!("report: the same again: {r:?}"));
    let r = b
        .run(&k, &Report::new(a, &[(p.clone(), f, 2)]))
        .await
        .unwrap();
    let moved = sver().await != before;
    out.push(format!(
        "report: lighter, in a weighted group: {r:?} {} (set version moved: {moved})",
        head(b.run(&k, &ReadStatusHead).await.unwrap())
    ));
    let r = b
        .run(&k, &Report::new(c, &[(p.clone(), f, 5)]))
        .await
        .unwrap();
    out.push(format!("report: c names a's term: {r:?}"));
    let gone = b
        .run(
            &k,
            &Release::new(
                a,
                &[GivenBack {
                    term: (p.clone(), f),
                    cause: MoveCause::HandOff,
                    state: None,
                    to: None,
                    lifetime: String::new(),
                }],
                TTL,
                HOLD,
            ),
        )
        .await
        .unwrap();
    let r = b
        .run(&k, &Report::new(a, &[(p.clone(), f, 6)]))
        .await
        .unwrap();
    out.push(format!(
        "report: after the term was given back: released={gone:?} {r:?} {}",
        head(b.run(&k, &ReadStatusHead).await.unwrap())
    ));
    out
}

/// Preferences in a group of their own: set, repeated, replayed, removed, shown with
/// the set and the status, dropped with their partition; and claims that take their
/// own preferred partitions first and leave others' to them (by count, and by weight).
async fn prefs<B: Protocol>(b: &B) -> Vec<String> {
    let cx = &mut Cx::default();
    let k = GroupKeys::new("leasehold", "preferred");
    let mut out = Vec::new();
    let mut ranks = Ranks::default();
    let r = b
        .run(&k, &Prefer::new(Some("pr-0"), "p0", Some("b")))
        .await
        .unwrap();
    out.push(format!("prefer: a group that does not exist: {r:?}"));
    let seed = Change::Seed {
        life: "life-p".into(),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    b.run(
        &k,
        &Add::new(&seed, &names(&["p0", "p1", "p2", "p3", "p4", "p5"])),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let sver = async || {
        let page = b.run(&k, &ReadSetPage::new(0, 1)).await.unwrap();
        page.expect("the group exists").set_version
    };
    let r = b
        .run(&k, &Prefer::new(Some("pr-1"), "zz", Some("b")))
        .await
        .unwrap();
    out.push(format!("prefer: an unknown partition: {r:?}"));
    let before = sver().await;
    let r = b
        .run(&k, &Prefer::new(Some("pr-2"), "p3", Some("b")))
        .await
        .unwrap();
    let moved = sver().await != before;
    out.push(format!(
        "prefer: p3 on b: {r:?} (set version moved: {moved})"
    ));
    let before = sver().await;
    let again = b
        .run(&k, &Prefer::new(Some("pr-2"), "p3", Some("b")))
        .await
        .unwrap();
    let same = b
        .run(&k, &Prefer::new(Some("pr-3"), "p3", Some("b")))
        .await
        .unwrap();
    let moved = sver().await != before;
    out.push(format!(
        "prefer: replayed, then the same anew: {again:?} {same:?} (set version moved: {moved})"
    ));
    b.run(&k, &Prefer::new(Some("pr-4"), "p4", Some("c")))
        .await
        .unwrap();
    b.run(&k, &Prefer::new(Some("pr-5"), "p5", Some("b")))
        .await
        .unwrap();
    let page = b.run(&k, &ReadSetPage::new(0, 2)).await.unwrap().unwrap();
    let later = b.run(&k, &ReadSetPage::new(2, 2)).await.unwrap().unwrap();
    out.push(format!(
        "prefer: the set's first page carries them: {:?}, the next none: {:?}",
        page.preferences, later.preferences
    ));
    let head = b.run(&k, &ReadStatusHead).await.unwrap().unwrap();
    out.push(format!("prefer: the status: {:?}", head.preferences));
    let (a, bt) = (
        "a:00000000000000000000000000000003",
        "b:00000000000000000000000000000003",
    );
    join_afresh(cx, b, &k, &[("a", a), ("b", bt)]).await;
    let leave = ClaimRequest {
        leave_to: vec![("b".into(), 1)],
        ..claim(cx, "a", a, 1, 3)
    };
    let r = b.run(&k, &leave).await.unwrap();
    out.push(format!(
        "prefer: a leaves one to b (room 1): {}",
        claimed(&r, &mut ranks)
    ));
    let first = ClaimRequest {
        prefer: names(&["p5", "zz", "p0", "p3"]),
        ..claim(cx, "b", bt, 1, 1)
    };
    let r = b.run(&k, &first).await.unwrap();
    out.push(format!(
        "prefer: b takes its own first, oldest first: {}",
        claimed(&r, &mut ranks)
    ));
    let r = b
        .run(&k, &Prefer::new(Some("pr-6"), "p4", None))
        .await
        .unwrap();
    out.push(format!("prefer: p4's removed: {r:?}"));
    let r = b
        .run(&k, &Prefer::new(Some("pr-7"), "p2", None))
        .await
        .unwrap();
    out.push(format!("prefer: p2 had none: {r:?}"));
    b.run(&k, &SetWeight::new(Some("pr-8"), "p4", 3))
        .await
        .unwrap();
    b.run(&k, &Prefer::new(Some("pr-9"), "p4", Some("b")))
        .await
        .unwrap();
    let weighed = |seq: u64, room: u64| ClaimRequest {
        room: Some(5),
        fallback: false,
        leave_to: vec![("b".into(), room)],
        ..claim(cx, "a", a, seq, 3)
    };
    let r = b.run(&k, &weighed(2, 3)).await.unwrap();
    out.push(format!(
        "prefer: p4 (3) fits b's room of 3: left to it (p5 is not: the room is spent): {}",
        claimed(&r, &mut ranks)
    ));
    let r = b.run(&k, &weighed(3, 2)).await.unwrap();
    out.push(format!(
        "prefer: not into a room of 2: a takes it: {}",
        claimed(&r, &mut ranks)
    ));
    b.run(&k, &Add::new(&strict("pr-11"), &names(&["p6"])))
        .await
        .unwrap();
    let only = |seq: u64, prefer: &[&str]| ClaimRequest {
        prefer: names(prefer),
        only_preferred: true,
        ..claim(cx, "b", bt, seq, 1)
    };
    let r = b.run(&k, &only(2, &["p5"])).await.unwrap();
    out.push(format!(
        "prefer: only its own, none free: {}",
        claimed(&r, &mut ranks)
    ));
    let r = b.run(&k, &only(3, &["p6"])).await.unwrap();
    out.push(format!(
        "prefer: only its own, p6 free: {}",
        claimed(&r, &mut ranks)
    ));
    let r = b
        .run(&k, &Remove::new(&strict("pr-10"), &names(&["p3"])))
        .await
        .unwrap();
    let head = b.run(&k, &ReadStatusHead).await.unwrap().unwrap();
    out.push(format!(
        "prefer: p3 removed ({r:?}), its preference with it: {:?}",
        head.preferences
    ));
    out
}

/// Terms given back as hand-offs, each leaving state for its successor.
fn handed(cx: &Cx, terms: &[Term]) -> Vec<GivenBack> {
    terms
        .iter()
        .map(|t| GivenBack {
            term: t.clone(),
            cause: MoveCause::HandOff,
            state: Some(format!("state of {}", t.0).into_bytes()),
            to: None,
            lifetime: cx.lifetime.clone(),
        })
        .collect()
}

/// The ledger of moves after entry `after`: who to whom, why, fences by rank, and
/// whether the time unowned is known (times differ between the stores' clocks).
fn ledger(moves: &[Move], ranks: &mut Ranks) -> String {
    let m: Vec<_> = moves
        .iter()
        .map(|m| {
            format!(
                "{} {:?}->{} {} {:?}->{} unowned={} held={}",
                m.partition,
                m.from,
                m.to,
                m.cause,
                m.old_fence.map(|f| ranks.of(f)),
                ranks.of(m.new_fence),
                m.unowned.is_some(),
                m.held_since_ms.is_some_and(|s| s <= m.started_ms),
            )
        })
        .collect();
    format!("{m:?}")
}

/// The fences a claim granted.
fn fences_of(r: &ClaimReply) -> Vec<(String, Fence)> {
    match r {
        ClaimReply::Claimed { partitions, .. } => {
            partitions.iter().map(|(n, f, _)| (n.clone(), *f)).collect()
        }
        other => panic!("expected a claim, got {other:?}"),
    }
}

/// Runs the script of operations and returns every answer, clocks and fences normalized.
#[allow(clippy::too_many_lines)]
async fn script<B: Protocol>(b: &B) -> Vec<String> {
    // In three parts, each a future of its own: no poll frame holds the whole story.
    let cx = &mut Cx::default();
    let ranks = &mut Ranks::default();
    let k = GroupKeys::new("leasehold", "conformance");
    let (mut out, a_first) = Box::pin(script_set_and_claims(b, &k, cx, ranks)).await;
    out.extend(Box::pin(script_drains_and_status(b, &k, cx, ranks, a_first)).await);
    out.extend(Box::pin(script_expiry_weights_and_restarts(b, &k, cx, ranks)).await);
    out
}

/// The script, first part: the group is created, its list versioned, partitions
/// claimed, released with state and handed off; the ledger. Returns a's first term.
async fn script_set_and_claims<B: Protocol>(
    b: &B,
    k: &GroupKeys,
    cx: &mut Cx,
    ranks: &mut Ranks,
) -> (Vec<String>, Term) {
    let mut out = Vec::new();
    let mut log = |what: &str, v: String| out.push(format!("{what}: {v}"));
    let (a, b1) = (
        "a:00000000000000000000000000000001",
        "b:00000000000000000000000000000001",
    );
    let seed = Change::Seed {
        life: "life-1".into(),
        grant_delay: Duration::from_millis(60),
        lease: TTL,
        gather: Duration::from_millis(60),
    };

    let r = b
        .run(k, &tick(cx, "a", a, true, ReplicaState::Settling))
        .await
        .unwrap();
    log("a joins a group that does not exist", shape(cx, &r, ranks));
    let r = b
        .run(k, &Add::new(&strict("op-1"), &names(&["x"])))
        .await
        .unwrap();
    log("an operator's add never creates it", format!("{r:?}"));
    let r = b
        .run(k, &Add::new(&seed, &names(&["p0", "p1", "p2"])))
        .await
        .unwrap();
    log("a seeds it with 3", format!("{r:?}"));
    let r = b
        .run(k, &tick(cx, "a", a, true, ReplicaState::Settling))
        .await
        .unwrap();
    log("then a joins it", shape(cx, &r, ranks));
    let r = b.run(k, &claim(cx, "a", a, 1, 2)).await.unwrap();
    log("a claim before the grant wait", claimed(&r, ranks));
    let r = b
        .run(k, &Add::new(&strict("op-2"), &names(&["x"])))
        .await
        .unwrap();
    log("an operator's add waits out the window", format!("{r:?}"));
    let r = b
        .run(k, &Add::new(&seed, &names(&["p2", "p3", "p4", "p4"])))
        .await
        .unwrap();
    log("the seed goes on with overlapping names", format!("{r:?}"));
    let other = Change::Seed {
        life: "life-2".into(),
        grant_delay: Duration::from_millis(60),
        lease: TTL,
        gather: Duration::from_millis(60),
    };
    let r = b.run(k, &Add::new(&other, &names(&["q"]))).await.unwrap();
    log("another replica's seed", format!("{r:?}"));
    tokio::time::sleep(Duration::from_millis(80)).await;
    let r = b
        .run(k, &Add::new(&strict("op-3"), &names(&["p9", "p4"])))
        .await
        .unwrap();
    log("strict add of a present one", format!("{r:?}"));
    let r = b
        .run(k, &Add::new(&strict("op-3"), &names(&["p9", "p4"])))
        .await
        .unwrap();
    log("the same request again", format!("{r:?}"));
    let r = b
        .run(k, &SetVersion::new(2, VersionStep::Begin))
        .await
        .unwrap();
    log("version 2 begins", format!("{r}"));
    let r = b
        .run(k, &SetVersion::new(2, VersionStep::Begin))
        .await
        .unwrap();
    log("and may be continued", format!("{r}"));
    let r = b
        .run(k, &Add::new(&Change::Versioned(1), &names(&["p9"])))
        .await
        .unwrap();
    log("a version 1 addition is stale", format!("{r:?}"));
    let r = b
        .run(k, &Remove::new(&Change::Versioned(1), &names(&["p0"])))
        .await
        .unwrap();
    log("and so is a removal", format!("{r:?}"));
    let r = b
        .run(k, &Add::new(&Change::Versioned(2), &names(&["p4"])))
        .await
        .unwrap();
    log("a version 2 addition is not", format!("{r:?}"));
    let r = b
        .run(k, &SetVersion::new(2, VersionStep::Done("v2")))
        .await
        .unwrap();
    log("version 2 applied", format!("{r}"));
    let r = b
        .run(k, &SetVersion::new(2, VersionStep::Begin))
        .await
        .unwrap();
    log("once applied it is not begun again", format!("{r}"));
    let r = b
        .run(k, &SetVersion::new(1, VersionStep::Done("v1")))
        .await
        .unwrap();
    log("an older version is not recorded", format!("{r}"));
    let r = b
        .run(k, &tick(cx, "a", a, false, ReplicaState::Active))
        .await
        .unwrap();
    log("a renews", shape(cx, &r, ranks));
    let r = b
        .run(k, &tick(cx, "a", a, false, ReplicaState::Active))
        .await
        .unwrap();
    log("a tick sent twice", shape(cx, &r, ranks));
    let r = b
        .run(k, &tick(cx, "a", "a:other", true, ReplicaState::Settling))
        .await
        .unwrap();
    log("a second process for a", shape(cx, &r, ranks));
    let r = b.run(k, &claim(cx, "a", a, 2, 2)).await.unwrap();
    log("a claims 2", claimed(&r, ranks));
    let a_terms = fences_of(&r);
    let r = b.run(k, &claim(cx, "a", a, 2, 2)).await.unwrap();
    log(
        "the same claim again gets the same answer",
        claimed(&r, ranks),
    );
    let r = b.run(k, &claim(cx, "a", a, 1, 2)).await.unwrap();
    log("an older one is stale", claimed(&r, ranks));
    let r = b
        .run(
            k,
            &ClaimRequest {
                process: "a:other".into(),
                ..claim(cx, "a", a, 3, 2)
            },
        )
        .await
        .unwrap();
    log(
        "a process that does not hold the session",
        claimed(&r, ranks),
    );
    let r = b
        .run(k, &tick(cx, "b", b1, true, ReplicaState::Active))
        .await
        .unwrap();
    log("b joins", shape(cx, &r, ranks));
    let r = b.run(k, &claim(cx, "b", b1, 1, 10)).await.unwrap();
    log("b claims the rest", claimed(&r, ranks));
    let b_terms = fences_of(&r);
    let p3 = b_terms.iter().find(|(n, _)| n == "p3").unwrap().clone();
    let mut both = a_terms.clone();
    both.push(p3.clone());
    both.push(a_terms[0].clone());
    let r = b
        .run(k, &Release::new(a, &handed(cx, &both), TTL, HOLD))
        .await
        .unwrap();
    log(
        "a releases its own (twice in one batch) and b's p3",
        format!("{r:?}"),
    );
    let r = b
        .run(k, &Release::new(a, &handed(cx, &a_terms), TTL, HOLD))
        .await
        .unwrap();
    log("a releases them again", format!("{r:?}"));
    let r = b.run(k, &Held::new(a)).await.unwrap();
    log("a holds", format!("{}", r.len()));
    let r = b.run(k, &claim(cx, "a", a, 3, 1)).await.unwrap();
    log("a claims one back", claimed(&r, ranks));
    let r = b.run(k, &claim(cx, "b", b1, 2, 10)).await.unwrap();
    log("b claims again", claimed(&r, ranks));
    let previous: Vec<Term> = match &r {
        ClaimReply::Claimed {
            partitions, moves, ..
        } => partitions
            .iter()
            .zip(moves)
            .filter(|(_, p)| p.state_bytes.is_some())
            .filter_map(|((n, _, _), p)| Some((n.clone(), p.fence?)))
            .collect(),
        other => panic!("expected a claim, got {other:?}"),
    };
    let mut asked = previous.clone();
    asked.extend(previous.iter().map(|(n, f)| (n.clone(), Fence(f.0 - 1))));
    asked.push(("p9".to_owned(), Fence(1)));
    let shown = |taken: Vec<Taken>| -> String {
        let t: Vec<_> = taken
            .iter()
            .map(|t| match t {
                Taken::State(s) => String::from_utf8_lossy(s).into_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        format!("{t:?}")
    };
    let r = b.run(k, &TakeHandOffs::new(&previous)).await.unwrap();
    log("b takes the state a's term left", shown(r));
    let r = b.run(k, &TakeHandOffs::new(&asked)).await.unwrap();
    log(
        "b takes it again (a retry), then as an earlier term's, then a partition with none",
        shown(r),
    );
    let later: Vec<Term> = previous
        .iter()
        .map(|(n, f)| (n.clone(), Fence(f.0 + 1)))
        .collect();
    let r = b.run(k, &TakeHandOffs::new(&later)).await.unwrap();
    log("named as a later term's, it is stale", shown(r));
    let r = b.run(k, &TakeHandOffs::new(&previous)).await.unwrap();
    log("and deleted", shown(r));
    let r = b.run(k, &Moves::new(None, 100)).await.unwrap();
    log(
        "the ledger: first owners, then a's hand-offs to b",
        ledger(&r, ranks),
    );
    let after = r.get(r.len().saturating_sub(2)).map(|m| m.id.clone());
    let r = b.run(k, &Moves::new(after.as_deref(), 100)).await.unwrap();
    log("the ledger after its last but one entry", ledger(&r, ranks));
    (out, a_terms[0].clone())
}

/// The script, second part: a late release, drains, the status, regrants, pages.
async fn script_drains_and_status<B: Protocol>(
    b: &B,
    k: &GroupKeys,
    cx: &mut Cx,
    ranks: &mut Ranks,
    a_first: Term,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut log = |what: &str, v: String| out.push(format!("{what}: {v}"));
    let (a, b1) = (
        "a:00000000000000000000000000000001",
        "b:00000000000000000000000000000001",
    );
    let b_terms = b.run(k, &Held::new(b1)).await.unwrap();
    // A late release of a's old term of p0 (b holds p0 now) touches nothing.
    let r = b
        .run(k, &Release::new(b1, &handed(cx, &[a_first]), TTL, HOLD))
        .await
        .unwrap();
    log("a release of another term", format!("{r:?}"));
    let owner = b
        .run(k, &Owner::new("p0"))
        .await
        .unwrap()
        .expect("p0 is a partition");
    log("p0's owner", format!("{:?}", owner.owner));
    log(
        "an unknown partition's owner",
        format!("{:?}", b.run(k, &Owner::new("nope")).await.unwrap()),
    );
    let r = b
        .run(k, &Remove::new(&strict("op-4"), &names(&["p2", "zz"])))
        .await
        .unwrap();
    log("strict remove of an unknown one", format!("{r:?}"));
    let r = b
        .run(
            k,
            &Remove::new(&strict("op-5"), &names(&["p0", "p1", "p2", "p3", "p4"])),
        )
        .await
        .unwrap();
    log("strict remove of every one", format!("{r:?}"));
    let r = b
        .run(k, &Remove::new(&strict("op-6"), &names(&["p2"])))
        .await
        .unwrap();
    log("b's p2 removed", format!("{r:?}"));
    let r = b
        .run(k, &Remove::new(&strict("op-6"), &names(&["p2"])))
        .await
        .unwrap();
    log("the same removal again", format!("{r:?}"));
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("b is told to give p2 up", shape(cx, &r, ranks));
    let p2 = b_terms.iter().find(|(n, _, _)| n == "p2").unwrap();
    let r = b
        .run(
            k,
            &ClaimRequest {
                regrant: vec![(p2.0.clone(), p2.1)],
                ..claim(cx, "b", b1, 3, 0)
            },
        )
        .await
        .unwrap();
    log(
        "a regrant of the removed p2 gives it back",
        claimed(&r, ranks),
    );
    let r = b.run(k, &Drain::new(None, "a", true, false)).await.unwrap();
    log("a drained", format!("{r:?}"));
    let r = b.run(k, &Drain::new(None, "b", true, false)).await.unwrap();
    log("the last one taking part", format!("{r:?}"));
    let r = b
        .run(k, &Drain::new(None, "ghost", true, false))
        .await
        .unwrap();
    log("a replica that is not live", format!("{r:?}"));
    let r = b
        .run(k, &tick(cx, "a", a, false, ReplicaState::Draining))
        .await
        .unwrap();
    log("a sees it", shape(cx, &r, ranks));
    let r = b
        .run(
            k,
            &TickRequest {
                ttl: Duration::from_secs(30),
                ..tick(cx, "a", a, false, ReplicaState::Away)
            },
        )
        .await
        .unwrap();
    log("a parks for 30 s", shape(cx, &r, ranks));
    let head = b.run(k, &ReadStatusHead).await.unwrap().unwrap();
    let left = head
        .members
        .iter()
        .find(|m| m.replica == "a")
        .map(|m| m.left.as_secs().div_ceil(10) * 10);
    log("its session's time left, to 10 s", format!("{left:?}"));
    let r = b
        .run(k, &tick(cx, "a", a, false, ReplicaState::Active))
        .await
        .unwrap();
    log(
        "a tick of the parked process delivered late",
        shape(cx, &r, ranks),
    );
    let back = "a:new-process";
    let r = b
        .run(k, &tick(cx, "a", back, true, ReplicaState::Settling))
        .await
        .unwrap();
    log("a comes back and resumes", shape(cx, &r, ranks));
    let r = b
        .run(k, &tick(cx, "a", back, true, ReplicaState::Settling))
        .await
        .unwrap();
    log(
        "its resume again (the reply was lost)",
        shape(cx, &r, ranks),
    );
    let head = b.run(k, &ReadStatusHead).await.unwrap().unwrap();
    let left = head
        .members
        .iter()
        .find(|m| m.replica == "a")
        .map(|m| m.left.as_millis().div_ceil(1000));
    log("the resumed session's time left, in s", format!("{left:?}"));
    let held = b.run(k, &Held::new(a)).await.unwrap();
    let regrant = ClaimRequest {
        process: back.into(),
        // p4 is b's: only what the session holds gets a new term.
        regrant: held
            .iter()
            .map(|(n, f, _)| (n.clone(), *f))
            .chain([("p4".to_owned(), Fence(1))])
            .collect(),
        ..claim(cx, "a", a, 1, 0)
    };
    let r = b.run(k, &regrant).await.unwrap();
    log("a, drained, regrants what it holds", claimed(&r, ranks));
    let r = b
        .run(k, &Drain::new(None, "a", false, false))
        .await
        .unwrap();
    log("a undrained", format!("{r:?}"));
    let r = b
        .run(k, &tick(cx, "a", a, false, ReplicaState::Active))
        .await
        .unwrap();
    log("the old process's tick", format!("{:?}", r.session));
    b.run(k, &Leave::new("a", "a:someone", a)).await.unwrap();
    let r = b
        .run(
            k,
            &TickRequest {
                process: back.into(),
                ..tick(cx, "a", a, false, ReplicaState::Active)
            },
        )
        .await
        .unwrap();
    log(
        "a leave by a process that does not hold it",
        format!("{:?}", r.session),
    );
    b.run(k, &Leave::new("a", back, a)).await.unwrap();
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("after a left", shape(cx, &r, ranks));
    let r = b.run(k, &claim(cx, "b", b1, 4, 10)).await.unwrap();
    log("b takes a's", claimed(&r, ranks));
    let head = b
        .run(k, &ReadStatusHead)
        .await
        .unwrap()
        .expect("the group exists");
    log(
        "status head",
        format!(
            "{} {:?} {:?} drained={:?}",
            head.set.count,
            head.members
                .iter()
                .map(|m| (&m.replica, m.held))
                .collect::<Vec<_>>(),
            head.instances,
            head.drained,
        ),
    );
    let page = b.run(k, &StatusPage::new(1, 3)).await.unwrap();
    log(
        "status page 1..4",
        format!(
            "{:?}",
            page.iter()
                .map(|p| (&p.partition, &p.owner, p.weight))
                .collect::<Vec<_>>()
        ),
    );
    log(
        "list",
        format!("{:?}", b.run(k, &ListPage::new(0, 100)).await.unwrap()),
    );
    let page = b.run(k, &ReadSetPage::new(0, 100)).await.unwrap().unwrap();
    log(
        "set page",
        format!(
            "{:?} v{} {:?} {:?}",
            page.names, page.version, page.digest, page.drained
        ),
    );

    out
}

/// The script, third part: an expiry freed over ticks, weights, a restart after a
/// crash.
async fn script_expiry_weights_and_restarts<B: Protocol>(
    b: &B,
    k: &GroupKeys,
    cx: &mut Cx,
    ranks: &mut Ranks,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut log = |what: &str, v: String| out.push(format!("{what}: {v}"));
    let b1 = "b:00000000000000000000000000000001";
    // A session that expires holding more than one reap budget: freed over ticks.
    let short = Duration::from_millis(40);
    let c = "c:00000000000000000000000000000001";
    let many: Vec<String> = (0..300).map(|i| format!("m{i:03}")).collect();
    let r = b.run(k, &Add::new(&strict("op-7"), &many)).await.unwrap();
    log("300 more", format!("{r:?}"));
    b.run(
        k,
        &TickRequest {
            ttl: short,
            ..tick(cx, "c", c, true, ReplicaState::Active)
        },
    )
    .await
    .unwrap();
    let r = b
        .run(
            k,
            &ClaimRequest {
                ttl: short,
                ..claim(cx, "c", c, 1, 300)
            },
        )
        .await
        .unwrap();
    log("c claims them all", format!("{}", fences_of(&r).len()));
    tokio::time::sleep(short * 2).await;
    let r = b.run(k, &claim(cx, "c", c, 2, 1)).await.unwrap();
    log("c's expired session claims nothing", format!("{r:?}"));
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("b finds c expired", shape(cx, &r, ranks));
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("and frees the rest", shape(cx, &r, ranks));

    // Weights.
    let r = b
        .run(k, &SetWeight::new(Some("op-8"), "zz", 2))
        .await
        .unwrap();
    log("the weight of an unknown partition", format!("{r:?}"));
    let r = b
        .run(k, &SetWeight::new(Some("op-9"), "p1", 5))
        .await
        .unwrap();
    log("b's p1 weighs 5", format!("{r:?}"));
    let r = b
        .run(k, &SetWeight::new(Some("op-9"), "p1", 5))
        .await
        .unwrap();
    log("the same weight request again", format!("{r:?}"));
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("b's load counts it", shape(cx, &r, ranks));
    let d = "d:00000000000000000000000000000001";
    let r = b
        .run(
            k,
            &TickRequest {
                capacity: 2,
                ..tick(cx, "d", d, true, ReplicaState::Active)
            },
        )
        .await
        .unwrap();
    log("d joins with capacity 2", shape(cx, &r, ranks));
    let with_room = |seq: u64, room: u64| ClaimRequest {
        room: Some(room),
        fallback: true,
        ..claim(cx, "d", d, seq, 10)
    };
    let r = b
        .run(k, &SetWeight::new(Some("op-10"), "m000", 3))
        .await
        .unwrap();
    log("free m000 weighs 3", format!("{r:?}"));
    let first_only = ClaimRequest {
        count: 1,
        ..with_room(1, 2)
    };
    let r = b.run(k, &first_only).await.unwrap();
    log("nothing fits into 2: d takes the first", claimed(&r, ranks));
    let r = b.run(k, &with_room(2, 2)).await.unwrap();
    log("two more fit into 2", claimed(&r, ranks));
    let r = b
        .run(k, &tick(cx, "d", d, false, ReplicaState::Active))
        .await
        .unwrap();
    log("loads after the moves", shape(cx, &r, ranks));
    let head = b
        .run(k, &ReadStatusHead)
        .await
        .unwrap()
        .expect("the group exists");
    log(
        "weighted status",
        format!(
            "{} {} {} {:?}",
            head.set.weighted,
            head.set.total_weight,
            head.set.max_weight,
            head.members
                .iter()
                .map(|m| (&m.replica, m.load, m.capacity))
                .collect::<Vec<_>>()
        ),
    );

    // A restart after a crash: the knocking process gets the old session.
    let e1 = "e:00000000000000000000000000000001";
    let e2 = "e:00000000000000000000000000000002";
    let e_ttl = Duration::from_millis(100);
    let sticky = |cx: &Cx, t: &str, join: bool| TickRequest {
        ttl: e_ttl,
        grace: Some(Duration::from_millis(1)),
        ..tick(cx, "e", t, join, ReplicaState::Active)
    };
    b.run(k, &sticky(cx, e1, true)).await.unwrap();
    let r = b
        .run(
            k,
            &ClaimRequest {
                ttl: e_ttl,
                ..claim(cx, "e", e1, 1, 2)
            },
        )
        .await
        .unwrap();
    log("e claims 2", format!("{}", fences_of(&r).len()));
    let r = b.run(k, &sticky(cx, e2, true)).await.unwrap();
    log(
        "e restarted after a crash knocks",
        format!("{:?}", r.session),
    );
    // Its old session expires (a ttl after the claim), the knock is good for two.
    tokio::time::sleep(e_ttl * 3 / 2).await;
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("e's old session expires into away", shape(cx, &r, ranks));
    let r = b.run(k, &sticky(cx, e2, true)).await.unwrap();
    log("the knocker resumes it", shape(cx, &r, ranks));

    // A sticky replica that crashes and nobody knocks: its session expires into away
    // for its grace after its last tick, the crashed process's late claim takes
    // nothing, and a new process of it resumes the session.
    let f1 = "f:00000000000000000000000000000001";
    let f2 = "f:00000000000000000000000000000002";
    let f_ttl = Duration::from_millis(100);
    let graced = |cx: &Cx, t: &str, join: bool, grace: Duration| TickRequest {
        ttl: f_ttl,
        grace: Some(grace),
        ..tick(cx, "f", t, join, ReplicaState::Active)
    };
    let f_claim = |cx: &Cx, t: &str, seq: u64| ClaimRequest {
        ttl: f_ttl,
        ..claim(cx, "f", t, seq, 1)
    };
    b.run(k, &graced(cx, f1, true, f_ttl * 6)).await.unwrap();
    let r = b.run(k, &f_claim(cx, f1, 1)).await.unwrap();
    log("f claims 1", format!("{}", fences_of(&r).len()));
    tokio::time::sleep(f_ttl * 3 / 2).await;
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log(
        "f's crashed session expires into away",
        shape(cx, &r, ranks),
    );
    let r = b.run(k, &f_claim(cx, f1, 2)).await.unwrap();
    log("a late claim of the crashed process", claimed(&r, ranks));
    let r = b.run(k, &graced(cx, f1, false, f_ttl * 6)).await.unwrap();
    log(
        "a late tick of the crashed process",
        format!("{:?}", r.session),
    );
    let r = b.run(k, &graced(cx, f2, true, f_ttl * 6)).await.unwrap();
    log("a new process of f resumes it", shape(cx, &r, ranks));
    // The same again, and nobody comes back: the session ends at its grace.
    let f3 = "f:00000000000000000000000000000003";
    let r = b.run(k, &f_claim(cx, f2, 1)).await.unwrap();
    log("f claims again", claimed(&r, ranks));
    // Its grace is the one its join said (6 ttls), whatever later ticks say.
    b.run(k, &graced(cx, f2, false, f_ttl * 3)).await.unwrap();
    tokio::time::sleep(f_ttl * 3 / 2).await;
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("f's second crash parks it too", shape(cx, &r, ranks));
    tokio::time::sleep(f_ttl * 5).await;
    let r = b
        .run(k, &tick(cx, "b", b1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("f's grace is over", shape(cx, &r, ranks));
    let r = b.run(k, &graced(cx, f3, true, f_ttl * 3)).await.unwrap();
    log("f after its grace starts afresh", shape(cx, &r, ranks));

    out
}

/// A group seeded from a list (p0, p1, p2) brought to a copy of an earlier lifetime
/// (p1, p2 at weight 3, x1 new; p0 removed; a drain and a preference): begun, refused
/// to another copy and to an operator meanwhile, its steps, the set it ends with, and
/// an adopt refused once an operator changed a seeded group.
async fn adopt<B: Protocol>(b: &B) -> Vec<String> {
    let cx = &mut Cx::default();
    let ranks = &mut Ranks::default();
    let k = GroupKeys::new("leasehold", "adopted");
    let mut out = Vec::new();
    let mut log = |step: &str, what: String| out.push(format!("{step}: {what}"));
    let seed = Change::Seed {
        life: "life-seeded".into(),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    b.run(&k, &Add::new(&seed, &names(&["p0", "p1", "p2"])))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let r1 = "r:00000000000000000000000000000001";
    join_afresh(cx, b, &k, &[("r", r1)]).await;
    let r = b.run(&k, &claim(cx, "r", r1, 1, 3)).await.unwrap();
    log("r claims the seeded set", claimed(&r, ranks));
    let step = |sver: u64, step: AdoptStep| Adopt {
        life: "life-earlier".into(),
        set_version: sver,
        step,
    };
    let begin = |sver: u64| {
        step(
            sver,
            AdoptStep::Begin {
                seeded: "life-seeded".into(),
                version: 0,
                digest: String::new(),
                highest_fence: Fence(1),
                drained: vec!["z".into()],
                preferences: vec![("p1".into(), "r".into())],
            },
        )
    };
    log(
        "begin",
        format!("{:?}", b.run(&k, &begin(7)).await.unwrap()),
    );
    log(
        "begin again",
        format!("{:?}", b.run(&k, &begin(7)).await.unwrap()),
    );
    log(
        "another copy's begin",
        format!("{:?}", b.run(&k, &begin(6)).await.unwrap()),
    );
    let held = b
        .run(&k, &Add::new(&strict("op-1"), &names(&["y"])))
        .await
        .unwrap();
    log(
        "an operator's change meanwhile",
        without_waits(&format!("{held:?}")),
    );
    let ws = vec![("p1".into(), 1), ("p2".into(), 3), ("x1".into(), 1)];
    log(
        "names",
        format!(
            "{:?}",
            b.run(&k, &step(7, AdoptStep::Names(ws))).await.unwrap()
        ),
    );
    log(
        "listed",
        format!("{:?}", b.run(&k, &ListPage::new(0, 10)).await.unwrap()),
    );
    log(
        "remove",
        format!(
            "{:?}",
            b.run(&k, &step(7, AdoptStep::Remove(names(&["p0"]))))
                .await
                .unwrap()
        ),
    );
    let r = b
        .run(&k, &tick(cx, "r", r1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("r is told to give p0 up", shape(cx, &r, ranks));
    log(
        "done",
        format!("{:?}", b.run(&k, &step(7, AdoptStep::Done)).await.unwrap()),
    );
    log(
        "done again",
        format!("{:?}", b.run(&k, &step(7, AdoptStep::Done)).await.unwrap()),
    );
    let page = b
        .run(&k, &ReadSetPage::new(0, 10))
        .await
        .unwrap()
        .expect("the group exists");
    log(
        "the adopted set",
        format!(
            "{} {} {:?} {:?} {:?}",
            page.life, page.set_version, page.names, page.drained, page.preferences
        ),
    );
    let r = b
        .run(&k, &tick(cx, "r", r1, false, ReplicaState::Active))
        .await
        .unwrap();
    log("after it", shape(cx, &r, ranks));

    // A seeded group an operator changed keeps its set.
    let k2 = GroupKeys::new("leasehold", "amended");
    b.run(&k2, &Add::new(&seed, &names(&["p0"]))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    b.run(&k2, &Add::new(&strict("op-2"), &names(&["p9"])))
        .await
        .unwrap();
    log(
        "a begin after an operator's change",
        format!("{:?}", b.run(&k2, &begin(7)).await.unwrap()),
    );
    out
}

/// The restore steps of `copy` (to run against a store that lost the group).
async fn restore<B: Protocol>(b: &B) -> Vec<String> {
    let cx = &mut Cx::default();
    cx.inc.clear();
    cx.roster = (String::new(), Vec::new());
    let k = GroupKeys::new("leasehold", "restored");
    let mut out = Vec::new();
    let mut log = |what: &str, v: String| out.push(format!("{what}: {v}"));
    let of = |v: u64| Restored {
        life: "life-9".into(),
        set_version: v,
        grant_delay: Duration::from_millis(60),
        count: 3,
    };
    let begin = |v: u64, names: Vec<(String, u64)>| RestoreStep::Begin {
        of: of(v),
        version: 4,
        digest: "dg".into(),
        lease: TTL,
        highest_fence: Fence(1 << 52),
        weighted: true,
        weights_version: 2,
        drained: names_of(&["r2"]),
        preferences: vec![("p1".into(), "r1".into())],
        names,
    };
    let r = b
        .run(
            &k,
            &Add::new(
                &Change::Seed {
                    life: "seed".into(),
                    grant_delay: Duration::from_millis(60),
                    lease: TTL,
                    gather: Duration::from_millis(60),
                },
                &names(&["s0"]),
            ),
        )
        .await
        .unwrap();
    log("a replica without a copy seeds it", format!("{r:?}"));
    let r = b
        .run(&k, &begin(7, vec![("p0".into(), 1), ("p1".into(), 4)]))
        .await
        .unwrap();
    log("a replica with a copy takes over", format!("{r}"));
    let r = b.run(&k, &begin(6, vec![("old".into(), 1)])).await.unwrap();
    log("an older copy does not", format!("{r}"));
    let r = b.run(&k, &begin(7, vec![("p0".into(), 1)])).await.unwrap();
    log("the same copy again", format!("{r}"));
    let t = b
        .run(&k, &tick(cx, "r1", "r1:01", true, ReplicaState::Settling))
        .await
        .unwrap();
    seen(cx, &t);
    log(
        "what a tick sees midway",
        format!(
            "{:?}",
            t.set.as_ref().map(|s| (s.count, s.restore_count, s.origin))
        ),
    );
    let r = b
        .run(
            &k,
            &RestoreStep::Add {
                of: of(7),
                names: vec![("p2".into(), 1)],
            },
        )
        .await
        .unwrap();
    log("the rest of the copy", format!("{r}"));
    let r = b
        .run(
            &k,
            &RestoreStep::Add {
                of: of(6),
                names: vec![("old".into(), 1)],
            },
        )
        .await
        .unwrap();
    log("nothing of another copy", format!("{r}"));
    let page = b.run(&k, &ReadSetPage::new(0, 100)).await.unwrap().unwrap();
    log(
        "the group restored",
        format!(
            "{:?} v{} {:?} w={} {:?} sver={} fmax_kept={} prefs={:?}",
            page.names,
            page.version,
            page.digest,
            page.weighted,
            page.drained,
            page.set_version,
            page.highest_fence.get() >= 1 << 52,
            page.preferences
        ),
    );
    let t = b
        .run(&k, &tick(cx, "r1", "r1:01", false, ReplicaState::Settling))
        .await
        .unwrap();
    log(
        "a tick sees it",
        format!(
            "{:?} waits={}",
            t.set
                .as_ref()
                .map(|s| (s.count, s.restore_count, s.origin, s.total_weight)),
            !t.grant_wait.is_zero()
        ),
    );
    let r = b
        .run(&k, &Remove::new(&strict("op-r"), &names(&["p0"])))
        .await
        .unwrap();
    log(
        "an operator's change waits out the window",
        format!("{r:?}"),
    );
    let c = b.run(&k, &claim(cx, "r1", "r1:01", 1, 3)).await.unwrap();
    log("and so do claims", format!("{c:?}"));
    let d = b
        .run(&k, &Drain::new(Some("op-d"), "r1", true, true))
        .await
        .unwrap();
    log("and drains", format!("{d:?}"));
    tokio::time::sleep(Duration::from_millis(80)).await;
    let r = b
        .run(&k, &Remove::new(&strict("op-r"), &names(&["p0"])))
        .await
        .unwrap();
    log("then it goes through", format!("{r:?}"));
    // r2 is drained (the copy said so) and not live.
    let d = b
        .run(&k, &Drain::new(Some("op-u"), "r2", false, false))
        .await
        .unwrap();
    log("an undrain of a replica that is not live", format!("{d:?}"));
    let d = b
        .run(&k, &Drain::new(Some("op-u"), "r2", false, false))
        .await
        .unwrap();
    log("the same undrain again", format!("{d:?}"));
    let d = b
        .run(&k, &Drain::new(Some("op-v"), "r2", false, false))
        .await
        .unwrap();
    log("another undrain of it", format!("{d:?}"));
    let t = b
        .run(&k, &tick(cx, "r1", "r1:01", false, ReplicaState::Settling))
        .await
        .unwrap();
    log(
        "and the restore is over",
        format!("{:?}", t.set.as_ref().map(|s| (s.count, s.restore_count))),
    );
    // A tick naming another server lifetime than the store's (the server changed since
    // the replica's last tick) lists what the session holds.
    let t = b
        .run(
            &k,
            &TickRequest {
                lifetime: "elsewhere".into(),
                ..tick(cx, "r1", "r1:01", false, ReplicaState::Active)
            },
        )
        .await
        .unwrap();
    log(
        "a tick naming another server lifetime",
        format!("{:?} {:?}", t.session, t.holdings.as_ref().map(Vec::len)),
    );
    // A session lives in one incarnation of the group: a tick or claim naming another
    // (Redis lost the group since, and a late copy of the session's join started it
    // again) is refused, and changes nothing.
    let elsewhere = "s:seed:1".to_owned();
    let t = b
        .run(
            &k,
            &TickRequest {
                incarnation: elsewhere.clone(),
                ..tick(cx, "r1", "r1:01", false, ReplicaState::Active)
            },
        )
        .await
        .unwrap();
    log("a tick of another incarnation", format!("{:?}", t.session));
    let c = b
        .run(
            &k,
            &ClaimRequest {
                incarnation: elsewhere,
                ..claim(cx, "r1", "r1:01", 2, 3)
            },
        )
        .await
        .unwrap();
    log("a claim of another incarnation", format!("{c:?}"));
    let t = b
        .run(&k, &tick(cx, "r1", "r1:01", false, ReplicaState::Active))
        .await
        .unwrap();
    log("the session itself lives on", format!("{:?}", t.session));
    out
}

/// Hand-overs to a named receiver: reserved for it for the hold (others' claims skip
/// the partition, its own take it first), free to anyone after; a repeated release
/// reserves nothing once the next term has started.
async fn reserved<B: Protocol>(b: &B) -> Vec<String> {
    let cx = &mut Cx::default();
    let k = GroupKeys::new("leasehold", "reserved");
    let mut out = Vec::new();
    let mut ranks = Ranks::default();
    let seed = Change::Seed {
        life: "life-r".into(),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    b.run(
        &k,
        &Add::new(&seed, &names(&["p0", "p1", "p2", "p3", "p4"])),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (a, bt, c) = (
        "a:00000000000000000000000000000004",
        "b:00000000000000000000000000000004",
        "c:00000000000000000000000000000004",
    );
    join_afresh(cx, b, &k, &[("a", a), ("b", bt), ("c", c)]).await;
    let r = b.run(&k, &claim(cx, "a", a, 1, 5)).await.unwrap();
    let terms = fences_of(&r);
    out.push(format!("reserve: a takes all: {}", claimed(&r, &mut ranks)));
    let give = |i: usize, to: Option<&str>| GivenBack {
        term: terms[i].clone(),
        cause: MoveCause::HandOff,
        state: None,
        to: to.map(str::to_owned),
        lifetime: String::new(),
    };
    // p1 to c, p2 to nobody, p3 to b.
    let gone = b
        .run(
            &k,
            &Release::new(
                a,
                &[give(1, Some("c")), give(2, None), give(3, Some("b"))],
                TTL,
                HOLD,
            ),
        )
        .await
        .unwrap();
    out.push(format!(
        "reserve: a hands p1 to c, p2 to anyone, p3 to b: {gone:?}"
    ));
    let r = b.run(&k, &claim(cx, "b", bt, 1, 3)).await.unwrap();
    out.push(format!(
        "reserve: b asks for 3: its own p3 first, then p2; never c's p1: {}",
        claimed(&r, &mut ranks)
    ));
    let t = b
        .run(&k, &tick(cx, "c", c, false, ReplicaState::Active))
        .await
        .unwrap();
    seen(cx, &t);
    out.push(format!(
        "reserve: c's tick counts what is reserved for it: {}",
        t.reserved
    ));
    let no_bound = ClaimRequest {
        room: Some(4),
        fallback: false,
        bound: 0,
        ..claim(cx, "c", c, 1, 2)
    };
    let r = b.run(&k, &no_bound).await.unwrap();
    out.push(format!(
        "reserve: c (a room of 4, no bound) leaves its p1: {}",
        claimed(&r, &mut ranks)
    ));
    let weighed = ClaimRequest {
        room: Some(0),
        fallback: false,
        bound: 1,
        ..claim(cx, "c", c, 2, 2)
    };
    let r = b.run(&k, &weighed).await.unwrap();
    out.push(format!(
        "reserve: c (no room, a bound of 1) takes its p1: {}",
        claimed(&r, &mut ranks)
    ));
    let again = b
        .run(&k, &Release::new(a, &[give(1, Some("c"))], TTL, HOLD))
        .await
        .unwrap();
    out.push(format!(
        "reserve: a's release of p1 again, after c's term started: {again:?}"
    ));
    // p4 to c for a short hold: after it, anyone takes it.
    let short = b
        .run(
            &k,
            &Release::new(a, &[give(4, Some("c"))], TTL, Duration::from_millis(30)),
        )
        .await
        .unwrap();
    let r = b.run(&k, &claim(cx, "b", bt, 2, 1)).await.unwrap();
    out.push(format!(
        "reserve: p4 to c ({short:?}), b during the hold: {}",
        claimed(&r, &mut ranks)
    ));
    tokio::time::sleep(Duration::from_millis(80)).await;
    let r = b.run(&k, &claim(cx, "b", bt, 3, 1)).await.unwrap();
    out.push(format!(
        "reserve: b after the hold: {}",
        claimed(&r, &mut ranks)
    ));
    // With preferences too: a's p0 to c; b, preferring p0, skips it; c takes it.
    b.run(&k, &Prefer::new(Some("rs-1"), "p0", Some("b")))
        .await
        .unwrap();
    b.run(&k, &Release::new(a, &[give(0, Some("c"))], TTL, HOLD))
        .await
        .unwrap();
    let pref = ClaimRequest {
        prefer: names(&["p0"]),
        ..claim(cx, "b", bt, 4, 1)
    };
    let r = b.run(&k, &pref).await.unwrap();
    out.push(format!(
        "reserve: b prefers p0, reserved for c: {}",
        claimed(&r, &mut ranks)
    ));
    let r = b.run(&k, &claim(cx, "c", c, 3, 1)).await.unwrap();
    out.push(format!(
        "reserve: c takes p0 in a group with preferences: {}",
        claimed(&r, &mut ranks)
    ));
    let moves = b.run(&k, &Moves::new(None, 100)).await.unwrap();
    out.push(format!(
        "reserve: the ledger: {}",
        ledger(&moves, &mut ranks)
    ));
    out
}

/// State is noted with the server lifetime the releasing replica named: a release that
/// names another than the server's (a retry that reached a server promoted since the
/// replica decided) leaves state the next owner is never offered.
async fn lifetimes<B: Protocol>(b: &B) -> Vec<String> {
    let cx = &mut Cx::default();
    let k = GroupKeys::new("leasehold", "lifetimes");
    let mut out = Vec::new();
    let mut ranks = Ranks::default();
    let seed = Change::Seed {
        life: "life-l".into(),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    b.run(&k, &Add::new(&seed, &names(&["p0", "p1"])))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (a, bt) = (
        "a:00000000000000000000000000000005",
        "b:00000000000000000000000000000005",
    );
    join_afresh(cx, b, &k, &[("a", a), ("b", bt)]).await;
    let r = b.run(&k, &claim(cx, "a", a, 1, 2)).await.unwrap();
    let terms = fences_of(&r);
    out.push(format!(
        "lifetimes: a takes both: {}",
        claimed(&r, &mut ranks)
    ));
    let now = cx.lifetime.clone();
    assert!(!now.is_empty(), "the ticks named the server's lifetime");
    let give = |i: usize, lifetime: &str| GivenBack {
        term: terms[i].clone(),
        cause: MoveCause::HandOff,
        state: Some(format!("state of {}", terms[i].0).into_bytes()),
        to: None,
        lifetime: lifetime.to_owned(),
    };
    let gone = b
        .run(
            &k,
            &Release::new(a, &[give(0, &now), give(1, "elsewhere")], TTL, HOLD),
        )
        .await
        .unwrap();
    out.push(format!(
        "lifetimes: a releases both with state, p1's naming another lifetime: {gone:?}"
    ));
    let r = b.run(&k, &claim(cx, "b", bt, 1, 2)).await.unwrap();
    out.push(format!(
        "lifetimes: b takes both: {}",
        claimed(&r, &mut ranks)
    ));
    let ClaimReply::Claimed {
        partitions, moves, ..
    } = &r
    else {
        panic!("expected a claim, got {r:?}");
    };
    for ((name, _, _), p) in partitions.iter().zip(moves) {
        if name == "p0" {
            assert!(
                p.state_bytes.is_some() && !p.state_before_server_change,
                "p0's state, left in the server's lifetime, is offered: {p:?}"
            );
        } else {
            assert!(
                p.state_bytes.is_none() && p.state_before_server_change,
                "p1's state, left naming another lifetime, is not: {p:?}"
            );
        }
    }
    assert_eq!(partitions.len(), 2, "{r:?}");
    // A replica with a longer lease than the group's creator claims: the group's
    // lease (its hold after a server change) follows it up, and never down.
    let long = ClaimRequest {
        ttl: TTL * 3,
        ..claim(cx, "b", bt, 2, 1)
    };
    b.run(&k, &long).await.unwrap();
    let short = ClaimRequest {
        ttl: TTL / 5,
        ..claim(cx, "b", bt, 3, 1)
    };
    b.run(&k, &short).await.unwrap();
    let r = b
        .run(&k, &tick(cx, "a", a, false, ReplicaState::Active))
        .await
        .unwrap();
    out.push(format!(
        "lifetimes: the group's lease after claims with 3 and 1/5 of its lease: {:?}",
        r.set.map(|s| s.lease)
    ));
    out
}

fn names_of(list: &[&str]) -> Vec<String> {
    names(list)
}

/// `Restoring(54ms)` and `Wait(1.2s)` as `Restoring(…)`, `Wait(…)`: clocks differ.
fn without_waits(line: &str) -> String {
    let mut out = line.to_owned();
    for word in ["Restoring(", "Wait("] {
        let mut from = 0;
        while let Some(i) = out[from..].find(word) {
            let start = from + i + word.len();
            let Some(end) = out[start..].find(')') else {
                break;
            };
            out.replace_range(start..start + end, "…");
            from = start;
        }
    }
    out
}

/// Each section on a redis-server of its own and on the in-memory store: both must
/// answer every step alike (a test per section, named after it; a difference names
/// its step).
macro_rules! alike {
    ($($test:ident: $section:ident,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let redis = RedisServer::start();
            let store = RedisStore::builder(redis.url()).build().unwrap();
            let on_redis = Box::pin($section(&store)).await;
            let in_memory = Box::pin($section(&MemoryGroupStore::new())).await;
            assert_alike(&on_redis, &in_memory);
        }
    )*};
}

alike! {
    a_groups_life_answers_alike: script,
    a_restore_answers_alike: restore,
    the_move_budget_answers_alike: budget,
    load_reports_answer_alike: loads,
    preferences_answer_alike: prefs,
    reservations_for_named_receivers_answer_alike: reserved,
    server_lifetimes_answer_alike: lifetimes,
    an_adopt_answers_alike: adopt,
}

/// The lines of one section from both stores, compared step by step (times coarsely).
fn assert_alike(on_redis: &[String], in_memory: &[String]) {
    assert!(!on_redis.is_empty(), "the section said nothing");
    let on_redis: Vec<String> = on_redis.iter().map(|l| without_waits(l)).collect();
    let in_memory: Vec<String> = in_memory.iter().map(|l| without_waits(l)).collect();
    for (r, m) in on_redis.iter().zip(&in_memory) {
        assert_eq!(r, m, "Redis and the in-memory store differ");
    }
    assert_eq!(
        on_redis.len(),
        in_memory.len(),
        "{on_redis:#?}\n{in_memory:#?}"
    );
}

/// The sections check what they claim to (on Redis; the tests above show the
/// in-memory store answers alike), and every step the checks name is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_section_answers_what_it_claims() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url()).build().unwrap();
    let mut on_redis = Box::pin(script(&store)).await;
    on_redis.extend(Box::pin(restore(&store)).await);
    on_redis.extend(Box::pin(budget(&store)).await);
    on_redis.extend(Box::pin(loads(&store)).await);
    on_redis.extend(Box::pin(prefs(&store)).await);
    on_redis.extend(Box::pin(reserved(&store)).await);
    on_redis.extend(Box::pin(lifetimes(&store)).await);
    on_redis.extend(Box::pin(adopt(&store)).await);
    let on_redis: Vec<String> = on_redis.iter().map(|l| without_waits(l)).collect();
    let expect = |step: &str, part: &str| {
        let line = on_redis
            .iter()
            .find(|l| l.starts_with(&format!("{step}:")))
            .unwrap_or_else(|| panic!("no step {step:?}"));
        assert!(
            line.contains(part),
            "{line}\nexpected it to contain {part:?}"
        );
    };
    expect(
        "the ledger: first owners, then a's hand-offs to b",
        r#""p2 None->b new None->f2 unowned=false held=false""#,
    );
    expect(
        "the ledger: first owners, then a's hand-offs to b",
        r#""p1 Some(\"a\")->b handoff Some(\"f1\")->f4 unowned=true held=true"]"#,
    );
    expect("nothing fits into 2: d takes the first", "fell_back");
    for want in [
        "budget: of a group that does not exist: 0",
        "budget: 3 moves wanted of a budget of 2: 2",
        "budget: 1 more in the same window: 0",
    ] {
        assert!(
            on_redis.iter().any(|l| l == want),
            "{want:?}: {on_redis:#?}"
        );
    }
    for (step, part) in [
        (
            "reserve: b asks for 3: its own p3 first, then p2; never c's p1",
            r#"["p3:f1:1", "p2:f1:1"] returned=[] unowned=1"#,
        ),
        ("reserve: c's tick counts what is reserved for it", "1"),
        (
            "reserve: c (a room of 4, no bound) leaves its p1",
            "[] returned",
        ),
        (
            "reserve: c (no room, a bound of 1) takes its p1",
            r#"["p1:f2:1"]"#,
        ),
        (
            "reserve: a's release of p1 again, after c's term started",
            "[false]",
        ),
        (
            "reserve: p4 to c ([true]), b during the hold",
            "[] returned",
        ),
        ("reserve: b after the hold", r#"["p4:f3:1"]"#),
        ("reserve: b prefers p0, reserved for c", "[] returned"),
        (
            "reserve: c takes p0 in a group with preferences",
            r#"["p0:f4:1"]"#,
        ),
    ] {
        expect(step, part);
    }
    expect(
        "report: a's own, another's, a stale fence, an unknown",
        "[true, true, false, false, false]",
    );
    expect(
        "report: the first weight makes the group weighted",
        r#"weighted=true total=10 max=7 loads=[("a", 8), ("c", 2)] (set version moved: true)"#,
    );
    expect("report: the same again", "[true]");
    expect(
        "report: lighter, in a weighted group",
        r#"[true] weighted=true total=5 max=2 loads=[("a", 3), ("c", 2)] (set version moved: false)"#,
    );
    expect("report: c names a's term", "[false]");
    for want in [
        "prefer: a group that does not exist: NoGroup",
        "prefer: an unknown partition: Unknown",
        "prefer: p3 on b: Set(None) (set version moved: true)",
        r#"prefer: replayed, then the same anew: Set(None) Set(Some("b")) (set version moved: false)"#,
        r#"prefer: the set's first page carries them: [("p3", "b"), ("p4", "c"), ("p5", "b")], the next none: []"#,
        r#"prefer: the status: [("p3", "b"), ("p4", "c"), ("p5", "b")]"#,
        r#"prefer: p4's removed: Set(Some("c"))"#,
        "prefer: p2 had none: Set(None)",
        r#"prefer: p3 removed (Removed(1)), its preference with it: [("p4", "b"), ("p5", "b")]"#,
    ] {
        assert!(
            on_redis.iter().any(|l| l == want),
            "{want:?}: {on_redis:#?}"
        );
    }
    expect(
        "prefer: a leaves one to b (room 1)",
        r#"["p0:f0:1", "p1:f0:1", "p2:f0:1"]"#,
    );
    expect("prefer: b takes its own first, oldest first", r#"["p3:"#);
    expect(
        "prefer: p4 (3) fits b's room of 3: left to it (p5 is not: the room is spent)",
        r#"["p5:f2:1"] returned=[] unowned=1"#,
    );
    expect("prefer: not into a room of 2: a takes it", r#"["p4:"#);
    expect(
        "prefer: only its own, none free",
        "[] returned=[] unowned=1",
    );
    expect("prefer: only its own, p6 free", r#"["p6:"#);
    expect(
        "report: after the term was given back",
        r#"released=[true] [false] weighted=true total=5 max=2 loads=[("a", 1), ("c", 2)]"#,
    );
    expect(
        "the ledger after its last but one entry",
        r#"["p1 Some(\"a\")->b handoff"#,
    );
    expect("b takes the state a's term left", r#"["state of p1"]"#);
    expect(
        "b takes it again (a retry), then as an earlier term's, then a partition with none",
        r#"["state of p1", "Stale", "Gone"]"#,
    );
    expect("named as a later term's, it is stale", r#"["Stale"]"#);
    expect("and deleted", r#"["Gone"]"#);
    expect("a claims one back", r#"handoff:true:Some(\"f1\"):Some(11)"#);
    expect("a joins a group that does not exist", "NoGroup");
    expect("a joins a group that does not exist", "set=None");
    expect("then a joins it", "Live");
    expect("an operator's add never creates it", "NoGroup");
    expect("a seeds it with 3", "Added(3)");
    expect("a claim before the grant wait", "Wait(…)");
    expect("an operator's add waits out the window", "Restoring(");
    expect("the seed goes on with overlapping names", "Added(2)");
    expect("another replica's seed", "Stale");
    expect("strict add of a present one", r#"Exists("p4")"#);
    expect("the same request again", r#"Exists("p4")"#);
    expect("version 2 begins", "true");
    expect("and may be continued", "true");
    expect("a version 1 addition is stale", "Stale");
    expect("and so is a removal", "Stale");
    expect("a version 2 addition is not", "Added(0)");
    expect("version 2 applied", "true");
    expect("once applied it is not begun again", "false");
    expect("an older version is not recorded", "false");
    expect("a renews", r#"(5, v2, \"v2\""#);
    expect("a tick sent twice", "Live");
    expect("a second process for a", "Refused(DuplicateReplica)");
    expect("a claims 2", r#"["p0:"#);
    expect("the same claim again gets the same answer", r#"["p0:"#);
    expect("an older one is stale", "Stale");
    expect("a process that does not hold the session", "Lost");
    expect(
        "a releases its own (twice in one batch) and b's p3",
        "[true, true, false, true]",
    );
    expect("a releases them again", "[true, true]");
    expect("a holds", "0");
    expect("a claims one back", r#"["p0:"#);
    expect("a release of another term", "[false]");
    expect("an unknown partition's owner", "None");
    expect("strict remove of an unknown one", r#"Unknown("zz")"#);
    expect("strict remove of every one", "Last");
    expect("b's p2 removed", "Removed(1)");
    expect("the same removal again", "Removed(1)");
    expect("b is told to give p2 up", r#"revoked=[("p2", "removed")]"#);
    expect(
        "a regrant of the removed p2 gives it back",
        r#"[] returned=["p2"]"#,
    );
    expect("a drained", "Done");
    expect("the last one taking part", "Last");
    expect("a replica that is not live", "Unknown");
    expect("a sees it", "drained=true");
    expect("its session's time left, to 10 s", "Some(30)");
    expect("a tick of the parked process delivered late", "Lost");
    expect("a comes back and resumes", "resumed=Some(34)");
    expect("its resume again (the reply was lost)", "resumed=Some(34)");
    expect("the resumed session's time left, in s", "Some(5)");
    expect(
        "a, drained, regrants what it holds",
        r#"[] returned=["p0"]"#,
    );
    expect("the old process's tick", "Lost");
    expect("a leave by a process that does not hold it", "Live");
    expect("b takes a's", "unowned=0");
    expect("c claims them all", "300");
    expect("c's expired session claims nothing", "Lost");
    expect("b finds c expired", "ending=1");
    expect("b finds c expired", "expired=300");
    expect("and frees the rest", "ending=0");
    expect("and frees the rest", "expired=0");
    expect("the weight of an unknown partition", "Unknown");
    expect("b's p1 weighs 5", "Set(1)");
    expect("the same weight request again", "Set(1)");
    expect("nothing fits into 2: d takes the first", r#"["m000:"#);
    expect("two more fit into 2", r#"["m001:f8:1", "m002:f8:1"]"#);
    expect("loads after the moves", r#"("d", Active, 3, 5, 2)"#);
    expect(
        "e restarted after a crash knocks",
        "Refused(DuplicateReplica)",
    );
    expect("e's old session expires into away", r#"("e", Away, 2"#);
    expect("e's old session expires into away", "expired=0");
    expect("the knocker resumes it", "resumed=Some(34)");
    expect("f's crashed session expires into away", r#"("f", Away, 1"#);
    expect("a late claim of the crashed process", "Lost");
    expect("a late tick of the crashed process", "Lost");
    expect("a new process of f resumes it", "resumed=Some(34)");
    expect("a new process of f resumes it", r#"("f", Active, 1"#);
    expect("f's second crash parks it too", r#"("f", Away,"#);
    expect("f's grace is over", "expired=1");
    expect("f after its grace starts afresh", "resumed=None");
    expect(
        "lifetimes: the group's lease after claims with 3 and 1/5 of its lease",
        "Some(15s)",
    );
    expect("begin", "Done");
    expect("begin again", "Done");
    expect("another copy's begin", "Refused(Other)");
    expect("an operator's change meanwhile", "Restoring(");
    expect("names", "Done");
    expect("listed", r#"["p0", "p1", "p2", "x1"]"#);
    expect("r is told to give p0 up", r#"revoked=[("p0", "removed")]"#);
    expect("done", "Done");
    expect("done again", "Refused(Other)");
    expect(
        "the adopted set",
        r#"life-earlier 8 [("p1", 1), ("p2", 3), ("x1", 1)] ["z"] [("p1", "r")]"#,
    );
    expect("a begin after an operator's change", "Refused(Amended)");
    expect("a replica without a copy seeds it", "Added(1)");
    expect("a replica with a copy takes over", "true");
    expect("an older copy does not", "false");
    expect("the same copy again", "true");
    expect("what a tick sees midway", "(2, 3, Restore)");
    expect("nothing of another copy", "false");
    expect(
        "the group restored",
        r#"[("p0", 1), ("p1", 4), ("p2", 1)] v4 "dg" w=true ["r2"] sver=7 fmax_kept=true prefs=[("p1", "r1")]"#,
    );
    expect("a tick sees it", "(3, 3, Restore, 6)) waits=true");
    expect("an operator's change waits out the window", "Restoring(");
    expect("and so do claims", "Wait(");
    expect("and drains", "Restoring(");
    expect("then it goes through", "Removed(1)");
    expect("an undrain of a replica that is not live", "Done");
    expect("the same undrain again", "Done");
    expect("another undrain of it", "Unknown");
    expect("and the restore is over", "(2, 0)");
    expect("a tick of another incarnation", "Lost");
    expect("a claim of another incarnation", "Lost");
    expect("the session itself lives on", "Live");
}
