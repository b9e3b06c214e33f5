//! A follower behind a link slower than its call timeout, against a real redis-server:
//! its acquires are never answered in time, yet the lease they take is freed for the
//! next leader. In a test binary of their own: they time a 300 ms link, and other fault
//! tests running in the same process (servers restarted and paused beside them) made
//! them miss it now and then.

mod support;

use std::time::Duration;

use leasehold_election::{ElectorHandle, RedisStore, current_leader};
use leasehold_testkit::{FaultProxy, RedisServer};
use support::{Terms, config, follows, store};
use tokio::time::{Instant, sleep, timeout};

const WAIT: Duration = Duration::from_secs(10);

/// Waits until `who` holds the lease of `job` in Redis (read directly, not through any
/// proxy); when that was first seen, or `None` if not within `limit`.
async fn held_by(watch: &RedisStore, who: &str, limit: Duration) -> Option<Instant> {
    let start = Instant::now();
    loop {
        let holder = current_leader(watch, "leasehold", "job").await.unwrap();
        if holder.is_some_and(|h| h.replica_id == who) {
            return Some(Instant::now());
        }
        if start.elapsed() >= limit {
            return None;
        }
        sleep(Duration::from_millis(1)).await;
    }
}

/// The scenario both tests start from: a leads on a fast link; b follows behind a link
/// slower than its call timeout (300 ms one way, so a round trip of 600 ms outlasts
/// every call); a releases, and b's next acquire arrives 300 ms after it was sent and
/// takes the free lease, but b's call has timed out by then: b never hears that it won.
struct Stranded {
    redis: RedisServer,
    _proxy: FaultProxy,
    terms: Terms,
    b: ElectorHandle,
    /// When b's unanswered acquire was first seen holding the lease.
    at: Instant,
}

/// Sets up [`Stranded`]. b has one connection that works: the first call to time out
/// hands it back, and a new one cannot be set up within a call timeout over that link.
/// If that first call was one whose reply was in transit when the delay began (it
/// arrived while a still held the lease), b never sends another and nothing is
/// stranded: a busy machine makes that likelier. Such a run is set up again (at most
/// three times): the tests below need the stranded lease, and check what follows it.
async fn stranded() -> Stranded {
    for _ in 0..3 {
        let redis = RedisServer::start();
        let terms = Terms::default();
        let proxy = FaultProxy::start(redis.addr()).await.unwrap();
        let a = terms.spawn(store(&redis.url()), config("job", "a", 1_000));
        timeout(WAIT, a.wait_until_leader())
            .await
            .expect("a leads")
            .unwrap();
        let b = terms.spawn(store(&proxy.url()), config("job", "b", 1_000));
        follows(&b, "a", WAIT).await;
        proxy.latency(Duration::from_millis(300));
        a.shutdown().await;
        let watch = store(&redis.url());
        if let Some(at) = held_by(&watch, "b", Duration::from_secs(3)).await {
            return Stranded {
                redis,
                _proxy: proxy,
                terms,
                b,
                at,
            };
        }
        b.shutdown().await;
    }
    panic!("in three set-ups, b's unanswered acquire never took the free lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_acquire_frees_the_lease_for_the_next_leader_within_700_ms() {
    let Stranded {
        redis,
        _proxy,
        terms,
        b,
        at: stranded,
    } = stranded().await;
    // A replica with a fast link campaigns now; it must lead within call timeout +
    // one-way delay (250 + 300 ms) of b's acquire taking the lease, not a lease later.
    let c = terms.spawn(store(&redis.url()), config("job", "c", 1_000));
    timeout(WAIT, c.wait_until_leader())
        .await
        .expect("c leads")
        .unwrap();
    let took = stranded.elapsed();
    assert!(
        took <= Duration::from_millis(700),
        "c led {took:?} after b's unanswered acquire took the lease"
    );
    assert!(
        terms.all().iter().all(|t| t.replica != "b"),
        "b never led: {:?}",
        terms.all()
    );
    c.shutdown().await;
    b.shutdown().await;
    terms.assert_no_overlap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_after_an_unanswered_acquire_leaves_no_lease_of_its_replica() {
    // The proxy stays up: b's release travels through it.
    let Stranded {
        redis,
        _proxy,
        terms: _terms,
        b,
        ..
    } = stranded().await;
    let watch = store(&redis.url());
    // b shuts down while its unanswered acquire holds the lease: shutdown must not
    // return before the release is confirmed (a round trip of 600 ms), and must not
    // wait much longer than a lease for it.
    let start = Instant::now();
    b.shutdown().await;
    let took = start.elapsed();
    assert!(
        took <= Duration::from_millis(1_500),
        "shutdown took {took:?}"
    );
    let left = current_leader(&watch, "leasehold", "job").await.unwrap();
    assert!(
        left.as_ref().is_none_or(|l| l.replica_id != "b"),
        "b's lease is left after its shutdown returned: {left:?}"
    );
    // Nothing of b's arrives later either.
    for _ in 0..150 {
        sleep(Duration::from_millis(10)).await;
        let held = current_leader(&watch, "leasehold", "job").await.unwrap();
        assert!(held.is_none_or(|l| l.replica_id != "b"));
    }
}
