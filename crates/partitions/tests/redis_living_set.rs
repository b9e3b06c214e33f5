//! A living partition set against a real redis-server started for each test: partitions
//! added and removed at runtime, versioned lists in a rolling deploy, sticky restarts,
//! drains, one partition's owner, and bad input refused with nothing lost.

mod support;

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupConfig, PartitionsError, ReplicaState};
use leasehold_testkit::RedisServer;
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
/// The default renew interval: a third of the lease.
const RENEW: Duration = Duration::from_millis(200);
const LIMIT: Duration = Duration::from_secs(20);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

fn admin(redis: &RedisServer) -> GroupAdmin<RedisStore> {
    GroupAdmin::new(store(redis), "g").unwrap()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_added_at_runtime_is_claimed_at_once_by_the_fair_share_rule() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 11, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);

    let start = Instant::now();
    assert_eq!(admin.add(["tenant-new"]).await.unwrap(), 1);
    let owned = until(LIMIT, "the new partition owned", || {
        fleet
            .replicas
            .values()
            .any(|h| h.status().owned.contains("tenant-new"))
    })
    .await;
    // The change publishes a notice: it is claimed at once, not a tick later. Bounded
    // generously here (a busy machine); the figure is `leasehold-bench` territory.
    assert!(
        start.elapsed() < RENEW + Duration::from_millis(400),
        "owned {owned:?} after the add"
    );
    fleet.partitions.push("tenant-new".to_owned());
    fleet.converge(LIMIT).await;
    assert_eq!(fleet.counts().values().copied().max(), Some(4));
    assert!(fleet.replicas.values().all(|h| h.status().partitions == 12));
    let listed = admin.list().await.unwrap();
    assert_eq!(listed.len(), 12);
    assert_eq!(listed.last().map(String::as_str), Some("tenant-new"));
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_partition_is_cancelled_released_and_never_claimed_again() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    let gone = ["p00003".to_owned(), "p00007".to_owned()];
    let owner = admin.owner(&gone[0]).await.unwrap().owner.unwrap();

    assert_eq!(admin.remove(gone.clone()).await.unwrap(), 2);
    until(LIMIT, "the removed partitions' callbacks stopped", || {
        fleet
            .ledger
            .terms()
            .iter()
            .filter(|t| gone.contains(&t.partition))
            .all(|t| t.end.is_some())
    })
    .await;
    fleet.partitions.retain(|p| !gone.contains(p));
    fleet.converge(LIMIT).await;
    assert!(fleet.replicas.values().all(|h| h.status().partitions == 10));
    for p in &gone {
        assert!(matches!(
            admin.owner(p).await,
            Err(PartitionsError::UnknownPartition(name)) if &name == p
        ));
    }
    let status = admin.status().await.unwrap().unwrap();
    assert_eq!(status.partitions.len(), 10);
    assert!(
        status
            .partitions
            .iter()
            .all(|p| !gone.contains(&p.partition))
    );
    // Its owner gave it back and nobody took it: each removed partition had one term.
    sleep(LEASE).await;
    for p in &gone {
        assert_eq!(fleet.ledger.owners_of(p).len(), 1, "{p}");
    }
    assert!(fleet.ledger.owners_of(&gone[0]) == [owner]);
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_and_changes_nothing() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 4, LEASE);
    fleet.start("a");
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    let before = admin.list().await.unwrap();

    assert!(matches!(
        admin.add(["p00001"]).await,
        Err(PartitionsError::AlreadyPresent(p)) if p == "p00001"
    ));
    // Strict: a chunk with one present name adds none of the others.
    assert!(matches!(
        admin.add(["fresh", "p00002"]).await,
        Err(PartitionsError::AlreadyPresent(p)) if p == "p00002"
    ));
    assert!(matches!(
        admin.add(["twice", "twice"]).await,
        Err(PartitionsError::DuplicatePartition(p)) if p == "twice"
    ));
    let long = "x".repeat(1_000);
    for bad in [
        "",
        "{tenant}",
        "a{b",
        "a}b",
        "line\nbreak",
        "nul\0",
        long.as_str(),
    ] {
        assert!(
            matches!(admin.add([bad]).await, Err(PartitionsError::Config(_))),
            "{bad:?} was not refused"
        );
        assert!(
            matches!(admin.owner(bad).await, Err(PartitionsError::Config(_))),
            "{bad:?} was not refused"
        );
    }
    assert!(matches!(
        admin.remove(["nope"]).await,
        Err(PartitionsError::UnknownPartition(p)) if p == "nope"
    ));
    assert!(matches!(
        admin.remove(["p00000", "nope"]).await,
        Err(PartitionsError::UnknownPartition(p)) if p == "nope"
    ));
    assert!(matches!(
        admin.remove(before.clone()).await,
        Err(PartitionsError::LastPartition)
    ));
    assert!(matches!(
        admin.owner("nope").await,
        Err(PartitionsError::UnknownPartition(p)) if p == "nope"
    ));
    assert!(matches!(
        admin.drain("nobody").await,
        Err(PartitionsError::UnknownReplica(r)) if r == "nobody"
    ));
    let unknown = GroupAdmin::new(store(&redis), "no-such-group").unwrap();
    assert!(matches!(
        unknown.list().await,
        Err(PartitionsError::UnknownGroup(g)) if g == "no-such-group"
    ));
    assert!(unknown.status().await.unwrap().is_none());
    assert!(matches!(
        GroupAdmin::new(store(&redis), "{g}"),
        Err(PartitionsError::Config(_))
    ));

    // Nothing was lost or added, and the replica still owns everything.
    assert_eq!(admin.list().await.unwrap(), before);
    sleep(RENEW * 2).await;
    fleet.converge(LIMIT).await;
    assert_eq!(fleet.counts()["a"], 4);
    assert_eq!(fleet.ledger.terms().len(), 4, "no partition moved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_of_a_newer_list_refuses_nobody_and_leaves_no_old_partition_unowned() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 16, LEASE);
    let old = fleet.partitions.clone();
    let v1 = |fleet: &Fleet<RedisStore>, r: &str| fleet.builder(r).list_version(1).build().unwrap();
    for r in ["a", "b", "c", "d"] {
        let config = v1(&fleet, r);
        fleet.start_with(config);
    }
    fleet.converge(LIMIT).await;

    // Version 2 adds four partitions; each replica is restarted in turn with it.
    let mut new = old.clone();
    new.extend((0..4).map(|i| format!("added-{i}")));
    let deploy = Instant::now();
    for r in ["a", "b", "c", "d"] {
        let config = GroupConfig::builder(fleet.group.as_str(), new.clone(), r)
            .lease(fleet.lease)
            .list_version(2)
            .build()
            .unwrap();
        fleet.replicas.remove(r).unwrap().shutdown().await;
        fleet.start_with(config);
        sleep(Duration::from_millis(300)).await;
        for (id, h) in &fleet.replicas {
            assert!(h.status().error.is_none(), "{id}: {:?}", h.status().error);
        }
    }
    fleet.partitions = new.clone();
    fleet.converge(LIMIT).await;
    assert!(fleet.spread() <= 1, "{:?}", fleet.counts());
    let admin = admin(&redis);
    let mut listed = admin.list().await.unwrap();
    listed.sort();
    let mut expected = new.clone();
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(admin.status().await.unwrap().unwrap().list_version, 2);

    // Each restart handed its share over at once: no old partition went unowned long
    // (bounded generously; `leasehold-bench rolling` has the figure).
    let (gap, partition) = fleet.ledger.longest_gap(&old, deploy, Instant::now());
    assert!(gap < LEASE, "{partition} unowned for {gap:?}");
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sticky_restart_within_the_rejoin_grace_moves_nothing_and_gets_new_fences() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    let sticky = |fleet: &Fleet<RedisStore>, r: &str| {
        fleet
            .builder(r)
            .rejoin_grace(Duration::from_secs(5))
            .build()
            .unwrap()
    };
    for r in ["a", "b", "c"] {
        let config = sticky(&fleet, r);
        fleet.start_with(config);
    }
    fleet.converge(LIMIT).await;
    let before = fleet.ledger.terms();
    let held: Vec<String> = fleet.replicas["b"].status().owned.into_iter().collect();
    assert_eq!(held.len(), 4);

    fleet.replicas.remove("b").unwrap().shutdown().await;
    // Away for longer than a lease: nobody takes b's partitions.
    sleep(LEASE * 2).await;
    assert_eq!(fleet.counts(), [("a".into(), 4), ("c".into(), 4)].into());
    let status = admin(&redis).status().await.unwrap().unwrap();
    let b = status.members.iter().find(|m| m.replica == "b").unwrap();
    assert_eq!((b.state, b.held), (ReplicaState::Away, 4));
    assert!(
        held.iter().all(|p| status
            .partitions
            .iter()
            .any(|s| &s.partition == p && s.owner.as_deref() == Some("b"))),
        "b's session keeps its partitions while it is away: {status:?}"
    );

    let config = sticky(&fleet, "b");
    fleet.start_with(config);
    fleet.converge(LIMIT).await;
    let mut back: Vec<String> = fleet.replicas["b"].status().owned.into_iter().collect();
    back.sort();
    let mut expected = held.clone();
    expected.sort();
    assert_eq!(back, expected, "b took its own partitions back");
    let after = fleet.ledger.terms();
    let new_terms = &after[before.len()..];
    assert_eq!(
        new_terms.len(),
        4,
        "only b's partitions got new terms: {new_terms:#?}"
    );
    for t in new_terms {
        assert_eq!(t.replica, "b");
        let old = before.iter().find(|o| o.partition == t.partition).unwrap();
        assert!(
            t.fence > old.fence,
            "{}: fence {} after {}",
            t.partition,
            t.fence,
            old.fence
        );
    }
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sticky_replica_that_does_not_return_is_replaced_after_its_grace() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 6, LEASE);
    let grace = Duration::from_millis(1500);
    for r in ["a", "b"] {
        let config = fleet.builder(r).rejoin_grace(grace).build().unwrap();
        fleet.start_with(config);
    }
    fleet.converge(LIMIT).await;
    let left = Instant::now();
    fleet.replicas.remove("b").unwrap().shutdown().await;
    let took = fleet.converge(LIMIT).await;
    assert_eq!(fleet.counts()["a"], 6);
    let elapsed = left.elapsed();
    assert!(
        elapsed >= grace,
        "b's partitions moved after {elapsed:?} ({took:?} converging), inside its grace"
    );
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_replica_hands_everything_over_and_takes_its_share_back_when_undrained() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);

    admin.drain("b").await.unwrap();
    until(LIMIT, "b drained", || {
        let counts = fleet.counts();
        counts["b"] == 0 && counts["a"] == 6 && counts["c"] == 6 && fleet.all_owned_once()
    })
    .await;
    assert!(fleet.replicas["b"].status().drained);
    let status = admin.status().await.unwrap().unwrap();
    let drained: Vec<&str> = status
        .members
        .iter()
        .filter(|m| m.drained)
        .map(|m| m.replica.as_str())
        .collect();
    assert_eq!(drained, ["b"]);
    let b = status.members.iter().find(|m| m.replica == "b").unwrap();
    assert_eq!((b.state, b.held), (ReplicaState::Draining, 0));
    // It stays at zero.
    sleep(LEASE * 2).await;
    assert_eq!(fleet.counts()["b"], 0);

    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;
    assert_eq!(fleet.counts()["b"], 4);
    assert!(!fleet.replicas["b"].status().drained);
    let status = admin.status().await.unwrap().unwrap();
    assert!(status.members.iter().all(|m| !m.drained), "{status:?}");
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_partitions_owner_is_read_without_listing_the_group() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 8, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    sleep(Duration::from_millis(100)).await;
    let owner = admin(&redis).owner("p00005").await.unwrap();
    let term = fleet
        .ledger
        .terms()
        .into_iter()
        .find(|t| t.partition == "p00005")
        .unwrap();
    assert_eq!(owner.partition, "p00005");
    assert_eq!(owner.owner.as_deref(), Some(term.replica.as_str()));
    assert_eq!(owner.fence.get(), term.fence);
    let left = owner.remaining.unwrap();
    assert!(left > Duration::ZERO && left <= LEASE, "{left:?}");
    let held = owner.held_for.unwrap();
    assert!(
        held >= Duration::from_millis(90) && held < LIMIT,
        "{held:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_deploys_of_two_list_versions_end_with_the_newer_list() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 8, LEASE);
    let v1 = fleet.builder("a").list_version(1).build().unwrap();
    fleet.start_with(v1);
    fleet.converge(LIMIT).await;
    let base = fleet.partitions.clone();
    // Version 2 drops p00000 and adds two; version 3 drops p00001 and adds two others.
    let mut v2: Vec<String> = base[1..].to_vec();
    v2.extend(["v2-a".to_owned(), "v2-b".to_owned()]);
    let mut v3: Vec<String> = base.iter().filter(|p| *p != "p00001").cloned().collect();
    v3.extend(["v3-a".to_owned(), "v3-b".to_owned()]);
    let config = |r: &str, version: u64, list: &[String]| {
        GroupConfig::builder(fleet.group.as_str(), list.to_vec(), r)
            .lease(fleet.lease)
            .list_version(version)
            .build()
            .unwrap()
    };
    let (b, c) = (config("b", 2, &v2), config("c", 3, &v3));
    // Started together, so their applications interleave.
    fleet.start_with(b);
    fleet.start_with(c);
    fleet.partitions = v3.clone();
    fleet.converge(LIMIT).await;
    let admin = admin(&redis);
    let mut listed = admin.list().await.unwrap();
    listed.sort();
    let mut expected = v3.clone();
    expected.sort();
    assert_eq!(listed, expected, "the newest list wins, whatever the order");
    assert_eq!(admin.status().await.unwrap().unwrap().list_version, 3);
    assert!(
        fleet.replicas.values().all(|h| h.status().error.is_none()),
        "nobody is refused"
    );
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_configured_with_another_list_says_so_and_serves_the_groups_set() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 0, LEASE);
    fleet.partitions = (1..=32).map(|i| format!("tenant-{i:02}")).collect();
    fleet.start("a");
    fleet.converge(LIMIT).await;
    let a = &fleet.replicas["a"];
    assert!(!a.status().list_differs);
    assert_eq!(a.status().list_difference, None);

    // A newcomer's replica, with the README's list under the same group name.
    let other: Vec<String> = (0..8).map(|i| format!("p{i:04}")).collect();
    let config = GroupConfig::builder("g", other, "b")
        .lease(LEASE)
        .build()
        .unwrap();
    fleet.start_with(config);
    let b = fleet.replicas["b"].subscribe();
    until(LIMIT, "b reports its list differs", || {
        b.borrow().list_differs
    })
    .await;
    fleet.converge(LIMIT).await;
    let view = fleet.replicas["b"].status();
    let d = view.list_difference.expect("which partitions differ");
    assert_eq!((d.only_in_group, d.only_here), (32, 8));
    assert_eq!(d.only_here_sample, ["p0000", "p0001", "p0002"]);
    assert_eq!(
        d.only_in_group_sample,
        ["tenant-01", "tenant-02", "tenant-03"]
    );
    // It serves the group's set, as documented.
    assert!(view.owned.iter().all(|p| p.starts_with("tenant-")));
    assert_eq!(view.partitions, 32);
    // The replica whose list is the group's still says nothing.
    assert!(!fleet.replicas["a"].status().list_differs);
    fleet.ledger.assert_no_double_ownership();
}
