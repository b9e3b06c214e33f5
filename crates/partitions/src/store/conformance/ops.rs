//! One conformance test per operation: each runs the same few steps on a redis-server
//! of its own and on the in-memory store, and compares the operation's typed replies
//! (`assert_eq!`). Clocks differ by nature: a reply's fences are replaced by their rank
//! among the fences the test has seen ([`Ranks`]), and its durations by whether there
//! is one (see each reply's [`Normal`]).
//!
//! The parts: the fixture ([`group`]) and the normal forms, then one function per
//! operation, named after it, listed once in [`per_op!`].

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::{Fence, RedisStore};
use leasehold_testkit::RedisServer;

use super::{Cx, HOLD, TTL, claim, fences_of, names, seen, strict, tick};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::PartitionOwner;
use crate::store::ops::adopt::{Adopt, AdoptReply, AdoptStep};
use crate::store::ops::budget::TakeBudget;
use crate::store::ops::change::{Add, AddReply, Change, Remove, RemoveReply};
use crate::store::ops::drain::{Drain, DrainReply};
use crate::store::ops::handoff::{TakeHandOffs, Taken};
use crate::store::ops::held::Held;
use crate::store::ops::leave::Leave;
use crate::store::ops::moves::{Move, MoveCause, Moves, NewestMoves};
use crate::store::ops::prefer::{Prefer, PreferReply};
use crate::store::ops::read::{ListPage, Owner, ReadSetPage, ReadStatusHead, SetPage, StatusPage};
use crate::store::ops::release::{GivenBack, Release};
use crate::store::ops::report::Report;
use crate::store::ops::restore::{RestoreStep, Restored};
use crate::store::ops::routes::{RouteBody, RouteRead, Routes};
use crate::store::ops::version::SetVersion;
use crate::store::ops::weight::{SetWeight, WeightReply};
use crate::store::protocol::{
    ClaimReply, Granted, Protocol, ReplicaState, SessionReply, Term, TickReply, TickRequest,
};

/// Replica a's session token, and c's.
const A: &str = "a:00000000000000000000000000000009";
const C: &str = "c:00000000000000000000000000000009";

