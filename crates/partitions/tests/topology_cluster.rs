//! Partition groups on a Redis Cluster: each group's keys share one slot (its hash tag),
//! different groups land on different primaries, and a group recovers after its
//! primary fails over to a replica.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_partitions::{Coordinator, CoordinatorHandle, GroupConfig};
use leasehold_partitions::{Ownership, RedisStore};
use leasehold_testkit::{MINIMAL_ACL_COMMANDS, MINIMAL_ACL_PATTERNS, RedisCluster, acl_user_args};
use support::Fleet;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_millis(800);
const LIMIT: Duration = Duration::from_secs(20);
/// Node timeout (1 s) plus a replica election; generous for a busy machine.
const FAILOVER: Duration = Duration::from_secs(40);

fn members_key(group: &str) -> String {
    format!("leasehold:{{{group}}}:members")
}

/// Replicas of a second group, balanced by hand (the shared `Fleet` runs group `g`).
fn spawn_group(
    store: &RedisStore,
    group: &str,
    partitions: &[String],
    replicas: &[&str],
) -> BTreeMap<String, CoordinatorHandle<RedisStore>> {
    replicas
        .iter()
        .map(|r| {
            let config = GroupConfig::builder(group, partitions.to_vec(), *r)
                .lease(LEASE)
                .build()
                .unwrap();
            let handle = Coordinator::new(
                store.clone(),
                config,
                |_p: String, lead: Ownership| async move {
                    lead.cancelled().await;
                    Ok(())
                },
            )
            .spawn();
            ((*r).to_owned(), handle)
        })
        .collect()
}

