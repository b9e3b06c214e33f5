//! The handle a caller keeps: status, waits, step-down and shutdown.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Stopped;
use crate::fence::Fence;
use crate::status::{Role, Status};

/// What the waits return once the elector has stopped.
const STOPPED: Stopped = Stopped::new("elector");

/// Controls a running elector. Dropping it stops the elector gracefully in the
/// background (the duty is cancelled and the lease released); call
/// [`ElectorHandle::shutdown`] to wait for that.
#[derive(Debug)]
pub struct ElectorHandle {
    pub(super) status: watch::Receiver<Status>,
    pub(super) shutdown: CancellationToken,
    pub(super) task: Mutex<Option<Worker>>,
    pub(super) control: Arc<Control>,
}

/// Requests from the handle that end a term without a plain shutdown.
#[derive(Debug)]
pub(super) struct Control {
    /// Bumped by every `step_down()`; a term started before the bump ends.
    pub(super) step_downs: watch::Sender<u64>,
    /// The latest instant a duty being stopped may run to (set by `stop_by`): its
    /// grace ends then if it would end later.
    pub(super) stop_by: watch::Sender<Option<Instant>>,
    /// The renew interval: a shutdown with a deadline keeps up to half of it for the
    /// release.
    pub(super) renew_interval: Duration,
}

impl Control {
    pub(super) fn new(renew_interval: Duration) -> Self {
        Self {
            step_downs: watch::Sender::new(0),
            stop_by: watch::Sender::new(None),
            renew_interval,
        }
    }
}

impl Control {
    /// A duty being stopped runs to `deadline` at the latest (an earlier deadline
    /// given before stands).
    pub(super) fn hurry(&self, deadline: Instant) {
        self.stop_by.send_if_modified(|by| match by {
            Some(at) if *at <= deadline => false,
            _ => {
                *by = Some(deadline);
                true
            }
        });
    }
}

/// How a spawned elector runs.
#[derive(Debug)]
pub(super) enum Worker {
    /// A task on the caller's runtime ([`Elector::spawn`](super::Elector::spawn)).
    Task(JoinHandle<()>),
    /// A thread of its own ([`Elector::spawn_dedicated`](super::Elector::spawn_dedicated)): fires once it has finished.
    Thread(oneshot::Receiver<()>),
}

impl ElectorHandle {
    /// A receiver of status changes.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// The status now.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Waits until this elector leads; returns the term's fence.
    ///
    /// # Errors
    /// [`Stopped`] if the elector stops first.
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches the status.
    pub async fn wait_until_leader(&self) -> Result<Fence, Stopped> {
        let mut rx = self.status.clone();
        let status = rx
            .wait_for(|s| s.is_leader() || s.role == Role::Stopped)
            .await
            .map_err(|_| STOPPED)?;
        status.fence().ok_or(STOPPED)
    }

    /// The token that stops this elector gracefully when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Asks the elector to stop gracefully, without waiting: the duty is cancelled
    /// (with its grace), the lease released, followers woken (the term ends with
    /// [`TermEndReason::Shutdown`](crate::TermEndReason::Shutdown));
    /// [`shutdown`](Self::shutdown) waits for it. The same as cancelling
    /// [`shutdown_token`](Self::shutdown_token).
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Asks the elector to stop gracefully as [`stop`](Self::stop) does, its duty
    /// aborted at `deadline` if the grace would let it run longer (then the lease is
    /// released), without waiting. An earlier deadline given before stands.
    /// Prefer [`shutdown_within`](Self::shutdown_within), which waits too.
    pub fn stop_by(&self, deadline: Instant) {
        self.control.hurry(deadline);
        self.shutdown.cancel();
    }

    /// Steps down voluntarily so that another replica leads: the current term ends
    /// ([`TermEndReason::SteppedDown`](crate::TermEndReason::SteppedDown): the duty is cancelled with its grace, then the
    /// lease is released and followers are woken), and this elector waits one retry
    /// interval before it campaigns again (a follower woken by the release leads within
    /// milliseconds; alone, this replica leads again after that wait). Returns once
    /// the term has ended and the lease is released; `Ok(false)` if it was not leading.
    ///
    /// # Errors
    /// [`Stopped`] if the elector stops first.
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// Dropping the future does not cancel the step-down, only the wait for it.
    pub async fn step_down(&self) -> Result<bool, Stopped> {
        let Some(fence) = self.status.borrow().fence() else {
            return Ok(false);
        };
        self.control.step_downs.send_modify(|n| *n += 1);
        let mut rx = self.status.clone();
        rx.wait_for(|s| {
            s.role == Role::Stopped || s.last_term.as_ref().is_some_and(|t| t.fence == fence)
        })
        .await
        .map_err(|_| STOPPED)?;
        Ok(true)
    }

    /// Stops gracefully: cancels the duty (with its grace), releases the lease, notifies
    /// followers, and returns once all of that is done.
    ///
    /// # Errors
    /// None: a release that fails is reported in the status (`last_term.released`,
    /// `last_error`) and the lease then expires on its own.
    ///
    /// # Panics
    /// Never (a panicking duty is caught by the elector).
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the shutdown: the elector keeps stopping (and
    /// releasing) in the background; only the wait for it is cancelled.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match task {
            Some(Worker::Task(task)) => {
                let _ = task.await;
            }
            Some(Worker::Thread(done)) => {
                let _ = done.await;
            }
            // Spawned by the caller (`Elector::pair`): wait for the stopped status, or
            // for the future to be dropped.
            None => {
                let mut rx = self.status.clone();
                let _ = rx.wait_for(|s| s.role == Role::Stopped).await;
            }
        }
    }

    /// Stops gracefully as [`shutdown`](Self::shutdown) does, but over by `within`: the
    /// duty is cancelled at once with its grace, aborted if it still runs shortly before
    /// the deadline (a fifth of `within`, at most half a renew interval, is kept for the
    /// release), and the lease released. Returns `true` if the elector had stopped by the
    /// deadline; `false` if not (Redis out of reach: it keeps stopping in the background,
    /// and the lease expires on its own). The same shape as
    /// `CoordinatorHandle::shutdown_within` in `leasehold-partitions`.
    ///
    /// Give it a little less than the orchestrator's grace period (Kubernetes'
    /// `terminationGracePeriodSeconds`), so the process exits before it is killed:
    ///
    /// ```no_run
    /// # async fn f(handle: leasehold_election::ElectorHandle) {
    /// use std::time::Duration;
    ///
    /// // SIGTERM: the duty gets its grace, but the whole shutdown no more than 2 s.
    /// if !handle.shutdown_within(Duration::from_secs(2)).await {
    ///     eprintln!("stopped late: the lease expires on its own");
    /// }
    /// # }
    /// ```
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the shutdown: the elector keeps stopping (by the
    /// same deadline) in the background.
    pub async fn shutdown_within(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let reserve = (within / 5).min(self.control.renew_interval / 2);
        self.control.hurry(deadline - reserve);
        self.shutdown.cancel();
        tokio::time::timeout_at(deadline, self.shutdown())
            .await
            .is_ok()
    }
}

impl Drop for ElectorHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