/// A group `k` seeded with `list`, joined by a and c, where a claimed the first `held`
/// partitions (its terms are returned).
async fn group<B: Protocol>(b: &B, k: &GroupKeys, list: &[&str], held: usize) -> (Cx, Vec<Term>) {
    let seed = Change::Seed {
        life: "life-o".into(),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    b.run(k, &Add::new(&seed, &names(list))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut cx = Cx::default();
    for (r, t) in [("a", A), ("c", C)] {
        let join = TickRequest {
            quiet: false,
            ..tick(&cx, r, t, true, ReplicaState::Active)
        };
        seen(&mut cx, &b.run(k, &join).await.unwrap());
    }
    let terms = if held == 0 {
        Vec::new()
    } else {
        fences_of(&b.run(k, &claim(&cx, "a", A, 1, held)).await.unwrap())
    };
    (cx, terms)
}

fn keys() -> GroupKeys {
    GroupKeys::new("leasehold", "per-op")
}

/// Fences replaced by their rank among every fence seen so far (first seen, first
/// ranked).
#[derive(Debug, Default)]
struct Ranks(BTreeMap<u64, u64>);

impl Ranks {
    fn of(&mut self, f: Fence) -> Fence {
        let n = self.0.len() as u64;
        Fence(*self.0.entry(f.get()).or_insert(n))
    }
}

/// A reply in the form both stores must give alike: fences by rank, durations by
/// whether there is one.
trait Normal {
    fn normal(self, ranks: &mut Ranks) -> Self;
}

/// The mark a duration leaves in a normal form: any duration is this one.
const SOME_TIME: Duration = Duration::from_secs(1);

fn some_time(d: Duration) -> Duration {
    if d.is_zero() { d } else { SOME_TIME }
}

impl Normal for Vec<Granted> {
    fn normal(self, ranks: &mut Ranks) -> Self {
        self.into_iter()
            .map(|(n, f, w)| (n, ranks.of(f), w))
            .collect()
    }
}

impl Normal for ClaimReply {
    fn normal(self, ranks: &mut Ranks) -> Self {
        match self {
            Self::Claimed {
                partitions,
                returned,
                unowned,
                moves,
                fell_back,
            } => Self::Claimed {
                partitions: partitions.normal(ranks),
                returned,
                unowned,
                moves: moves
                    .into_iter()
                    .map(|mut m| {
                        m.unowned = m.unowned.map(|_| SOME_TIME);
                        m.fence = m.fence.map(|f| ranks.of(f));
                        m
                    })
                    .collect(),
                fell_back,
            },
            Self::Wait(d) => Self::Wait(some_time(d)),
            other => other,
        }
    }
}

impl Normal for Option<PartitionOwner> {
    fn normal(self, ranks: &mut Ranks) -> Self {
        self.map(|o| PartitionOwner {
            fence: ranks.of(o.fence),
            remaining: o.remaining.map(|_| SOME_TIME),
            held_for: o.held_for.map(|_| SOME_TIME),
            ..o
        })
    }
}

impl Normal for Vec<PartitionOwner> {
    fn normal(self, ranks: &mut Ranks) -> Self {
        self.into_iter()
            .map(|o| Some(o).normal(ranks).expect("some"))
            .collect()
    }
}

impl Normal for Vec<Move> {
    fn normal(self, ranks: &mut Ranks) -> Self {
        self.into_iter()
            .map(|m| Move {
                id: String::new(),
                old_fence: m.old_fence.map(|f| ranks.of(f)),
                new_fence: ranks.of(m.new_fence),
                ended_ms: m.ended_ms.map(|_| 1),
                held_since_ms: m.held_since_ms.map(|_| 1),
                started_ms: 1,
                unowned: m.unowned.map(|_| SOME_TIME),
                ..m
            })
            .collect()
    }
}

impl Normal for Option<SetPage> {
    fn normal(self, ranks: &mut Ranks) -> Self {
        self.map(|p| SetPage {
            life: String::new(),
            highest_fence: ranks.of(p.highest_fence),
            ..p
        })
    }
}

impl Normal for Option<RouteRead> {
    fn normal(self, ranks: &mut Ranks) -> Self {
        self.map(|r| RouteRead {
            life: String::new(),
            last: r.last.map(|_| String::new()),
            body: match r.body {
                // Redis reads the table in hash order: by partition here.
                RouteBody::Table(mut t) => {
                    t.sort();
                    RouteBody::Table(t.into_iter().map(|(p, o, f)| (p, o, ranks.of(f))).collect())
                }
                RouteBody::After(a) => RouteBody::After(
                    a.into_iter()
                        .map(|(p, o, f, _)| (p, o, ranks.of(f), String::new()))
                        .collect(),
                ),
                RouteBody::Gap => RouteBody::Gap,
            },
            ..r
        })
    }
}

/// What a tick replies, without its clocks and versions: the session, whether it
/// resumed, the set's count and list version, the roster (replica, state, held),
/// unowned, whether the group waits to grant, ending, drained, revoked, expired,
/// reserved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TickSeen {
    session: SessionReply,
    resumed: bool,
    set: Option<(usize, u64)>,
    roster: Vec<(String, ReplicaState, usize)>,
    unowned: usize,
    waits: bool,
    ending: usize,
    drained: bool,
    revoked: Vec<(String, String)>,
    expired: usize,
    reserved: usize,
}

fn tick_seen(cx: &mut Cx, r: &TickReply) -> TickSeen {
    seen(cx, r);
    r.roster.apply(&mut cx.roster.1);
    cx.roster.0.clone_from(&r.roster_version);
    let mut roster: Vec<_> = cx
        .roster
        .1
        .iter()
        .map(|m| (m.replica.clone(), m.state, m.held))
        .collect();
    roster.sort();
    TickSeen {
        session: r.session,
        resumed: r.resumed.is_some(),
        set: r.set.as_ref().map(|s| (s.count, s.version)),
        roster,
        unowned: r.unowned,
        waits: !r.grant_wait.is_zero(),
        ending: r.ending,
        drained: r.drained,
        revoked: r.revoked.clone(),
        expired: r.expired,
        reserved: r.reserved,
    }
}

async fn op_tick<B: Protocol>(b: &B) -> Vec<TickSeen> {
    let k = keys();
    let mut cx = Cx::default();
    let none = b
        .run(&k, &tick(&cx, "a", A, true, ReplicaState::Active))
        .await
        .unwrap();
    let mut out = vec![tick_seen(&mut cx, &none)];
    let (mut cx, _) = group(b, &k, &["p0", "p1", "p2"], 2).await;
    for state in [ReplicaState::Active, ReplicaState::Draining] {
        let r = b.run(&k, &tick(&cx, "c", C, false, state)).await.unwrap();
        out.push(tick_seen(&mut cx, &r));
    }
    let dup = TickRequest {
        quiet: false,
        ..tick(&cx, "a", C, true, ReplicaState::Active)
    };
    let r = b.run(&k, &dup).await.unwrap();
    out.push(tick_seen(&mut cx, &r));
    out
}

async fn op_claim<B: Protocol>(b: &B) -> Vec<ClaimReply> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let (cx, _) = group(b, &k, &["p0", "p1", "p2"], 0).await;
    let mut out = Vec::new();
    for req in [
        claim(&cx, "a", A, 1, 2),
        claim(&cx, "a", A, 1, 2),
        claim(&cx, "a", A, 0, 2),
        claim(&cx, "c", C, 1, 5),
        claim(&cx, "c", "c:0000000000000000000000000000000f", 1, 1),
    ] {
        out.push(b.run(&k, &req).await.unwrap().normal(ranks));
    }
    out
}

