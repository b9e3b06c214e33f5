//! One term granted by someone else, run without an elector.
//!
//! A partition coordinator claims its partitions in batches, then runs each granted
//! term here: the same term code as an elector's ([`super::term`]: run the duty, renew,
//! step down at the local deadline, release), with renewals and the release made by
//! the coordinator's [`TermCalls`] and no campaign before or after. The runner ends
//! with its term.
//!
//! Plumbing for Leasehold's partition crate, reached through the hidden
//! `leasehold_election::__private` module: no semver promise.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span};

use super::handle::Control;
use super::{DutyResult, Labels, Runner};
use crate::config::{ConfigError, ElectorConfig};
use crate::error::StoreError;
use crate::fence::Fence;
use crate::grid::RenewGrid;
use crate::leadership::Leadership;
use crate::metrics as m;
use crate::status::{Status, TermEnd};
use crate::store::BackendWarning;
use crate::validate::validate_name;

/// The calls of a term: its renewals and its release (a lease store with one duty's
/// keys, or a partition coordinator's batch).
pub trait TermCalls: Send + Sync + 'static {
    /// Extends the lease held with `token` to `lease` from now; `false` if `token` no
    /// longer holds it.
    ///
    /// # Errors
    /// The store's [`StoreError`].
    fn renew(
        &self,
        token: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Gives back the lease held with `token` (once the duty has ended); `false` if
    /// `token` no longer held it.
    ///
    /// # Errors
    /// The store's [`StoreError`].
    fn release(&self, token: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Server settings that weaken the guarantees, read when the runner starts (the
    /// status' `warnings`).
    ///
    /// # Errors
    /// The store's [`StoreError`].
    fn self_check(&self) -> impl Future<Output = Result<Vec<BackendWarning>, StoreError>> + Send;
}

/// The settings of a group's granted terms: an elector's timing rules (its duty name is
/// replaced by each term's partition), the group (the `group` metric label) and the
/// group's renew grid, on which every term's renewals fall so that they share a
/// round trip.
#[derive(Debug, Clone)]
pub struct TermConfig {
    elector: ElectorConfig,
    group: String,
    grid: RenewGrid,
}

impl TermConfig {
    /// The terms of `group`, timed by `elector`, renewing on the grid that starts at
    /// `epoch` with `elector`'s renew interval.
    ///
    /// # Errors
    /// [`ConfigError`] if `group` is not a valid name.
    pub fn new(elector: ElectorConfig, group: &str, epoch: Instant) -> Result<Self, ConfigError> {
        validate_name("group name", group)?;
        let grid = RenewGrid::new(epoch, elector.renew_interval);
        Ok(Self {
            elector,
            group: group.to_owned(),
            grid,
        })
    }
}

/// A lease someone else took on a term's behalf (a partition coordinator's batch
/// claim).
#[derive(Debug, Clone)]
pub struct Grant {
    /// The term's fence.
    pub fence: Fence,
    /// When the call that took the lease was *sent*: the local deadline is anchored here.
    pub sent: Instant,
    /// The token the lease is held with (renewals and the release use it).
    pub token: String,
}

/// One granted term: leads at once (no campaign), renews through its [`TermCalls`]
/// until the lease is refused, its local deadline passes (even if a renewal never
/// returns), the duty ends, or it is stopped; then steps down (cancel the duty, its
/// grace never past the deadline, abort, join) and only then releases. It ends with
/// its term. Everything an elector's term does, with the same metrics, logs and spans.
pub struct GrantedTerm<C, F> {
    config: Arc<ElectorConfig>,
    group: String,
    grid: RenewGrid,
    calls: C,
    grant: Grant,
    duty: F,
}

impl<C, F> std::fmt::Debug for GrantedTerm<C, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantedTerm")
            .field("config", &self.config)
            .field("group", &self.group)
            .field("grant", &self.grant)
            .finish_non_exhaustive()
    }
}

impl<C, F, Fut> GrantedTerm<C, F>
where
    C: TermCalls,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// The term of `partition` that `grant` holds, with `config`'s settings, its
    /// renewals and release made by `calls`, running `duty`.
    pub fn new(config: &TermConfig, partition: &str, grant: Grant, calls: C, duty: F) -> Self {
        let mut elector = config.elector.clone();
        partition.clone_into(&mut elector.duty);
        Self {
            config: Arc::new(elector),
            group: config.group.clone(),
            grid: config.grid,
            calls,
            grant,
            duty,
        }
    }

    /// The handle and the term's future (spawn it where it is supervised). The future
    /// ends once the term has ended and its lease is released; dropping it aborts the
    /// duty without a release.
    pub fn pair(self) -> (TermHandle, impl Future<Output = ()> + Send + 'static) {
        m::describe();
        let (tx, rx) = watch::channel(Status::new());
        let shutdown = CancellationToken::new();
        let span =
            info_span!("elector", duty = %self.config.duty, replica = %self.config.replica_id);
        let control = Arc::new(Control::new(self.config.renew_interval));
        let runner = Runner {
            grid: Some(self.grid),
            labels: Labels::new(&self.config, Some(&self.group)),
            store: self.calls,
            config: self.config,
            duty: self.duty,
            status: tx,
            shutdown: shutdown.clone(),
            duty_runtime: None,
            control: control.clone(),
        };
        let handle = TermHandle {
            status: rx,
            shutdown,
            control,
        };
        (handle, runner.run_granted(self.grant).instrument(span))
    }
}

impl<C, F, Fut> Runner<C, F>
where
    C: TermCalls,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Leads the granted term at once (unless stopped before it started), then stops.
    async fn run_granted(self, grant: Grant) {
        self.started().await;
        self.observe_fence(grant.fence, false);
        if !self.shutdown.is_cancelled() {
            self.lead(grant.fence, grant.sent, &grant.token, self.config.lease)
                .await;
        }
        self.stopped();
    }
}

/// Controls a [`GrantedTerm`]: stop it, hurry it, read how it ended. Dropping it stops
/// the term gracefully (as [`stop`](Self::stop)).
#[derive(Debug)]
pub struct TermHandle {
    status: watch::Receiver<Status>,
    shutdown: CancellationToken,
    control: Arc<Control>,
}

impl TermHandle {
    /// Ends the term gracefully, without waiting: the duty is cancelled with its
    /// grace, then the lease released (the term ends with `TermEndReason::Shutdown`).
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Ends the term as [`stop`](Self::stop) does, the duty aborted at `deadline` if
    /// its grace would let it run longer; an earlier deadline given before stands.
    pub fn stop_by(&self, deadline: Instant) {
        self.control.hurry(deadline);
        self.shutdown.cancel();
    }

    /// How the term ended; `None` while it runs (or if it never led: stopped before it
    /// started).
    pub fn ended(&self) -> Option<TermEnd> {
        self.status.borrow().last_term.clone()
    }
}

impl Drop for TermHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
