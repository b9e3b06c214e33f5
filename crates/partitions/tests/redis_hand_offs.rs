//! Hand-off state against a real redis-server started for each test: a term that ends
//! for a planned move leaves state (`Ownership::hand_off`), and the next owner is
//! offered it (`Ownership::handed_over`) only if it comes from the term immediately
//! before its own; otherwise it is told why (a first owner, a crash, nothing left,
//! state whose time to live passed).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_partitions::{GroupAdmin, MoveCause};
use leasehold_partitions::{NoHandOff, RedisStore};
use leasehold_testkit::RedisServer;
use support::{Fleet, Term, state_of};
use tokio::time::sleep;

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// Every term with the term before it of its partition (by fence), oldest first.
fn with_previous(terms: &[Term]) -> Vec<(Option<Term>, Term)> {
    let mut by: BTreeMap<&str, Vec<&Term>> = BTreeMap::new();
    for t in terms {
        by.entry(t.partition.as_str()).or_default().push(t);
    }
    let mut out = Vec::new();
    for (_, mut ts) in by {
        ts.sort_by_key(|t| t.fence);
        let mut before: Option<Term> = None;
        for t in ts {
            out.push((before.clone(), t.clone()));
            before = Some(t.clone());
        }
    }
    out
}

fn offered(t: &Term) -> String {
    match &t.handed_over {
        Ok(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Err(why) => format!("{why:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_planned_move_hands_the_next_owner_the_state_of_the_term_before() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 8, LEASE);
    fleet.hand_off = true;
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();

    fleet.start("a");
    fleet
        .until("a owns all", LIMIT, |f| f.counts()["a"] == 8)
        .await;
    // A join: a hands four over to b.
    fleet.start("b");
    fleet.converge(LIMIT).await;
    // A drain of b: its four go back to a.
    admin.drain("b").await.unwrap();
    fleet
        .until("b drained", LIMIT, |f| f.counts()["a"] == 8)
        .await;
    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;
    // A graceful shutdown of a: b takes everything.
    fleet.replicas.remove("a").unwrap().shutdown().await;
    fleet
        .until("b owns all after a left", LIMIT, |f| f.counts()["b"] == 8)
        .await;

    let terms = fleet.ledger.terms();
    let mut handed = 0;
    for (before, t) in with_previous(&terms) {
        match &before {
            None => assert!(
                matches!(t.handed_over, Err(NoHandOff::FirstOwner)),
                "a first owner is told so: {t:?}"
            ),
            Some(b) => {
                assert_eq!(
                    offered(&t),
                    String::from_utf8(state_of(&b.partition, b.fence)).unwrap(),
                    "{t:?} after {b:?}"
                );
                handed += 1;
            }
        }
    }
    // 4 joined, 4 drained, 4 back after the undrain, and a's last 4 or more.
    assert!(handed >= 16, "{handed} hand-offs");

    // The ledger says how much state each move carried.
    let moves = admin.moves(None, 1_000).await.unwrap();
    assert_eq!(moves.len(), terms.len());
    for m in &moves {
        let expected = m
            .old_fence
            .map(|f| state_of(&m.partition, f.get()).len() as u64);
        assert_eq!(m.state_bytes, expected, "{m:?}");
        if m.cause != MoveCause::New {
            assert!(m.cause.is_planned(), "{m:?}");
        }
    }
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_state_after_a_crash_or_when_none_was_left_and_the_next_owner_says_why() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 6, LEASE);
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();

    // a leaves no state.
    fleet.start("a");
    fleet
        .until("a owns all", LIMIT, |f| f.counts()["a"] == 6)
        .await;
    fleet.hand_off = true;
    fleet.start("b");
    fleet.converge(LIMIT).await;
    let from_a: Vec<Term> = fleet
        .ledger
        .terms()
        .into_iter()
        .filter(|t| t.replica == "b")
        .collect();
    assert_eq!(from_a.len(), 3);
    for t in &from_a {
        assert!(
            matches!(&t.handed_over, Err(NoHandOff::NothingLeft { cause }) if *cause == MoveCause::HandOff),
            "{t:?}"
        );
    }

    // b crashes (it would hand state off, but a crash releases nothing).
    fleet.replicas.remove("b").unwrap().abort();
    fleet
        .until("a owns all after b crashed", LIMIT, |f| {
            f.counts()["a"] == 6
        })
        .await;
    let after_crash: Vec<Term> = fleet
        .ledger
        .terms()
        .into_iter()
        .filter(|t| t.replica == "a" && from_a.iter().any(|b| b.partition == t.partition))
        .filter(|t| {
            from_a
                .iter()
                .any(|b| b.partition == t.partition && b.fence < t.fence)
        })
        .collect();
    assert_eq!(after_crash.len(), 3, "{:?}", fleet.ledger.terms());
    for t in &after_crash {
        assert!(matches!(t.handed_over, Err(NoHandOff::Crashed)), "{t:?}");
    }
    let moves = admin.moves(None, 1_000).await.unwrap();
    let expired: Vec<_> = moves
        .iter()
        .filter(|m| m.cause == MoveCause::Expiry)
        .collect();
    assert_eq!(expired.len(), 3);
    assert!(expired.iter().all(|m| m.state_bytes.is_none()));
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_nobody_takes_within_its_time_to_live_is_gone() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 4, LEASE);
    fleet.hand_off = true;
    let ttl = Duration::from_millis(200);
    fleet.start_with(fleet.builder("a").hand_off_ttl(ttl).build().unwrap());
    fleet
        .until("a owns all", LIMIT, |f| f.counts()["a"] == 4)
        .await;
    // a leaves the group with nobody to take over; b comes after the state expired.
    fleet.replicas.remove("a").unwrap().shutdown().await;
    let probe = redis.redis_cli(&["KEYS", "leasehold:{g}:handoff:*"]);
    assert_eq!(
        probe.lines().count(),
        4,
        "a's four states are kept: {probe}"
    );
    sleep(ttl * 2).await;
    fleet.start("b");
    fleet
        .until("b owns all", LIMIT, |f| f.counts()["b"] == 4)
        .await;
    for t in fleet.ledger.terms().iter().filter(|t| t.replica == "b") {
        assert!(matches!(t.handed_over, Err(NoHandOff::Gone)), "{t:?}");
    }
    let probe = redis.redis_cli(&["KEYS", "leasehold:{g}:handoff:*"]);
    assert_eq!(probe.trim(), "", "no state is left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_left_before_a_restart_is_never_offered_after_it() {
    // A restart (or a failover) may lose a later term of the partition with its writes,
    // so that the state would look like the previous term's when it is not: found by
    // the simulation's lossy failovers (seeds 12, 76, 81, ... of 300 before the fix).
    let mut redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 4, LEASE);
    fleet.hand_off = true;
    fleet.start("a");
    fleet
        .until("a owns all", LIMIT, |f| f.counts()["a"] == 4)
        .await;
    fleet.replicas.remove("a").unwrap().shutdown().await;
    let kept = redis.redis_cli(&["KEYS", "leasehold:{g}:handoff:*"]);
    assert_eq!(kept.lines().count(), 4, "a's four states are kept: {kept}");
    // A restart that keeps every key: another server lifetime.
    assert_eq!(redis.redis_cli(&["SAVE"]), "OK");
    redis.restart();
    fleet.start("b");
    fleet
        .until("b owns all", LIMIT, |f| f.counts()["b"] == 4)
        .await;
    let by_b: Vec<Term> = fleet
        .ledger
        .terms()
        .into_iter()
        .filter(|t| t.replica == "b")
        .collect();
    assert_eq!(by_b.len(), 4);
    for t in &by_b {
        assert!(
            matches!(t.handed_over, Err(NoHandOff::ServerChanged)),
            "{t:?}"
        );
    }
    // The ledger still says a left state.
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();
    let moves = admin.moves(None, 100).await.unwrap();
    assert!(
        moves
            .iter()
            .filter(|m| m.to == "b")
            .all(|m| m.state_bytes.is_some() && m.cause == MoveCause::Leave),
        "{moves:?}"
    );
}
