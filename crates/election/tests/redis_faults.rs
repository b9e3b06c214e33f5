//! Fault paths against a real redis-server, with a fault proxy between the leader and
//! the server where a network fault is needed. Instants are compared on one clock:
//! every elector runs in this process.

mod support;

use std::time::Duration;

use leasehold_election::{TermEndReason, current_leader};
use leasehold_testkit::{FaultProxy, RedisServer};
use support::{Terms, config, eventually, follows, leader_count, store};
use tokio::time::{Instant, sleep, timeout};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn black_holed_leader_steps_down_before_its_key_expires() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let terms = Terms::default();
    let lease = Duration::from_millis(600);
    let a = terms.spawn(store(&proxy.url()), config("job", "a", 600));
    a.wait_until_leader().await.unwrap();
    let b = terms.spawn(store(&redis.url()), config("job", "b", 600));
    sleep(Duration::from_millis(100)).await;
    let cut = Instant::now();
    proxy.blackhole();
    timeout(WAIT, b.wait_until_leader())
        .await
        .expect("b takes over")
        .unwrap();
    eventually("b's duty runs", WAIT, || terms.all().len() >= 2).await;
    let all = terms.all();
    assert_eq!(all.len(), 2, "{all:?}");
    let (old, new) = (&all[0], &all[1]);
    assert_eq!((old.replica.as_str(), new.replica.as_str()), ("a", "b"));
    let a_end = old.end.expect("a's duty ended");
    // a stepped down on its own deadline, at most one lease after the cut...
    assert!(
        a_end - cut <= lease,
        "a stepped down {:?} after the cut",
        a_end - cut
    );
    // ...and strictly before b could lead (the key outlives a's local deadline).
    assert!(
        a_end < new.start,
        "a ended at {a_end:?}, b started at {:?}",
        new.start
    );
    assert!(new.fence > old.fence);
    // The term's record is published once the (black-holed) release attempt gave up.
    let mut rx = a.subscribe();
    let st = timeout(WAIT, rx.wait_for(|s| s.last_term.is_some()))
        .await
        .unwrap()
        .unwrap()
        .clone();
    assert!(
        matches!(
            st.last_term.as_ref().map(|t| &t.reason),
            Some(TermEndReason::DeadlinePassed)
        ),
        "{st:?}"
    );
    // Heal: a's held renewal arrives late and is refused; a follows b.
    proxy.pass();
    sleep(Duration::from_millis(700)).await;
    assert!(b.status().is_leader() && !a.status().is_leader());
    assert_eq!(terms.all().len(), 2);
    terms.assert_no_overlap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_redis_server_makes_the_leader_step_down_on_its_own_deadline() {
    let redis = RedisServer::start();
    let terms = Terms::default();
    let a = terms.spawn(store(&redis.url()), config("job", "a", 400));
    a.wait_until_leader().await.unwrap();
    let b = terms.spawn(store(&redis.url()), config("job", "b", 400));
    sleep(Duration::from_millis(50)).await;
    let paused = Instant::now();
    redis.pause();
    eventually("a steps down while redis is frozen", WAIT, || {
        !a.status().is_leader()
    })
    .await;
    let stepped = paused.elapsed();
    assert!(
        stepped <= Duration::from_millis(400),
        "a stepped down {stepped:?} after the pause"
    );
    assert!(
        !b.status().is_leader(),
        "nobody can be elected while redis is frozen"
    );
    sleep(Duration::from_millis(500)).await;
    redis.resume();
    eventually("a leader after resume", WAIT, || {
        leader_count(&[&a, &b]) == 1
    })
    .await;
    sleep(Duration::from_millis(300)).await;
    terms.assert_no_overlap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moderate_latency_is_ridden_out_and_excessive_latency_hands_over() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let terms = Terms::default();
    let a = terms.spawn(store(&proxy.url()), config("job", "a", 600));
    a.wait_until_leader().await.unwrap();
    let b = terms.spawn(store(&redis.url()), config("job", "b", 600));
    // 2 × 40 ms round trip: well inside the 250 ms call timeout.
    proxy.latency(Duration::from_millis(40));
    sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        terms.all().len(),
        1,
        "40 ms of latency must not cost the lease: {:?}",
        a.status()
    );
    assert!(a.status().is_leader());
    // Round trips beyond the call timeout: renewals fail and a must step down.
    proxy.latency(Duration::from_millis(300));
    timeout(WAIT, b.wait_until_leader())
        .await
        .expect("b takes over")
        .unwrap();
    proxy.pass();
    terms.assert_no_overlap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_resets_mid_term_are_survived() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let terms = Terms::default();
    let a = terms.spawn(store(&proxy.url()), config("job", "a", 1_000));
    a.wait_until_leader().await.unwrap();
    for _ in 0..6 {
        proxy.reset_connections();
        sleep(Duration::from_millis(200)).await;
    }
    // Give it one more renew interval to show a clean status.
    sleep(Duration::from_millis(400)).await;
    assert_eq!(
        terms.all().len(),
        1,
        "resets must not cost the lease: {:?}",
        terms.all()
    );
    let st = a.status();
    assert!(st.is_leader());
    assert!(
        st.last_error.is_none(),
        "reconnected transparently: {:?}",
        st.last_error
    );
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarts_that_lose_all_data_never_yield_two_leaders() {
    let mut redis = RedisServer::start();
    let terms = Terms::default();
    let a = terms.spawn(store(&redis.url()), config("job", "a", 400));
    timeout(WAIT, a.wait_until_leader())
        .await
        .expect("a leads")
        .unwrap();
    let b = terms.spawn(store(&redis.url()), config("job", "b", 400));
    for _ in 0..3 {
        // Somewhere in the middle of a term (renewals every 133 ms).
        sleep(Duration::from_millis(rand::random_range(200..500))).await;
        let before = terms.all().len();
        tokio::task::block_in_place(|| redis.restart());
        eventually("a new term after the restart", WAIT, || {
            terms.all().len() > before
        })
        .await;
    }
    sleep(Duration::from_millis(300)).await;
    assert_eq!(leader_count(&[&a, &b]), 1);
    // Never two leaders at one instant (one clock, this process), fences increase, and
    // each new term began only after the old leader's own deadline had passed: nothing
    // is granted for a lease after a restart, so even a leader that had not learned of
    // the loss had stopped believing it led.
    terms.assert_no_overlap();
    terms.assert_each_starts_after_the_previous_deadline();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_during_a_restart_that_loses_all_data_is_never_overlapped() {
    let mut redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let terms = Terms::default();
    let lease = Duration::from_millis(1_000);
    let a = terms.spawn(store(&proxy.url()), config("job", "a", 1_000));
    timeout(WAIT, a.wait_until_leader())
        .await
        .expect("a leads")
        .unwrap();
    let b = terms.spawn(store(&redis.url()), config("job", "b", 1_000));
    follows(&b, "a", WAIT).await;
    // At a random point of a's renew cycle, a loses its link (so it cannot learn that
    // its lease is gone) and Redis restarts empty.
    sleep(Duration::from_millis(rand::random_range(0..333))).await;
    proxy.blackhole();
    tokio::task::block_in_place(|| redis.restart());
    let restarted = Instant::now();
    timeout(WAIT, b.wait_until_leader())
        .await
        .expect("b takes over")
        .unwrap();
    eventually("b's duty runs", WAIT, || terms.all().len() >= 2).await;
    let all = terms.all();
    let (old, new) = (&all[0], &all[1]);
    assert_eq!((old.replica.as_str(), new.replica.as_str()), ("a", "b"));
    // a believed it led until its own deadline; b began after it (one clock).
    let deadline = old.deadline.expect("a's term ended");
    assert!(
        deadline < new.start,
        "b started {:?} before a's deadline",
        deadline - new.start
    );
    assert!(old.end.expect("ended") <= new.start);
    assert!(new.fence > old.fence);
    // The price: about one lease without a leader after the restart, no more.
    let waited = new.start - restarted;
    assert!(
        waited <= lease + Duration::from_millis(500),
        "b led {waited:?} after the restart"
    );
    proxy.pass();
    sleep(Duration::from_millis(300)).await;
    terms.assert_no_overlap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_a_black_holed_acquire_returns_and_nothing_of_it_lands_later() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let terms = Terms::default();
    let a = terms.spawn(store(&redis.url()), config("job", "a", 1_000));
    timeout(WAIT, a.wait_until_leader())
        .await
        .expect("a leads")
        .unwrap();
    let b = terms.spawn(store(&proxy.url()), config("job", "b", 1_000));
    follows(&b, "a", WAIT).await;
    proxy.blackhole();
    a.shutdown().await;
    // b's next acquire is held in the network: it times out, unanswered.
    let mut rx = b.subscribe();
    timeout(WAIT, rx.wait_for(|s| s.last_error.is_some()))
        .await
        .expect("b's acquire times out")
        .unwrap();
    let start = Instant::now();
    b.shutdown().await;
    let took = start.elapsed();
    // No confirmation can come through a black hole: shutdown gives up after a lease.
    assert!(
        took <= Duration::from_millis(1_500),
        "shutdown took {took:?}"
    );
    // Heal: the held acquire arrives and takes the free lease, and the release queued
    // behind it on the same connection frees it at once.
    proxy.pass();
    let watch = store(&redis.url());
    for _ in 0..150 {
        sleep(Duration::from_millis(10)).await;
        let held = current_leader(&watch, "leasehold", "job").await.unwrap();
        assert!(
            held.as_ref().is_none_or(|l| l.replica_id != "b"),
            "the stopped replica holds the lease: {held:?}"
        );
    }
    assert!(terms.all().iter().all(|t| t.replica != "b"));
}
