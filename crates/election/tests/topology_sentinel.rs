//! Sentinel: the store resolves the primary through three Sentinels and follows a
//! failover; `wait_for_replicas` counts an acquire or renewal only once a replica has it.

mod support;

use std::time::Duration;

use leasehold_election::DutyKeys;
use leasehold_election::ext::new_token;
use leasehold_election::{
    Acquire, BuildError, ElectorConfig, Fence, LeaseStore, RedisStore, StoreError,
};
use leasehold_testkit::{MASTER_NAME, RedisSentinelSet};
use support::{Terms, config, eventually, granted};
use tokio::time::{Instant, timeout};

const WAIT: Duration = Duration::from_secs(10);
/// A failover takes `down-after-milliseconds` (1 s) plus an election; the bound is
/// generous because the machine may be busy.
const FAILOVER: Duration = Duration::from_secs(40);

fn sentinel_store(set: &RedisSentinelSet) -> RedisStore {
    RedisStore::sentinel_builder(MASTER_NAME, set.sentinel_urls())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn electors_follow_a_sentinel_failover_to_the_promoted_replica() {
    let mut set = tokio::task::block_in_place(|| RedisSentinelSet::start(1));
    assert_eq!(set.primary_index(), 0);
    let terms = Terms::default();
    let a = terms.spawn(sentinel_store(&set), config("job", "a", 1_000));
    let b = terms.spawn(sentinel_store(&set), config("job", "b", 1_000));
    timeout(WAIT, async {
        while !a.status().is_leader() && !b.status().is_leader() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a leader through sentinel");
    let first = terms.all()[0].clone();
    let keys = DutyKeys::new("leasehold", "job");
    // The lease reached the replica.
    eventually("the lease is replicated", WAIT, || {
        set.nodes()[1].redis_cli(&["EXISTS", keys.lease()]) == "(integer) 1"
    })
    .await;

    let killed = Instant::now();
    set.nodes_mut()[0].stop();
    eventually("a leader on the promoted primary", FAILOVER, || {
        terms
            .all()
            .iter()
            .any(|t| t.fence > first.fence && t.end.is_none())
    })
    .await;
    let new_primary = tokio::task::block_in_place(|| set.wait_for_new_primary(0));
    assert_eq!(new_primary, 1);
    let recovered = killed.elapsed();
    eprintln!("sentinel failover: a leader again {recovered:?} after the primary was killed");
    assert!(
        set.nodes()[1].redis_cli(&["GET", keys.lease()]) != "(nil)",
        "the lease lives on the promoted primary"
    );
    // Fences are floored at the server's TIME, so they grow across the failover even if
    // the promoted replica had missed the newest fence.
    let terms_seen = terms.all();
    for w in terms_seen.windows(2) {
        assert!(w[0].fence < w[1].fence, "{terms_seen:?}");
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// Acquires and renews `n` times; mean latency of one call.
async fn mean_latency(store: &RedisStore, duty: &str, n: u32) -> Duration {
    let keys = DutyKeys::new("leasehold", duty);
    let token = new_token("bench");
    let lease = Duration::from_secs(5);
    let won = store.acquire(&keys, &token, lease, Fence(0)).await.unwrap();
    assert!(matches!(won, Acquire::Won { .. }), "{won:?}");
    let start = Instant::now();
    for _ in 0..n {
        assert!(store.renew(&keys, &token, lease).await.unwrap());
    }
    start.elapsed() / n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_replicas_counts_writes_only_once_replicated_and_its_cost() {
    let set = tokio::task::block_in_place(|| RedisSentinelSet::start(1));
    let plain = sentinel_store(&set);
    let waiting = RedisStore::sentinel_builder(MASTER_NAME, set.sentinel_urls())
        .call_timeout(Duration::from_millis(300))
        .wait_for_replicas(1, Duration::from_millis(100))
        .build()
        .unwrap();

    // Warm up both connections, then measure renewals with and without WAIT.
    mean_latency(&plain, "warm-plain", 20).await;
    mean_latency(&waiting, "warm-wait", 20).await;
    let n = 500;
    let without = mean_latency(&plain, "plain", n).await;
    let with = mean_latency(&waiting, "waiting", n).await;
    eprintln!(
        "renew latency over {n} calls (loopback, 1 replica): {without:?} without WAIT, \
         {with:?} with WAIT 1 100"
    );

    // A frozen replica cannot acknowledge: the acquire is won on the primary but not
    // counted, with a retryable error...
    let replica = &set.nodes()[1];
    replica.pause();
    let keys = DutyKeys::new("leasehold", "frozen");
    let token = new_token("a");
    let err = waiting
        .acquire(&keys, &token, Duration::from_secs(5), Fence(0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Replication {
                acked: 0,
                wanted: 1
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    // ...which is resolved as any acquire without a definite answer: released (the
    // elector does this), then a new token campaigns, and wins once the replica is back.
    replica.resume();
    let again = timeout(WAIT, async {
        let mut token = token;
        loop {
            waiting.abandon(&keys, &token).await.unwrap();
            token = new_token("a");
            match waiting
                .acquire(&keys, &token, Duration::from_secs(5), Fence(0))
                .await
            {
                Ok(won) => return won,
                Err(e) => {
                    assert!(e.is_retryable(), "{e:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
    .await
    .expect("acquire succeeds once the replica is back");
    assert!(matches!(again, Acquire::Won { .. }), "{again:?}");
}

#[test]
fn wait_must_fit_in_the_call_timeout() {
    let err = RedisStore::builder("redis://127.0.0.1:1/")
        .call_timeout(Duration::from_millis(200))
        .wait_for_replicas(1, Duration::from_millis(200))
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::ReplicaWait { .. }), "{err:?}");
    let err = RedisStore::builder("redis://127.0.0.1:1/")
        .wait_for_replicas(0, Duration::from_millis(10))
        .build()
        .unwrap_err();
    assert!(
        matches!(err, BuildError::ReplicaWait { replicas: 0, .. }),
        "{err:?}"
    );
    let err = RedisStore::sentinel_builder(MASTER_NAME, Vec::<String>::new())
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::NoUrls("sentinel")), "{err:?}");
}

/// The replica misses a grant (its link is cut just before), then the primary dies and
/// Sentinel promotes the replica: the new primary has no lease and has never seen the
/// fence, yet grants nothing until the old holder's local deadline has passed, and its
/// fence is above the lost one. Run once with a duty the replica knew (its boot marker
/// replicated) and once with one it never saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_lost_the_grant_never_yields_two_leaders() {
    for known in [true, false] {
        let mut set = tokio::task::block_in_place(|| RedisSentinelSet::start(1));
        let store = sentinel_store(&set);
        let keys = DutyKeys::new("leasehold", "lossy");
        let lease = Duration::from_secs(4);
        if known {
            // An earlier term, replicated with its marker, then released.
            let token = new_token("early");
            let (_, _) = granted(&store, &keys, &token, lease, FAILOVER).await;
            store.release(&keys, &token).await.unwrap();
            eventually("the boot marker is replicated", WAIT, || {
                set.nodes()[1].redis_cli(&["EXISTS", keys.boot()]) == "(integer) 1"
            })
            .await;
        }
        tokio::task::block_in_place(|| set.cut_replication());
        let (sent, fence) = granted(&store, &keys, "a", lease, FAILOVER).await;
        // a may lead until here, on this process's clock.
        let deadline = sent + lease;
        set.nodes_mut()[0].stop();
        // b knows nothing (a fresh process: no fence floor) and asks until it wins.
        let b = sentinel_store(&set);
        let (won, b_fence) = granted(&b, &keys, "b", lease, FAILOVER).await;
        let promoted = tokio::task::block_in_place(|| set.wait_for_new_primary(0));
        assert_eq!(promoted, 1);
        assert_eq!(
            set.nodes()[1]
                .redis_cli(&["GET", keys.lease()])
                .trim_matches('"'),
            "b",
            "b's lease is on the promoted replica"
        );
        assert!(
            won >= deadline,
            "known {known}: b was granted {:?} before a's local deadline",
            deadline - won
        );
        assert!(
            b_fence > fence,
            "known {known}: fence {b_fence:?} after {fence:?}"
        );
        eprintln!(
            "known {known}: b granted {:?} after a's deadline",
            won - deadline
        );
    }
}

/// With `min_replicas_acked(1)` a grant or renewal counts only once the replica has it:
/// a primary cut off from its replica (a failover would lose what it writes now, and an
/// isolated primary is how a split brain starts) keeps no leader beyond its deadline,
/// and none is elected until the replica is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_replicas_acked_keeps_no_leader_on_a_primary_cut_off_from_its_replicas() {
    let set = tokio::task::block_in_place(|| RedisSentinelSet::start(1));
    let lease = Duration::from_millis(1_000);
    let acked = |replica: &str| {
        ElectorConfig::builder("acked", replica)
            .lease(lease)
            .min_replicas_acked(1)
            .build()
            .unwrap()
    };
    let terms = Terms::default();
    let a = terms.spawn(sentinel_store(&set), acked("a"));
    let b = terms.spawn(sentinel_store(&set), acked("b"));
    eventually("a leader whose lease is on the replica", WAIT, || {
        a.status().is_leader() || b.status().is_leader()
    })
    .await;
    tokio::task::block_in_place(|| set.cut_replication());
    let cut = Instant::now();
    eventually("the leader steps down", WAIT, || {
        !a.status().is_leader() && !b.status().is_leader()
    })
    .await;
    assert!(
        cut.elapsed() <= lease * 3,
        "stepped down {:?} after the cut",
        cut.elapsed()
    );
    tokio::time::sleep(lease * 2).await;
    assert!(
        !a.status().is_leader() && !b.status().is_leader(),
        "no grant counts while no replica acknowledges it"
    );
    let unacked = terms.all().len();
    tokio::task::block_in_place(|| set.mend_replication());
    eventually("a leader again once the replica is back", WAIT, || {
        a.status().is_leader() || b.status().is_leader()
    })
    .await;
    assert_eq!(terms.all().len(), unacked + 1);
    a.shutdown().await;
    b.shutdown().await;
}
