//! The elector: campaign, lead, renew, step down, release.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::backoff::Backoff;
use crate::config::ElectorConfig;
use crate::error::StoreError;
use crate::fence::Fence;
use crate::grid::RenewGrid;
use crate::keys::{DutyKeys, new_token};
use crate::leadership::Leadership;
use crate::metrics as m;
use crate::status::{Role, Status, TermEnd, TermEndReason};
use crate::store::{Acquire, LeaseStore};

/// A wake-up at least this much later than asked is reported as a stall: a tenth of
/// the renew interval, at least 20 ms (less is scheduling noise on a busy machine).
fn stall_threshold(config: &ElectorConfig) -> Duration {
    (config.renew_interval / 10).max(Duration::from_millis(20))
}

/// A confirmed lease whose provable validity (from the call's send time, less the
/// safety margin) ends sooner than this is given back rather than led.
const MIN_VALIDITY: Duration = Duration::from_millis(1);

/// The error a duty may return; it is logged, counted and reported in the status.
pub type DutyError = Box<dyn std::error::Error + Send + Sync>;

/// What a duty returns. `Ok(())` ends the term normally (the lease is released and the
/// elector campaigns again); `Err` ends it as failed (released, then backoff).
pub type DutyResult = Result<(), DutyError>;

/// The elector has stopped; returned by [`ElectorHandle::wait_until_leader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the elector has stopped")]
pub struct ElectorStopped;

/// Campaigns for one duty and runs it while leading. Start it with [`Elector::spawn`].
///
/// The loop:
/// 1. **Campaign**: one atomic script takes the lease if free and issues a fence. On a
///    loss it learns the holder and the time left on its lease, sleeps until exactly
///    then (capped by the retry interval, plus a little jitter), and is woken at once
///    by a release notification.
/// 2. **Lead**: the duty runs as its own task with a [`Leadership`]. The elector renews
///    every renew interval; each call is capped by the time left on the lease. The
///    local deadline is `sent + lease - safety_margin` of the last successful call.
/// 3. **Step down** when renewal is refused, the deadline passes (even if a call never
///    returns), the duty ends, or on shutdown: cancel the duty, give it its grace
///    (never past the deadline; none at all if the lease may already be lost), abort
///    it, join it, and only then release the lease and notify followers.
pub struct Elector<S, F> {
    store: S,
    config: Arc<ElectorConfig>,
    duty: F,
    shutdown: CancellationToken,
    grant: Option<Grant>,
}

/// A lease already taken for this elector by someone else on its behalf (a partition
/// coordinator's batch claim): the elector leads that one term at once, without
/// campaigning, and stops when the term ends.
///
/// For Leasehold's own crates; no semver promise.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Grant {
    /// The term's fence.
    pub fence: Fence,
    /// When the call that took the lease was *sent*: the local deadline is anchored here.
    pub sent: Instant,
    /// The token the lease is held with (renewals and the release use it).
    pub token: String,
}

