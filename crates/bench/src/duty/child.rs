//! The hidden `child` mode: one elector in its own OS process, reporting on stdout.
//!
//! It prints one [`Event`] per line: `leading` when its duty starts, `renewed` after
//! every renewal, and on SIGTERM it shuts down gracefully (release plus notification)
//! before printing `sigterm` and `stopped` and exiting 0.
//!
//! With `--one-term` its elector wins one term and never campaigns again
//! ([`OneTerm`]), and it prints `term_ended` when that term ends (`--lose-writes`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehold_election::{
    DutyResult, Elector, ElectorConfig, ElectorHandle, Leadership, LeaseStore, Role, Status,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior, interval};

use crate::args::ChildArgs;
use crate::clock::{now_us, wall_us};
use crate::duty::event::Event;
use crate::duty::one_term::OneTerm;
use crate::store::{self, BoxError};

/// How often the duty looks at its deadline to notice a renewal.
const POLL: Duration = Duration::from_millis(1);
/// `--saturate`: how long each busy task computes before it yields.
const BUSY_SLICE: Duration = Duration::from_millis(5);
/// `--saturate`: how often the leader's duty blocks its worker (for two leases).
const BLOCK_EVERY: Duration = Duration::from_secs(3);

/// Runs the child until SIGTERM.
///
/// # Errors
/// Bad settings, or the SIGTERM handler could not be installed.
pub async fn run(args: &ChildArgs) -> Result<(), BoxError> {
    let lease = Duration::from_millis(args.lease_ms);
    let store = store::build_store(&args.conn.spec()?, lease)?;
    let config = store::acked_config(&args.duty, &args.replica, lease, args.min_replicas_acked)?;
    // The renewal was sent at `deadline - (lease - margin)`.
    let validity = config.lease() - config.safety_margin();
    let snapshotter = args.soak.then(install_recorder).transpose()?;
    if args.saturate {
        saturate();
    }
    // Installed before the elector starts, so an early SIGTERM is never fatal.
    let mut term = signal(SignalKind::terminate())?;
    let stopping = Arc::new(AtomicBool::new(false));
    let soak = args.soak.then(|| Soak {
        stopping: stopping.clone(),
        block: args.saturate.then_some(lease * 2),
        validity,
    });
    let handle = if args.one_term {
        spawn_elector(OneTerm::new(store), config, soak, validity, args.dedicated)?
    } else {
        spawn_elector(store, config, soak, validity, args.dedicated)?
    };
    if args.one_term {
        tokio::spawn(report_term_ends(handle.subscribe()));
    }
    term.recv().await;
    let sigterm_us = now_us();
    stopping.store(true, Ordering::SeqCst);
    handle.shutdown().await;
    let stopped_us = now_us();
    Event::Sigterm { at_us: sigterm_us }.emit();
    Event::Stopped { at_us: stopped_us }.emit();
    if let Some(snapshotter) = snapshotter {
        for us in renew_rtts(&snapshotter) {
            Event::RenewRtt { us }.emit();
        }
    }
    Ok(())
}

/// Starts the child's elector on `store` (on a thread of its own if `dedicated`).
fn spawn_elector<S: LeaseStore>(
    store: S,
    config: ElectorConfig,
    soak: Option<Soak>,
    validity: Duration,
    dedicated: bool,
) -> Result<ElectorHandle, BoxError> {
    let elector = Elector::new(store, config, move |lead| {
        let soak = soak.clone();
        async move {
            match soak {
                Some(soak) => soak.duty(lead).await,
                None => report(lead, validity).await,
            }
        }
    });
    Ok(if dedicated {
        elector.spawn_dedicated()?
    } else {
        elector.spawn()
    })
}

