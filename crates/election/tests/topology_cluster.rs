//! Redis Cluster: scripts route by their hash tag, duties spread over the primaries,
//! release notifications (a PUBLISH inside a script) reach a subscriber on any node,
//! electors recover after the primary of their slot fails over to its replica, and
//! fenced batches run on the one node of their hash tag's slot.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold_election::DutyKeys;
use leasehold_election::ext::new_token;
use leasehold_election::{
    Acquire, Fence, FencedWriteError, FencedWriter, LeaseStore, RedisStore, StoreError,
    current_leader,
};
use leasehold_testkit::RedisCluster;
use support::{Terms, config, eventually, granted, recheck_now, slow_to_recheck};
use tokio::time::{Instant, timeout};

const WAIT: Duration = Duration::from_secs(10);
/// Node timeout (1 s) plus a replica election; generous for a busy machine.
const FAILOVER: Duration = Duration::from_secs(40);

fn cluster_store(cluster: &RedisCluster) -> RedisStore {
    RedisStore::cluster_builder(cluster.node_urls())
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// The keys of a duty named `<prefix>-<i>` whose slot `node` serves.
fn duty_on(cluster: &RedisCluster, node: usize, prefix: &str) -> DutyKeys {
    (0..)
        .map(|i| DutyKeys::new("leasehold", &format!("{prefix}-{i}")))
        .find(|k| cluster.primary_for_key(k.lease()) == node)
        .unwrap()
}

/// Duty names whose keys land on `n` different primaries (one per primary).
fn duties_on_distinct_primaries(cluster: &RedisCluster, n: usize) -> Vec<(String, usize)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for i in 0.. {
        let duty = format!("duty-{i}");
        let node = cluster.primary_for_key(DutyKeys::new("leasehold", &duty).lease());
        if seen.insert(node) {
            out.push((duty, node));
        }
        if out.len() == n {
            return out;
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duties_spread_over_primaries_and_hand_over_by_notification() {
    let cluster = tokio::task::block_in_place(|| RedisCluster::start(3, 0));
    let duties = tokio::task::block_in_place(|| duties_on_distinct_primaries(&cluster, 3));
    let store_a = cluster_store(&cluster);
    let store_b = cluster_store(&cluster);
    let mut pairs = Vec::new();
    for (duty, _) in &duties {
        // One record per duty; b re-checks only when a's lease runs out, so it takes
        // over quickly only through the release notification.
        let terms = Terms::default();
        let a = terms.spawn(store_a.clone(), config(duty, "a", 3_000));
        timeout(WAIT, a.wait_until_leader())
            .await
            .expect("a leads")
            .unwrap();
        let b = terms.spawn(store_b.clone(), slow_to_recheck(duty, "b", 3_000));
        pairs.push((duty.clone(), a, b, terms));
    }
    // Each duty's lease lives on its own primary.
    for (duty, node) in &duties {
        let keys = DutyKeys::new("leasehold", duty);
        assert_ne!(
            cluster.nodes()[*node].redis_cli(&["GET", keys.lease()]),
            "(nil)"
        );
        let leader = current_leader(&store_b, "leasehold", duty)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(leader.replica_id, "a");
    }
    // Fenced writes route by the key's slot, with the guard in the same slot.
    let fence = pairs[0].1.status().fence().unwrap();
    FencedWriter::new(store_a.clone())
        .set("report", "v1", fence)
        .await
        .unwrap();

    tokio::time::sleep(Duration::from_millis(300)).await;
    for (duty, a, b, terms) in pairs {
        // Published on one node, received through a subscription on another: b
        // re-checks now, and its own timer is then 2 s away or more.
        recheck_now(&cluster.nodes()[0], &duty);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let start = Instant::now();
        a.shutdown().await;
        timeout(WAIT, b.wait_until_leader())
            .await
            .expect("b leads")
            .unwrap();
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "{duty}: hand-over took {:?}; the release notification did not cross nodes",
            start.elapsed()
        );
        b.shutdown().await;
        terms.assert_no_overlap();
    }
    // The self-check reads one primary's settings.
    assert!(store_a.self_check().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_batches_need_one_hash_tag_and_say_so_when_keys_span_slots() {
    let cluster = tokio::task::block_in_place(|| RedisCluster::start(3, 0));
    let writer = FencedWriter::new(cluster_store(&cluster));
    // One tag: the raise and the batch run on the primary that owns its slot.
    let node = tokio::task::block_in_place(|| cluster.primary_for_key("{tenant-7}"));
    writer.raise("cursor:{tenant-7}", Fence(3)).await.unwrap();
    writer
        .batch()
        .rpush("out:{tenant-7}", "r1")
        .set("cursor:{tenant-7}", "1")
        .commit(Fence(3))
        .await
        .unwrap();
    let primary = &cluster.nodes()[node];
    assert_eq!(primary.redis_cli(&["GET", "cursor:{tenant-7}"]), "1");
    assert_eq!(
        primary.redis_cli(&["LRANGE", "out:{tenant-7}", "0", "-1"]),
        "r1"
    );
    assert_eq!(primary.redis_cli(&["GET", "out:{tenant-7}:fence"]), "3");
    assert!(matches!(
        writer.raise("out:{tenant-7}", Fence(2)).await,
        Err(FencedWriteError::Stale { .. })
    ));

    // Keys in two slots: refused before anything is sent.
    let (a, b) = ("out:tenant-7", "cursor:tenant-7");
    let (slot_a, slot_b) = tokio::task::block_in_place(|| (cluster.keyslot(a), cluster.keyslot(b)));
    assert_ne!(slot_a, slot_b);
    let err = writer
        .batch()
        .rpush(a, "r1")
        .set(b, "1")
        .commit(Fence(3))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FencedWriteError::CrossSlot { key, other } if key == a && other == b),
        "{err:?}"
    );
    // A single write whose guard lies in another slot (a `}` but no hash tag) is
    // refused by the cluster (`CROSSSLOT`), and said so in the same words.
    let err = writer.set("a}b", "v", Fence(3)).await.unwrap_err();
    assert!(
        matches!(&err, FencedWriteError::CrossSlot { key, other }
            if key == "a}b" && other == "{a}b}:fence"),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn electors_recover_after_their_primary_fails_over() {
    let mut cluster = tokio::task::block_in_place(|| RedisCluster::start(3, 1));
    let duties = tokio::task::block_in_place(|| duties_on_distinct_primaries(&cluster, 3));
    let terms = Terms::default();
    // One store waits for a replica after every acquire and renewal (WAIT routed to the
    // slot's primary).
    let waiting = RedisStore::cluster_builder(cluster.node_urls())
        .call_timeout(Duration::from_millis(500))
        .wait_for_replicas(1, Duration::from_millis(200))
        .build()
        .unwrap();
    let plain = cluster_store(&cluster);
    let mut electors = Vec::new();
    for (duty, _) in &duties {
        electors.push(terms.spawn(waiting.clone(), config(duty, "a", 1_000)));
        electors.push(terms.spawn(plain.clone(), config(duty, "b", 1_000)));
    }
    eventually("every duty has a leader", WAIT, || {
        electors
            .chunks(2)
            .all(|pair| pair.iter().any(|e| e.status().is_leader()))
    })
    .await;

    // WAIT goes to the primary of the key's slot: freezing the replica of the first
    // duty's primary fails a waiting acquire there, and only there.
    let replica_of = |primary: usize| {
        let port = format!("(integer) {}", cluster.nodes()[primary].port());
        cluster
            .nodes()
            .iter()
            .position(|n| {
                let role = n.redis_cli(&["ROLE"]);
                role.starts_with("slave") && role.lines().nth(2) == Some(port.as_str())
            })
            .expect("every primary has a replica")
    };
    let frozen = tokio::task::block_in_place(|| replica_of(duties[0].1));
    let (on_frozen, on_healthy) = tokio::task::block_in_place(|| {
        (
            duty_on(&cluster, duties[0].1, "probe-frozen"),
            duty_on(&cluster, duties[1].1, "probe-healthy"),
        )
    });
    cluster.nodes()[frozen].pause();
    let lease = Duration::from_secs(5);
    let healthy = waiting
        .acquire(&on_healthy, &new_token("p"), lease, Fence(0))
        .await;
    let stalled = waiting
        .acquire(&on_frozen, &new_token("p"), lease, Fence(0))
        .await;
    cluster.nodes()[frozen].resume();
    assert!(matches!(healthy, Ok(Acquire::Won { .. })), "{healthy:?}");
    assert!(
        matches!(
            stalled,
            Err(StoreError::Replication {
                acked: 0,
                wanted: 1
            })
        ),
        "{stalled:?}"
    );

    // Kill the primary of the first duty.
    let (victim_duty, victim) = duties[0].clone();
    let before = electors[0]
        .status()
        .highest_fence
        .max(electors[1].status().highest_fence);
    let killed = Instant::now();
    cluster.nodes_mut()[victim].stop();
    eventually(
        "the victim duty leads again on the promoted replica",
        FAILOVER,
        || {
            electors[..2]
                .iter()
                .any(|e| e.status().fence().is_some_and(|f| f > before))
        },
    )
    .await;
    eprintln!(
        "cluster failover: {victim_duty} led again {:?} after its primary was killed",
        killed.elapsed()
    );
    // The other duties never lost their leader for long and still have one.
    eventually("every duty has a leader", FAILOVER, || {
        electors
            .chunks(2)
            .all(|pair| pair.iter().any(|e| e.status().is_leader()))
    })
    .await;
    let promoted = tokio::task::block_in_place(|| {
        cluster.wait_until_healthy();
        cluster.primary_for_key(DutyKeys::new("leasehold", &victim_duty).lease())
    });
    assert_ne!(promoted, victim);
    for e in electors {
        e.shutdown().await;
    }
}

/// The replica of a duty's primary misses a grant (its link is cut just before), then
/// that primary dies and the cluster promotes the replica: the new primary has neither
/// the lease nor the fence, yet grants nothing until the old holder's local deadline
/// has passed, and its fence is above the lost one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_failover_that_lost_the_grant_never_yields_two_leaders() {
    let mut cluster = tokio::task::block_in_place(|| RedisCluster::start(3, 1));
    let keys = DutyKeys::new("leasehold", "lossy");
    let primary = tokio::task::block_in_place(|| cluster.primary_for_key(keys.lease()));
    let store = cluster_store(&cluster);
    let lease = Duration::from_secs(4);
    // An earlier term, replicated, then released.
    let (_, _) = granted(&store, &keys, "early", lease, FAILOVER).await;
    store.release(&keys, "early").await.unwrap();
    tokio::task::block_in_place(|| cluster.cut_replication(primary));
    let (sent, fence) = granted(&store, &keys, "a", lease, FAILOVER).await;
    let deadline = sent + lease;
    cluster.nodes_mut()[primary].stop();
    let b = cluster_store(&cluster);
    let (won, b_fence) = granted(&b, &keys, "b", lease, FAILOVER).await;
    assert_ne!(
        tokio::task::block_in_place(|| cluster.primary_for_key(keys.lease())),
        primary
    );
    assert!(
        won >= deadline,
        "b was granted {:?} before a's local deadline",
        deadline - won
    );
    assert!(b_fence > fence, "fence {b_fence:?} after {fence:?}");
    eprintln!("b granted {:?} after a's deadline", won - deadline);
}
