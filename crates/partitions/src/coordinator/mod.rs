//! The coordinator: the replica's pure decision state machine
//! ([`ReplicaMachine`](crate::replica::ReplicaMachine)), the driver that performs its
//! actions ([`driver`]), one granted term's runner per owned partition inside a
//! `JoinSet` ([`runners`]), the batch between them and the terms ([`batch`]), and one
//! log line per group event ([`logs`]).

mod batch;
mod driver;
mod handoff;
mod logs;
mod runners;
pub(crate) mod warm;

pub use self::warm::Prepare;
use self::warm::PrepareFn;

use std::future::Future;
use std::sync::atomic::AtomicU64;
#[cfg(any(test, feature = "testing"))]
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use leasehold_election::{DutyResult, Fence};
use metrics::counter;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

use self::driver::{Driver, Parts, Running};
use crate::config::GroupConfig;
use crate::error::{PartitionsError, STOPPED};
use crate::keys::GroupKeys;
use crate::metrics as m;
use crate::ownership::Ownership;
use crate::store::GroupStore;
use crate::view::GroupView;

/// Spreads a group's partitions over every replica of the group; start it with
/// [`Coordinator::spawn`].
///
/// The callback runs while this replica owns a partition, with the partition name and
/// the term's [`Ownership`] (the duty's `Leadership`: fence, deadline, cancellation;
/// plus hand-off state, load reports and why the term ended); it is cancelled (with a
/// grace bounded by the lease) when ownership ends.
pub struct Coordinator<B, F> {
    store: B,
    config: GroupConfig,
    callback: Arc<F>,
    shutdown: CancellationToken,
    seed: Option<u64>,
    prepare: Option<PrepareFn>,
}

