//! Sticky restarts (`rejoin_grace`) under faults, against a real redis-server started
//! for each test: a resumed replica that crashes, a resume whose reply is lost or held,
//! a partition removed or a replica drained while its owner is away, a weighted group
//! resumed in several regrant batches, and a crash with a restart inside the grace.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupConfig, PartitionsError, ReplicaState};
use leasehold_testkit::{FaultProxy, RedisServer};
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
/// The default renew interval: a third of the lease.
const RENEW: Duration = Duration::from_millis(200);
const GRACE: Duration = Duration::from_secs(15);
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

fn sticky(fleet: &Fleet<RedisStore>, replica: &str) -> GroupConfig {
    fleet.builder(replica).rejoin_grace(GRACE).build().unwrap()
}

/// Waits until `done` holds, checking every 5 ms; how long it took.
async fn until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not after {limit:?}");
        sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

/// The store, with its connection open (so that a fault set afterwards hits calls, not
/// the connection's set-up).
async fn warm(store: RedisStore) -> RedisStore {
    leasehold_partitions::GroupAdmin::new(store.clone(), "g")
        .unwrap()
        .status()
        .await
        .unwrap();
    store
}

fn owned(fleet: &Fleet<RedisStore>, replica: &str) -> BTreeSet<String> {
    fleet.replicas[replica].status().owned
}

