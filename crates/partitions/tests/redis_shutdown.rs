//! A shutdown with a deadline (`CoordinatorHandle::shutdown_within`), against a real
//! redis-server: callbacks that return hand their partitions off at once; callbacks that
//! outrun the deadline are aborted before it and their partitions released, so another
//! replica takes them without waiting for the lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use leasehold_partitions::{Coordinator, CoordinatorHandle, GroupConfig, Ownership, RedisStore};
use leasehold_testkit::RedisServer;
use tokio::time::{Instant, sleep};

/// Long enough that a partition waiting for its lease to expire would fail the test
/// (a new group on a fresh server holds its grants back for one lease, so not longer).
const LEASE: Duration = Duration::from_secs(6);
const LIMIT: Duration = Duration::from_secs(20);

fn store(redis: &RedisServer) -> RedisStore {
    // Logs go to the test's captured output (shown when it fails); RUST_LOG picks.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

fn config(replica: &str) -> GroupConfig {
    let partitions: Vec<String> = (0..6).map(|i| format!("p{i}")).collect();
    GroupConfig::builder("g", partitions, replica)
        .lease(LEASE)
        .renew_interval(Duration::from_millis(500))
        .grace(Duration::from_secs(30))
        // A replica starting into a group nobody serves claims after one renew
        // interval, not the default lease: the test tells a released lease from one
        // that expired.
        .settle(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// A replica whose callbacks ignore their cancellation (a stuck flush, say); counts
/// the callbacks running.
fn stubborn(
    redis: &RedisServer,
    replica: &str,
    running: Arc<AtomicUsize>,
) -> CoordinatorHandle<RedisStore> {
    Coordinator::new(
        store(redis),
        config(replica),
        move |_p: String, _own: Ownership| {
            let running = running.clone();
            async move {
                running.fetch_add(1, Ordering::SeqCst);
                let _guard = Decrement(running);
                std::future::pending::<()>().await;
                Ok(())
            }
        },
    )
    .spawn()
}

struct Decrement(Arc<AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn polite(redis: &RedisServer, replica: &str) -> CoordinatorHandle<RedisStore> {
    Coordinator::new(
        store(redis),
        config(replica),
        |_p: String, own: Ownership| async move {
            own.cancelled().await;
            Ok(())
        },
    )
    .spawn()
}

async fn until(what: &str, done: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_that_outrun_the_deadline_are_aborted_and_their_partitions_released() {
    let redis = RedisServer::start();
    let running = Arc::new(AtomicUsize::new(0));
    let a = stubborn(&redis, "a", running.clone());
    // Owned is published when a term's elector starts; its callback runs a moment
    // later (on a loaded machine, after the shutdown could begin): wait for all six.
    until("a runs all 6 callbacks", || {
        a.status().owned.len() == 6 && running.load(Ordering::SeqCst) == 6
    })
    .await;

    let start = Instant::now();
    let within = Duration::from_secs(1);
    assert!(a.shutdown_within(within).await, "a stopped by its deadline");
    let took = start.elapsed();
    assert!(took <= within + Duration::from_millis(100), "{took:?}");
    assert!(
        took >= within / 2,
        "the callbacks had most of the deadline to finish: {took:?}"
    );
    assert_eq!(running.load(Ordering::SeqCst), 0, "every callback aborted");
    assert!(!a.is_running());

    // Released, not left to expire: a new replica owns them well before a's last
    // renewals would have expired.
    let b = polite(&redis, "b");
    let waited = until("b owns all 6", || b.status().owned.len() == 6).await;
    assert!(waited < LEASE / 4, "{waited:?}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_that_return_hand_over_at_once_and_the_deadline_is_not_waited_for() {
    let redis = RedisServer::start();
    let a = polite(&redis, "a");
    let b = polite(&redis, "b");
    until("3 each", || {
        a.status().owned.len() == 3 && b.status().owned.len() == 3
    })
    .await;

    let start = Instant::now();
    assert!(a.shutdown_within(Duration::from_secs(8)).await);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    let moved = until("b owns all 6", || b.status().owned.len() == 6).await;
    assert!(moved < LEASE / 4, "{moved:?}");
    b.shutdown().await;
}
