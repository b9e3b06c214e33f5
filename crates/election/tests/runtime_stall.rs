//! A duty that blocks the runtime it runs on (synchronous work, a CPU loop without an
//! `.await`: a common tokio mistake) for 2.5 leases, against a real redis-server.
//!
//! - With the default elector, which shares that runtime, the lease is lost (when every
//!   worker is blocked the elector cannot run at all), and the duty sees its term as
//!   over the moment it resumes: `check()` fails, `is_cancelled()` is true, before the
//!   elector has run again. The successor leads only after the old deadline.
//! - With `Elector::spawn_dedicated` the elector renews from a thread of its own: the
//!   lease is kept and no successor leads, whether one worker or every worker is held.
//!
//! Each case builds its own 2-worker application runtime; the would-be successor runs on
//! a runtime on another thread, out of the stall's reach. One clock: this process's.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use leasehold_election::{Elector, ElectorHandle, Leadership, Role, Status, current_leader};
use leasehold_testkit::RedisServer;
use support::{config, store};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, sleep, timeout};

const LEASE_MS: u64 = 1_000;
const BLOCK: Duration = Duration::from_millis(2_500);
const WAIT: Duration = Duration::from_secs(10);

/// What the blocked duty saw the instant the block ended, before any `.await`.
#[derive(Debug, Clone, Copy)]
struct Resumed {
    at: Instant,
    check_ok: bool,
    cancelled: bool,
    remaining: Duration,
    deadline: Instant,
}

#[derive(Debug)]
struct Outcome {
    resumed: Resumed,
    /// When each term of the would-be successor started, until the blocked replica
    /// shut down (a lease after the block).
    successor_terms: Vec<Instant>,
    /// The blocked replica's status a lease after the block.
    status: Status,
    /// Terms the blocked replica started.
    terms: u64,
}

/// Runs `b`, a follower on a runtime of its own thread, until `stop` fires; reports
/// on `following` once it follows `a`.
fn successor(
    url: String,
    terms: Arc<Mutex<Vec<Instant>>>,
    following: oneshot::Sender<()>,
    stop: oneshot::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let b = Elector::new(
                store(&url),
                config("job", "b", LEASE_MS),
                move |lead: Leadership| {
                    terms.lock().unwrap().push(Instant::now());
                    async move {
                        lead.cancelled().await;
                        Ok(())
                    }
                },
            )
            .spawn();
            let mut rx = b.subscribe();
            let _ = timeout(
                WAIT,
                rx.wait_for(|s| matches!(&s.role, Role::Follower { leader: Some(l) } if l == "a")),
            )
            .await;
            let _ = following.send(());
            let _ = stop.await;
            b.shutdown().await;
        });
    })
}