impl<B, F> std::fmt::Debug for Coordinator<B, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<B, F, Fut> Coordinator<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// A coordinator for this replica.
    pub fn new(store: B, config: GroupConfig, callback: F) -> Self {
        let store = match config.min_replicas_acked {
            Some(replicas) => store.with_replica_acks(replicas, config.renew_interval / 4),
            None => store,
        };
        Self {
            store,
            config,
            callback: Arc::new(callback),
            shutdown: CancellationToken::new(),
            seed: None,
            prepare: None,
        }
    }

    /// Runs `prepare` when another replica is about to hand this one a partition in a
    /// warm move (the giver's
    /// [`GroupConfigBuilder::prepare_moves`](crate::GroupConfigBuilder::prepare_moves)):
    /// warm a cache, open a connection, load what the partition needs, without owning
    /// it yet. The giver keeps the partition until `prepare` returns (this replica then
    /// says it is ready) or until [`Prepare::within`] has passed (`prepare` is then
    /// dropped, and the move goes on without waiting for it); then it hands the
    /// partition over, named for this replica, which claims it. Whatever was prepared
    /// belongs to the callback: the partition's own callback runs when the term
    /// starts, as for any move, and a move that goes elsewhere (this replica had no
    /// room by then, or the giver's term ended another way) leaves it unused.
    ///
    /// Without it, this replica answers every request to prepare at once.
    ///
    /// ```no_run
    /// # use leasehold_partitions::{Coordinator, GroupConfig, MemoryGroupStore};
    /// # async fn demo() {
    /// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
    ///     .build()
    ///     .unwrap();
    /// let handle = Coordinator::new(MemoryGroupStore::new(), config, |tenant, lead| async move {
    ///     lead.cancelled().await;
    ///     Ok(())
    /// })
    /// .on_prepare(|job| async move {
    ///     // Warm this tenant's cache before its current owner lets go of it.
    ///     println!("preparing {} (from {})", job.partition, job.from);
    /// })
    /// .spawn();
    /// # drop(handle);
    /// # }
    /// ```
    pub fn on_prepare<P, PFut>(mut self, prepare: P) -> Self
    where
        P: Fn(Prepare) -> PFut + Send + Sync + 'static,
        PFut: Future<Output = ()> + Send + 'static,
    {
        self.prepare = Some(Arc::new(move |job| Box::pin(prepare(job))));
        self
    }

    /// Draws this coordinator's random numbers (session tokens, hand-off picks) from
    /// `seed`, so that a simulation replays exactly. With the `testing` feature.
    #[cfg(any(test, feature = "testing"))]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Also stops gracefully when `token` is cancelled.
    pub fn shutdown_on(mut self, token: &CancellationToken) -> Self {
        self.shutdown = token.child_token();
        self
    }

    /// Spawns the coordinator on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(self) -> CoordinatorHandle<B> {
        m::describe();
        let keys = Arc::new(GroupKeys::new(&self.config.key_prefix, &self.config.group));
        let (view_tx, view_rx) = watch::channel(GroupView {
            settling: true,
            ..GroupView::default()
        });
        let span =
            info_span!("partitions", group = %self.config.group, replica = %self.config.replica_id);
        let epoch = Instant::now();
        let roster_bytes = Arc::new(AtomicU64::new(0));
        let (leave_by, leave_by_rx) = watch::channel(None);
        let running = Running::default();
        let replica: Arc<str> = self.config.replica_id.as_str().into();
        // The terms' settings: the configuration was checked when it was built, and
        // cannot change since.
        let first = self.config.partitions.first().unwrap_or(&self.config.group);
        let task = match self.config.terms(first, epoch) {
            Ok(template) => {
                let driver = Driver::new(Parts {
                    store: self.store.clone(),
                    config: self.config,
                    template,
                    callback: self.callback,
                    view: view_tx,
                    shutdown: self.shutdown.clone(),
                    leave_by: leave_by_rx,
                    epoch,
                    seed: self.seed,
                    roster_bytes: roster_bytes.clone(),
                    prepare: self.prepare,
                    running: running.clone(),
                });
                tokio::spawn(driver.run().instrument(span))
            }
            Err(e) => {
                warn!(error = %crate::ErrorChain(&e), "invalid group configuration; not joining");
                view_tx.send_modify(|v| v.error = Some(PartitionsError::Config(e.into())));
                tokio::spawn(async move { drop(view_tx) })
            }
        };
        CoordinatorHandle {
            inner: Arc::new(HandleInner {
                view: view_rx,
                shutdown: self.shutdown,
                leave_by,
                task: Mutex::new(Some(task)),
                store: self.store,
                keys,
                roster_bytes,
                running,
                replica,
            }),
        }
    }
}

/// Controls a running coordinator. Cheap to clone (its clones share the coordinator),
/// so it can live in an application's shared state (an `Arc`, axum's `State`).
/// Dropping the last clone stops the coordinator gracefully in the background; call
/// [`CoordinatorHandle::shutdown`] to wait for that.
#[derive(Debug)]
pub struct CoordinatorHandle<B> {
    inner: Arc<HandleInner<B>>,
}

impl<B> Clone for CoordinatorHandle<B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

#[derive(Debug)]
struct HandleInner<B> {
    view: watch::Receiver<GroupView>,
    shutdown: CancellationToken,
    /// The instant a shutdown must be over by, if one was given.
    leave_by: watch::Sender<Option<Instant>>,
    task: Mutex<Option<JoinHandle<()>>>,
    store: B,
    keys: Arc<GroupKeys>,
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    roster_bytes: Arc<AtomicU64>,
    running: Running,
    replica: Arc<str>,
}

impl<B> Drop for HandleInner<B> {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl<B: GroupStore> CoordinatorHandle<B> {
    /// A receiver of changes of [`status`](Self::status).
    pub fn subscribe(&self) -> watch::Receiver<GroupView> {
        self.inner.view.clone()
    }

    /// This replica's view of its group now: what it owns, its share, its readiness,
    /// the last error. Local and cheap (no I/O). For the whole group as Redis holds it
    /// (every replica's partitions and addresses), read
    /// [`admin().status()`](crate::GroupAdmin::status).
    pub fn status(&self) -> GroupView {
        self.inner.view.borrow().clone()
    }

