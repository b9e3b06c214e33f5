//! `stall`: a duty that blocks the runtime it runs on (a 2-worker runtime; the common
//! tokio mistake of synchronous work without `.await`) for 2.5 leases, with the default
//! elector (on that runtime) and with `Elector::spawn_dedicated` (on a thread of its
//! own); blocking one worker, then every worker.
//!
//! Per case it reports whether the replica kept its lease, whether a successor (an
//! elector on the bench's own runtime, out of the stall's reach) led and when, and what
//! the duty saw: `Leadership::check()` the instant the block ended, and, from a probe
//! task on the application's runtime calling `check()` every millisecond, how long after
//! the deadline the term was seen as over. One clock: this process's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use leasehold_election::{Elector, Leadership, RedisStore, Role};
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, sleep, timeout};

use crate::stats::round3;
use crate::store::{self, BoxError, Servers, TargetArgs, Topology};

/// Worker threads of the application's runtime.
const WORKERS: usize = 2;
/// Longest wait for a leader or a follower on a busy machine.
const WAIT: Duration = Duration::from_secs(15);

/// One elector kind with one way of blocking.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallCase {
    /// `default` (`Elector::spawn`, on the blocked runtime) or `dedicated`
    /// (`Elector::spawn_dedicated`).
    pub elector: String,
    /// `one_worker` (the duty's own) or `all_workers` (every application worker).
    pub blocked: String,
    /// The replica still led a lease after the block, and no successor had led.
    pub kept_lease: bool,
    /// Another replica led during or after the block.
    pub successor_led: bool,
    /// Block start → the successor's duty started.
    pub successor_led_after_block_start_ms: Option<f64>,
    /// The successor started after the blocked replica's local deadline (no instant
    /// with two leaders).
    pub successor_started_after_old_deadline: Option<bool>,
    /// `check()` failed the instant the block ended: the duty saw its term as over.
    pub duty_saw_term_over_on_resume: bool,
    /// `remaining()` at that instant.
    pub remaining_on_resume_ms: f64,
    /// The term's deadline → the probe on the application's runtime saw `check()` fail
    /// (`None`: the term did not end). Near zero when a worker was free to run it.
    pub probe_saw_term_over_after_deadline_ms: Option<f64>,
    /// Late wake-ups the elector reported (`Status::stalls`).
    pub stalls_reported: u64,
}

/// The final report of `stall`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallReport {
    /// Always `stall`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// The lease.
    pub lease_ms: u64,
    /// How long the duty blocked.
    pub block_ms: u64,
    /// Worker threads of the application's runtime.
    pub workers: usize,
    /// Default elector then dedicated, each blocking one worker then all.
    pub cases: Vec<StallCase>,
}

/// What `stall` runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The lease, in milliseconds.
    pub lease_ms: u64,
    /// How long the duty blocks, in leases.
    pub block_leases: f64,
    /// The Redis set-up.
    pub target: TargetArgs,
}

/// Runs the four cases one after another, each on a fresh duty.
///
/// # Errors
/// If the servers cannot start or a case does not get going in time.
pub async fn run(settings: &Settings) -> Result<StallReport, BoxError> {
    let lease = Duration::from_millis(settings.lease_ms);
    let block = lease.mul_f64(settings.block_leases.max(0.0));
    let servers = Arc::new(Servers::start(&settings.target)?);
    let tag = format!("{}", std::process::id());
    let mut cases = Vec::new();
    for (dedicated, every_worker) in [(false, false), (false, true), (true, false), (true, true)] {
        let duty = format!(
            "bench-stall-{tag}-{}-{}",
            if dedicated { "dedicated" } else { "default" },
            if every_worker { "all" } else { "one" }
        );
        let main = tokio::runtime::Handle::current();
        let servers = servers.clone();
        let case = tokio::task::spawn_blocking(move || {
            one(
                &main,
                &servers,
                &duty,
                lease,
                block,
                dedicated,
                every_worker,
            )
        })
        .await?
        .map_err(|e| format!("{}: {e}", label(dedicated, every_worker)))?;
        eprintln!(
            "{}: kept the lease {}, successor led {}, duty saw the term over on resuming {}, \
             stalls reported {}",
            label(dedicated, every_worker),
            case.kept_lease,
            case.successor_led,
            case.duty_saw_term_over_on_resume,
            case.stalls_reported
        );
        cases.push(case);
    }
    Ok(StallReport {
        scenario: "stall".to_owned(),
        topology: servers.topology,
        lease_ms: settings.lease_ms,
        block_ms: u64::try_from(block.as_millis()).unwrap_or(u64::MAX),
        workers: WORKERS,
        cases,
    })
}

fn label(dedicated: bool, every_worker: bool) -> String {
    format!(
        "{} elector, {} blocked",
        if dedicated { "dedicated" } else { "default" },
        if every_worker {
            "every worker"
        } else {
            "one worker"
        }
    )
}

/// What the blocked duty saw the instant the block ended.
#[derive(Debug, Clone, Copy)]
struct Resumed {
    check_ok: bool,
    remaining: Duration,
}