async fn op_release<B: Protocol>(b: &B) -> Vec<Vec<bool>> {
    let k = keys();
    let (cx, terms) = group(b, &k, &["p0", "p1", "p2"], 2).await;
    let given = |t: &Term| GivenBack {
        state: Some(b"s".to_vec()),
        lifetime: cx.lifetime.clone(),
        ..GivenBack::plain(t.clone(), MoveCause::HandOff)
    };
    let release = |session: &str, terms: Vec<GivenBack>| Release {
        session: session.to_owned(),
        terms,
        state_ttl: TTL,
        hold: HOLD,
    };
    let stale = GivenBack::plain((terms[1].0.clone(), Fence(1)), MoveCause::HandOff);
    vec![
        b.run(&k, &release(C, vec![given(&terms[0])]))
            .await
            .unwrap(),
        b.run(&k, &release(A, vec![given(&terms[0]), stale]))
            .await
            .unwrap(),
        b.run(&k, &release(A, vec![given(&terms[0])]))
            .await
            .unwrap(),
        b.run(&k, &release(A, Vec::new())).await.unwrap(),
    ]
}

async fn op_take_hand_offs<B: Protocol>(b: &B) -> Vec<Vec<Taken>> {
    let k = keys();
    let (cx, terms) = group(b, &k, &["p0", "p1"], 1).await;
    let given = GivenBack {
        state: Some(b"state of p0".to_vec()),
        lifetime: cx.lifetime.clone(),
        ..GivenBack::plain(terms[0].clone(), MoveCause::HandOff)
    };
    let release = Release {
        session: A.to_owned(),
        terms: vec![given],
        state_ttl: TTL,
        hold: HOLD,
    };
    b.run(&k, &release).await.unwrap();
    let (p0, f) = terms[0].clone();
    let take = |terms: Vec<Term>| TakeHandOffs(terms);
    vec![
        b.run(&k, &take(vec![(p0.clone(), f)])).await.unwrap(),
        b.run(&k, &take(vec![(p0.clone(), f)])).await.unwrap(),
        b.run(
            &k,
            &take(vec![(p0.clone(), Fence(f.get() + 1)), ("p1".into(), f)]),
        )
        .await
        .unwrap(),
    ]
}

