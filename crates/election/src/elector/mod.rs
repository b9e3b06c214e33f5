//! The elector: campaign, lead, renew, step down, release.
//!
//! - this module: the [`Elector`] builder and what the campaign and the term share;
//! - `handle`: the [`ElectorHandle`] a caller keeps;
//! - `campaign`: ask for the lease, follow the holder, resolve unknown acquires;
//! - `term`: run the duty, renew, step down, release;
//! - `granted`: one term granted by someone else (a partition coordinator's claim),
//!   run without an elector: the same term code, no campaign;
//! - `rules`: every decision of the two, as pure, unit-tested functions.

mod campaign;
mod granted;
mod handle;
mod rules;
mod term;

pub use self::granted::{Grant, GrantedTerm, TermCalls, TermConfig, TermHandle};
pub use self::handle::ElectorHandle;
use self::handle::{Control, Worker};

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use crate::config::ElectorConfig;
use crate::error::StoreError;
use crate::fence::Fence;
use crate::grid::RenewGrid;
use crate::keys::DutyKeys;
use crate::leadership::Leadership;
use crate::metrics as m;
use crate::status::{Role, Status};
use crate::store::LeaseStore;

/// Logs one term's or one call's detail at `level` for a duty of its own, and at debug
/// for a partition's elector (one of many in a group, whose coordinator logs one line
/// per group event with counts instead, so that neither an outage nor a cold start of
/// 10,000 partitions prints a line for each).
macro_rules! detail {
    ($elector:expr, $level:ident, $($arg:tt)+) => {
        if $elector.labels.in_group() {
            ::tracing::debug!($($arg)+)
        } else {
            ::tracing::$level!($($arg)+)
        }
    };
}
pub(crate) use detail;

/// The error a duty may return; it is logged, counted and reported in the status.
pub type DutyError = Box<dyn std::error::Error + Send + Sync>;

/// What a duty returns. `Ok(())` ends the term normally (the lease is released and the
/// elector campaigns again); `Err` ends it as failed (released, then backoff).
pub type DutyResult = Result<(), DutyError>;

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
        let store = match config.min_replicas_acked {
            Some(replicas) => store.with_replica_acks(replicas, config.call_timeout / 2),
            None => store,
        };
        Self {
            store,
            config: Arc::new(config),
            duty,
            shutdown: CancellationToken::new(),
        }
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
        let keys = DutyKeys::new(&self.config.key_prefix, &self.config.duty);
        let control = Arc::new(Control::new(self.config.renew_interval));
        let runner = Runner {
            grid: None,
            labels: Labels::new(&self.config, None),
            store: Keyed {
                store: self.store,
                keys,
            },
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
    /// Whether the elector is one of a partition group's.
    fn in_group(&self) -> bool {
        !self.group.is_empty()
    }

    /// The labels of an elector configured by `c`, in `group` if it runs a partition's
    /// term.
    fn new(c: &ElectorConfig, group: Option<&str>) -> Self {
        Self {
            duty: c.duty.clone(),
            replica: c.replica_id.clone(),
            group: group.unwrap_or_default().to_owned(),
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

/// A lease store with the keys of one duty: the calls of an elector's terms.
struct Keyed<S> {
    store: S,
    keys: DutyKeys,
}

impl<S: LeaseStore> TermCalls for Keyed<S> {
    fn renew(
        &self,
        token: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        self.store.renew(&self.keys, token, lease)
    }

    fn release(&self, token: &str) -> impl Future<Output = Result<bool, StoreError>> + Send {
        self.store.release(&self.keys, token)
    }

    fn self_check(
        &self,
    ) -> impl Future<Output = Result<Vec<crate::store::BackendWarning>, StoreError>> + Send {
        self.store.self_check()
    }
}

/// What runs an elector's campaign and terms (`S`: [`Keyed`]), or one granted term
/// (`S`: the [`TermCalls`] of its grant).
struct Runner<S, F> {
    /// The store's calls.
    store: S,
    config: Arc<ElectorConfig>,
    /// Renewals fall on this grid when set (a partition group's terms renew together).
    grid: Option<RenewGrid>,
    duty: F,
    status: watch::Sender<Status>,
    shutdown: CancellationToken,
    labels: Labels,
    /// Where the duty runs when the elector has a runtime of its own.
    duty_runtime: Option<tokio::runtime::Handle>,
    control: Arc<Control>,
}

impl<S, F, Fut> Runner<Keyed<S>, F>
where
    S: LeaseStore,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    async fn run(self) {
        self.started().await;
        self.campaign().await;
        self.stopped();
    }
}

impl<S, F, Fut> Runner<S, F>
where
    S: TermCalls,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Exports the series and checks the backend, before the first campaign or term.
    async fn started(&self) {
        // Export the series from the start, so "nobody leads" sums to 0 rather than
        // to nothing, and `increase()` sees a replica's first term.
        gauge!(m::IS_LEADER, &self.labels.pair()).set(0.0);
        counter!(m::TERMS_STARTED, &self.labels.pair()).increment(0);
        self.self_check().await;
    }

    /// Reports the elector (or the granted term's runner) stopped.
    fn stopped(&self) {
        self.status.send_modify(|s| s.role = Role::Stopped);
        gauge!(m::IS_LEADER, &self.labels.pair()).set(0.0);
        detail!(self, info, "elector stopped");
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
        if late < rules::stall_threshold(self.config.renew_interval) {
            return;
        }
        histogram!(m::ELECTOR_STALL, &self.labels.pair()).record(late.as_secs_f64());
        self.status.send_modify(|s| s.stalls += 1);
        detail!(
            self,
            warn,
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
            detail!(
                self,
                warn,
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
        detail!(self, warn, op, error = %crate::ErrorChain(&e), "redis call failed");
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
            Ok(Err(e)) => debug!(error = %crate::ErrorChain(&e), "backend self-check unavailable"),
            Err(_) => debug!("backend self-check timed out"),
        }
    }
}
