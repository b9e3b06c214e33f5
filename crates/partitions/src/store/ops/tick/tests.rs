use std::time::Instant;

use leasehold_testkit::RedisServer;

use super::*;
use crate::store::ops;
use crate::store::protocol::{Change, ClaimReply, ClaimRequest, Protocol};

const TTL: Duration = Duration::from_secs(5);

/// The server lifetime and roster version a replica has seen.
type Seen = (String, String);

fn seen(r: &TickReply) -> Seen {
    (r.lifetime.clone(), r.roster_version.clone())
}

fn type_checks(redis: &RedisServer) -> u64 {
    let info = redis.redis_cli(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_type:calls="))
        .and_then(|l| l.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// A reply without what moves with the clock.
fn timeless(mut r: TickReply) -> String {
    r.soonest = None;
    r.grant_wait = Duration::ZERO;
    format!("{r:?}")
}

/// Replica `i`'s session token.
fn token(i: usize) -> String {
    format!("r{i}:{i:032x}")
}

/// Replica `i`'s tick, naming the server lifetime and roster version it has seen.
fn request(i: usize, join: bool, state: ReplicaState, inc: &str, seen: &Seen) -> TickRequest {
    TickRequest {
        incarnation: inc.to_owned(),
        lifetime: seen.0.clone(),
        roster: seen.1.clone(),
        ..TickRequest::of(&format!("r{i}"), &token(i), join, state, TTL)
    }
}

/// A server with a group `group` of `count` partitions (`p0`, `p1`, ...) on leases
/// of `lease`, seeded and granting, and a store on it.
async fn seeded(
    group: &str,
    count: usize,
    lease: Duration,
) -> (RedisServer, RedisStore, GroupKeys, Vec<String>) {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url()).build().unwrap();
    let k = GroupKeys::new("leasehold", group);
    let names: Vec<String> = (0..count).map(|i| format!("p{i}")).collect();
    let seed = Change::Seed {
        life: format!("life-{group}"),
        grant_delay: Duration::from_millis(1),
        lease,
        gather: Duration::from_millis(1),
    };
    store.run(&k, &ops::Add::new(&seed, &names)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    (redis, store, k, names)
}

/// A heartbeat answers a quiet tick on its own (no type checks, no library), and
/// replies exactly what the whole tick replies to the same tick: in a plain group,
/// and in a weighted one with a drained, draining member and partitions left
/// without an owner. A tick that says it is quiet but is not (the roster changed)
/// gets the whole tick's reply, and the heartbeat that found so changed nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_replies_what_the_whole_tick_does() {
    let (redis, store, k, _) = seeded("quiet", 12, TTL).await;
    let mut kept: Vec<Seen> = Vec::new();
    let mut inc = String::new();
    for i in 0..3 {
        let join = request(i, true, ReplicaState::Active, "", &Seen::default());
        let r = run(&store, &k, &join, &SCRIPT).await.unwrap();
        inc = r.set.as_ref().unwrap().incarnation.clone();
        kept.push(seen(&r));
    }
    for case in ["plain", "weighted, drained, unowned"] {
        if case != "plain" {
            store
                .run(&k, &ops::SetWeight::new(Some("w"), "p3", 4))
                .await
                .unwrap();
            store
                .run(&k, &ops::Drain::new(Some("d"), "r1", true, true))
                .await
                .unwrap();
        }
        // Claims change the roster: every replica reads it again, once.
        for (i, count) in [(0, 3), (1, 2), (2, 1)] {
            let seq = 1 + u64::from(case != "plain");
            let claim = ClaimRequest::of(&format!("r{i}"), &token(i), seq, count, TTL, &inc);
            store.run(&k, &claim).await.unwrap();
        }
        for (i, kept) in kept.iter_mut().enumerate() {
            let state = if i == 1 && case != "plain" {
                ReplicaState::Draining
            } else {
                ReplicaState::Active
            };
            let stale = TickRequest {
                quiet: true,
                ..request(i, false, state, &inc, kept)
            };
            let read = super::redis(&store, &k, &stale).await.unwrap();
            assert!(
                read.roster.is_sent(),
                "{case}: r{i} reads the changed roster"
            );
            *kept = seen(&read);
            for _ in 0..3 {
                let req = TickRequest {
                    quiet: true,
                    ..request(i, false, state, &inc, kept)
                };
                let checks = type_checks(&redis);
                let quiet = heartbeat(&store, &k, &req).await.unwrap();
                assert_eq!(
                    type_checks(&redis),
                    checks,
                    "{case}: r{i}'s steady tick is answered by the heartbeat"
                );
                let quiet = quiet.expect("a steady tick is quiet");
                let whole = run(&store, &k, &req, &SCRIPT).await.unwrap();
                assert!(!quiet.roster.is_sent() && quiet.soonest.is_some(), "{case}");
                assert_eq!(timeless(quiet), timeless(whole), "{case}: r{i}");
            }
        }
    }
}

/// A partition revoked from a session is listed by every tick until the session
/// gives it up, also a tick that says it is quiet and names the roster as it is:
/// the heartbeat leaves it to the whole tick, and changes nothing itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_leaves_a_revoked_partition_to_the_whole_tick() {
    let (_redis, store, k, names) = seeded("revoked", 4, TTL).await;
    let join = request(0, true, ReplicaState::Active, "", &Seen::default());
    let r = run(&store, &k, &join, &SCRIPT).await.unwrap();
    let inc = r.set.as_ref().unwrap().incarnation.clone();
    let claim = ClaimRequest::of("r0", &token(0), 1, 4, TTL, &inc);
    store.run(&k, &claim).await.unwrap();
    let strict = Change::Strict {
        op: "op-revoke".into(),
    };
    store
        .run(&k, &ops::Remove::new(&strict, &names[..1]))
        .await
        .unwrap();
    let mut kept = seen(
        &run(
            &store,
            &k,
            &request(0, false, ReplicaState::Active, &inc, &Seen::default()),
            &SCRIPT,
        )
        .await
        .unwrap(),
    );
    for _ in 0..2 {
        let req = TickRequest {
            quiet: true,
            ..request(0, false, ReplicaState::Active, &inc, &kept)
        };
        assert!(
            heartbeat(&store, &k, &req).await.unwrap().is_none(),
            "a session with a revoked partition does not tick quietly"
        );
        let r = super::redis(&store, &k, &req).await.unwrap();
        assert_eq!(r.revoked, vec![("p0".to_owned(), "removed".to_owned())]);
        kept = seen(&r);
    }
}

/// How many times the server has answered `INFO` (this read included).
fn info_reads(redis: &RedisServer) -> u64 {
    let info = redis.redis_cli(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_info:calls="))
        .and_then(|l| l.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// A tick takes the server's lifetime as read for a quarter lease after a script
/// last read it (`server.lua`): steady ticks read no `INFO`, and a tick seconds
/// after a restart that kept the data still names the old lifetime. The claim that
/// then sees the new one holds grants back for a lease from now (that tick extended
/// the session after the restart), not from the restart, and the next tick names
/// the new lifetime and lists what the session holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_takes_the_lifetime_as_read_for_a_window_and_the_hold_counts_from_the_last_that_did()
{
    // A long group lease, so that the window (10 s) outlasts the restart.
    let lease = Duration::from_secs(40);
    let window = lease / 4;
    let (mut redis, store, k, _) = seeded("window", 4, lease).await;
    // r0's tick, naming what it has seen (a join if it has seen no group), sent
    // as a heartbeat first once it has seen a roster.
    let tick = |inc: &str, kept: &Seen| {
        let req = TickRequest {
            quiet: true,
            ..request(0, inc.is_empty(), ReplicaState::Active, inc, kept)
        };
        let (store, k) = (store.clone(), k.clone());
        async move { super::redis(&store, &k, &req).await.unwrap() }
    };
    let r = tick("", &Seen::default()).await;
    let checked = Instant::now();
    let inc = r.set.as_ref().unwrap().incarnation.clone();
    let claim = ClaimRequest::of("r0", &token(0), 1, 2, lease, &inc);
    assert!(matches!(
        store.run(&k, &claim).await.unwrap(),
        ClaimReply::Claimed { .. }
    ));
    let mut kept = seen(&tick(&inc, &Seen::default()).await);
    let before = info_reads(&redis);
    for _ in 0..3 {
        let r = tick(&inc, &kept).await;
        assert_eq!(r.session, SessionReply::Live);
        kept = seen(&r);
    }
    assert_eq!(info_reads(&redis), before + 1, "steady ticks read no INFO");

    // A restart that kept the data: another run id, the same keys.
    assert_eq!(redis.redis_cli(&["SAVE"]), "OK");
    redis.restart();
    // Long enough that the server says it began seconds ago (it counts whole
    // seconds, and rounds down by one).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let old = kept.0.clone();
    let r = tick(&inc, &kept).await;
    assert!(
        checked.elapsed() < window,
        "the restart outlasted the window"
    );
    assert_eq!(r.session, SessionReply::Live);
    assert_eq!(
        r.lifetime, old,
        "within the window the tick takes the lifetime as read"
    );

    let claim = ClaimRequest::of("r0", &token(0), 2, 2, lease, &inc);
    let ClaimReply::Wait(wait) = store.run(&k, &claim).await.unwrap() else {
        panic!("a claim in the new lifetime waits");
    };
    assert!(
        wait > lease - Duration::from_millis(500) && wait <= lease,
        "the hold counts a lease from the last tick that took the lifetime as read: {wait:?}"
    );
    let r = tick(&inc, &kept).await;
    assert_ne!(r.lifetime, old, "the next tick names the new lifetime");
    let held = r.holdings.expect("and lists what the session holds");
    assert_eq!(held.len(), 2);
}

/// The twin takes the lifetime as read for a window as the script does: a tick
/// right after a failover still names the old lifetime, the claim that sees the
/// new one waits a lease from then, and the next tick names the new one and lists
/// what the session holds; past the window a tick reads the lifetime itself.
#[tokio::test(start_paused = true)]
async fn the_twin_takes_the_lifetime_as_read_for_a_window() {
    use crate::MemoryGroupStore;

    let store = MemoryGroupStore::new();
    let k = GroupKeys::new("leasehold", "window");
    let names: Vec<String> = (0..4).map(|i| format!("p{i}")).collect();
    let lease = Duration::from_secs(4);
    let seed = Change::Seed {
        life: "life-window".to_owned(),
        grant_delay: Duration::from_millis(1),
        lease,
        gather: Duration::from_millis(1),
    };
    store.run(&k, &ops::Add::new(&seed, &names)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let tick = |i: usize, inc: &str, kept: &Seen| {
        let req = request(i, inc.is_empty(), ReplicaState::Active, inc, kept);
        let store = store.clone();
        let k = k.clone();
        async move { store.run(&k, &req).await.unwrap() }
    };
    let r = tick(0, "", &Seen::default()).await;
    let inc = r.set.as_ref().unwrap().incarnation.clone();
    let mut kept = seen(&r);
    let claim = ClaimRequest::of("r0", &token(0), 1, 2, lease, &inc);
    assert!(matches!(
        store.run(&k, &claim).await.unwrap(),
        ClaimReply::Claimed { .. }
    ));
    kept = seen(&tick(0, &inc, &kept).await);
    let old = kept.0.clone();

    store.fail_over_to(store.snapshot());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = tick(0, &inc, &kept).await;
    assert_eq!(
        r.lifetime, old,
        "within the window the tick takes the lifetime as read"
    );
    let claim = ClaimRequest::of("r0", &token(0), 2, 2, lease, &inc);
    assert_eq!(
        store.run(&k, &claim).await.unwrap(),
        ClaimReply::Wait(lease)
    );
    let r = tick(0, &inc, &kept).await;
    assert_ne!(r.lifetime, old, "the next tick names the new lifetime");
    assert_eq!(r.holdings.as_ref().map(Vec::len), Some(2));
    let kept = seen(&r);

    // Past the window, a tick reads the lifetime: it sees the next failover.
    tokio::time::sleep(lease / 4).await;
    store.fail_over_to(store.snapshot());
    let r = tick(0, &inc, &kept).await;
    assert_ne!(r.lifetime, kept.0);
}

/// A tick after changes sends only the members changed since the version its
/// replica names, and the members gone since; CHANGES stays short however many
/// replicas come and go (one entry per member and a few dozen gone), and a
/// replica whose version is older than what it keeps reads the whole roster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_stay_short_and_a_replica_that_missed_them_reads_everything() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url()).build().unwrap();
    let k = GroupKeys::new("leasehold", "changes");
    let seed = Change::Seed {
        life: "life-changes".to_owned(),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    store
        .run(&k, &ops::Add::new(&seed, &["p0".to_owned()]))
        .await
        .unwrap();
    let mut inc = String::new();
    let mut kept: Vec<Seen> = Vec::new();
    for i in 0..2 {
        let join = request(i, true, ReplicaState::Active, "", &Seen::default());
        let r = store.run(&k, &join).await.unwrap();
        inc = r.set.as_ref().unwrap().incarnation.clone();
        kept.push(seen(&r));
    }
    let tick = |i: usize, state, kept: &Seen| request(i, false, state, &inc, kept);
    let r0 = store
        .run(&k, &tick(0, ReplicaState::Active, &kept[0]))
        .await
        .unwrap();
    kept[0] = seen(&r0);
    // 150 replicas join and leave; r1 reads the roster before the last one leaves.
    for i in 10..160 {
        let join = request(i, true, ReplicaState::Active, "", &Seen::default());
        store.run(&k, &join).await.unwrap();
        if i == 159 {
            let r1 = store
                .run(&k, &tick(1, ReplicaState::Active, &kept[1]))
                .await
                .unwrap();
            kept[1] = seen(&r1);
        }
        let (name, token) = (format!("r{i}"), token(i));
        store
            .run(&k, &ops::Leave::new(&name, &token, &token))
            .await
            .unwrap();
    }
    let card = redis.redis_cli(&["ZCARD", &k.changes]);
    let entries: usize = card.trim_start_matches("(integer) ").parse().unwrap();
    assert!(entries <= 2 + 64 + 1, "CHANGES keeps {entries} entries");
    let r1 = store
        .run(&k, &tick(1, ReplicaState::Active, &kept[1]))
        .await
        .unwrap();
    assert_eq!(
        r1.roster,
        RosterUpdate::Changes {
            changed: Vec::new(),
            gone: vec!["r159".to_owned()]
        },
        "r1 missed one leave"
    );
    let r0 = store
        .run(&k, &tick(0, ReplicaState::Draining, &kept[0]))
        .await
        .unwrap();
    let RosterUpdate::Full(all) = &r0.roster else {
        panic!("r0 missed more than CHANGES keeps: {:?}", r0.roster);
    };
    let mut said: Vec<_> = all.iter().map(|m| (m.replica.as_str(), m.state)).collect();
    said.sort_unstable();
    assert_eq!(
        said,
        [("r0", ReplicaState::Draining), ("r1", ReplicaState::Active)],
        "the whole roster, r0's new state included"
    );
    // r1 reads r0's new state as a change.
    kept[1] = seen(&r1);
    let r1 = store
        .run(&k, &tick(1, ReplicaState::Active, &kept[1]))
        .await
        .unwrap();
    let changed: Vec<_> = r1
        .roster
        .members()
        .iter()
        .map(|m| m.replica.as_str())
        .collect();
    assert_eq!(changed, ["r0"], "{:?}", r1.roster);
    assert!(matches!(r1.roster, RosterUpdate::Changes { .. }));
}

/// A roster entry that is not `state \t capacity \t held \t load`, or names and
/// entries of different lengths, is a protocol error naming it, never a panic.
#[test]
fn a_malformed_roster_entry_is_a_protocol_error() {
    let ok = members(vec!["a".into()], &["active\t2\t5\t7".into()]).unwrap();
    assert_eq!(
        (ok[0].state, ok[0].capacity, ok[0].held, ok[0].load),
        (ReplicaState::Active, 2, 5, 7)
    );
    for entry in ["active\t2\t5", "active\tx\t5\t7", "", "active\t2\t-1\t7"] {
        let e = members(vec!["a".into()], &[entry.into()]).unwrap_err();
        assert!(
            matches!(&e, StoreError::Protocol(m) if m.contains("roster entry")),
            "{entry:?}: {e}"
        );
    }
    let e = members(vec!["a".into(), "b".into()], &["active\t1\t0\t0".into()]).unwrap_err();
    assert!(matches!(e, StoreError::Protocol(_)), "{e}");
}

/// Every name is a Lua identifier, used once.
fn identifiers_once(names: &[&str]) {
    let mut unique = names.to_vec();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    for name in names {
        assert!(
            name.starts_with(|c: char| c.is_ascii_lowercase())
                && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{name}"
        );
    }
}

/// The slots of `S` a script fills (`r[<var>.<name>] =`) are every slot, each once,
/// and every slot it names is one of them.
fn fills_every_slot_once<S: Slots>(script: &str, source: &str, var: &str) {
    let mut filled = crate::store::ops::slots::assigned(source, "r", var);
    filled.sort_unstable();
    let mut names = S::NAMES.to_vec();
    names.sort_unstable();
    assert_eq!(filled, names, "{script} fills every slot of its reply once");
    for name in crate::store::ops::slots::mentioned(source, var) {
        assert!(S::NAMES.contains(&name), "{script} names {var}.{name}");
    }
}

/// The tick and the heartbeat fill every slot of their replies by name, once each (a
/// slot left nil would end the reply there), and the heartbeat reads only META fields
/// that are named, as `meta.lua` reads them; every name is a Lua identifier, used once.
#[test]
fn the_scripts_fill_every_slot_of_their_reply_by_name() {
    let tick = include_str!("../../lua/tick.lua");
    let heartbeat = include_str!("../../lua/heartbeat.lua");
    fills_every_slot_once::<TickSlot>("tick.lua", tick, "SLOT");
    fills_every_slot_once::<HeartbeatSlot>("heartbeat.lua", heartbeat, "SLOT");
    let fields = crate::store::ops::slots::mentioned(heartbeat, "FIELD");
    assert!(fields.len() > 5, "{fields:?}");
    for name in fields {
        assert!(
            MetaField::NAMES.contains(&name),
            "heartbeat.lua reads FIELD.{name}"
        );
    }
    let meta = include_str!("../../lua/lib/meta.lua");
    for name in MetaField::NAMES {
        assert!(
            meta.contains(&format!("'{name}'")),
            "META has no field {name}"
        );
    }
    for names in [TickSlot::NAMES, HeartbeatSlot::NAMES, MetaField::NAMES] {
        identifiers_once(names);
    }
    assert!(SCRIPT.code().contains(&TickSlot::lua_index("SLOT")));
    let code = HEARTBEAT.code();
    assert!(code.contains(&HeartbeatSlot::lua_index("SLOT")));
    assert!(code.contains(&MetaField::lua_index("FIELD")));
    assert!(code.contains(&MetaField::lua_names("META_FIELDS")));
}

/// A tick reply of one value per slot parses, read by name; one slot short (a slot
/// left nil: Redis ends the reply there) or one more is a protocol error.
#[test]
fn a_tick_reply_has_every_slot() {
    use redis::Value;
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    let slots: Vec<Value> = TickSlot::ALL
        .iter()
        .map(|slot| match slot {
            TickSlot::Status => bulk("live"),
            TickSlot::Names | TickSlot::Entries | TickSlot::Gone | TickSlot::Revoked => {
                Value::Array(Vec::new())
            }
            TickSlot::Resumed
            | TickSlot::Digest
            | TickSlot::Life
            | TickSlot::Origin
            | TickSlot::Incarnation
            | TickSlot::Lifetime => bulk(""),
            TickSlot::RosterVersion => bulk("v1"),
            TickSlot::Exists | TickSlot::Count => Value::Int(1),
            TickSlot::Soonest => Value::Int(-1),
            TickSlot::Reserved => Value::Int(2),
            _ => Value::Int(0),
        })
        .collect();
    let r = parse(Value::Array(slots.clone())).unwrap();
    assert_eq!(
        (r.session, r.set.map(|s| s.count), r.soonest, r.reserved),
        (SessionReply::Live, Some(1), None, 2)
    );
    assert_eq!(r.roster_version, "v1");
    let mut short = slots.clone();
    short.pop();
    let mut long = slots;
    long.push(Value::Int(0));
    for reply in [short, long] {
        let e = parse(Value::Array(reply)).unwrap_err();
        assert!(
            matches!(&e, StoreError::Protocol(m) if m.contains("slots, expected 32")),
            "{e}"
        );
    }
}

/// A heartbeat reply of one value per slot, with one per META field (a missing field
/// nil), parses, read by name; one slot or field short or one more is a protocol
/// error.
#[test]
fn a_heartbeat_reply_has_every_slot_and_field() {
    use redis::Value;
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    let meta: Vec<Value> = MetaField::ALL
        .iter()
        .map(|f| match f {
            MetaField::Count => bulk("4"),
            MetaField::Version => bulk("2"),
            MetaField::Server => bulk("run:1"),
            _ => Value::Nil,
        })
        .collect();
    let reply = |meta: Vec<Value>| -> Vec<Value> {
        HeartbeatSlot::ALL
            .iter()
            .map(|slot| match slot {
                HeartbeatSlot::Meta => Value::Array(meta.clone()),
                HeartbeatSlot::Unowned => Value::Int(3),
                HeartbeatSlot::Soonest => Value::Int(-1),
                _ => Value::Int(0),
            })
            .collect()
    };
    let req = TickRequest::of("r0", &token(0), false, ReplicaState::Active, TTL);
    let r = parse_heartbeat(&req, Value::Array(reply(meta.clone())))
        .unwrap()
        .expect("a quiet tick");
    let set = r.set.unwrap();
    assert_eq!(
        (set.count, set.version, set.total_weight, set.max_weight),
        (4, 2, 4, 1),
        "an unweighted set weighs one a partition"
    );
    assert_eq!((r.unowned, r.lifetime.as_str()), (3, "run:1"));
    let mut short = meta.clone();
    short.pop();
    let mut long = meta;
    long.push(Value::Nil);
    for meta in [short, long] {
        assert!(parse_heartbeat(&req, Value::Array(reply(meta))).is_err());
    }
    let mut short = reply(Vec::new());
    short.pop();
    assert!(parse_heartbeat(&req, Value::Array(short)).is_err());
}