impl<S, F> std::fmt::Debug for Elector<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S, F, Fut> Elector<S, F>
where
    S: LeaseStore,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// An elector running `duty` whenever it leads.
    pub fn new(store: S, config: ElectorConfig, duty: F) -> Self {
        Self {
            store,
            config: Arc::new(config),
            duty,
            shutdown: CancellationToken::new(),
            grant: None,
        }
    }

    /// Leads the term of `grant` at once instead of campaigning, and stops once that
    /// term has ended (after the release). For Leasehold's own crates.
    #[doc(hidden)]
    pub fn granted(mut self, grant: Grant) -> Self {
        self.grant = Some(grant);
        self
    }

    /// Stops gracefully when `token` is cancelled (in addition to
    /// [`ElectorHandle::shutdown`]). The elector uses a child of it.
    pub fn shutdown_on(mut self, token: &CancellationToken) -> Self {
        self.shutdown = token.child_token();
        self
    }

    /// Spawns the elector on the current tokio runtime.
    ///
    /// The elector's renewals and deadline timer then share the runtime with the
    /// application: a task that blocks a worker (synchronous I/O, a CPU loop without
    /// `.await`) can hold them up until the lease is lost. The duty still sees the term
    /// end at its deadline ([`Leadership::check`]), and the stall is reported; to keep
    /// the lease through such stalls, use [`Elector::spawn_dedicated`].
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(self) -> ElectorHandle {
        let (handle, run) = self.pair();
        let task = tokio::spawn(run);
        *handle.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(Worker::Task(task));
        handle
    }

    /// Spawns the elector on a thread of its own: a small current-thread runtime that
    /// runs the elector loop, its renewals, deadline timer and cancellation, with its
    /// own Redis connections and release subscription ([`LeaseStore::detached`]). The
    /// duty still runs on the caller's runtime. A duty (or anything else) that blocks
    /// the application's runtime then cannot stall the renewals: the replica keeps its
    /// lease, and the term ends only if Redis is unreachable, refuses, or the duty
    /// returns.
    ///
    /// Costs one OS thread per elector; meant for a few important duties, not for
    /// thousands of partitions.
    ///
    /// # Errors
    /// If the operating system refuses the thread, or the runtime cannot be built.
    ///
    /// # Panics
    /// Outside a tokio runtime: the duty is spawned on the caller's.
    pub fn spawn_dedicated(self) -> std::io::Result<ElectorHandle> {
        let duty_runtime = tokio::runtime::Handle::current();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let name = format!("leasehold-{}", self.config.duty);
        let mut elector = self;
        elector.store = elector.store.detached();
        let (handle, run) = elector.build(Some(duty_runtime));
        let (done_tx, done_rx) = oneshot::channel();
        std::thread::Builder::new().name(name).spawn(move || {
            runtime.block_on(run);
            // Ends the store's connections and subscription with the elector.
            drop(runtime);
            let _ = done_tx.send(());
        })?;
        *handle.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(Worker::Thread(done_rx));
        Ok(handle)
    }

    /// The handle and the elector's future, for callers who spawn it themselves (for
    /// example into a `JoinSet` that supervises many electors). The future ends when
    /// the elector has stopped; dropping it stops the elector without a release.
    pub fn pair(self) -> (ElectorHandle, impl Future<Output = ()> + Send + 'static) {
        self.build(None)
    }

    /// The handle and the future; the duty is spawned on `duty_runtime` if given (the
    /// elector runs elsewhere), else on the runtime that runs the future.
    fn build(
        self,
        duty_runtime: Option<tokio::runtime::Handle>,
    ) -> (ElectorHandle, impl Future<Output = ()> + Send + 'static) {
        m::describe();
        let (tx, rx) = watch::channel(Status::new());
        let shutdown = self.shutdown.clone();
        let span =
            info_span!("elector", duty = %self.config.duty, replica = %self.config.replica_id);
        let keys = match &self.config.group {
            Some(group) => DutyKeys::grouped(&self.config.key_prefix, group, &self.config.duty),
            None => DutyKeys::new(&self.config.key_prefix, &self.config.duty),
        };
        let grid = self
            .config
            .renew_grid
            .map(|epoch| RenewGrid::new(epoch, self.config.renew_interval));
        let control = Arc::new(Control::default());
        let runner = Runner {
            keys,
            grid,
            grant: self.grant,
            labels: Labels::new(&self.config),
            store: self.store,
            config: self.config,
            duty: self.duty,
            status: tx,
            shutdown: self.shutdown,
            duty_runtime,
            control: control.clone(),
        };
        let handle = ElectorHandle {
            status: rx,
            shutdown,
            task: Mutex::new(None),
            control,
        };
        (handle, runner.run().instrument(span))
    }
}

/// Controls a running elector. Dropping it stops the elector gracefully in the
/// background (the duty is cancelled and the lease released); call
/// [`ElectorHandle::shutdown`] to wait for that.
#[derive(Debug)]
pub struct ElectorHandle {
    status: watch::Receiver<Status>,
    shutdown: CancellationToken,
    task: Mutex<Option<Worker>>,
    control: Arc<Control>,
}

