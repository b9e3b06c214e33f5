//! Readiness in the group's sense (`CoordinatorHandle::readiness`), against a real
//! redis-server: a replica is ready once it holds its floor share, not before; a
//! drained or leaving replica says so at once; a stopped one says it has stopped.

mod support;

use std::time::Duration;

use leasehold_partitions::{GroupAdmin, NotReady, RedisStore};
use leasehold_testkit::RedisServer;
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_is_ready_once_it_holds_its_floor_and_not_while_drained_or_leaving() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    fleet.start_all(&["a", "b"]);
    // Not ready while the new group holds its grants back, or before a replica's share.
    let a = fleet.replicas["a"].clone();
    assert!(a.readiness().is_err(), "ready before anything was granted");
    fleet.converge(LIMIT).await;
    for (id, h) in &fleet.replicas {
        assert!(h.readiness().is_ok(), "{id}: {:?}", h.readiness());
    }

    // A joiner is ready only once it holds its floor (12 / 3 = 4).
    fleet.start("c");
    let c = fleet.replicas["c"].clone();
    let start = Instant::now();
    loop {
        let owned = c.status().owned.len();
        match c.readiness() {
            Ok(()) => {
                assert!(owned >= 4, "ready with {owned} partitions");
                break;
            }
            Err(why) => {
                assert!(
                    !matches!(why, NotReady::Refused(_) | NotReady::Stopped),
                    "{why}"
                );
            }
        }
        assert!(
            start.elapsed() < LIMIT,
            "c never ready: {:?}",
            c.readiness()
        );
        sleep(Duration::from_millis(5)).await;
    }

    // Drained: not ready as soon as its view says so.
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();
    admin.drain("b").await.unwrap();
    let b = fleet.replicas["b"].clone();
    let start = Instant::now();
    while !matches!(b.readiness(), Err(NotReady::Drained)) {
        assert!(start.elapsed() < LIMIT, "b: {:?}", b.readiness());
        sleep(Duration::from_millis(5)).await;
    }
    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;
    // Every partition owned is not every view caught up: a replica whose view still
    // counts b out has a floor of 12 / 2 = 6. Ready again once each view has b back.
    let start = Instant::now();
    while let Some((id, why)) = fleet
        .replicas
        .iter()
        .find_map(|(id, h)| h.readiness().err().map(|e| (id.clone(), e)))
    {
        assert!(start.elapsed() < LIMIT, "{id} not ready again: {why:?}");
        sleep(Duration::from_millis(5)).await;
    }

    // Leaving: not ready the moment the shutdown begins; stopped once it is done.
    let leaving = fleet.replicas.remove("a").unwrap();
    let handle = leaving.clone();
    let shutdown = tokio::spawn(async move { handle.shutdown().await });
    let start = Instant::now();
    while leaving.readiness().is_ok() {
        assert!(start.elapsed() < LIMIT, "still ready while leaving");
        sleep(Duration::from_millis(1)).await;
    }
    assert!(
        matches!(
            leaving.readiness(),
            Err(NotReady::Leaving | NotReady::Stopped)
        ),
        "{:?}",
        leaving.readiness()
    );
    shutdown.await.unwrap();
    assert!(matches!(leaving.readiness(), Err(NotReady::Stopped)));
    assert!(!leaving.is_running());
    fleet.ledger.assert_no_double_ownership();
}

/// A replica that was ready stays ready while a peer leaves: the floor rises (12 / 3 =
/// 4, then 12 / 2 = 6) a moment before it has claimed the leaver's partitions, and a
/// readiness probe must not flap then (it did, for under a millisecond).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_replica_stays_ready_while_a_peer_leaves() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    let a = fleet.replicas["a"].clone();
    let start = Instant::now();
    while a.readiness().is_err() {
        assert!(
            start.elapsed() < LIMIT,
            "a never ready: {:?}",
            a.readiness()
        );
        sleep(Duration::from_millis(5)).await;
    }
    // Every view a publishes while c leaves and a takes its share.
    let mut views = a.subscribe();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        while views.changed().await.is_ok() {
            let v = views.borrow_and_update().clone();
            let done = v.owned.len() == 6;
            seen.push((
                v.owned.len(),
                v.floor,
                v.readiness().map_err(|e| e.to_string()),
            ));
            if done {
                break;
            }
        }
        seen
    });
    let c = fleet.replicas.remove("c").unwrap();
    c.shutdown().await;
    let seen = tokio::time::timeout(LIMIT, watcher).await.unwrap().unwrap();
    assert!(
        seen.iter()
            .any(|(owned, floor, _)| *floor == 6 && *owned < 6),
        "the test never saw the floor rise before a took its share: {seen:?}"
    );
    let flapped: Vec<_> = seen.iter().filter(|(_, _, r)| r.is_err()).collect();
    assert!(
        flapped.is_empty(),
        "readiness flapped: {flapped:?} of {seen:?}"
    );
}
