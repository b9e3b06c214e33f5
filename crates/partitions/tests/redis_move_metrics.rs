//! Partition moves counted by cause (a join's rebalance, a removal, a drain, a leave, a
//! kill), read back through a debugging recorder, against a real redis-server. One test
//! per binary: the recorder is process-global.

mod support;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use leasehold_election::RedisStore;
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
}

impl Totals {
    /// Sum of a counter over every label set that has `label = value` (all if `None`).
    fn counter(&self, name: &str, label: Option<(&str, &str)>) -> u64 {
        let mut seen = self.seen.lock().unwrap();
        for (k, _, _, v) in self.snap.snapshot().into_vec() {
            if let DebugValue::Counter(c) = v {
                *seen.entry(k.key().clone()).or_default() += c;
            }
        }
        seen.iter()
            .filter(|(k, _)| k.name() == name)
            .filter(|(k, _)| {
                label.is_none_or(|(l, v)| k.labels().any(|x| x.key() == l && x.value() == v))
            })
            .map(|(_, c)| c)
            .sum()
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

    // A join: the others hand its share over.
    fleet.start("c");
    fleet.converge(LIMIT).await;
    assert_eq!(totals.released("handed_off"), 4);
    assert_eq!(totals.counter(m::HANDOFFS, None), 4);

    // A removal: its owner hands it back.
    admin.remove(["p00000"]).await.unwrap();
    eventually("p00000 handed back", || totals.released("removed") == 1).await;
    fleet.partitions.retain(|p| p != "p00000");
    fleet.converge(LIMIT).await;

    // A drain: everything of c's goes.
    let c_held = fleet.counts()["c"] as u64;
    admin.drain("c").await.unwrap();
    eventually("c drained", || totals.released("drained") == c_held).await;
    admin.undrain("c").await.unwrap();
    fleet.converge(LIMIT).await;

    // A graceful leave.
    let b_held = fleet.counts()["b"] as u64;
    fleet.replicas.remove("b").unwrap().shutdown().await;
    assert_eq!(totals.released("shutdown"), b_held);
    fleet.converge(LIMIT).await;

    // A kill: nobody releases; the tick that finds the session expired counts them.
    let a_held = fleet.counts()["a"] as u64;
    fleet.replicas.remove("a").unwrap().abort();
    fleet.converge(LIMIT).await;
    assert_eq!(totals.counter(m::EXPIRED, Some(("group", "g"))), a_held);
    assert_eq!(fleet.counts()["c"], 11);
    assert!(totals.counter(m::SESSIONS_LOST, None) == 0);
    fleet.ledger.assert_no_double_ownership();
}