async fn op_leave<B: Protocol>(b: &B) -> (Vec<usize>, TickSeen) {
    let k = keys();
    let (mut cx, _) = group(b, &k, &["p0", "p1"], 2).await;
    let process = tick(&cx, "a", A, false, ReplicaState::Active).instance;
    let leave = |process: &str| Leave {
        replica: "a".into(),
        process: process.to_owned(),
        session: A.to_owned(),
    };
    let mut held = Vec::new();
    b.run(&k, &leave("another process")).await.unwrap();
    held.push(b.run(&k, &Held(A.into())).await.unwrap().len());
    b.run(&k, &leave(&process)).await.unwrap();
    b.run(&k, &leave(&process)).await.unwrap();
    held.push(b.run(&k, &Held(A.into())).await.unwrap().len());
    let r = b
        .run(&k, &tick(&cx, "c", C, false, ReplicaState::Active))
        .await
        .unwrap();
    (held, tick_seen(&mut cx, &r))
}

async fn op_add<B: Protocol>(b: &B) -> Vec<AddReply> {
    let k = keys();
    let add = |mode: Change, list: &[&str]| Add {
        mode,
        names: names(list),
    };
    let mut out = vec![b.run(&k, &add(strict("o1"), &["x"])).await.unwrap()];
    group(b, &k, &["p0", "p1"], 0).await;
    for op in [
        add(strict("o2"), &["p2", "p3"]),
        add(strict("o2"), &["p2", "p3"]),
        add(strict("o3"), &["p4", "p0"]),
        add(Change::Ensure, &["p0", "p5"]),
        add(Change::Versioned(3), &["p6"]),
    ] {
        out.push(b.run(&k, &op).await.unwrap());
    }
    out
}

async fn op_remove<B: Protocol>(b: &B) -> Vec<RemoveReply> {
    let k = keys();
    let remove = |mode: Change, list: &[&str]| Remove {
        mode,
        names: names(list),
    };
    let mut out = vec![b.run(&k, &remove(strict("o1"), &["x"])).await.unwrap()];
    group(b, &k, &["p0", "p1", "p2"], 2).await;
    for op in [
        remove(strict("o2"), &["zz"]),
        remove(strict("o3"), &["p0", "p1", "p2"]),
        remove(strict("o4"), &["p0"]),
        remove(strict("o4"), &["p0"]),
        remove(Change::Ensure, &["p0", "p2"]),
    ] {
        out.push(b.run(&k, &op).await.unwrap());
    }
    out
}

async fn op_list_page<B: Protocol>(b: &B) -> Vec<Vec<String>> {
    let k = keys();
    let page = |offset, limit| ListPage { offset, limit };
    let mut out = vec![b.run(&k, &page(0, 10)).await.unwrap()];
    group(b, &k, &["p0", "p1", "p2", "p3"], 0).await;
    for p in [page(0, 10), page(1, 2), page(3, 5), page(9, 5)] {
        out.push(b.run(&k, &p).await.unwrap());
    }
    out
}

async fn op_set_page<B: Protocol>(b: &B) -> Vec<Option<SetPage>> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let page = |offset, limit| ReadSetPage { offset, limit };
    let mut out = vec![b.run(&k, &page(0, 10)).await.unwrap()];
    group(b, &k, &["p0", "p1", "p2"], 1).await;
    b.run(&k, &SetWeight::new(None, "p1", 4)).await.unwrap();
    b.run(&k, &Drain::new(None, "c", true, false))
        .await
        .unwrap();
    b.run(&k, &Prefer::new(None, "p2", Some("c")))
        .await
        .unwrap();
    for p in [page(0, 10), page(1, 1)] {
        out.push(b.run(&k, &p).await.unwrap().normal(ranks));
    }
    out
}