fn run_case(dedicated: bool, block_every_worker: bool) -> Outcome {
    let redis = RedisServer::start();
    let app = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (block_now, gate_open) = watch::channel(false);
    // With every worker blocked, the duty and a helper hold one worker each: the barrier
    // proves both are held at once.
    let barrier = Arc::new(Barrier::new(if block_every_worker { 2 } else { 1 }));
    let resumed = Arc::new(Mutex::new(None));
    let started = Arc::new(AtomicU64::new(0));
    let successor_terms = Arc::new(Mutex::new(Vec::new()));
    let (following_tx, following_rx) = oneshot::channel();
    let (stop_tx, stop_rx) = oneshot::channel();
    let (status, terms, led, thread) = app.block_on(async {
        let (block, gate, seen, count) = (
            gate_open.clone(),
            barrier.clone(),
            resumed.clone(),
            started.clone(),
        );
        // The application uses the store first, so its connection (and that connection's
        // driver task) lives on the application's runtime.
        let app_store = store(&redis.url());
        current_leader(&app_store, "leasehold", "job")
            .await
            .unwrap();
        let elector = Elector::new(
            app_store,
            config("job", "a", LEASE_MS),
            move |lead: Leadership| {
                count.fetch_add(1, Ordering::SeqCst);
                let (mut block, gate, seen) = (block.clone(), gate.clone(), seen.clone());
                async move {
                    let _ = block.wait_for(|open| *open).await;
                    gate.wait();
                    // The mistake under test: blocking a runtime worker.
                    std::thread::sleep(BLOCK);
                    *seen.lock().unwrap() = Some(Resumed {
                        at: Instant::now(),
                        check_ok: lead.check().is_ok(),
                        cancelled: lead.is_cancelled(),
                        remaining: lead.remaining(),
                        deadline: lead.deadline(),
                    });
                    lead.cancelled().await;
                    Ok(())
                }
            },
        );
        let a: ElectorHandle = if dedicated {
            elector.spawn_dedicated().unwrap()
        } else {
            elector.spawn()
        };
        timeout(WAIT, a.wait_until_leader())
            .await
            .expect("a leads")
            .unwrap();
        let thread = successor(redis.url(), successor_terms.clone(), following_tx, stop_rx);
        // Spawned from outside the workers, so an idle worker picks it up.
        let helper = block_every_worker.then(|| {
            let (mut block, gate) = (gate_open.clone(), barrier.clone());
            tokio::spawn(async move {
                let _ = block.wait_for(|open| *open).await;
                gate.wait();
                std::thread::sleep(BLOCK);
            })
        });
        following_rx.await.unwrap();
        // The wake-ups come from outside the workers (this thread).
        block_now.send_replace(true);
        timeout(WAIT, async {
            while resumed.lock().unwrap().is_none() {
                sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the duty resumes");
        // A lease later: the successor has led (or not), the elector has caught up.
        sleep(Duration::from_millis(LEASE_MS)).await;
        // Before the shutdown, whose release hands over to the successor.
        let status = a.status();
        let led = successor_terms.lock().unwrap().clone();
        a.shutdown().await;
        if let Some(helper) = helper {
            helper.await.unwrap();
        }
        (status, started.load(Ordering::SeqCst), led, thread)
    });
    let _ = stop_tx.send(());
    thread.join().unwrap();
    Outcome {
        resumed: resumed.lock().unwrap().expect("resumed"),
        successor_terms: led,
        status,
        terms,
    }
}

#[test]
fn with_the_default_elector_a_blocked_runtime_ends_the_term_for_the_duty_at_its_deadline() {
    let out = run_case(false, true);
    let r = out.resumed;
    // Every worker was held for 2.5 leases: nobody renewed, and the duty sees that at
    // once, although the elector has not run since.
    assert!(r.deadline < r.at, "{out:?}");
    assert!(!r.check_ok && r.cancelled, "{out:?}");
    assert_eq!(r.remaining, Duration::ZERO);
    // The successor led, and only after the blocked replica's deadline (one clock).
    let first = *out.successor_terms.first().expect("a successor led");
    assert!(r.deadline < first, "{out:?}");
    // The elector noticed it woke up late.
    assert!(out.status.stalls >= 1, "{out:?}");
}

#[test]
fn the_dedicated_elector_keeps_the_lease_while_one_worker_is_blocked() {
    let out = run_case(true, false);
    let r = out.resumed;
    assert!(r.check_ok && !r.cancelled, "{out:?}");
    assert!(r.remaining > Duration::ZERO && r.deadline > r.at);
    assert!(out.successor_terms.is_empty(), "no successor led: {out:?}");
    assert!(out.status.is_leader() && out.terms == 1, "{out:?}");
}

#[test]
fn the_dedicated_elector_keeps_the_lease_while_every_worker_is_blocked() {
    let out = run_case(true, true);
    let r = out.resumed;
    assert!(r.check_ok && !r.cancelled, "{out:?}");
    assert!(r.remaining > Duration::ZERO && r.deadline > r.at);
    assert!(out.successor_terms.is_empty(), "no successor led: {out:?}");
    assert!(out.status.is_leader() && out.terms == 1, "{out:?}");
}
