//! Drains, against a real redis-server started for each test: a drain is about a
//! replica id and lasts until undrained (also across a lost session), and a drain that
//! would leave nobody to serve the group is refused unless forced.

mod support;

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, PartitionsError};
use leasehold_testkit::{FaultProxy, RedisServer};
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

fn store(url: &str) -> RedisStore {
    RedisStore::builder(url)
        .call_timeout(Duration::from_millis(150))
        .build()
        .unwrap()
}

fn admin(redis: &RedisServer) -> GroupAdmin<RedisStore> {
    GroupAdmin::new(store(&redis.url()), "g").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_outlasts_a_lost_session() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let mut fleet = Fleet::new(store(&redis.url()), 8, LEASE);
    fleet.start("a");
    let config = fleet.config("b");
    fleet.start_on(store(&proxy.url()), config);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    admin.drain("b").await.unwrap();
    let start = Instant::now();
    while fleet.counts()["a"] != 8 {
        assert!(start.elapsed() < LIMIT, "b never handed over");
        sleep(Duration::from_millis(10)).await;
    }
    // Cut off for 2.5 leases: b's session is lost; it starts a new one.
    proxy.blackhole();
    sleep(LEASE * 5 / 2).await;
    proxy.pass();
    let back = Instant::now();
    while !fleet.replicas["b"].status().joined || back.elapsed() < LEASE * 3 {
        assert!(back.elapsed() < LIMIT);
        sleep(Duration::from_millis(20)).await;
    }
    let view = fleet.replicas["b"].status();
    assert!(view.drained && view.owned.is_empty(), "{view:?}");
    let status = admin.status().await.unwrap().unwrap();
    let b = status.members.iter().find(|m| m.replica == "b").unwrap();
    assert!(b.drained && b.held == 0, "{b:?}");
    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_the_last_active_replica_is_refused_unless_forced() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 8, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    admin.drain("a").await.unwrap();
    assert!(
        matches!(
            admin.drain("b").await,
            Err(PartitionsError::LastActiveReplica(r)) if r == "b"
        ),
        "b is the last replica taking part"
    );
    let start = Instant::now();
    while fleet.counts()["b"] != 8 {
        assert!(start.elapsed() < LIMIT, "b serves everything");
        sleep(Duration::from_millis(10)).await;
    }
    admin.drain_forced("b").await.unwrap();
    let start = Instant::now();
    while fleet.counts().values().any(|n| *n > 0) {
        assert!(start.elapsed() < LIMIT, "forced: nobody serves");
        sleep(Duration::from_millis(10)).await;
    }
    admin.undrain("a").await.unwrap();
    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}