async fn op_set_version<B: Protocol>(b: &B) -> Vec<bool> {
    let k = keys();
    let v = |version, done: Option<&str>| SetVersion {
        version,
        done: done.map(str::to_owned),
    };
    let mut out = vec![b.run(&k, &v(1, None)).await.unwrap()];
    group(b, &k, &["p0"], 0).await;
    for step in [
        v(2, None),
        v(2, None),
        v(1, None),
        v(2, Some("d2")),
        v(2, None),
        v(1, Some("d1")),
        v(3, Some("d3")),
    ] {
        out.push(b.run(&k, &step).await.unwrap());
    }
    out
}

async fn op_restore<B: Protocol>(b: &B) -> (Vec<bool>, Vec<String>, Option<SetPage>) {
    let k = keys();
    let ranks = &mut Ranks::default();
    let of = |life: &str, set_version| Restored {
        life: life.into(),
        set_version,
        grant_delay: Duration::from_millis(1),
        count: 3,
    };
    let begin = |of: Restored| RestoreStep::Begin {
        of,
        version: 4,
        digest: "dg".into(),
        lease: TTL,
        highest_fence: Fence(1_000),
        weighted: true,
        weights_version: 2,
        drained: vec!["r2".into()],
        preferences: vec![("p1".into(), "r1".into())],
        names: vec![("p0".into(), 1), ("p1".into(), 4)],
    };
    let add = |of: Restored| RestoreStep::Add {
        of,
        names: vec![("p2".into(), 1)],
    };
    let mut out = Vec::new();
    for step in [
        add(of("life-r", 7)),
        begin(of("life-r", 7)),
        begin(of("life-r", 7)),
        begin(of("life-r", 6)),
        add(of("life-other", 7)),
        add(of("life-r", 7)),
    ] {
        out.push(b.run(&k, &step).await.unwrap());
    }
    let list = b
        .run(
            &k,
            &ListPage {
                offset: 0,
                limit: 10,
            },
        )
        .await
        .unwrap();
    let page = b
        .run(
            &k,
            &ReadSetPage {
                offset: 0,
                limit: 10,
            },
        )
        .await
        .unwrap()
        .normal(ranks);
    (out, list, page)
}

async fn op_adopt<B: Protocol>(b: &B) -> (Vec<AdoptReply>, Vec<String>) {
    let k = keys();
    let adopt = |step: AdoptStep| Adopt {
        life: "life-earlier".into(),
        set_version: 8,
        step,
    };
    let begin = |seeded: &str| {
        adopt(AdoptStep::Begin {
            seeded: seeded.into(),
            version: 2,
            digest: "d".into(),
            highest_fence: Fence(5),
            drained: vec!["z".into()],
            preferences: vec![("p1".into(), "r".into())],
        })
    };
    let mut out = vec![b.run(&k, &begin("life-o")).await.unwrap()];
    group(b, &k, &["p0", "p1"], 0).await;
    for step in [
        begin("life-other"),
        begin("life-o"),
        begin("life-o"),
        adopt(AdoptStep::Names(vec![("p1".into(), 1), ("x1".into(), 3)])),
        adopt(AdoptStep::Remove(vec!["p0".into()])),
        adopt(AdoptStep::Done),
        adopt(AdoptStep::Done),
    ] {
        out.push(b.run(&k, &step).await.unwrap());
    }
    let list = b
        .run(
            &k,
            &ListPage {
                offset: 0,
                limit: 10,
            },
        )
        .await
        .unwrap();
    (out, list)
}

