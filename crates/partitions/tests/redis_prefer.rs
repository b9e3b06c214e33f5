//! Preferences against a real redis-server started for each test: preferred partitions
//! end up on their replica and stay; they go to the others while it is away and come
//! back when it returns; a partition moves back to its replica when the balance bound
//! allows, and by a swap in a group balanced exactly; preferences come back after
//! Redis loses the group; a preference for a replica that is not there leaves nothing
//! unowned; typed errors; a preferences key of the wrong type is refused with nothing
//! written.

mod support;

use std::time::Duration;

use leasehold_election::{RedisStore, StoreError};
use leasehold_partitions::{GroupAdmin, PartitionsError};
use leasehold_testkit::RedisServer;
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(30);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

fn admin(redis: &RedisServer) -> GroupAdmin<RedisStore> {
    GroupAdmin::new(store(redis), "g").unwrap()
}

/// Whether `replica` runs the callbacks of all of `partitions` (per its view).
fn holds(fleet: &Fleet<RedisStore>, replica: &str, partitions: &[String]) -> bool {
    fleet.replicas.get(replica).is_some_and(|h| {
        let owned = h.status().owned;
        partitions.iter().all(|p| owned.contains(p))
    })
}

/// Terms of `partitions` started at or after `since`.
fn started_since(fleet: &Fleet<RedisStore>, partitions: &[String], since: Instant) -> usize {
    fleet
        .ledger
        .terms()
        .iter()
        .filter(|t| partitions.contains(&t.partition) && t.start >= since)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_partitions_go_to_their_replica_stay_and_come_back_after_a_restart() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    fleet.create_group().await;
    let admin = admin(&redis);
    let preferred: Vec<String> = fleet.partitions[..3].to_vec();
    for p in &preferred {
        assert_eq!(admin.prefer(p, "b").await.unwrap(), None);
    }
    let status = admin.status().await.unwrap().unwrap();
    assert_eq!(status.preferred(&preferred[0]), Some("b"));
    assert_eq!(status.preferences.len(), 3);

    // (a) They end up on b, the group balanced, and they stay.
    fleet.start_all(&["a", "b", "c"]);
    fleet
        .until("the preferred partitions on b", LIMIT, |f| {
            f.balanced() && holds(f, "b", &preferred)
        })
        .await;
    let settled = Instant::now();
    sleep(LEASE * 5).await;
    assert!(holds(&fleet, "b", &preferred), "they stay on b");
    assert_eq!(
        started_since(&fleet, &preferred, settled),
        0,
        "no term of theirs started since"
    );

    // (b) b stops gracefully: its partitions go to the others...
    fleet.replicas.remove("b").unwrap().shutdown().await;
    fleet
        .until("b's partitions on a and c", LIMIT, |f| f.balanced())
        .await;
    // ...and come back when b returns (a new coordinator, the same id), the group
    // balanced.
    fleet.start("b");
    fleet
        .until("the preferred partitions back on b", LIMIT, |f| {
            f.balanced() && holds(f, "b", &preferred)
        })
        .await;
    assert!(
        fleet.spread() <= 1,
        "counts within one: {:?}",
        fleet.counts()
    );
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_moves_back_to_its_replica_when_the_bound_allows() {
    let redis = RedisServer::start();
    // 10 on 3: one replica holds 4, the others 3.
    let mut fleet = Fleet::new(store(&redis), 10, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    let counts = fleet.counts();
    let (full, _) = counts.iter().find(|(_, n)| **n == 4).unwrap();
    let (light, _) = counts.iter().find(|(_, n)| **n == 3).unwrap();
    let (full, light) = (full.clone(), light.clone());
    let p = fleet.replicas[&full]
        .status()
        .owned
        .iter()
        .next()
        .unwrap()
        .clone();
    admin(&redis).prefer(&p, &light).await.unwrap();
    fleet
        .until("the partition on its replica", LIMIT, |f| {
            f.balanced() && holds(f, &light, std::slice::from_ref(&p))
        })
        .await;
    assert_eq!(fleet.counts()[&light], 4, "{:?}", fleet.counts());
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_exactly_balanced_group_a_preference_is_met_by_a_swap() {
    let redis = RedisServer::start();
    // 12 on 3: everyone at 4, nobody has room.
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    let theirs: Vec<String> = fleet.replicas["a"]
        .status()
        .owned
        .iter()
        .take(2)
        .cloned()
        .collect();
    let admin = admin(&redis);
    for p in &theirs {
        admin.prefer(p, "b").await.unwrap();
    }
    fleet
        .until("both on b, by swaps", LIMIT, |f| {
            f.balanced() && holds(f, "b", &theirs)
        })
        .await;
    assert_eq!(
        fleet.counts().values().copied().collect::<Vec<_>>(),
        [4, 4, 4]
    );
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preference_for_a_replica_that_is_not_there_leaves_nothing_unowned() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 8, LEASE);
    fleet.create_group().await;
    let admin = admin(&redis);
    // (c) Preferred on a replica that never runs, and on one that stops.
    for p in &fleet.partitions[..3] {
        admin.prefer(p, "ghost").await.unwrap();
    }
    for p in &fleet.partitions[3..5] {
        admin.prefer(p, "b").await.unwrap();
    }
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    fleet.replicas.remove("b").unwrap().shutdown().await;
    let start = Instant::now();
    fleet
        .until("everything on a", LIMIT, |f| f.counts()["a"] == 8)
        .await;
    assert!(
        start.elapsed() < LEASE * 10,
        "b's preferred partitions did not wait for it: {:?}",
        start.elapsed()
    );

    // (d) Removing a preference says which one it was; removing it again, none.
    assert_eq!(
        admin
            .unprefer(&fleet.partitions[0])
            .await
            .unwrap()
            .as_deref(),
        Some("ghost")
    );
    assert_eq!(admin.unprefer(&fleet.partitions[0]).await.unwrap(), None);
    assert_eq!(
        admin
            .prefer(&fleet.partitions[1], "a")
            .await
            .unwrap()
            .as_deref(),
        Some("ghost"),
        "a new preference replaces the old"
    );
    let status = admin.status().await.unwrap().unwrap();
    let listed: Vec<(&str, &str)> = status
        .preferences
        .iter()
        .map(|(p, r)| (p.as_str(), r.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            ("p00001", "a"),
            ("p00002", "ghost"),
            ("p00003", "b"),
            ("p00004", "b")
        ]
    );
    // A partition removed from the set takes its preference with it.
    admin.remove(["p00003"]).await.unwrap();
    let status = admin.status().await.unwrap().unwrap();
    assert_eq!(status.preferred("p00003"), None);
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preference_errors_are_typed() {
    let redis = RedisServer::start();
    let admin = admin(&redis);
    assert!(
        matches!(admin.prefer("p00000", "a").await, Err(PartitionsError::UnknownGroup(g)) if g == "g"),
        "no group yet"
    );
    let fleet = Fleet::new(store(&redis), 4, LEASE);
    fleet.create_group().await;
    assert!(matches!(
        admin.prefer("nope", "a").await,
        Err(PartitionsError::UnknownPartition(p)) if p == "nope"
    ));
    assert!(matches!(
        admin.unprefer("nope").await,
        Err(PartitionsError::UnknownPartition(_))
    ));
    for (p, r) in [("p00000", ""), ("p00000", "a{b}"), ("", "a"), ("p{0}", "a")] {
        assert!(
            matches!(admin.prefer(p, r).await, Err(PartitionsError::Config(_))),
            "{p:?} on {r:?}"
        );
    }
    assert!(
        admin
            .status()
            .await
            .unwrap()
            .unwrap()
            .preferences
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferences_key_of_the_wrong_type_is_a_typed_error_and_nothing_is_written() {
    let redis = RedisServer::start();
    let fleet = Fleet::new(store(&redis), 4, LEASE);
    fleet.create_group().await;
    let key = "leasehold:{g}:prefs";
    redis.redis_cli(&["SET", key, "not a hash"]);
    let sver = || redis.redis_cli(&["HGET", "leasehold:{g}:meta", "sver"]);
    let before = sver();
    let err = admin(&redis).prefer("p00000", "a").await.unwrap_err();
    assert!(
        matches!(err, PartitionsError::Store(StoreError::WrongType(_))),
        "{err:?}"
    );
    assert_eq!(
        redis.redis_cli(&["GET", key]).trim(),
        "not a hash",
        "untouched"
    );
    assert_eq!(sver(), before, "the set's version did not move");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferences_come_back_after_redis_loses_the_group() {
    let mut redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 8, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    admin.prefer("p00001", "b").await.unwrap();
    admin.prefer("p00002", "ghost").await.unwrap();
    let want = admin.status().await.unwrap().unwrap().preferences;
    // Every replica has read them; now Redis loses everything.
    sleep(LEASE).await;
    redis.restart();
    let start = Instant::now();
    loop {
        if let Ok(Some(s)) = admin.status().await
            && s.preferences == want
            && s.partitions.len() == 8
        {
            break;
        }
        assert!(start.elapsed() < LIMIT, "the preferences did not come back");
        sleep(Duration::from_millis(20)).await;
    }
    fleet
        .until("p00001 on b again", LIMIT, |f| {
            f.balanced() && holds(f, "b", &["p00001".to_owned()])
        })
        .await;
    fleet.ledger.assert_no_double_ownership();
}
