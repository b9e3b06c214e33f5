//! Partition groups on Sentinel: a failover to a replica that missed the group's last
//! claims and ticks never yields two owners of a partition.

mod support;

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_testkit::{MASTER_NAME, RedisSentinelSet};
use support::Fleet;
use tokio::time::{Instant, sleep};

/// Longer than a failover takes, so that the old owners still lead when it is over.
const LEASE: Duration = Duration::from_secs(5);
/// `down-after-milliseconds` (1 s) plus an election, then a lease of holding back;
/// generous because the machine may be busy.
const LIMIT: Duration = Duration::from_secs(40);

fn sentinel_store(set: &RedisSentinelSet) -> RedisStore {
    RedisStore::sentinel_builder(MASTER_NAME, set.sentinel_urls())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// The primary's replica is cut off, then c leaves and a and b claim its partitions
/// and keep ticking, on the primary only. The primary dies and Sentinel promotes the
/// replica, which still has c's session and none of those claims or ticks. a talks to
/// the dead primary only, so its terms run to their local deadlines; b follows the
/// failover and keeps believing in what it claimed unless the new primary corrects it;
/// c comes back. On this process's clock no partition has two owners at once, fences
/// grow, and the group is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_lost_claims_and_ticks_never_yields_two_owners() {
    let mut set = tokio::task::block_in_place(|| RedisSentinelSet::start(1));
    let direct = RedisStore::builder(set.nodes()[0].url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mut fleet = Fleet::new(sentinel_store(&set), 12, LEASE);
    let config = fleet.config("a");
    fleet.start_on(direct, config);
    fleet.start_all(&["b", "c"]);
    fleet.converge(LIMIT).await;

    tokio::task::block_in_place(|| set.cut_replication());
    fleet.replicas.remove("c").unwrap().shutdown().await;
    fleet.converge(LIMIT).await;
    // Ticks the replica never sees: the new primary's sessions expire earlier than
    // their replicas' deadlines.
    sleep(LEASE / 2).await;
    let a = fleet.replicas.remove("a").unwrap();
    set.nodes_mut()[0].stop();
    let killed = Instant::now();
    fleet.start("c");
    let served = fleet.converge(LIMIT).await;
    assert_eq!(
        tokio::task::block_in_place(|| set.wait_for_new_primary(0)),
        1
    );
    eprintln!("served by b and c again {served:?} after the primary was killed");
    fleet.ledger.assert_no_double_ownership();
    assert!(
        killed.elapsed() >= LEASE,
        "the new primary held nothing back"
    );
    a.abort();
}

/// With `min_replicas_acked(1)` a heartbeat or claim counts only once the replica has
/// it: while the primary is cut off from its replica every term ends within a lease or
/// so (no heartbeat is acknowledged), and the group is served again once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_replicas_acked_serves_nothing_a_failover_could_lose() {
    let set = tokio::task::block_in_place(|| RedisSentinelSet::start(1));
    let lease = Duration::from_millis(1_000);
    let mut fleet = Fleet::new(sentinel_store(&set), 8, lease);
    for r in ["a", "b"] {
        let config = fleet.builder(r).min_replicas_acked(1).build().unwrap();
        fleet.start_with(config);
    }
    fleet.converge(LIMIT).await;
    tokio::task::block_in_place(|| set.cut_replication());
    let cut = Instant::now();
    while fleet.ledger.terms().iter().any(|t| t.end.is_none()) {
        assert!(cut.elapsed() < LIMIT, "terms outlived the cut");
        sleep(Duration::from_millis(20)).await;
    }
    eprintln!("every term ended {:?} after the cut", cut.elapsed());
    assert!(cut.elapsed() <= lease * 3, "{:?}", cut.elapsed());
    tokio::task::block_in_place(|| set.mend_replication());
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}