async fn op_drain<B: Protocol>(b: &B) -> Vec<DrainReply> {
    let k = keys();
    let drain = |op: Option<&str>, replica: &str, on, force| Drain {
        op: op.map(str::to_owned),
        replica: replica.into(),
        on,
        force,
    };
    let mut out = vec![b.run(&k, &drain(None, "a", true, false)).await.unwrap()];
    group(b, &k, &["p0", "p1"], 1).await;
    for d in [
        drain(Some("d1"), "a", true, false),
        drain(Some("d1"), "a", true, false),
        drain(None, "c", true, false),
        drain(None, "c", true, true),
        drain(None, "zz", true, false),
        drain(None, "a", false, false),
        drain(None, "zz", false, false),
    ] {
        out.push(b.run(&k, &d).await.unwrap());
    }
    out
}

async fn op_report<B: Protocol>(b: &B) -> Vec<Vec<bool>> {
    let k = keys();
    let report = |session: &str, weights: Vec<(String, Fence, u64)>| Report {
        session: session.into(),
        weights,
    };
    let mut out = vec![
        b.run(&k, &report(A, vec![("p0".into(), Fence(1), 4)]))
            .await
            .unwrap(),
    ];
    let (_, terms) = group(b, &k, &["p0", "p1"], 1).await;
    let (p0, f) = terms[0].clone();
    for r in [
        report(
            A,
            vec![
                (p0.clone(), f, 7),
                (p0.clone(), Fence(1), 2),
                ("zz".into(), f, 1),
            ],
        ),
        report(A, vec![(p0.clone(), f, 7)]),
        report(C, vec![(p0.clone(), f, 3)]),
    ] {
        out.push(b.run(&k, &r).await.unwrap());
    }
    out
}

async fn op_held<B: Protocol>(b: &B) -> Vec<Vec<Granted>> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let mut out = vec![b.run(&k, &Held(A.into())).await.unwrap()];
    group(b, &k, &["p0", "p1", "p2"], 2).await;
    b.run(&k, &SetWeight::new(None, "p1", 3)).await.unwrap();
    for s in [A, C, "zz"] {
        out.push(b.run(&k, &Held(s.into())).await.unwrap().normal(ranks));
    }
    out
}

async fn op_set_weight<B: Protocol>(b: &B) -> Vec<WeightReply> {
    let k = keys();
    let weight = |op: Option<&str>, partition: &str, weight| SetWeight {
        op: op.map(str::to_owned),
        partition: partition.into(),
        weight,
    };
    let mut out = vec![b.run(&k, &weight(None, "p0", 2)).await.unwrap()];
    group(b, &k, &["p0", "p1"], 1).await;
    for w in [
        weight(None, "zz", 2),
        weight(Some("w1"), "p0", 5),
        weight(Some("w1"), "p0", 5),
        weight(None, "p0", 3),
        weight(None, "p1", 1),
    ] {
        out.push(b.run(&k, &w).await.unwrap());
    }
    out
}

async fn op_prefer<B: Protocol>(b: &B) -> Vec<PreferReply> {
    let k = keys();
    let prefer = |op: Option<&str>, partition: &str, replica: Option<&str>| Prefer {
        op: op.map(str::to_owned),
        partition: partition.into(),
        replica: replica.map(str::to_owned),
    };
    let mut out = vec![b.run(&k, &prefer(None, "p0", Some("c"))).await.unwrap()];
    group(b, &k, &["p0", "p1"], 0).await;
    for p in [
        prefer(None, "zz", Some("c")),
        prefer(Some("r1"), "p0", Some("c")),
        prefer(Some("r1"), "p0", Some("c")),
        prefer(None, "p0", Some("a")),
        prefer(None, "p0", None),
        prefer(None, "p1", None),
    ] {
        out.push(b.run(&k, &p).await.unwrap());
    }
    out
}

