//! Redis restarts that lose every key, against a real redis-server started for each
//! test: the group comes back with the set its live replicas last saw (additions,
//! removals, weights, drains), never shrunk to an admin's addition, with fences that
//! keep growing, and an owner cut off during the restart is never overlapped.

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

async fn listed(admin: &GroupAdmin<RedisStore>) -> Vec<String> {
    let mut l = admin.list().await.unwrap();
    l.sort();
    l
}

/// Waits until the group exists and lists `want` (sorted).
async fn until_listed(admin: &GroupAdmin<RedisStore>, want: &[String]) {
    let start = Instant::now();
    loop {
        match admin.list().await {
            Ok(mut l) => {
                l.sort();
                if l == want {
                    return;
                }
                assert!(
                    start.elapsed() < LIMIT,
                    "the group lists {l:?}, not {want:?}"
                );
            }
            Err(e) => assert!(start.elapsed() < LIMIT, "{e}"),
        }
        sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_loses_data_keeps_the_set_its_replicas_saw() {
    let mut redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 8, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    assert_eq!(admin.remove(["p00003"]).await.unwrap(), 1);
    assert_eq!(admin.add(["late-1"]).await.unwrap(), 1);
    admin.set_weight("p00005", 3).await.unwrap();
    fleet.partitions.retain(|p| p != "p00003");
    fleet.partitions.push("late-1".into());
    // Weighted now: loads balance, not counts.
    fleet.settle(LIMIT).await;
    let mut want = fleet.partitions.clone();
    want.sort();
    assert_eq!(listed(&admin).await, want);
    // Every replica has seen the change; now Redis loses everything.
    sleep(LEASE).await;
    redis.restart();
    let restarted = Instant::now();
    until_listed(&admin, &want).await;
    fleet.settle(LIMIT).await;
    let status = admin.status().await.unwrap().unwrap();
    let w = status
        .partitions
        .iter()
        .find(|p| p.partition == "p00005")
        .unwrap();
    assert_eq!(w.weight, 3, "the weight came back too");
    let back: Vec<_> = fleet
        .ledger
        .terms()
        .into_iter()
        .filter(|t| t.partition == "p00003" && t.start >= restarted)
        .collect();
    assert!(back.is_empty(), "a removed partition came back: {back:?}");
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_addition_right_after_a_data_loss_never_shrinks_the_group() {
    let mut redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    // The replicas reach Redis through the proxy, so the admin's call surely lands
    // before any of their ticks after the restart.
    let mut fleet = Fleet::new(store(&proxy.url()), 8, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    proxy.blackhole();
    redis.restart();
    let added = admin.add(["late-1"]).await;
    assert!(
        matches!(added, Ok(1) | Err(PartitionsError::UnknownGroup(_))),
        "{added:?}"
    );
    proxy.reset_connections();
    proxy.pass();
    let mut want = fleet.partitions.clone();
    if added.is_ok() {
        want.push("late-1".into());
    }
    want.sort();
    until_listed(&admin, &want).await;
    if added.is_ok() {
        fleet.partitions.push("late-1".into());
    }
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_keep_growing_after_a_data_loss_for_replicas_that_never_saw_them() {
    let mut redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 8, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    // b's partitions were granted by a server whose clock ran far ahead: their fences
    // are far above anything a's own claims ever saw. Restart b so its terms carry them.
    let b = fleet.replicas["b"].view().owned;
    for p in &b {
        redis.redis_cli(&["HSET", "leasehold:{g}:fences", p, "9000000000000000"]);
    }
    fleet.replicas.remove("b").unwrap().shutdown().await;
    fleet.start("b");
    fleet.converge(LIMIT).await;
    // Now Redis (on a host whose clock is behind) loses everything, and b is gone: a
    // claims b's old partitions.
    fleet.replicas.remove("b").unwrap().abort();
    sleep(LEASE).await;
    redis.restart();
    let start = Instant::now();
    while fleet.counts().get("a") != Some(&8) {
        assert!(start.elapsed() < LIMIT, "a never took everything");
        sleep(Duration::from_millis(20)).await;
    }
    let terms = fleet.ledger.terms();
    for p in &fleet.partitions {
        let mut fences: Vec<_> = terms
            .iter()
            .filter(|t| &t.partition == p)
            .map(|t| (t.start, t.fence))
            .collect();
        fences.sort();
        assert!(
            fences.windows(2).all(|w| w[0].1 < w[1].1),
            "{p}: fences went back: {fences:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_cut_off_during_a_data_losing_restart_is_never_overlapped() {
    let mut redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    let config = fleet.config("a");
    fleet.start_on(store(&proxy.url()), config);
    fleet.start("b");
    fleet.converge(LIMIT).await;
    // a cannot learn of the restart: its callbacks run until their local deadlines.
    proxy.blackhole();
    redis.restart();
    let start = Instant::now();
    while fleet.counts().get("b") != Some(&12) {
        assert!(start.elapsed() < LIMIT, "b never took everything");
        sleep(Duration::from_millis(20)).await;
    }
    // On this process's clock, every term of a's ended before b's term of the same
    // partition began.
    fleet.ledger.assert_no_double_ownership();
    proxy.pass();
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}
