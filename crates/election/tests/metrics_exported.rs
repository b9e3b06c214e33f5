//! The elector's metrics, read back through a debugging recorder, against a real
//! redis-server. One test per binary: the recorder is process-global.

use std::time::Duration;

use leasehold_election::{Elector, ElectorConfig, Leadership, RedisStore, metrics as m};
use leasehold_testkit::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_terms_and_renewals_are_measured() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).unwrap();
    let spawn = |replica: &str| {
        let cfg = ElectorConfig::builder("metered", replica)
            .lease(Duration::from_millis(300))
            .build()
            .unwrap();
        Elector::new(store.clone(), cfg, |l: Leadership| async move {
            l.cancelled().await;
            Ok(())
        })
        .spawn()
    };
    let a = spawn("a");
    a.wait_until_leader().await.unwrap();
    let b = spawn("b");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let leaders = |snap: &[(
        metrics_util::CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )]| {
        snap.iter()
            .filter(|(k, ..)| k.key().name() == m::IS_LEADER)
            .map(|(.., v)| match v {
                DebugValue::Gauge(g) => g.into_inner(),
                _ => 0.0,
            })
            .sum::<f64>()
    };
    let snap = snapshotter.snapshot().into_vec();
    assert_eq!(leaders(&snap), 1.0, "is_leader sums to one");
    let names: Vec<_> = snap
        .iter()
        .map(|(k, ..)| k.key().name().to_owned())
        .collect();
    for expected in [
        m::LEADER_FENCE,
        m::TERMS_STARTED,
        m::RENEW_RTT,
        m::TIME_TO_LEADER,
        m::VALIDITY_LEFT,
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    a.shutdown().await;
    b.wait_until_leader().await.unwrap();
    let snap = snapshotter.snapshot().into_vec();
    let ended = snap.iter().find(|(k, ..)| {
        k.key().name() == m::TERMS_ENDED
            && k.key()
                .labels()
                .any(|l| l.key() == "reason" && l.value() == "shutdown")
    });
    assert!(
        matches!(ended, Some((.., DebugValue::Counter(1)))),
        "{ended:?}"
    );
    assert_eq!(leaders(&snap), 1.0);
    b.shutdown().await;
}
