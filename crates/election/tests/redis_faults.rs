//! Fault paths against a real redis-server, with a fault proxy between the leader and
//! the server where a network fault is needed. Instants are compared on one clock:
//! every elector runs in this process.

mod support;

use std::time::Duration;

use leasehold_election::TermEndReason;
use leasehold_testkit::{FaultProxy, RedisServer};
use support::{Terms, config, eventually, leader_count, store};
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
async fn redis_restart_mid_term_never_yields_two_leaders() {
    let mut redis = RedisServer::start();
    let terms = Terms::default();
    let a = terms.spawn(store(&redis.url()), config("job", "a", 400));
    a.wait_until_leader().await.unwrap();
    let b = terms.spawn(store(&redis.url()), config("job", "b", 400));
    for _ in 0..3 {
        sleep(Duration::from_millis(300)).await;
        redis.restart();
    }
    eventually("a leader after the restarts", WAIT, || {
        leader_count(&[&a, &b]) == 1
    })
    .await;
    sleep(Duration::from_millis(500)).await;
    // A restart loses the lease key: a new term may start while the old leader is
    // still within its deadline (it learns at its next renewal). The fence orders them;
    // see the fenced-write tests for how writes are kept safe.
    let all = terms.all();
    let mut sorted = all.clone();
    sorted.sort_by_key(|t| t.start);
    assert!(
        sorted.windows(2).all(|w| w[0].fence < w[1].fence),
        "{all:?}"
    );
}