/// `--one-term`: prints a `term_ended` line for every term that ends, from the
/// elector's status (a duty whose lease may be lost is aborted at once, before it
/// could print anything). Dated when the status first showed the term over.
async fn report_term_ends(mut status: watch::Receiver<Status>) {
    let (mut leading, mut ended_at, mut reported) = (false, None, None);
    loop {
        {
            let s = status.borrow_and_update();
            let now_leading = matches!(s.role, Role::Leader { .. });
            if leading && !now_leading {
                ended_at.get_or_insert_with(now_us);
            }
            leading = now_leading;
            if let Some(t) = &s.last_term
                && reported != Some(t.fence)
            {
                reported = Some(t.fence);
                Event::TermEnded {
                    fence: t.fence.get(),
                    at_us: ended_at.take().unwrap_or_else(now_us),
                    planned: t.reason.is_planned(),
                    reason: t.reason.label().to_owned(),
                }
                .emit();
            }
        }
        if status.changed().await.is_err() {
            return;
        }
    }
}

/// Records the elector's metrics in memory, to read the renew round trips at the end.
fn install_recorder() -> Result<Snapshotter, BoxError> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .map_err(|e| format!("metrics recorder: {e}"))?;
    Ok(snapshotter)
}

/// Every renew round trip recorded so far (µs).
fn renew_rtts(snapshotter: &Snapshotter) -> Vec<u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == leasehold_election::metrics::RENEW_RTT)
        .flat_map(|(.., value)| match value {
            DebugValue::Histogram(samples) => samples
                .into_iter()
                .map(|s| (s.into_inner() * 1e6).round() as u64)
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// `--saturate`: one CPU-bound task per worker of this runtime, each computing for
/// [`BUSY_SLICE`] between yields, for as long as the process lives.
fn saturate() {
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    for _ in 0..workers {
        tokio::spawn(async {
            loop {
                let start = std::time::Instant::now();
                while start.elapsed() < BUSY_SLICE {
                    std::hint::spin_loop();
                }
                tokio::task::yield_now().await;
            }
        });
    }
}

/// The duty of a `soak` child.
#[derive(Debug, Clone)]
struct Soak {
    /// Set once SIGTERM has arrived.
    stopping: Arc<AtomicBool>,
    /// `--saturate`: block the worker this long every [`BLOCK_EVERY`].
    block: Option<Duration>,
    /// Lease − safety margin: how far the deadline lies after the acquire was sent.
    validity: Duration,
}

impl Soak {
    /// Reports the start, blocks its worker now and then if asked to, and reports the
    /// end with its reason.
    async fn duty(self, lead: Leadership) -> DutyResult {
        let fence = lead.fence().get();
        let deadline = lead.deadline();
        Event::Leading {
            fence,
            at_us: now_us(),
            sent_at_us: wall_us(deadline.checked_sub(self.validity).unwrap_or(deadline)),
        }
        .emit();
        let mut every = interval(BLOCK_EVERY);
        every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            tokio::select! {
                () = lead.cancelled() => break,
                _ = every.tick(), if self.block.is_some() => {
                    // A duty that blocks its worker: what a runtime under load does.
                    std::thread::sleep(self.block.unwrap_or_default());
                }
            }
        }
        Event::TermEnded {
            fence,
            at_us: now_us(),
            planned: self.stopping.load(Ordering::SeqCst),
            reason: lead
                .end_reason()
                .map_or_else(|| "unknown".to_owned(), |r| r.label().to_owned()),
        }
        .emit();
        Ok(())
    }
}

/// The duty: report the start, then every move of the deadline, until cancelled.
async fn report(lead: Leadership, validity: Duration) -> DutyResult {
    let sent_at = |deadline: Instant| wall_us(deadline.checked_sub(validity).unwrap_or(deadline));
    let mut last = lead.deadline();
    Event::Leading {
        fence: lead.fence().get(),
        at_us: now_us(),
        sent_at_us: sent_at(last),
    }
    .emit();
    let mut poll = interval(POLL);
    poll.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = lead.cancelled() => return Ok(()),
            _ = poll.tick() => {}
        }
        let deadline = lead.deadline();
        if deadline != last {
            last = deadline;
            Event::Renewed {
                sent_at_us: sent_at(deadline),
            }
            .emit();
        }
    }
}