/// Parks `replica` (a sticky shutdown), then starts it again on `store`; waits until
/// the fleet is balanced again.
async fn sticky_restart(fleet: &mut Fleet<RedisStore>, replica: &str, store: RedisStore) {
    fleet.replicas.remove(replica).unwrap().shutdown().await;
    sleep(RENEW).await;
    let config = sticky(fleet, replica);
    fleet.start_on(store, config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_replica_that_crashes_and_does_not_return_is_replaced_after_its_grace() {
    const SHORT: Duration = Duration::from_secs(3);
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    fleet.start("a");
    let config = fleet.builder("b").rejoin_grace(SHORT).build().unwrap();
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    fleet.replicas.remove("b").unwrap().shutdown().await;
    sleep(RENEW).await;
    let config = fleet.builder("b").rejoin_grace(SHORT).build().unwrap();
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    let held = owned(&fleet, "b");
    assert_eq!(held.len(), 6);

    let killed = Instant::now();
    fleet.replicas.remove("b").unwrap().abort();
    // Its partitions wait for it for its grace after its last heartbeat (at most a
    // renew interval before the kill), shown as `away`; then they move. Before the
    // fix of the resumed session's expiry they waited park time + grace; before
    // crashed sticky sessions were parked at all, a lease.
    let admin = admin(&redis);
    sleep(LEASE * 2).await;
    let status = admin.status().await.unwrap().unwrap();
    let b = status.members.iter().find(|m| m.replica == "b").unwrap();
    assert_eq!(b.state, ReplicaState::Away, "{b:?}");
    assert!(b.session_left <= SHORT, "{b:?}");
    let took = until(LIMIT, "b's partitions owned by a", || {
        held.is_subset(&owned(&fleet, "a"))
    })
    .await;
    let after = killed.elapsed();
    assert!(
        after >= SHORT - RENEW - Duration::from_millis(100),
        "owned again {after:?} after the kill, inside the grace {SHORT:?}"
    );
    assert!(
        after < SHORT + RENEW + Duration::from_millis(800),
        "owned again {after:?} after the kill ({took:?} after the first look), grace {SHORT:?}"
    );
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_whose_reply_is_held_past_its_timeout_is_not_refused_for_the_grace() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    fleet.start("a");
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    let held = owned(&fleet, "b");

    // b comes back on a link so slow that the reply of its resuming tick arrives 1.5
    // renew intervals late, after the call timed out and the next tick was sent.
    fleet.replicas.remove("b").unwrap().shutdown().await;
    let b = warm(store(&proxy.url())).await;
    proxy.latency(RENEW * 3 / 4);
    let config = sticky(&fleet, "b");
    fleet.start_on(b, config);
    sleep(RENEW * 3).await;
    proxy.pass();
    until(
        Duration::from_secs(5),
        "b holds its own partitions again",
        || owned(&fleet, "b") == held,
    )
    .await;
    let view = fleet.replicas["b"].status();
    assert!(
        !matches!(view.error, Some(PartitionsError::DuplicateReplica(_))),
        "{view:?}"
    );
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_whose_reply_is_cut_and_retried_by_the_store_is_not_refused() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    fleet.start("a");
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    let held = owned(&fleet, "b");

    // The resuming tick runs, then its connection breaks before the reply: the store
    // sends it again on a fresh connection.
    fleet.replicas.remove("b").unwrap().shutdown().await;
    proxy.cut_replies_containing(1, b"live");
    let config = sticky(&fleet, "b");
    fleet.start_on(store(&proxy.url()), config);
    until(
        Duration::from_secs(5),
        "b holds its own partitions again",
        || owned(&fleet, "b") == held,
    )
    .await;
    assert_eq!(proxy.cuts_left(), 0, "the resume's reply was cut");
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_removed_while_its_owner_is_away_is_never_granted_again() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 16, LEASE);
    fleet.start("a");
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    // Several rounds: the resume, the revocation and the give-back race.
    for _ in 0..4 {
        let gone = owned(&fleet, "b").into_iter().next().unwrap();
        fleet.replicas.remove("b").unwrap().shutdown().await;
        assert_eq!(admin.remove([gone.as_str()]).await.unwrap(), 1);
        let removed = Instant::now();
        let config = sticky(&fleet, "b");
        fleet.start_with(config);
        fleet.partitions.retain(|p| *p != gone);
        fleet.converge(LIMIT).await;
        let late: Vec<_> = fleet
            .ledger
            .terms()
            .into_iter()
            .filter(|t| t.partition == gone && t.start >= removed)
            .collect();
        assert!(late.is_empty(), "{gone} served after its removal: {late:?}");
    }
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_drained_while_away_takes_nothing_back_when_it_resumes() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    fleet.start("a");
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    fleet.replicas.remove("b").unwrap().shutdown().await;
    admin.drain("b").await.unwrap();
    let drained = Instant::now();
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    until(LIMIT, "a holds everything", || {
        owned(&fleet, "a").len() == 12
    })
    .await;
    sleep(LEASE).await;
    let b_terms: Vec<_> = fleet
        .ledger
        .terms()
        .into_iter()
        .filter(|t| t.replica == "b" && t.start >= drained)
        .collect();
    assert!(
        b_terms.is_empty(),
        "a drained replica started terms: {b_terms:?}"
    );
    assert!(fleet.replicas["b"].status().drained);
    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weighted_group_resumed_in_several_batches_keeps_every_partition_it_serves() {
    let redis = RedisServer::start();
    // b's link is slow, so its regrant batches (it holds about 100: four of them) are
    // still in flight at its next tick.
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let slow = || {
        RedisStore::builder(proxy.url())
            .call_timeout(Duration::from_millis(190))
            .build()
            .unwrap()
    };
    let mut fleet = Fleet::new(store(&redis.url()), 200, LEASE);
    fleet.start("a");
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    admin.set_weight("p00000", 2).await.unwrap();
    sleep(LEASE).await;
    for round in 0..3 {
        let b = warm(slow()).await;
        proxy.latency(Duration::from_millis(40));
        sticky_restart(&mut fleet, "b", b).await;
        until(LIMIT, "b serves again", || !owned(&fleet, "b").is_empty()).await;
        sleep(LEASE * 2).await;
        proxy.pass();
        sleep(LEASE).await;
        // Every partition b's callbacks run is b's in Redis: none was freed under them.
        let status = admin.status().await.unwrap().unwrap();
        for p in owned(&fleet, "b") {
            let o = status.partitions.iter().find(|s| s.partition == p).unwrap();
            assert_eq!(o.owner.as_deref(), Some("b"), "round {round}: {p}: {o:?}");
        }
        fleet.ledger.assert_no_double_ownership();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sticky_replica_killed_and_restarted_within_its_grace_gets_its_own_partitions_back() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    for r in ["a", "b", "c"] {
        let config = sticky(&fleet, r);
        fleet.start_with(config);
    }
    fleet.converge(LIMIT).await;
    let held = owned(&fleet, "b");
    let before = fleet.ledger.terms().len();
    fleet.replicas.remove("b").unwrap().abort();
    // Restarted at once: its old session is still live (it was killed, not parked).
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    assert_eq!(owned(&fleet, "b"), held, "b got its own partitions back");
    let moved: Vec<_> = fleet.ledger.terms()[before..]
        .iter()
        .filter(|t| t.replica != "b")
        .cloned()
        .collect();
    assert!(moved.is_empty(), "nothing moved: {moved:?}");
    fleet.ledger.assert_no_double_ownership();
}

/// The promise of guarantee 9 as an orchestrator keeps it: a sticky pod killed and
/// started again within its grace, but after its old session expired (a restart
/// longer than the lease), gets its own partitions back and nothing moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sticky_replica_restarted_within_its_grace_after_its_session_expired_moves_nothing() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    for r in ["a", "b", "c"] {
        let config = sticky(&fleet, r);
        fleet.start_with(config);
    }
    fleet.converge(LIMIT).await;
    let held = owned(&fleet, "b");
    let killed = Instant::now();
    fleet.replicas.remove("b").unwrap().abort();
    // Down for three leases: its session expired long before it is back.
    sleep(LEASE * 3).await;
    let taken: Vec<_> = fleet
        .ledger
        .terms()
        .into_iter()
        .filter(|t| t.replica != "b" && t.start >= killed && held.contains(&t.partition))
        .collect();
    assert!(
        taken.is_empty(),
        "b's partitions moved while it was away: {taken:?}"
    );
    let status = admin(&redis).status().await.unwrap().unwrap();
    let b = status.members.iter().find(|m| m.replica == "b");
    assert_eq!(b.map(|m| m.state), Some(ReplicaState::Away), "{b:?}");
    assert_eq!(b.map(|m| m.held), Some(held.len()), "{b:?}");
    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    assert_eq!(owned(&fleet, "b"), held, "b got its own partitions back");
    let moved: Vec<_> = fleet
        .ledger
        .terms()
        .into_iter()
        .filter(|t| t.start >= killed && t.replica != "b")
        .collect();
    assert!(moved.is_empty(), "nothing moved: {moved:?}");
    let ledger = admin(&redis).moves(None, 1_000).await.unwrap();
    let since: Vec<_> = ledger
        .iter()
        .filter(|m| m.to != "b" && m.from.as_deref() == Some("b"))
        .collect();
    assert!(since.is_empty(), "the ledger of moves: {since:?}");
    fleet.ledger.assert_no_double_ownership();
}