async fn op_owner<B: Protocol>(b: &B) -> Vec<Option<PartitionOwner>> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let mut out = vec![b.run(&k, &Owner("p0".into())).await.unwrap()];
    group(b, &k, &["p0", "p1"], 1).await;
    for p in ["p0", "p1", "zz"] {
        out.push(b.run(&k, &Owner(p.into())).await.unwrap().normal(ranks));
    }
    out
}

/// A group whose ledger has moves: a's first claim, then c taking what a hands off.
async fn with_moves<B: Protocol>(b: &B, k: &GroupKeys) {
    let (cx, terms) = group(b, k, &["p0", "p1", "p2"], 2).await;
    let release = Release {
        session: A.to_owned(),
        terms: vec![GivenBack::plain(terms[0].clone(), MoveCause::HandOff)],
        state_ttl: TTL,
        hold: HOLD,
    };
    b.run(k, &release).await.unwrap();
    b.run(k, &claim(&cx, "c", C, 1, 2)).await.unwrap();
}

async fn op_moves<B: Protocol>(b: &B) -> Vec<Vec<Move>> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let moves = |after: Option<String>, limit| Moves { after, limit };
    let mut out = vec![b.run(&k, &moves(None, 10)).await.unwrap()];
    with_moves(b, &k).await;
    let all = b.run(&k, &moves(None, 10)).await.unwrap();
    let second = all.get(1).map(|m| m.id.clone());
    out.push(all.normal(ranks));
    // An id the ledger never held is not compared: Redis reads the stream after it
    // (every later id), the in-memory store finds no such entry and reads nothing.
    for m in [moves(second, 10), moves(None, 2)] {
        out.push(b.run(&k, &m).await.unwrap().normal(ranks));
    }
    out
}

async fn op_newest_moves<B: Protocol>(b: &B) -> Vec<Vec<Move>> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let mut out = vec![b.run(&k, &NewestMoves { limit: 2 }).await.unwrap()];
    with_moves(b, &k).await;
    for limit in [1, 2, 10] {
        out.push(
            b.run(&k, &NewestMoves { limit })
                .await
                .unwrap()
                .normal(ranks),
        );
    }
    out
}

async fn op_routes<B: Protocol>(b: &B) -> Vec<Option<RouteRead>> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let routes = |after: Option<String>, limit| Routes { after, limit };
    let mut out = vec![b.run(&k, &routes(None, 10)).await.unwrap()];
    with_moves(b, &k).await;
    let first = b
        .run(
            &k,
            &Moves {
                after: None,
                limit: 1,
            },
        )
        .await
        .unwrap()
        .first()
        .map(|m| m.id.clone());
    for r in [
        routes(None, 10),
        routes(first.clone(), 10),
        routes(first, 1),
    ] {
        out.push(b.run(&k, &r).await.unwrap().normal(ranks));
    }
    out
}

async fn op_take_budget<B: Protocol>(b: &B) -> Vec<usize> {
    let k = keys();
    let day = Duration::from_secs(86_400);
    let take = |want| TakeBudget {
        want,
        budget: 3,
        window: day,
    };
    let mut out = vec![b.run(&k, &take(1)).await.unwrap()];
    group(b, &k, &["p0"], 0).await;
    for want in [2, 0, 2, 1] {
        out.push(b.run(&k, &take(want)).await.unwrap());
    }
    out
}

/// A status head without its clocks: the set's count, weights and origin, the members
/// (replica, state, held, load, capacity), instances (whether each advertises an
/// address), drains and preferences.
type HeadSeen = Option<(
    (usize, bool, u64, u64),
    Vec<(String, ReplicaState, usize, u64, u32)>,
    Vec<bool>,
    Vec<String>,
    Vec<(String, String)>,
)>;