    /// Whether the coordinator still runs (it stops after a shutdown, or if its task
    /// ended): for a liveness probe (`/livez`).
    pub fn is_running(&self) -> bool {
        self.inner.view.has_changed().is_ok()
    }

    /// Whether this replica is ready in its group's sense, for a readiness probe
    /// (`/readyz`): admitted, settled, not drained, not leaving, and holding at least
    /// its floor share ([`GroupView::readiness`]). An orchestrator that replaces the
    /// next pod of a rolling deploy only once this one is ready moves each partition
    /// about once per deploy, and never crowds them onto the last old pod.
    ///
    /// ```no_run
    /// # use leasehold_partitions::{CoordinatorHandle, MemoryGroupStore};
    /// # fn probe(handle: &CoordinatorHandle<MemoryGroupStore>) -> (u16, String) {
    /// match handle.readiness() {
    ///     Ok(()) => (200, "ready".to_owned()),
    ///     Err(why) => (503, why.to_string()),
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`NotReady`](crate::NotReady), saying why not.
    pub fn readiness(&self) -> Result<(), crate::NotReady> {
        if !self.is_running() {
            return Err(crate::NotReady::Stopped);
        }
        if self.inner.shutdown.is_cancelled() {
            return Err(crate::NotReady::Leaving);
        }
        self.inner.view.borrow().readiness()
    }

    /// The fence of this replica's running term of `partition`, if it owns it now: for
    /// a request handler's "is it still mine?" before it serves a request. Local and
    /// cheap (a map lookup and the term's deadline; no I/O, no await), so it can run on
    /// every request. `None` once the term has ended, locally (its deadline passed, it
    /// was cancelled) even before its callback has returned.
    ///
    /// A route a client holds ([`Router`](crate::Router)) is a hint; this is the truth
    /// for this replica. Pass the fence on with the work (a fenced write) to make a
    /// write of a term that ends meanwhile fail instead of landing.
    ///
    /// ```no_run
    /// # use leasehold_partitions::{CoordinatorHandle, MemoryGroupStore};
    /// # fn handle(coordinator: &CoordinatorHandle<MemoryGroupStore>, tenant: &str) -> u16 {
    /// match coordinator.owns(tenant) {
    ///     Some(fence) => {
    ///         // serve it, writing with `fence`
    ///         # let _ = fence;
    ///         200
    ///     }
    ///     None => {
    ///         coordinator.misrouted(tenant); // counted; redirect to the owner
    ///         421
    ///     }
    /// }
    /// # }
    /// ```
    pub fn owns(&self, partition: &str) -> Option<Fence> {
        let lead = self.inner.running.get(partition)?;
        (!lead.is_cancelled()).then(|| lead.fence())
    }

    /// Counts a request for `partition` that reached this replica although it does not
    /// own it (the `leasehold_partition_misrouted_requests_total` counter), for a
    /// handler that answers it with a redirect to the owner (see
    /// [`owns`](Self::owns)). A few during moves are expected: a client's route lags a
    /// move by the time its notice takes to arrive.
    pub fn misrouted(&self, partition: &str) {
        debug!(
            partition,
            "a request for a partition this replica does not own"
        );
        counter!(
            m::MISROUTED,
            "group" => self.inner.keys.group.clone(),
            "replica" => self.inner.replica.to_string()
        )
        .increment(1);
    }

    /// The group's admin on this coordinator's store: its status
    /// ([`GroupAdmin::status`](crate::GroupAdmin::status)), moves, partitions, drains.
    pub fn admin(&self) -> crate::GroupAdmin<B> {
        crate::GroupAdmin::from_parts(self.inner.store.clone(), (*self.inner.keys).clone())
    }

    /// Bytes of roster this coordinator's group ticks have received since it started:
    /// what the `leasehold_group_roster_bytes_total` counter counts (a tick's reply
    /// carries the roster only when it changed; approximately, per member, its replica
    /// id's and state's lengths plus 8 bytes for each of its four integer fields, plus
    /// the roster version's length). A cheap read of a shared counter, for tools that
    /// install no metrics recorder (the bench's replica processes). With the `testing`
    /// feature.
    #[cfg(any(test, feature = "testing"))]
    pub fn roster_bytes_received(&self) -> u64 {
        self.inner.roster_bytes.load(Ordering::Relaxed)
    }