/// Requests from the handle that end a term without a plain shutdown.
#[derive(Debug, Default)]
struct Control {
    /// Why the shutdown that follows ends the term (default: `Shutdown`).
    stop_reason: Mutex<Option<TermEndReason>>,
    /// Bumped by every `step_down()`; a term started before the bump ends.
    step_downs: watch::Sender<u64>,
}

/// How a spawned elector runs.
#[derive(Debug)]
enum Worker {
    /// A task on the caller's runtime ([`Elector::spawn`]).
    Task(JoinHandle<()>),
    /// A thread of its own ([`Elector::spawn_dedicated`]): fires once it has finished.
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
    /// [`ElectorStopped`] if the elector stops first.
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches the status.
    pub async fn wait_until_leader(&self) -> Result<Fence, ElectorStopped> {
        let mut rx = self.status.clone();
        let status = rx
            .wait_for(|s| s.is_leader() || s.role == Role::Stopped)
            .await
            .map_err(|_| ElectorStopped)?;
        status.fence().ok_or(ElectorStopped)
    }

    /// The token that stops this elector gracefully when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops like a shutdown, but the term ends with `reason` (in the status, logs and
    /// metrics). For Leasehold's own crates: a partition removed, handed off, drained.
    #[doc(hidden)]
    pub fn stop_because(&self, reason: TermEndReason) {
        *self
            .control
            .stop_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reason);
        self.shutdown.cancel();
    }

    /// Steps down voluntarily so that another replica leads: the current term ends
    /// ([`TermEndReason::SteppedDown`]: the duty is cancelled with its grace, then the
    /// lease is released and followers are woken), and this elector waits one retry
    /// interval before it campaigns again (a follower woken by the release leads within
    /// milliseconds; alone, this replica leads again after that wait). Returns once
    /// the term has ended and the lease is released; `Ok(false)` if it was not leading.
    ///
    /// # Errors
    /// [`ElectorStopped`] if the elector stops first.
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// Dropping the future does not cancel the step-down, only the wait for it.
    pub async fn step_down(&self) -> Result<bool, ElectorStopped> {
        let Some(fence) = self.status.borrow().fence() else {
            return Ok(false);
        };
        self.control.step_downs.send_modify(|n| *n += 1);
        let mut rx = self.status.clone();
        rx.wait_for(|s| {
            s.role == Role::Stopped || s.last_term.as_ref().is_some_and(|t| t.fence == fence)
        })
        .await
        .map_err(|_| ElectorStopped)?;
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
    pub async fn shutdown(self) {
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
}

impl Drop for ElectorHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Metric labels: `duty`, `replica`, and `group` (empty for a duty outside a
/// partition group), so a partition name in two groups, or a partition named like a
/// duty, never share a series.
#[derive(Debug, Clone)]
struct Labels {
    duty: String,
    replica: String,
    group: String,
}

impl Labels {
    fn new(c: &ElectorConfig) -> Self {
        Self {
            duty: c.duty.clone(),
            replica: c.replica_id.clone(),
            group: c.group.clone().unwrap_or_default(),
        }
    }

    fn pair(&self) -> [(&'static str, String); 3] {
        [
            ("duty", self.duty.clone()),
            ("replica", self.replica.clone()),
            ("group", self.group.clone()),
        ]
    }

    fn with(&self, key: &'static str, value: &str) -> [(&'static str, String); 4] {
        let [a, b, c] = self.pair();
        [a, b, c, (key, value.to_owned())]
    }
}

struct Runner<S, F> {
    store: S,
    config: Arc<ElectorConfig>,
    keys: DutyKeys,
    /// Renewals fall on this grid when set (see [`ElectorConfig::renew_grid`]).
    grid: Option<RenewGrid>,
    /// A term to lead at once, instead of campaigning (see [`Elector::granted`]).
    grant: Option<Grant>,
    duty: F,
    status: watch::Sender<Status>,
    shutdown: CancellationToken,
    labels: Labels,
    /// Where the duty runs when the elector has a runtime of its own.
    duty_runtime: Option<tokio::runtime::Handle>,
    control: Arc<Control>,
}

impl<S, F, Fut> Runner<S, F>
where
    S: LeaseStore,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    async fn run(mut self) {
        // Export the series from the start, so "nobody leads" sums to 0 rather than
        // to nothing, and `increase()` sees a replica's first term.
        gauge!(m::IS_LEADER, &self.labels.pair()).set(0.0);
        counter!(m::TERMS_STARTED, &self.labels.pair()).increment(0);
        self.self_check().await;
        if let Some(grant) = self.grant.take() {
            self.observe_fence(grant.fence, false);
            if !self.shutdown.is_cancelled() {
                self.lead(grant.fence, grant.sent, &grant.token, self.config.lease)
                    .await;
            }
        } else {
            self.campaign().await;
        }
        self.status.send_modify(|s| s.role = Role::Stopped);
        gauge!(m::IS_LEADER, &self.labels.pair()).set(0.0);
        info!("elector stopped");
    }

    /// Campaigns, leads and campaigns again until shut down.
    async fn campaign(&self) {
        let notify = self.store.release_notifier(&self.keys);
        let cfg = self.config.clone();
        let mut backoff = Backoff::new(cfg.backoff_initial, cfg.backoff_max);
        let mut token = new_token(&cfg.replica_id);
        // Tokens (and send times) of acquires whose outcome is unknown and whose release
        // is not confirmed yet: each may hold the lease with nobody leading. Their
        // release is on its way; shutdown waits for it to be confirmed.
        let mut unresolved: Vec<(String, Instant)> = Vec::new();
        let mut campaign_start = Instant::now();
        while !self.shutdown.is_cancelled() {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let floor = Fence(self.status.borrow().highest_fence.0 + 1);
            let sent = Instant::now();
            // Shutdown does not wait for an acquire in flight: it is resolved below.
            let result = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => None,
                r = timeout(
                    cfg.call_timeout,
                    self.store.acquire(&self.keys, &token, cfg.lease, floor),
                ) => Some(r.unwrap_or(Err(StoreError::Timeout(cfg.call_timeout)))),
            };
            let Some(result) = result else {
                unresolved.push((token, sent));
                break;
            };
            match result {
                Ok(Acquire::Won { fence, regressed }) => {
                    backoff.reset();
                    self.observe_fence(fence, regressed);
                    histogram!(m::TIME_TO_LEADER, &self.labels.pair())
                        .record(campaign_start.elapsed().as_secs_f64());
                    let end = self.lead(fence, sent, &token, cfg.lease).await;
                    token = new_token(&cfg.replica_id);
                    campaign_start = Instant::now();
                    let pause = match end.reason {
                        _ if self.shutdown.is_cancelled() => break,
                        TermEndReason::Shutdown => break,
                        // Let a follower, woken by the release, take over.
                        TermEndReason::SteppedDown => cfg.retry_interval,
                        TermEndReason::DutyReturned => cfg.backoff_initial,
                        TermEndReason::DutyFailed(_)
                        | TermEndReason::DutyPanicked(_)
                        | TermEndReason::BackendError(_) => backoff.next_delay(),
                        _ => Duration::ZERO,
                    };
                    if !pause.is_zero() && self.sleep_unless_shutdown(pause).await {
                        break;
                    }
                }
                // An earlier call with this token (a store's retry) took the lease and
                // its reply was lost. Lead only for what is provable from this call's
                // send time; if that is too little, give the lease back.
                Ok(Acquire::Confirmed { fence, remaining }) => {
                    backoff.reset();
                    self.observe_fence(fence, false);
                    let provable = sent + remaining.saturating_sub(cfg.safety_margin);
                    if provable > Instant::now() + MIN_VALIDITY {
                        histogram!(m::TIME_TO_LEADER, &self.labels.pair())
                            .record(campaign_start.elapsed().as_secs_f64());
                        let end = self.lead(fence, sent, &token, remaining).await;
                        if self.shutdown.is_cancelled() {
                            break;
                        }
                        if matches!(end.reason, TermEndReason::SteppedDown)
                            && self.sleep_unless_shutdown(cfg.retry_interval).await
                        {
                            break;
                        }
                        campaign_start = Instant::now();
                    } else if !self.abandon(&token, cfg.call_timeout).await {
                        unresolved.push((token.clone(), sent));
                    }
                    token = new_token(&cfg.replica_id);
                }
                // The store lost its data (or another server took over its keys) less
                // than a lease ago: a lease granted before may still be believed valid
                // by its holder. Nobody leads until the store says the lease is over.
                Ok(Acquire::Recovering { wait }) => {
                    backoff.reset();
                    let first = self.status.send_if_modified(|s| {
                        let role = Role::Follower { leader: None };
                        let changed = s.role != role || s.last_error.is_some();
                        s.role = role;
                        s.last_error = None;
                        changed
                    });
                    if first {
                        info!(
                            wait_ms = wait.as_millis(),
                            "redis lost its data (or another server took over) less than a \
                             lease ago: no lease is granted until the old ones have expired"
                        );
                    }
                    let jitter = cfg.follower_jitter.mul_f64(rand::random::<f64>());
                    // From now, not from `sent`: the wait was measured when the store
                    // answered, which is later.
                    if self.sleep_unless_shutdown(wait + jitter).await {
                        break;
                    }
                }
                Ok(Acquire::Lost {
                    holder,
                    remaining,
                    fence,
                }) => {
                    backoff.reset();
                    self.observe_fence(fence, false);
                    self.status.send_if_modified(|s| {
                        let role = Role::Follower {
                            leader: Some(holder.clone()),
                        };
                        let changed = s.role != role || s.last_error.is_some();
                        s.role = role;
                        s.last_error = None;
                        changed
                    });
                    let wait = remaining.map_or(cfg.retry_interval, |r| r.min(cfg.retry_interval));
                    let jitter = cfg.follower_jitter.mul_f64(rand::random::<f64>());
                    let recheck = sent + wait + jitter;
                    tokio::select! {
                        () = self.shutdown.cancelled() => break,
                        () = &mut notified => debug!("woken by a release notification"),
                        () = sleep_until(recheck) => self.woke(recheck, "follower re-check"),
                    }
                }
                Err(e) => {
                    // After a retryable error the acquire may have taken the lease with
                    // this token, and nobody would lead it: resolve it (release), and
                    // campaign on with a new token, never re-extending that lease.
                    let unknown = e.is_retryable();
                    self.record_error(e, "acquire");
                    if unknown {
                        if !self.abandon(&token, cfg.call_timeout).await {
                            unresolved.push((token, sent));
                        }
                        token = new_token(&cfg.replica_id);
                    }
                    self.status.send_if_modified(|s| {
                        let role = Role::Follower { leader: None };
                        let changed = s.role != role;
                        s.role = role;
                        changed
                    });
                    if self.sleep_unless_shutdown(backoff.next_delay()).await {
                        break;
                    }
                }
            }
            // A lease an old acquire may have taken has expired two leases after it
            // was sent (its request took less than a lease to arrive, or nothing works).
            unresolved.retain(|(_, at)| at.elapsed() < cfg.lease * 2);
        }
        self.resolve_at_shutdown(unresolved).await;
    }

    /// Releases whatever an acquire with `token` of unknown outcome may hold, waiting
    /// up to `limit` for the store to confirm; `true` once confirmed.
    async fn abandon(&self, token: &str, limit: Duration) -> bool {
        match timeout(limit, self.store.abandon(&self.keys, token)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                debug!(error = %e, "release after an unanswered acquire not confirmed yet");
                false
            }
            Err(_) => {
                debug!("release after an unanswered acquire not confirmed yet");
                false
            }
        }
    }

    /// At shutdown: waits up to one lease for the store to confirm that no unresolved
    /// token holds the lease (on a slow link the confirmation takes a round trip longer
    /// than the call timeout). Past that, any such lease expires on its own.
    async fn resolve_at_shutdown(&self, tokens: Vec<(String, Instant)>) {
        if tokens.is_empty() {
            return;
        }
        let limit = self.config.lease;
        let attempts = tokens.iter().map(|(t, _)| self.abandon(t, limit));
        let confirmed = futures::future::join_all(attempts).await;
        let left = confirmed.iter().filter(|ok| !**ok).count();
        if left > 0 {
            warn!(
                left,
                "could not confirm the release of leases that unanswered acquires may hold; \
                 they expire within one lease"
            );
        }
    }

    /// Leads one term whose lease is valid for `validity` from `sent` (the send time of
    /// the call that took or confirmed it); returns once the duty has ended and the
    /// lease is released.
    async fn lead(&self, fence: Fence, sent: Instant, token: &str, validity: Duration) -> TermEnd {
        let cfg = &self.config;
        let mut deadline = sent + validity.saturating_sub(cfg.safety_margin);
        let cancel = CancellationToken::new();
        let leadership =
            Leadership::new(fence, &cfg.replica_id, &cfg.duty, cancel.clone(), deadline);
        let span = info_span!("duty", fence = fence.0);
        let work = (self.duty)(leadership.clone()).instrument(span);
        let mut duty = AbortOnDropHandle::new(match &self.duty_runtime {
            Some(runtime) => runtime.spawn(work),
            None => tokio::spawn(work),
        });
        let since = Instant::now();
        gauge!(m::IS_LEADER, &self.labels.pair()).set(1.0);
        gauge!(m::LEADER_FENCE, "duty" => cfg.duty.clone(), "group" => self.labels.group.clone())
            .set(fence.0 as f64);
        gauge!(m::VALIDITY_LEFT, &self.labels.pair()).set(
            deadline
                .saturating_duration_since(Instant::now())
                .as_secs_f64(),
        );
        counter!(m::TERMS_STARTED, &self.labels.pair()).increment(1);
        // Before the status says "leader": a `step_down()` that saw this term's fence
        // bumps the counter after this point, so the term sees it.
        let mut step_downs = self.control.step_downs.subscribe();
        step_downs.mark_unchanged();
        // Gauges first, then the status: whoever sees the status sees the gauges too.
        self.status.send_modify(|s| {
            s.role = Role::Leader { fence, since };
            s.last_error = None;
        });
        info!(fence = fence.0, "became leader");

        // A confirmed lease (less than a whole lease left) is renewed at once.
        let mut next_renew = if validity < cfg.lease {
            Instant::now()
        } else {
            self.next_renew(sent)
        };
        let mut duty_done = false;
        let reason = loop {
            tokio::select! {
                biased;
                () = sleep_until(deadline) => {
                    self.woke(deadline, "deadline");
                    break TermEndReason::DeadlinePassed;
                }
                () = self.shutdown.cancelled() => break self.stop_reason(),
                Ok(()) = step_downs.changed() => break TermEndReason::SteppedDown,
                joined = &mut duty => {
                    duty_done = true;
                    break match joined {
                        Ok(Ok(())) => TermEndReason::DutyReturned,
                        Ok(Err(e)) => TermEndReason::DutyFailed(e.to_string().into()),
                        Err(e) => TermEndReason::DutyPanicked(panic_message(e).into()),
                    };
                }
                () = sleep_until(next_renew) => {
                    self.woke(next_renew, "renewal");
                    let sent = Instant::now();
                    let limit = cfg.call_timeout.min(deadline.saturating_duration_since(sent));
                    let renewed = tokio::select! {
                        biased;
                        () = self.shutdown.cancelled() => break self.stop_reason(),
                        r = timeout(limit, self.store.renew(&self.keys, token, cfg.lease)) => {
                            r.unwrap_or(Err(StoreError::Timeout(limit)))
                        }
                    };
                    match renewed {
                        Ok(true) => {
                            let extended = sent + cfg.lease - cfg.safety_margin;
                            // A reply processed after the deadline (a stalled elector)
                            // does not revive the term: the duty may have seen it end.
                            if !leadership.extend_deadline(extended) {
                                break TermEndReason::DeadlinePassed;
                            }
                            deadline = extended;
                            next_renew = self.next_renew(sent);
                            histogram!(m::RENEW_RTT, &self.labels.pair()).record(sent.elapsed().as_secs_f64());
                            gauge!(m::VALIDITY_LEFT, &self.labels.pair())
                                .set(deadline.saturating_duration_since(Instant::now()).as_secs_f64());
                            if self.status.borrow().last_error.is_some() {
                                self.status.send_modify(|s| s.last_error = None);
                            }
                        }
                        Ok(false) => break TermEndReason::RenewalRefused,
                        Err(e) if !e.is_retryable() => {
                            self.record_error(e.clone(), "renew");
                            break TermEndReason::BackendError(e);
                        }
                        Err(e) => {
                            self.record_error(e, "renew");
                            next_renew = Instant::now() + (cfg.renew_interval / 4).max(Duration::from_millis(1));
                        }
                    }
                }
            }
        };
        leadership.set_end_reason(&reason);
        self.step_down(fence, reason, duty, duty_done, &cancel, deadline, token)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn step_down(
        &self,
        fence: Fence,
        reason: TermEndReason,
        mut duty: AbortOnDropHandle<DutyResult>,
        duty_done: bool,
        cancel: &CancellationToken,
        deadline: Instant,
        token: &str,
    ) -> TermEnd {
        let cfg = &self.config;
        // From here on this replica does not consider itself leader: the duty's token
        // fires first, then the status and gauges say so.
        cancel.cancel();
        gauge!(m::IS_LEADER, &self.labels.pair()).set(0.0);
        gauge!(m::VALIDITY_LEFT, &self.labels.pair()).set(0.0);
        self.status
            .send_modify(|s| s.role = Role::Follower { leader: None });
        let lease_lost = reason.lease_may_be_lost()
            || matches!(
                &reason,
                TermEndReason::BackendError(StoreError::WrongType(_))
            );
        let mut grace_overrun = false;
        if !duty_done {
            let now = Instant::now();
            let grace_end = if lease_lost {
                now
            } else {
                (now + cfg.grace).min(deadline)
            };
            tokio::select! {
                biased;
                _ = &mut duty => {}
                () = sleep_until(grace_end) => {
                    grace_overrun = grace_end > now;
                    duty.abort();
                    let _ = (&mut duty).await;
                }
            }
            if grace_overrun {
                counter!(m::GRACE_OVERRUNS, &self.labels.pair()).increment(1);
                warn!(fence = fence.0, "duty outran its grace and was aborted");
            }
        }
        // The duty has provably ended (joined): only now give the lease back.
        let released = if matches!(reason, TermEndReason::RenewalRefused) {
            false
        } else {
            match timeout(cfg.call_timeout, self.store.release(&self.keys, token)).await {
                Ok(Ok(released)) => released,
                Ok(Err(e)) => {
                    self.record_error(e, "release");
                    false
                }
                Err(_) => {
                    self.record_error(StoreError::Timeout(cfg.call_timeout), "release");
                    false
                }
            }
        };
        counter!(m::TERMS_ENDED, &self.labels.with("reason", reason.label())).increment(1);
        match &reason {
            TermEndReason::Shutdown
            | TermEndReason::DutyReturned
            | TermEndReason::SteppedDown
            | TermEndReason::Removed
            | TermEndReason::HandedOff
            | TermEndReason::Drained => {
                info!(fence = fence.0, %reason, released, "stepped down");
            }
            _ => warn!(fence = fence.0, %reason, released, "stepped down"),
        }
        let end = TermEnd {
            fence,
            reason,
            grace_overrun,
            released,
        };
        self.status.send_modify(|s| s.last_term = Some(end.clone()));
        end
    }

    /// When to renew after a call sent at `sent`: one renew interval later, rounded
    /// down onto the renew grid if one is configured (never later, so always safe), so
    /// that many electors of one process renew together and can share a round trip.
    fn next_renew(&self, sent: Instant) -> Instant {
        let due = sent + self.config.renew_interval;
        self.grid.map_or(due, |grid| grid.floor(due))
    }

    /// Why a shutdown ends the term: `Shutdown`, or what `stop_because` said.
    fn stop_reason(&self) -> TermEndReason {
        self.control
            .stop_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or(TermEndReason::Shutdown)
    }

    /// Returns true if shutdown was requested while sleeping.
    async fn sleep_unless_shutdown(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        tokio::select! {
            () = self.shutdown.cancelled() => true,
            () = sleep_until(until) => {
                self.woke(until, "backoff");
                false
            }
        }
    }

    /// Reports a wake-up far later than asked (`asked` was the timer's instant): the
    /// elector's runtime or thread was blocked. A histogram sample, a warning and the
    /// status' `stalls` count.
    fn woke(&self, asked: Instant, what: &'static str) {
        let late = Instant::now().saturating_duration_since(asked);
        if late < stall_threshold(&self.config) {
            return;
        }
        histogram!(m::ELECTOR_STALL, &self.labels.pair()).record(late.as_secs_f64());
        self.status.send_modify(|s| s.stalls += 1);
        warn!(
            late_ms = u64::try_from(late.as_millis()).unwrap_or(u64::MAX),
            timer = what,
            "the elector woke up late: its runtime was blocked (a task that does not \
             yield?); Elector::spawn_dedicated keeps renewals off the application's runtime"
        );
    }

    fn observe_fence(&self, fence: Fence, regressed: bool) {
        let highest = self.status.borrow().highest_fence;
        let regression = regressed || fence < highest;
        if regression {
            counter!(m::FENCE_REGRESSIONS, &self.labels.pair()).increment(1);
            warn!(
                fence = fence.0,
                highest = highest.0,
                "fence regression: the store's fence counter was behind a fence seen before \
                 (did Redis lose data?)"
            );
        }
        self.status.send_if_modified(|s| {
            let changed = fence > s.highest_fence || regression;
            s.highest_fence = s.highest_fence.max(fence);
            if regression {
                s.fence_regressions += 1;
            }
            changed
        });
        gauge!(m::LEADER_FENCE, "duty" => self.labels.duty.clone(), "group" => self.labels.group.clone()).set(fence.0 as f64);
    }

    fn record_error(&self, e: StoreError, op: &'static str) {
        let [a, b, c] = self.labels.pair();
        let labels = [
            a,
            b,
            c,
            ("op", op.to_owned()),
            ("kind", e.kind().to_owned()),
        ];
        counter!(m::REDIS_ERRORS, &labels).increment(1);
        warn!(op, error = %e, "redis call failed");
        self.status.send_modify(|s| s.last_error = Some(e));
    }

    async fn self_check(&self) {
        match timeout(self.config.call_timeout, self.store.self_check()).await {
            Ok(Ok(warnings)) => {
                // The store logs them once (a process may run thousands of electors);
                // each elector reports them in its status.
                for w in &warnings {
                    debug!(warning = %w, "backend self-check");
                }
                self.status.send_modify(|s| s.warnings = warnings);
            }
            Ok(Err(e)) => debug!(error = %e, "backend self-check unavailable"),
            Err(_) => debug!("backend self-check timed out"),
        }
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    if e.is_cancelled() {
        return "cancelled".to_owned();
    }
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}
