//! The weights a replica writes from its callbacks' load reports are counted
//! (`leasehold_partition_load_weights_total`), read back through a debugging recorder,
//! against a real redis-server. One test per binary: the recorder is process-global.

mod support;

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, LoadDamping, metrics as m};
use leasehold_testkit::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::{Fleet, Loads};
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_weight_written_from_loads_is_counted() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    recorder.install().unwrap();
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let admin = GroupAdmin::new(store.clone(), "g").unwrap();
    let loads = Loads::default();
    let mut fleet = Fleet::new(store, 4, LEASE);
    fleet.loads = Some(loads.clone());
    for p in &fleet.partitions {
        loads.set(p, 50.0);
    }
    // A threshold of 0 and no jumps: every whole unit the average moves is written,
    // and the average climbs from 1 to 50 in many steps (a jump would take one).
    let damping = LoadDamping::default()
        .half_life(Duration::from_millis(200))
        .threshold_percent(0)
        .jump_percent(0);
    let config = fleet
        .builder("a")
        .weights_from_loads(damping)
        .build()
        .unwrap();
    fleet.start_with(config);
    let mut written = 0;
    let start = Instant::now();
    loop {
        for (k, _, _, v) in snap.snapshot().into_vec() {
            if let DebugValue::Counter(c) = v
                && k.key().name() == m::LOAD_WEIGHTS
            {
                written += c;
            }
        }
        let status = admin.status().await.unwrap();
        let done = status
            .as_ref()
            .is_some_and(|s| s.partitions.iter().all(|p| p.weight == 50));
        if done {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "weights not 50 after {LIMIT:?}: {status:?}"
        );
        sleep(Duration::from_millis(20)).await;
    }
    // Each of the 4 partitions went from 1 to 50 in at least two writes (the first
    // interval's average is not all the way there), and none of them was written
    // uncounted: the counter is at least that, and no more than one write per
    // partition per renew interval since the start.
    let intervals = (start.elapsed().as_millis() / (LEASE / 3).as_millis()) as u64 + 1;
    assert!(
        (8..=4 * intervals).contains(&written),
        "{written} weights written in {intervals} intervals"
    );
    assert_eq!(fleet.replicas["a"].status().load, 200);
}