async fn op_status_head<B: Protocol>(b: &B) -> Vec<HeadSeen> {
    let k = keys();
    let head = async || -> HeadSeen {
        b.run(&k, &ReadStatusHead).await.unwrap().map(|h| {
            (
                (
                    h.set.count,
                    h.set.weighted,
                    h.set.total_weight,
                    h.set.max_weight,
                ),
                // Redis lists the members by expiry: by replica here.
                {
                    let mut m: Vec<_> = h
                        .members
                        .iter()
                        .map(|m| (m.replica.clone(), m.state, m.held, m.load, m.capacity))
                        .collect();
                    m.sort();
                    m
                },
                h.instances.iter().map(|i| i.contains('\t')).collect(),
                h.drained,
                h.preferences,
            )
        })
    };
    let mut out = vec![head().await];
    group(b, &k, &["p0", "p1", "p2"], 2).await;
    out.push(head().await);
    b.run(&k, &SetWeight::new(None, "p0", 4)).await.unwrap();
    b.run(&k, &Drain::new(None, "c", true, false))
        .await
        .unwrap();
    b.run(&k, &Prefer::new(None, "p2", Some("c")))
        .await
        .unwrap();
    out.push(head().await);
    out
}

async fn op_status_page<B: Protocol>(b: &B) -> Vec<Vec<PartitionOwner>> {
    let k = keys();
    let ranks = &mut Ranks::default();
    let page = |offset, limit| StatusPage { offset, limit };
    let mut out = vec![b.run(&k, &page(0, 10)).await.unwrap()];
    group(b, &k, &["p0", "p1", "p2"], 2).await;
    for p in [page(0, 10), page(1, 1), page(5, 10)] {
        out.push(b.run(&k, &p).await.unwrap().normal(ranks));
    }
    out
}

/// Publishing and listening are no scripts: what one store's listener hears of a
/// message published through it.
async fn op_publish<B: Protocol>(b: &B) -> Vec<String> {
    let k = keys();
    let mut notices = b.notices(&k);
    // Redis's subscription is made in the background: publish until it is heard.
    let heard = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            b.publish(&k, "hello").await.unwrap();
            match tokio::time::timeout(Duration::from_millis(50), notices.recv()).await {
                Ok(Ok(m)) if m == "hello" => return m,
                _ => {}
            }
        }
    })
    .await
    .expect("the message is heard");
    vec![heard]
}

/// Every operation's steps on a redis-server of its own and on the in-memory store:
/// the typed replies must be equal (a test per operation, named after it).
macro_rules! per_op {
    ($($test:ident: $steps:ident,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let redis = RedisServer::start();
            let store = RedisStore::builder(redis.url()).build().unwrap();
            let on_redis = Box::pin($steps(&store)).await;
            let in_memory = Box::pin($steps(&MemoryGroupStore::new())).await;
            assert_eq!(on_redis, in_memory, "Redis (left) and the in-memory store differ");
        }
    )*};
}

per_op! {
    tick_alike: op_tick,
    claim_alike: op_claim,
    release_alike: op_release,
    take_hand_offs_alike: op_take_hand_offs,
    leave_alike: op_leave,
    add_alike: op_add,
    remove_alike: op_remove,
    list_page_alike: op_list_page,
    set_page_alike: op_set_page,
    set_version_alike: op_set_version,
    restore_alike: op_restore,
    adopt_alike: op_adopt,
    drain_alike: op_drain,
    report_alike: op_report,
    held_alike: op_held,
    set_weight_alike: op_set_weight,
    prefer_alike: op_prefer,
    owner_alike: op_owner,
    moves_alike: op_moves,
    newest_moves_alike: op_newest_moves,
    routes_alike: op_routes,
    take_budget_alike: op_take_budget,
    status_head_alike: op_status_head,
    status_page_alike: op_status_page,
    publish_and_notices_alike: op_publish,
}

/// The server's warnings are no script either: Redis reads its settings (a test
/// server's may weaken the guarantees), the in-memory store has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_of_a_fresh_server() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url()).build().unwrap();
    store
        .warnings()
        .await
        .expect("the server's settings are read");
    let in_memory = MemoryGroupStore::new().warnings().await.unwrap();
    assert!(in_memory.is_empty());
}