/// One case, on a thread of the bench's blocking pool: builds the application's runtime
/// there, and runs the would-be successor on `main` (the bench's runtime).
fn one(
    main: &tokio::runtime::Handle,
    servers: &Servers,
    duty: &str,
    lease: Duration,
    block: Duration,
    dedicated: bool,
    every_worker: bool,
) -> Result<StallCase, BoxError> {
    let app = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()?;
    // The successor: its own store, on the bench's runtime.
    let successor_terms = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (following_tx, following_rx) = oneshot::channel::<()>();
    let successor = {
        let store = store::build_store(&servers.spec, lease)?;
        let config = store::config(duty, "successor", lease)?;
        let terms = successor_terms.clone();
        async move {
            let b = Elector::new(store, config, move |lead: Leadership| {
                terms
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Instant::now());
                async move {
                    lead.cancelled().await;
                    Ok(())
                }
            })
            .spawn();
            let mut rx = b.subscribe();
            let _ = timeout(
                WAIT,
                rx.wait_for(
                    |s| matches!(&s.role, Role::Follower { leader: Some(l) } if l == "blocked"),
                ),
            )
            .await;
            let _ = following_tx.send(());
            let _ = stop_rx.await;
            b.shutdown().await;
        }
    };

    let spec = servers.spec.clone();
    let duty = duty.to_owned();
    app.block_on(async move {
        let store: RedisStore = store::build_store(&spec, lease)?;
        let config = store::config(&duty, "blocked", lease)?;
        let (open, gate_rx) = watch::channel(false);
        // With every worker blocked, the duty and a helper hold one worker each; the
        // barrier proves both are held at once.
        let barrier = Arc::new(Barrier::new(if every_worker { 2 } else { 1 }));
        let resumed = Arc::new(Mutex::new(None::<Resumed>));
        let current = Arc::new(Mutex::new(None::<Leadership>));
        let terms = Arc::new(AtomicU64::new(0));
        let elector = {
            let (gate, barrier, resumed, current, terms) = (
                gate_rx.clone(),
                barrier.clone(),
                resumed.clone(),
                current.clone(),
                terms.clone(),
            );
            Elector::new(store, config, move |lead: Leadership| {
                terms.fetch_add(1, Ordering::SeqCst);
                *current.lock().unwrap_or_else(|e| e.into_inner()) = Some(lead.clone());
                let (mut gate, barrier, resumed) = (gate.clone(), barrier.clone(), resumed.clone());
                async move {
                    let _ = gate.wait_for(|open| *open).await;
                    barrier.wait();
                    // The mistake being measured: blocking a runtime worker.
                    std::thread::sleep(block);
                    *resumed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Resumed {
                        check_ok: lead.check().is_ok(),
                        remaining: lead.remaining(),
                    });
                    lead.cancelled().await;
                    Ok(())
                }
            })
        };
        let handle = if dedicated {
            elector.spawn_dedicated()?
        } else {
            elector.spawn()
        };
        timeout(WAIT, handle.wait_until_leader())
            .await
            .map_err(|_| "the blocked replica never led")??;
        let successor = main.spawn(successor);
        timeout(WAIT, following_rx)
            .await
            .map_err(|_| "the successor never followed")??;
        // Spawned from outside the workers, so an idle worker takes each.
        let helper = every_worker.then(|| {
            let (mut gate, barrier) = (gate_rx.clone(), barrier.clone());
            tokio::spawn(async move {
                let _ = gate.wait_for(|open| *open).await;
                barrier.wait();
                std::thread::sleep(block);
            })
        });
        let probe = {
            let current = current.clone();
            tokio::spawn(async move {
                loop {
                    let lead = current.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    if let Some(lead) = lead
                        && lead.check().is_err()
                    {
                        let seen = Instant::now();
                        return seen.saturating_duration_since(lead.deadline());
                    }
                    sleep(Duration::from_millis(1)).await;
                }
            })
        };
        let block_start = Instant::now();
        open.send_replace(true);
        timeout(block + WAIT, async {
            while resumed.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
                sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .map_err(|_| "the duty never resumed")?;
        // A lease later the successor has led, or not, and the elector has caught up.
        sleep(lease).await;
        let status = handle.status();
        let led = successor_terms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let old_deadline = current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Leadership::deadline);
        let probe_lag = if probe.is_finished() {
            Some(probe.await?)
        } else {
            probe.abort();
            None
        };
        handle.shutdown().await;
        if let Some(helper) = helper {
            helper.await?;
        }
        let _ = stop_tx.send(());
        successor.await?;
        let resumed = resumed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or("the duty never resumed")?;
        let first = led.first().copied();
        let ms = |d: Duration| round3(d.as_secs_f64() * 1000.0);
        Ok(StallCase {
            elector: if dedicated { "dedicated" } else { "default" }.to_owned(),
            blocked: if every_worker {
                "all_workers"
            } else {
                "one_worker"
            }
            .to_owned(),
            kept_lease: status.is_leader() && led.is_empty() && terms.load(Ordering::SeqCst) == 1,
            successor_led: first.is_some(),
            successor_led_after_block_start_ms: first.map(|t| ms(t - block_start)),
            successor_started_after_old_deadline: first
                .zip(old_deadline)
                .map(|(t, deadline)| deadline < t),
            duty_saw_term_over_on_resume: !resumed.check_ok,
            remaining_on_resume_ms: ms(resumed.remaining),
            probe_saw_term_over_after_deadline_ms: probe_lag.map(ms),
            stalls_reported: status.stalls,
        })
    })
}
