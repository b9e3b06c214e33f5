//! Partition groups on a Redis Cluster: each group's keys share one slot (its hash tag),
//! different groups land on different primaries, and a group recovers after its
//! primary fails over to a replica.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::{Leadership, RedisStore};
use leasehold_partitions::{Coordinator, CoordinatorHandle, GroupConfig, group_status};
use leasehold_testkit::RedisCluster;
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
                |_p: String, lead: Leadership| async move {
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
    let counts: Vec<usize> = group.values().map(|h| h.view().owned.len()).collect();
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
    let status = group_status(&store, "leasehold", "g")
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
    let after = group_status(&store, "leasehold", "g")
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
