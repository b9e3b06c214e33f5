//! The router against a real redis-server started for each test: its table follows
//! every move (a kill, a join, a graceful leave) to what the group's status says,
//! never names a term older than one it named before, catches up from the ledger after
//! its subscription was lost, ignores a notice it cannot read, and after Redis lost the
//! group knows no owner until the group is back; and the claim script's move notice
//! reads back as the claim's terms.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures::StreamExt;
use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupNotice, RouteChange, Router};
use leasehold_testkit::{FaultProxy, RedisServer};
use support::Fleet;

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

fn store(url: String) -> RedisStore {
    RedisStore::builder(url)
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// Every live owner and its fence, as the group's status says.
async fn owners(admin: &GroupAdmin<RedisStore>) -> BTreeMap<String, (String, u64)> {
    let status = admin.status().await.unwrap().expect("the group exists");
    status
        .partitions
        .into_iter()
        .filter_map(|p| Some((p.partition, (p.owner?, p.fence.get()))))
        .collect()
}

/// The router's table, in the same form.
fn table(router: &Router) -> BTreeMap<String, (String, u64)> {
    router
        .routes()
        .into_iter()
        .map(|(p, r)| (p, (r.replica().to_owned(), r.fence().get())))
        .collect()
}

/// Waits until the router's table is the group's owners, every partition owned.
async fn until_routed(router: &Router, admin: &GroupAdmin<RedisStore>, partitions: usize) {
    let start = Instant::now();
    loop {
        let want = owners(admin).await;
        if want.len() == partitions && table(router) == want {
            return;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the router's table {:?} is not the group's owners {:?}",
            table(router),
            want
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every change the router made, per partition, names a newer term than the one before.
fn assert_fences_grow(changes: &[RouteChange]) {
    let mut last: HashMap<&str, u64> = HashMap::new();
    for c in changes {
        if let Some(route) = &c.route {
            let f = route.fence().get();
            if let Some(&before) = last.get(c.partition.as_str()) {
                assert!(
                    f > before,
                    "{}: the router named fence {f} after {before}",
                    c.partition
                );
            }
            last.insert(&c.partition, f);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_follows_a_kill_a_join_and_a_leave_and_never_names_an_older_term() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(redis.url()), 12, LEASE);
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    let router = Router::new(store(redis.url()), "g").unwrap();
    let mut changes = router.changes();
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    tokio::time::timeout(LIMIT, router.wait_until_ready())
        .await
        .unwrap();
    until_routed(&router, &admin, 12).await;
    let reads = router.status().full_reads;

    // A kill: the dead replica's partitions move after its lease.
    fleet.replicas["a"].abort();
    fleet.replicas.remove("a");
    let start = Instant::now();
    while owners(&admin).await.values().any(|(r, _)| r == "a") || owners(&admin).await.len() < 12 {
        assert!(start.elapsed() < LIMIT, "a's partitions never moved");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    until_routed(&router, &admin, 12).await;
    assert!(table(&router).values().all(|(r, _)| r != "a"));
    // A join, then a graceful leave.
    fleet.start("d");
    fleet.converge(LIMIT).await;
    until_routed(&router, &admin, 12).await;
    let b = fleet.replicas.remove("b").unwrap();
    b.shutdown().await;
    fleet.converge(LIMIT).await;
    until_routed(&router, &admin, 12).await;

    let mut seen = Vec::new();
    while let Ok(c) = changes.try_recv() {
        seen.push(c);
    }
    assert!(seen.len() >= 12, "changes: {seen:?}");
    assert_fences_grow(&seen);
    let status = router.status();
    assert!(status.ready && status.group_exists);
    assert_eq!(
        status.full_reads, reads,
        "a router that misses nothing never reads the whole table again"
    );
    assert_eq!(status.routes, 12);
    fleet.ledger.assert_no_double_ownership();
    router.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_scripts_move_notice_reads_back_as_the_claims_terms() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(redis.url()), 6, LEASE);
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    let mut notices = Box::pin(admin.notices());
    // Subscribed before anything moves: the first notice is the subscription's own.
    let first = tokio::time::timeout(LIMIT, notices.next()).await.unwrap();
    assert_eq!(first, Some(GroupNotice::Missed));
    fleet.start("a");
    let mut moved = BTreeMap::new();
    let mut last = None;
    let start = Instant::now();
    while moved.len() < 6 {
        assert!(start.elapsed() < LIMIT, "moved so far: {moved:?}");
        let Ok(Some(n)) = tokio::time::timeout(LIMIT, notices.next()).await else {
            panic!("no notice");
        };
        if let GroupNotice::Moved(m) = n {
            assert_eq!(m.replica, "a");
            assert!(!m.incarnation.is_empty());
            assert_eq!(
                m.after, last,
                "each claim's notice names the entry before it"
            );
            for (p, f) in &m.partitions {
                moved.insert(p.clone(), f.get());
            }
            last = Some(m.last.clone());
        }
    }
    let ledger = admin.newest_moves(1).await.unwrap();
    assert_eq!(
        Some(ledger[0].id.clone()),
        last,
        "the notice's last id is the ledger's"
    );
    let owners = owners(&admin).await;
    let fences: BTreeMap<String, u64> = owners.into_iter().map(|(p, (_, f))| (p, f)).collect();
    assert_eq!(moved, fences);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_of_an_unknown_version_or_kind_is_skipped_never_misread() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(redis.url()), 4, LEASE);
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    let router = Router::new(store(redis.url()), "g").unwrap();
    fleet.start("a");
    fleet.converge(LIMIT).await;
    until_routed(&router, &admin, 4).await;
    let before = table(&router);
    let reads = router.status().full_reads;
    let mut notices = Box::pin(admin.notices());

    // A newer version's move notice naming another owner with higher fences, and a
    // kind nobody knows, then a plain change.
    let mut conn = redis
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let future = "leasehold:{g}\t2\tmoved\tlife\t\t9-0\tz\t\tp00000\t999999999999999";
    for message in [
        future,
        "leasehold:{g}\t1\tteleport\tp00000",
        "leasehold:{g}",
    ] {
        let _: i64 = redis::cmd("PUBLISH")
            .arg("leasehold:released")
            .arg(message)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let next = tokio::time::timeout(LIMIT, notices.next()).await.unwrap();
    assert_eq!(
        next,
        Some(GroupNotice::Changed),
        "the two unknown ones were skipped"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        table(&router),
        before,
        "the router did not take the unknown notice"
    );
    assert_eq!(router.status().full_reads, reads);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_cut_off_reads_only_the_moves_it_missed() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let mut fleet = Fleet::new(store(redis.url()), 8, LEASE);
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    let router = Router::new(store(proxy.url()), "g").unwrap();
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    until_routed(&router, &admin, 8).await;
    let (reads, catch_ups) = (router.status().full_reads, router.status().catch_ups);

    // Cut off while partitions move.
    proxy.blackhole();
    fleet.start("c");
    fleet.converge(LIMIT).await;
    let moved = owners(&admin).await;
    assert_ne!(table(&router), moved, "the router missed the moves");
    proxy.reset_connections();
    proxy.pass();
    until_routed(&router, &admin, 8).await;
    let status = router.status();
    assert!(status.catch_ups > catch_ups, "{status:?}");
    assert_eq!(
        status.full_reads, reads,
        "the gap was closed from the ledger: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_lost_the_group_a_router_knows_no_owner_until_it_is_back() {
    let mut redis = RedisServer::start();
    let mut fleet = Fleet::new(store(redis.url()), 6, LEASE);
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    let router = Router::new(store(redis.url()), "g").unwrap();
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    until_routed(&router, &admin, 6).await;
    let old: BTreeMap<String, u64> = table(&router)
        .into_iter()
        .map(|(p, (_, f))| (p, f))
        .collect();

    // A restart that loses everything: every change the router makes from now on
    // names a term of the group as it is made again (a higher fence), or no owner.
    let mut changes = router.changes();
    let reads = router.status().full_reads;
    redis.restart();
    let start = Instant::now();
    while router.status().full_reads == reads {
        assert!(
            start.elapsed() < LIMIT,
            "the router never read the group again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    until_routed(&router, &admin, 6).await;
    while let Ok(c) = changes.try_recv() {
        if let Some(r) = c.route {
            let f = r.fence().get();
            assert!(
                f > old[&c.partition],
                "{}: an old term named again",
                c.partition
            );
        }
    }
    for (p, (_, f)) in table(&router) {
        assert!(
            f > old[&p],
            "{p}: fences grow across the loss ({f} after {})",
            old[&p]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owns_answers_with_the_running_terms_fence_and_nothing_after_it_ends() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(redis.url()), 6, LEASE);
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    let start = Instant::now();
    loop {
        let owners = owners(&admin).await;
        let agree = owners.len() == 6
            && owners.iter().all(|(p, (r, f))| {
                fleet.replicas[r].owns(p).map(|f| f.get()) == Some(*f)
                    && fleet
                        .replicas
                        .iter()
                        .filter(|(other, _)| *other != r)
                        .all(|(_, h)| h.owns(p).is_none())
            });
        if agree {
            break;
        }
        assert!(start.elapsed() < LIMIT, "owns never agreed with {owners:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fleet.replicas["a"].owns("not-a-partition"), None);
    let a = fleet.replicas["a"].clone();
    a.shutdown().await;
    for p in &fleet.partitions {
        assert_eq!(a.owns(p), None, "{p}: a left");
    }
}