    /// Waits until this replica has been admitted to its group (for readiness in the
    /// group's sense, holding its share, see [`readiness`](Self::readiness)).
    ///
    /// # Errors
    /// The conflict that keeps this replica out of the group (duplicate replica id,
    /// different partition list), an invalid configuration, or
    /// [`PartitionsError::Stopped`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_until_ready(&self) -> Result<(), PartitionsError> {
        let mut rx = self.inner.view.clone();
        let v = rx
            .wait_for(|v| v.joined || v.error.as_ref().is_some_and(PartitionsError::keeps_out))
            .await
            .map_err(|_| PartitionsError::Stopped(STOPPED))?;
        match &v.error {
            Some(e) if !v.joined && e.keeps_out() => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// The token that stops this coordinator gracefully.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// Asks the coordinator to leave gracefully, without waiting (the same as
    /// cancelling [`shutdown_token`](Self::shutdown_token));
    /// [`shutdown`](Self::shutdown) waits for it.
    pub fn stop(&self) {
        self.inner.shutdown.cancel();
    }

    /// Stops at once without releasing anything, as a crash would: the callbacks are
    /// aborted, the leases and the heartbeat expire on their own. With the `testing`
    /// feature, for simulations and tests; use [`CoordinatorHandle::shutdown`] in
    /// production.
    #[cfg(any(test, feature = "testing"))]
    pub fn abort(&self) {
        if let Some(task) = self
            .inner
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }

    /// Leaves gracefully: removes this replica from the heartbeat set, cancels every
    /// callback (with its grace), releases every lease, and returns once done (from
    /// every clone of the handle that calls it).
    ///
    /// # Cancel safety
    /// The coordinator keeps stopping in the background if this future is dropped.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match task {
            Some(task) => {
                let _ = task.await;
            }
            // Another clone is awaiting the task: the view's sender is dropped once the
            // coordinator has stopped.
            None => {
                let mut rx = self.inner.view.clone();
                while rx.changed().await.is_ok() {}
            }
        }
    }

    /// Leaves gracefully as [`shutdown`](Self::shutdown) does, but over by `within`:
    /// the group is told at once (nothing new is taken), every callback is cancelled and
    /// may hand its state off during its grace, and those still running shortly
    /// before the deadline (a fifth of `within`, at most half a renew interval, is kept
    /// for the releases) are aborted and their partitions released as a plain leave.
    /// Returns `true` if the coordinator had stopped by the deadline; `false` if it had
    /// not (Redis out of reach: it keeps stopping in the background, and whatever it
    /// still holds expires on its own within a lease).
    ///
    /// Give it a little less than the orchestrator's grace period (Kubernetes'
    /// `terminationGracePeriodSeconds`, minus any `preStop` hook), so the process exits
    /// before it is killed:
    ///
    /// ```no_run
    /// # async fn f(handle: leasehold_partitions::CoordinatorHandle<leasehold_partitions::MemoryGroupStore>) {
    /// use std::time::Duration;
    ///
    /// // terminationGracePeriodSeconds: 30
    /// tokio::signal::ctrl_c().await.ok(); // or SIGTERM
    /// if !handle.shutdown_within(Duration::from_secs(25)).await {
    ///     eprintln!("left the group late: what was not released expires within a lease");
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// The coordinator keeps stopping (by the same deadline) if this future is dropped.
    pub async fn shutdown_within(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        // An earlier deadline given before stands.
        self.inner.leave_by.send_if_modified(|by| match by {
            Some(at) if *at <= deadline => false,
            _ => {
                *by = Some(deadline);
                true
            }
        });
        tokio::time::timeout_at(deadline, self.shutdown())
            .await
            .is_ok()
    }
}