fn balanced(group: &BTreeMap<String, CoordinatorHandle<RedisStore>>, partitions: usize) -> bool {
    let counts: Vec<usize> = group.values().map(|h| h.status().owned.len()).collect();
    counts.iter().sum::<usize>() == partitions
        && counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0) <= 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_spread_over_primaries_and_recover_from_a_failover() {
    let mut cluster = tokio::task::block_in_place(|| RedisCluster::start(3, 1));
    let store = RedisStore::cluster_builder(cluster.node_urls())
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    // Group `g` (the shared fleet's) and a second group on another primary.
    let (g_node, other, other_node) = tokio::task::block_in_place(|| {
        let g_node = cluster.primary_for_key(&members_key("g"));
        let (other, node) = (0..)
            .map(|i| format!("tenants-{i}"))
            .map(|name| {
                let node = cluster.primary_for_key(&members_key(&name));
                (name, node)
            })
            .find(|(_, node)| *node != g_node)
            .unwrap();
        (g_node, other, node)
    });
    assert_ne!(g_node, other_node);

    let mut fleet = Fleet::new(store.clone(), 12, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    let other_partitions: Vec<String> = (0..8).map(|i| format!("q{i}")).collect();
    let second = spawn_group(&store, &other, &other_partitions, &["x", "y"]);
    fleet.converge(LIMIT).await;
    let start = Instant::now();
    while !balanced(&second, 8) {
        assert!(start.elapsed() < LIMIT, "second group not balanced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Every key of a group lives on its primary.
    let status = leasehold_partitions::GroupAdmin::new(store.clone(), "g")
        .unwrap()
        .status()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.spread(), 0);
    assert_eq!(
        cluster.nodes()[g_node].redis_cli(&["EXISTS", &members_key("g")]),
        "(integer) 1"
    );
    assert_eq!(
        cluster.nodes()[other_node].redis_cli(&["EXISTS", &members_key(&other)]),
        "(integer) 1"
    );

    // Kill group g's primary: its replica takes over and the group converges again;
    // the other group is unaffected beyond the cluster's brief fail state.
    let killed = Instant::now();
    cluster.nodes_mut()[g_node].stop();
    let promoted = tokio::task::block_in_place(|| {
        let deadline = std::time::Instant::now() + FAILOVER;
        loop {
            let running = cluster.nodes().iter().position(|n| n.is_running()).unwrap();
            let info = cluster.nodes()[running].redis_cli(&["CLUSTER", "INFO"]);
            if info.contains("cluster_state:ok") {
                let node = cluster.primary_for_key(&members_key("g"));
                if node != g_node {
                    return node;
                }
            }
            assert!(std::time::Instant::now() < deadline, "no failover: {info}");
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let fences_before: BTreeMap<String, u64> = status
        .partitions
        .iter()
        .map(|p| (p.partition.clone(), p.fence.get()))
        .collect();
    fleet.converge(FAILOVER).await;
    eprintln!(
        "cluster failover: group g balanced again {:?} after its primary was killed",
        killed.elapsed()
    );
    let start = Instant::now();
    while !balanced(&second, 8) {
        assert!(start.elapsed() < FAILOVER, "second group not balanced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = leasehold_partitions::GroupAdmin::new(store.clone(), "g")
        .unwrap()
        .status()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.spread(), 0);
    for p in &after.partitions {
        assert!(
            p.fence.get() >= fences_before[&p.partition],
            "{}: fence went back",
            p.partition
        );
    }
    assert_ne!(promoted, g_node);
    fleet.ledger.assert_no_double_ownership();
    for (_, h) in second {
        h.shutdown().await;
    }
}

/// How many scripts a node refused to run (`rejected_calls` of `EVALSHA` and `EVAL` in
/// `INFO commandstats`): a cluster redirection (`ASK`, `TRYAGAIN`, `MOVED`) counts there.
fn rejected_scripts(node: &leasehold_testkit::RedisServer) -> u64 {
    let info = node.redis_cli(&["INFO", "commandstats"]);
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| l.split("rejected_calls=").nth(1))
        .filter_map(|n| n.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// Finding 9 of issue 17: while a slot migrates, a script whose keys are split between
/// the two nodes gets `TRYAGAIN` (and one whose keys have all moved, `ASK`). The store
/// retries through both; a migration shorter than a lease loses no session: nothing
/// moves, nobody owns twice, and the group works on its new primary. Run as the
/// minimal ACL user plus `+cluster|slots +asking`, as docs/topologies.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migration_shorter_than_a_lease_loses_no_session() {
    // As the documented minimal ACL user with the cluster's additions
    // (docs/topologies.md): `ASKING` is what a redirected script needs.
    let commands = format!("{MINIMAL_ACL_COMMANDS} +cluster|slots +asking");
    let user = acl_user_args("leasehold", MINIMAL_ACL_PATTERNS, &commands);
    let user: Vec<&str> = user.iter().map(String::as_str).collect();
    let cluster = tokio::task::block_in_place(|| RedisCluster::start_with_args(3, 0, &user));
    let urls = cluster
        .nodes()
        .iter()
        .map(|n| format!("redis://leasehold:secret@127.0.0.1:{}/", n.port()));
    let store = RedisStore::cluster_builder(urls)
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    // A longer lease than the other tests': several ticks run during the migration.
    let lease = Duration::from_secs(2);
    let mut fleet = Fleet::new(store.clone(), 12, lease);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    let slot = tokio::task::block_in_place(|| cluster.keyslot(&members_key("g")));
    let from = tokio::task::block_in_place(|| cluster.primary_for_slot(slot));
    let to = (from + 1) % 3;
    let terms = fleet.ledger.terms().len();
    let rejected_before = tokio::task::block_in_place(|| {
        rejected_scripts(&cluster.nodes()[from]) + rejected_scripts(&cluster.nodes()[to])
    });

    let started = Instant::now();
    // A dozen keys or more, 60 ms apart: the migration takes about half a lease.
    let moved =
        tokio::task::block_in_place(|| cluster.migrate_slot(slot, to, Duration::from_millis(60)));
    let took = started.elapsed();
    assert!(moved >= 10, "the group's keys moved: {moved}");
    assert!(took < lease * 2 / 3, "the migration took {took:?}");
    assert_eq!(
        tokio::task::block_in_place(|| cluster.primary_for_slot(slot)),
        to
    );
    let redirected = tokio::task::block_in_place(|| {
        rejected_scripts(&cluster.nodes()[from]) + rejected_scripts(&cluster.nodes()[to])
    }) - rejected_before;
    assert!(
        redirected > 0,
        "the replicas ran scripts during the migration (moved {moved} keys in {took:?})"
    );
    eprintln!("slot migration: {moved} keys in {took:?}, {redirected} scripts redirected");

    // Three leases on the new primary: every session lived through it.
    tokio::time::sleep(lease * 3).await;
    fleet.converge(LIMIT).await;
    assert_eq!(
        fleet.ledger.terms().len(),
        terms,
        "a partition moved: {:#?}",
        &fleet.ledger.terms()[terms..]
    );
    assert_eq!(
        tokio::task::block_in_place(
            || cluster.nodes()[to].redis_cli(&["EXISTS", &members_key("g")])
        ),
        "(integer) 1"
    );
    // And the group works there: a crash's partitions move as usual.
    let orphans = fleet.replicas["c"].status().owned;
    fleet.replicas.remove("c").unwrap().abort();
    fleet.reowned(&orphans, LIMIT).await;
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}
