//! A new group's first grants, against a real redis-server. On a server that has run
//! for more than a lease, the replicas started together own every partition, evenly and
//! without a hand-off, about one renew interval after the group was created (no lease
//! it granted can have been forgotten). On a server that started less than a lease ago
//! (a restart may have forgotten leases still held) the new group grants nothing for a
//! lease.

mod support;

use std::time::Duration;

use leasehold_partitions::RedisStore;
use leasehold_partitions::redis;
use leasehold_testkit::RedisServer;
use support::Fleet;
use tokio::time::{Instant, sleep};

/// Renew interval: a third of it, 1 s.
const LEASE: Duration = Duration::from_secs(3);
const LIMIT: Duration = Duration::from_secs(20);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// The server's `uptime_in_seconds`.
async fn uptime(store: &RedisStore) -> u64 {
    let info = store
        .query(redis::cmd("INFO").arg("server"))
        .await
        .expect("INFO server");
    let text: String = redis::FromRedisValue::from_redis_value(info).expect("INFO is text");
    text.lines()
        .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("uptime_in_seconds")
}

/// Starts three replicas of 12 partitions together; returns how long until every
/// partition was owned once, spread ≤ 1, and the fleet.
async fn cold_start(store: RedisStore) -> (Duration, Fleet<RedisStore>) {
    let mut fleet = Fleet::new(store, 12, LEASE);
    let start = Instant::now();
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    (start.elapsed(), fleet)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_server_older_than_a_lease_a_new_group_is_served_after_one_renew_interval() {
    let redis = RedisServer::start();
    let store = store(&redis);
    // The scripts count whole seconds of uptime, less one: 5 s is older than the lease.
    let start = Instant::now();
    while uptime(&store).await < 5 {
        assert!(start.elapsed() < LIMIT, "the server's uptime does not grow");
        sleep(Duration::from_millis(100)).await;
    }
    let (took, fleet) = cold_start(store).await;
    // About a renew interval (1 s) and the claims; well inside the lease's hold (3 s).
    assert!(
        took < LEASE * 3 / 4,
        "all owned after {took:?}: the group held its grants as if the server were new"
    );
    // Every replica claimed against the same roster: equal shares, first terms only.
    sleep(LEASE).await;
    assert!(fleet.balanced(), "{:?}", fleet.counts());
    let terms = fleet.ledger.terms();
    assert_eq!(terms.len(), 12, "a partition changed owner: {terms:?}");
    let handoffs: u64 = fleet.replicas.values().map(|h| h.status().handoffs).sum();
    assert_eq!(handoffs, 0);
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_server_that_just_started_a_new_group_grants_nothing_for_a_lease() {
    // A restart that lost every key looks like this: a young server, no group.
    let redis = RedisServer::start();
    let store = store(&redis);
    assert!(uptime(&store).await <= 1, "the new server is already old");
    let (took, fleet) = cold_start(store).await;
    assert!(
        took >= LEASE * 9 / 10,
        "all owned after {took:?}: a lease granted before the restart may still be held"
    );
    let handoffs: u64 = fleet.replicas.values().map(|h| h.status().handoffs).sum();
    assert_eq!(handoffs, 0);
    fleet.ledger.assert_no_double_ownership();
}
