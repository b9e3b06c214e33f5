//! Partition moves counted by cause (a join's rebalance, a removal, a drain, a leave, a
//! kill), the time each partition had no owner by the cause of its move, and what each
//! new term was offered of its predecessor's state, read back
//! through a debugging recorder, against a real redis-server. One test
//! per binary: the recorder is process-global.

mod support;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use leasehold_partitions::RedisStore;
use leasehold_partitions::{GroupAdmin, metrics as m};
use leasehold_testkit::RedisServer;
use metrics::Key;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

/// Counter totals: a debugging snapshot hands out each counter's increments since the
/// last snapshot (and resets it), so they are added up here.
struct Totals {
    snap: Snapshotter,
    seen: Mutex<HashMap<Key, u64>>,
    /// Histogram values recorded so far, by key.
    values: Mutex<HashMap<Key, Vec<f64>>>,
}

impl Totals {
    /// Sum of a counter over every label set that has `label = value` (all if `None`).
    fn counter(&self, name: &str, label: Option<(&str, &str)>) -> u64 {
        self.take();
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(k, _)| k.name() == name)
            .filter(|(k, _)| {
                label.is_none_or(|(l, v)| k.labels().any(|x| x.key() == l && x.value() == v))
            })
            .map(|(_, c)| c)
            .sum()
    }

    /// Folds the values recorded since the last snapshot into the totals.
    fn take(&self) {
        let mut seen = self.seen.lock().unwrap();
        let mut values = self.values.lock().unwrap();
        for (k, _, _, v) in self.snap.snapshot().into_vec() {
            match v {
                DebugValue::Counter(c) => *seen.entry(k.key().clone()).or_default() += c,
                DebugValue::Histogram(h) => values
                    .entry(k.key().clone())
                    .or_default()
                    .extend(h.into_iter().map(|x| x.into_inner())),
                DebugValue::Gauge(_) => {}
            }
        }
    }

    /// The times unowned recorded for moves of `cause`, in seconds.
    fn unowned(&self, cause: &str) -> Vec<f64> {
        self.take();
        self.values
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.name() == m::UNOWNED_SECONDS)
            .filter(|(k, _)| k.labels().any(|x| x.key() == "cause" && x.value() == cause))
            .flat_map(|(_, v)| v.iter().copied())
            .collect()
    }

    fn released(&self, reason: &str) -> u64 {
        self.counter(m::RELEASES, Some(("reason", reason)))
    }
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < LIMIT, "{what}: not after {LIMIT:?}");
        sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_move_is_counted_with_its_cause() {
    let recorder = DebuggingRecorder::new();
    let totals = Totals {
        snap: recorder.snapshotter(),
        seen: Mutex::default(),
        values: Mutex::default(),
    };
    recorder.install().unwrap();
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let admin = GroupAdmin::new(store.clone(), "g").unwrap();
    let mut fleet = Fleet::new(store, 12, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    assert_eq!(totals.counter(m::ACQUISITIONS, None), 12);
    let offered = |outcome: &str| totals.counter(m::HAND_OFF_STATE, Some(("outcome", outcome)));
    assert_eq!(offered("first_owner"), 12);

    // A join: the others hand its share over (a and b leave no state; c will).
    fleet.hand_off = true;
    fleet.start("c");
    fleet.converge(LIMIT).await;
    assert_eq!(offered("nothing_left"), 4);
    assert_eq!(totals.released("handed_off"), 4);
    assert_eq!(totals.counter(m::HANDOFFS, None), 4);
    // The joiner recorded how long each had no owner, by the cause the ledger names.
    let handed = totals.unowned("handoff");
    assert_eq!(handed.len(), 4, "{handed:?}");
    assert!(handed.iter().all(|s| (0.0..5.0).contains(s)), "{handed:?}");
    assert!(
        totals.unowned("new").is_empty(),
        "first owners have no time unowned"
    );

    // A removal: its owner hands it back.
    admin.remove(["p00000"]).await.unwrap();
    eventually("p00000 handed back", || totals.released("removed") == 1).await;
    fleet.partitions.retain(|p| p != "p00000");
    fleet.converge(LIMIT).await;

    // A drain: everything of c's goes.
    let c_held = fleet.counts()["c"] as u64;
    admin.drain("c").await.unwrap();
    eventually("c drained", || totals.released("drained") == c_held).await;
    eventually("c's partitions taken by the others", || {
        totals.unowned("drain").len() as u64 == c_held
    })
    .await;
    eventually("c's state delivered with each", || {
        offered("delivered") == c_held
    })
    .await;
    admin.undrain("c").await.unwrap();
    fleet.converge(LIMIT).await;

    // A graceful leave.
    let b_held = fleet.counts()["b"] as u64;
    fleet.replicas.remove("b").unwrap().shutdown().await;
    assert_eq!(totals.released("shutdown"), b_held);
    fleet.converge(LIMIT).await;
    assert_eq!(totals.unowned("leave").len() as u64, b_held);

    // A kill: nobody releases; the tick that finds the session expired counts them.
    let a_held = fleet.counts()["a"] as u64;
    fleet.replicas.remove("a").unwrap().abort();
    fleet.converge(LIMIT).await;
    assert_eq!(totals.counter(m::EXPIRED, Some(("group", "g"))), a_held);
    let expired = totals.unowned("expiry");
    assert_eq!(expired.len() as u64, a_held, "{expired:?}");
    assert_eq!(offered("crashed"), a_held);
    assert_eq!(fleet.counts()["c"], 11);
    assert!(totals.counter(m::SESSIONS_LOST, None) == 0);
    fleet.ledger.assert_no_double_ownership();
}
