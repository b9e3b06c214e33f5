//! The coordinator: one elector per claimed partition inside a `JoinSet`, one group
//! tick per renew interval, and the balancing rule of [`crate::balance`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use leasehold_election::store::ANY_RELEASE;
use leasehold_election::{DutyResult, Elector, ElectorConfig, ElectorHandle, Leadership, Role};
use metrics::{counter, gauge};
use rand::seq::{IndexedRandom, SliceRandom};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::backend::{Conflict, GroupBackend, GroupStatus, TickRequest};
use crate::balance::{Member, Plan, plan};
use crate::batch::{Batch, GroupStore};
use crate::config::GroupConfig;
use crate::error::PartitionsError;
use crate::keys::GroupKeys;
use crate::metrics as m;
use crate::view::GroupView;

/// How long after the first queued renewal a batch waits for the rest (renewals are
/// aligned on a grid, so they arrive within microseconds of each other).
const BATCH_WINDOW: Duration = Duration::from_millis(1);
/// Shortest delay of an extra tick while ownership is changing.
const QUICK_TICK: Duration = Duration::from_millis(5);
/// Ticks run this long after each grid point, so aligned renewals are already queued.
const TICK_OFFSET: Duration = Duration::from_millis(5);

/// Spreads a fixed list of partitions over every replica of a group; start it with
/// [`Coordinator::spawn`].
///
/// The callback runs while this replica owns a partition, with the partition name and
/// the same [`Leadership`] an elector gives a duty; it is cancelled (with a grace
/// bounded by the lease) when ownership ends.
pub struct Coordinator<B, F> {
    backend: B,
    config: GroupConfig,
    callback: Arc<F>,
    shutdown: CancellationToken,
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
    B: GroupBackend,
    F: Fn(String, Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// A coordinator for this replica.
    pub fn new(backend: B, config: GroupConfig, callback: F) -> Self {
        Self {
            backend,
            config,
            callback: Arc::new(callback),
            shutdown: CancellationToken::new(),
        }
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
        let keys = GroupKeys::new(
            &self.config.key_prefix,
            &self.config.group,
            &self.config.partitions,
        );
        let epoch = Instant::now();
        let electors = self
            .config
            .partitions
            .iter()
            .map(|p| {
                self.config
                    .elector(p, epoch)
                    .expect("validated by GroupConfigBuilder::build")
            })
            .collect();
        let batch = Arc::new(Batch::new(keys.partitions.iter().map(|k| k.lease.clone())));
        let (view_tx, view_rx) = watch::channel(GroupView {
            settling: true,
            ..GroupView::default()
        });
        let (events_tx, events) = mpsc::unbounded_channel();
        let releases = self.backend.release_events(&keys.partitions[0]);
        let span =
            info_span!("partitions", group = %self.config.group, replica = %self.config.replica_id);
        let runner = Runner {
            store: GroupStore {
                backend: self.backend.clone(),
                batch: batch.clone(),
            },
            backend: self.backend.clone(),
            labels: Labels::new(&self.config),
            instance: format!("{:032x}", rand::random::<u128>()),
            digest: self.config.digest(),
            list: self.config.partitions.join("\n"),
            slots: (0..self.config.partitions.len())
                .map(|_| Slot::Idle)
                .collect(),
            leading: Default::default(),
            campaigning: Default::default(),
            index: keys
                .partitions
                .iter()
                .enumerate()
                .map(|(i, k)| (k.lease.clone(), i))
                .collect(),
            keys: keys.clone(),
            config: Arc::new(self.config),
            electors_cfg: electors,
            callback: self.callback,
            batch,
            epoch,
            started: epoch,
            tasks: JoinSet::new(),
            task_ids: HashMap::new(),
            events_tx,
            events,
            releases,
            view: view_tx,
            shutdown: self.shutdown.clone(),
            members: Vec::new(),
            unowned_since: HashMap::new(),
            orphans: Default::default(),
            free_queue: Vec::new(),
            generation: 0,
            shed_streak: 0,
            cooldown_until: epoch,
            conflict: None,
            plan: None,
            tick_soon: None,
            claimed_once: false,
        };
        let task = tokio::spawn(runner.run().instrument(span));
        CoordinatorHandle {
            view: view_rx,
            shutdown: self.shutdown,
            task: Mutex::new(Some(task)),
            backend: self.backend,
            keys,
        }
    }
}

/// Controls a running coordinator. Dropping it stops the coordinator gracefully in the
/// background; call [`CoordinatorHandle::shutdown`] to wait for that.
#[derive(Debug)]
pub struct CoordinatorHandle<B> {
    view: watch::Receiver<GroupView>,
    shutdown: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    backend: B,
    keys: GroupKeys,
}

impl<B: GroupBackend> CoordinatorHandle<B> {
    /// A receiver of view changes.
    pub fn subscribe(&self) -> watch::Receiver<GroupView> {
        self.view.clone()
    }

    /// The view now.
    pub fn view(&self) -> GroupView {
        self.view.borrow().clone()
    }

    /// Waits until the first group tick has succeeded.
    ///
    /// # Errors
    /// The conflict that keeps this replica out of the group (duplicate replica id,
    /// different partition list), or [`PartitionsError::Stopped`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn ready(&self) -> Result<(), PartitionsError> {
        let mut rx = self.view.clone();
        let v = rx
            .wait_for(|v| {
                v.joined
                    || matches!(
                        v.error,
                        Some(
                            PartitionsError::DuplicateReplica(_)
                                | PartitionsError::PartitionListMismatch(_)
                        )
                    )
            })
            .await
            .map_err(|_| PartitionsError::Stopped)?;
        match &v.error {
            Some(
                e @ (PartitionsError::DuplicateReplica(_)
                | PartitionsError::PartitionListMismatch(_)),
            ) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// Reads the whole group from the store (every partition's owner, fence and lease
    /// left; live replicas and their counts).
    ///
    /// # Errors
    /// The store's error.
    pub async fn group_status(&self) -> Result<Option<GroupStatus>, PartitionsError> {
        Ok(self.backend.group_status(&self.keys).await?)
    }

    /// The token that stops this coordinator gracefully.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops at once without releasing anything, as a crash would: the callbacks are
    /// aborted, the leases and the heartbeat expire on their own. For simulations and
    /// tests; use [`CoordinatorHandle::shutdown`] in production.
    pub fn abort(self) {
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }

    /// Leaves gracefully: removes this replica from the heartbeat set, cancels every
    /// callback (with its grace), releases every lease, and returns once done.
    ///
    /// # Cancel safety
    /// The coordinator keeps stopping in the background if this future is dropped.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl<B> Drop for CoordinatorHandle<B> {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Reads a group from a backend, without being a member (for operators and tools).
///
/// # Errors
/// The store's error.
pub async fn group_status<B: GroupBackend>(
    backend: &B,
    prefix: &str,
    group: &str,
) -> Result<Option<GroupStatus>, PartitionsError> {
    Ok(backend
        .group_status(&GroupKeys::new(prefix, group, &[]))
        .await?)
}

#[derive(Debug, Clone)]
struct Labels {
    group: String,
    replica: String,
}

impl Labels {
    fn new(c: &GroupConfig) -> Self {
        Self {
            group: c.group.clone(),
            replica: c.replica_id.clone(),
        }
    }

    fn pair(&self) -> [(&'static str, String); 2] {
        [
            ("group", self.group.clone()),
            ("replica", self.replica.clone()),
        ]
    }
}

enum Slot {
    Idle,
    /// An elector is campaigning (or waiting for a dead holder's lease to expire).
    Campaigning {
        handle: ElectorHandle,
        generation: u64,
    },
    Leading {
        handle: ElectorHandle,
        generation: u64,
    },
    /// Told to stop; waiting for its task to end.
    Stopping {
        generation: u64,
    },
}

impl Slot {
    fn generation(&self) -> Option<u64> {
        match self {
            Slot::Idle => None,
            Slot::Campaigning { generation, .. }
            | Slot::Leading { generation, .. }
            | Slot::Stopping { generation } => Some(*generation),
        }
    }
}

struct RoleEvent {
    index: usize,
    generation: u64,
    role: Role,
}

struct Runner<B, F> {
    store: GroupStore<B>,
    backend: B,
    config: Arc<GroupConfig>,
    electors_cfg: Vec<ElectorConfig>,
    keys: GroupKeys,
    labels: Labels,
    instance: String,
    digest: String,
    list: String,
    callback: Arc<F>,
    batch: Arc<Batch>,
    epoch: Instant,
    started: Instant,
    slots: Vec<Slot>,
    /// Indices of `Leading` and `Campaigning` slots, kept by `set_slot`, so per-event
    /// work scales with what this replica holds, not with P.
    leading: std::collections::BTreeSet<usize>,
    campaigning: std::collections::BTreeSet<usize>,
    index: HashMap<String, usize>,
    tasks: JoinSet<(usize, u64)>,
    /// Task id → (partition index, generation), to name a panicked task's partition.
    task_ids: HashMap<tokio::task::Id, (usize, u64)>,
    events_tx: mpsc::UnboundedSender<RoleEvent>,
    events: mpsc::UnboundedReceiver<RoleEvent>,
    releases: broadcast::Receiver<String>,
    view: watch::Sender<GroupView>,
    shutdown: CancellationToken,
    members: Vec<(String, Option<usize>)>,
    /// Partitions without a live owner, since when (local clock).
    unowned_since: HashMap<usize, Instant>,
    /// Unowned for longer than lease + retry interval (as of the last tick).
    orphans: std::collections::HashSet<usize>,
    /// Unowned partitions in random order, refilled each tick; claims pop from it.
    free_queue: Vec<usize>,
    generation: u64,
    shed_streak: u32,
    cooldown_until: Instant,
    conflict: Option<Conflict>,
    plan: Option<Plan>,
    tick_soon: Option<Instant>,
    claimed_once: bool,
}

impl<B, F, Fut> Runner<B, F>
where
    B: GroupBackend,
    F: Fn(String, Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    async fn run(mut self) {
        let mut next_tick = Instant::now();
        let mut leaving = false;
        loop {
            let soon = self.tick_soon.unwrap_or(next_tick).min(next_tick);
            tokio::select! {
                biased;
                () = self.shutdown.cancelled(), if !leaving => {
                    leaving = true;
                    self.leave().await;
                    if self.tasks.is_empty() {
                        break;
                    }
                }
                joined = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    self.on_joined(joined);
                    if leaving && self.tasks.is_empty() {
                        break;
                    }
                }
                Some(ev) = self.events.recv() => self.on_role(ev),
                () = sleep_until(soon), if !leaving => {
                    self.tick_soon = None;
                    self.tick().await;
                    let now = Instant::now();
                    while next_tick <= now {
                        next_tick = self.next_grid_point(now);
                    }
                }
                () = self.batch.arrived.notified(), if !leaving => {
                    // A renewal off the grid (or the tick is far): flush it on its own.
                    if next_tick.saturating_duration_since(Instant::now()) > TICK_OFFSET + BATCH_WINDOW {
                        sleep(BATCH_WINDOW).await;
                        self.tick().await;
                    }
                }
                released = self.releases.recv(), if !leaving => self.on_release(released),
            }
            if leaving {
                self.fail_pending("the replica is leaving its group");
            }
        }
        self.fail_pending("the partition coordinator has stopped");
        self.view.send_modify(|v| {
            v.owned.clear();
            v.error = Some(PartitionsError::Stopped);
        });
        gauge!(m::OWNED, &self.labels.pair()).set(0.0);
        info!("left the group");
    }

    fn next_grid_point(&self, now: Instant) -> Instant {
        let step = self.config.renew_interval.as_nanos();
        let since = now.saturating_duration_since(self.epoch).as_nanos();
        let k = since / step + 1;
        let at = Duration::from_nanos(u64::try_from(k * step).unwrap_or(u64::MAX));
        self.epoch + at + TICK_OFFSET
    }

    fn settling(&self) -> bool {
        self.started.elapsed() < self.config.settle
    }

    fn owned(&self) -> usize {
        self.leading.len()
    }

    fn set_slot(&mut self, i: usize, slot: Slot) {
        self.leading.remove(&i);
        self.campaigning.remove(&i);
        match slot {
            Slot::Leading { .. } => {
                self.leading.insert(i);
            }
            Slot::Campaigning { .. } => {
                self.campaigning.insert(i);
            }
            Slot::Idle | Slot::Stopping { .. } => {}
        }
        self.slots[i] = slot;
    }

    fn fail_pending(&self, why: &str) {
        for p in self.batch.take() {
            let _ = p.reply.send(Err(leasehold_election::StoreError::Connection(
                why.to_owned(),
            )));
        }
    }

    /// One group tick: heartbeat, publish the count, renew every queued lease, scan.
    async fn tick(&mut self) {
        let pending = self.batch.take();
        let settling = self.settling() || self.conflict.is_some();
        let request = TickRequest {
            replica: self.config.replica_id.clone(),
            instance: self.instance.clone(),
            ttl: self.config.lease,
            owned: (!settling).then(|| self.owned()),
            lease: self.config.lease,
            digest: self.digest.clone(),
            list: self.list.clone(),
            renewals: pending.iter().map(|p| (p.index, p.token.clone())).collect(),
        };
        let limit = self.config.renew_interval;
        let reply = match timeout(limit, self.backend.tick(&self.keys, &request)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => return self.tick_failed(pending, e),
            Err(_) => {
                return self.tick_failed(pending, leasehold_election::StoreError::Timeout(limit));
            }
        };
        for (p, ok) in pending.into_iter().zip(
            reply
                .renewed
                .iter()
                .copied()
                .chain(std::iter::repeat(false)),
        ) {
            let _ = p.reply.send(Ok(ok));
        }
        let now = Instant::now();
        self.members = reply.members;
        // A member that stops heartbeating drops out when its heartbeat expires; live
        // members refresh every renew interval, long before. Look again right after
        // the earliest expiry if that comes before the next regular tick, so a dead
        // replica's partitions move within one lease of its last heartbeat plus a
        // tick, not plus a renew interval.
        if let Some(left) = reply.heartbeat_left.iter().min()
            && *left < self.config.renew_interval
        {
            let at = now + *left + QUICK_TICK;
            self.tick_soon = Some(self.tick_soon.map_or(at, |t| t.min(at)));
        }
        let unowned: HashMap<usize, _> = reply.unowned.into_iter().map(|u| (u.index, u)).collect();
        let free_now = unowned.values().filter(|u| u.holder.is_none()).count();
        self.unowned_since.retain(|i, _| unowned.contains_key(i));
        // A settling member will claim its share soon: partitions are not orphaned
        // while anyone is settling (a member that dies while settling drops out of the
        // heartbeat set within one lease, and the clock starts then).
        if self.members.iter().any(|(_, owned)| owned.is_none()) {
            self.unowned_since.clear();
        }
        for i in unowned.keys() {
            self.unowned_since.entry(*i).or_insert(now);
        }
        let orphan_after = self.config.lease + self.config.retry_interval;
        self.orphans = self
            .unowned_since
            .iter()
            .filter(|(_, since)| now - **since > orphan_after)
            .map(|(i, _)| *i)
            .collect();
        self.free_queue = self.unowned_since.keys().copied().collect();
        self.free_queue.shuffle(&mut rand::rng());
        self.conflict = reply.conflict;
        let error = match &self.conflict {
            Some(Conflict::DuplicateReplica) => Some(PartitionsError::DuplicateReplica(
                self.config.replica_id.clone(),
            )),
            Some(Conflict::PartitionListMismatch) => Some(PartitionsError::PartitionListMismatch(
                self.config.group.clone(),
            )),
            None => None,
        };
        if let Some(e) = &error {
            warn!(error = %e, "not claiming partitions");
        }
        gauge!(m::GROUP_PARTITIONS, "group" => self.config.group.clone())
            .set(self.config.partitions.len() as f64);
        gauge!(m::LIVE_REPLICAS, "group" => self.config.group.clone())
            .set(self.members.len() as f64);
        self.view.send_modify(|v| {
            v.joined = v.joined || self.conflict.is_none();
            v.error = error;
        });
        self.rebalance(now);
        // While partitions are free and this replica may still grow, the counts it
        // planned with go stale with every acquisition (its own and the others'):
        // look again soon instead of a renew interval later.
        let below_cap = self.plan.is_some_and(|p| self.owned() < p.cap);
        if free_now > 0 && below_cap && self.conflict.is_none() && !self.settling() {
            let at = Instant::now() + QUICK_TICK.max(self.config.renew_interval / 20);
            self.tick_soon = Some(self.tick_soon.map_or(at, |t| t.min(at)));
        }
    }

    fn tick_failed(
        &mut self,
        pending: Vec<crate::batch::PendingRenew>,
        e: leasehold_election::StoreError,
    ) {
        debug!(error = %e, "group tick failed");
        counter!(m::TICK_ERRORS, &self.labels.pair()).increment(1);
        for p in pending {
            let _ = p.reply.send(Err(e.clone()));
        }
        self.view.send_modify(|v| v.error = Some(e.into()));
    }

    /// Applies the balancing rule: shed, stop surplus campaigns, claim.
    fn rebalance(&mut self, now: Instant) {
        let settling = self.settling() || self.conflict.is_some();
        let members: Vec<Member> = self
            .members
            .iter()
            .map(|(r, c)| Member {
                replica: r.clone(),
                owned: *c,
            })
            .collect();
        let owned = self.owned();
        let plan = plan(
            self.config.partitions.len(),
            &self.config.replica_id,
            owned,
            settling,
            &members,
            self.unowned_since.len(),
        );
        self.plan = Some(plan);

        // Shed only when the imbalance has been seen on two ticks in a row, and not
        // again until the counts have caught up with the last move.
        self.shed_streak = if plan.shed > 0 {
            self.shed_streak + 1
        } else {
            0
        };
        if self.shed_streak >= 2 && now >= self.cooldown_until {
            self.shed(plan.shed);
            self.shed_streak = 0;
            self.cooldown_until = now + 2 * self.config.renew_interval;
        }

        self.claim();
    }

    /// Stops campaigns beyond the allowance and starts new ones up to it; orphans are
    /// claimed whatever the allowance.
    fn claim(&mut self) {
        let Some(plan) = self.plan else { return };
        let settling = self.settling() || self.conflict.is_some();
        // Stop campaigns beyond the allowance (orphans are always worth taking).
        let mut budget = plan.allowance.saturating_sub(self.owned());
        let mut over: Vec<usize> = Vec::new();
        for &i in &self.campaigning {
            if self.orphans.contains(&i) {
                continue;
            }
            if budget > 0 {
                budget -= 1;
            } else {
                over.push(i);
            }
        }
        for i in over {
            self.stop(i);
        }

        // Claim every orphan, then free or dead-held partitions up to the allowance,
        // taken from a queue shuffled at each tick so that replicas claiming together
        // rarely collide, and so that each claim costs O(1), not O(P).
        // A settling or conflicted replica (duplicate id, different partition list)
        // claims nothing, not even orphans.
        if settling {
            self.publish();
            return;
        }
        let mut picks: Vec<usize> = self
            .orphans
            .iter()
            .copied()
            .filter(|i| matches!(self.slots[*i], Slot::Idle))
            .collect();
        while budget > 0 {
            let Some(i) = self.free_queue.pop() else {
                break;
            };
            if matches!(self.slots[i], Slot::Idle)
                && self.unowned_since.contains_key(&i)
                && !self.orphans.contains(&i)
            {
                picks.push(i);
                budget -= 1;
            }
        }
        let first_claims = !self.claimed_once;
        for i in picks {
            // Spread the first claims after settling over half a renew interval, so
            // replicas that settle together interleave instead of racing.
            let spread = if first_claims {
                self.config.renew_interval / 2
            } else {
                Duration::from_millis(5).min(self.config.retry_interval / 4)
            };
            self.campaign(i, spread.mul_f64(rand::random::<f64>()));
        }
        self.claimed_once = true;
        self.publish();
    }

    fn shed(&mut self, n: usize) {
        let leading: Vec<usize> = self.leading.iter().copied().collect();
        let chosen: Vec<usize> = leading.sample(&mut rand::rng(), n).copied().collect();
        for i in chosen {
            info!(partition = %self.config.partitions[i], "handing off a partition to rebalance");
            counter!(m::HANDOFFS, &self.labels.pair()).increment(1);
            self.view.send_modify(|v| v.handoffs += 1);
            self.stop(i);
        }
    }

    fn stop(&mut self, i: usize) {
        let slot = std::mem::replace(&mut self.slots[i], Slot::Idle);
        let next = match slot {
            Slot::Campaigning { handle, generation } | Slot::Leading { handle, generation } => {
                handle.shutdown_token().cancel();
                Slot::Stopping { generation }
            }
            other => other,
        };
        self.set_slot(i, next);
    }

    fn campaign(&mut self, i: usize, delay: Duration) {
        self.generation += 1;
        let generation = self.generation;
        let partition = self.config.partitions[i].clone();
        let callback = self.callback.clone();
        let name = partition.clone();
        let elector = Elector::new(
            self.store.clone(),
            self.electors_cfg[i].clone(),
            move |lead: Leadership| callback(name.clone(), lead),
        );
        let (handle, run) = elector.pair();
        let mut status = handle.subscribe();
        let events = self.events_tx.clone();
        let span = info_span!("partition", partition = %partition);
        let task = self.tasks.spawn(
            async move {
                if !delay.is_zero() {
                    sleep(delay).await;
                }
                let forward = async move {
                    loop {
                        let role = status.borrow_and_update().role.clone();
                        if events
                            .send(RoleEvent {
                                index: i,
                                generation,
                                role,
                            })
                            .is_err()
                        {
                            return;
                        }
                        if status.changed().await.is_err() {
                            return;
                        }
                    }
                };
                tokio::join!(run, forward);
                (i, generation)
            }
            .instrument(span),
        );
        self.task_ids.insert(task.id(), (i, generation));
        self.set_slot(i, Slot::Campaigning { handle, generation });
    }

    fn on_role(&mut self, ev: RoleEvent) {
        if self.slots[ev.index].generation() != Some(ev.generation) {
            return;
        }
        let me = self.config.replica_id.clone();
        let mut lost = false;
        let slot = std::mem::replace(&mut self.slots[ev.index], Slot::Idle);
        let next = match (slot, ev.role) {
            (Slot::Campaigning { handle, generation }, Role::Leader { fence, .. }) => {
                debug!(partition = %self.config.partitions[ev.index], fence = fence.get(), "acquired");
                counter!(m::ACQUISITIONS, &self.labels.pair()).increment(1);
                self.unowned_since.remove(&ev.index);
                if !self.unowned_since.is_empty() {
                    // Partitions are still free: the others' counts we planned with are
                    // stale now. Refresh them soon rather than a renew interval later
                    // (debounced, so a burst of acquisitions costs one extra tick).
                    let at = Instant::now() + QUICK_TICK.max(self.config.renew_interval / 20);
                    self.tick_soon = Some(self.tick_soon.map_or(at, |t| t.min(at)));
                }
                Slot::Leading { handle, generation }
            }
            (Slot::Leading { handle, generation }, Role::Follower { .. } | Role::Stopped) => {
                // The term ended on its own (renewal refused, deadline, callback ended).
                let reason = handle
                    .status()
                    .last_term
                    .map_or("unknown", |t| t.reason.label());
                counter!(m::RELEASES, "group" => self.labels.group.clone(), "replica" => self.labels.replica.clone(), "reason" => reason).increment(1);
                Slot::Campaigning { handle, generation }
            }
            (
                Slot::Campaigning { handle, generation },
                Role::Follower {
                    leader: Some(holder),
                },
            ) if holder != me && self.members.iter().any(|(r, _)| *r == holder) => {
                // Lost to a live replica: stop campaigning for it, try another.
                handle.shutdown_token().cancel();
                self.unowned_since.remove(&ev.index);
                lost = true;
                Slot::Stopping { generation }
            }
            (slot, _) => slot,
        };
        self.set_slot(ev.index, next);
        if lost {
            self.claim();
        }
        self.publish();
    }

    fn on_joined(&mut self, joined: Option<Result<(usize, u64), tokio::task::JoinError>>) {
        match joined {
            Some(Ok((i, generation))) => {
                self.task_ids.retain(|_, v| *v != (i, generation));
                if self.slots[i].generation() == Some(generation) {
                    if let Slot::Leading { .. } = self.slots[i] {
                        counter!(m::RELEASES, "group" => self.labels.group.clone(), "replica" => self.labels.replica.clone(), "reason" => "stopped").increment(1);
                    }
                    self.set_slot(i, Slot::Idle);
                }
            }
            Some(Err(e)) => {
                // An elector task panicked: name its partition and free its slot.
                if let Some((i, generation)) = self.task_ids.remove(&e.id()) {
                    error!(partition = %self.config.partitions[i], error = %e, "a partition elector task failed");
                    if self.slots[i].generation() == Some(generation) {
                        self.set_slot(i, Slot::Idle);
                    }
                } else {
                    error!(error = %e, "a partition elector task failed");
                }
            }
            None => {}
        }
        self.publish();
    }

    fn on_release(&mut self, released: Result<String, broadcast::error::RecvError>) {
        let wanted = match &released {
            Ok(key) if key == ANY_RELEASE => true,
            Ok(key) => self
                .index
                .get(key)
                .is_some_and(|i| matches!(self.slots[*i], Slot::Idle)),
            Err(_) => true,
        };
        if wanted {
            // Re-read membership and free partitions right away.
            let at = Instant::now() + BATCH_WINDOW;
            self.tick_soon = Some(self.tick_soon.map_or(at, |t| t.min(at)));
        }
    }

    async fn leave(&mut self) {
        info!("leaving the group");
        let limit = self.config.renew_interval;
        match timeout(
            limit,
            self.backend
                .leave(&self.keys, &self.config.replica_id, &self.instance),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                warn!(error = %e, "could not leave the heartbeat set; it expires within one lease")
            }
            Err(_) => warn!("leaving the heartbeat set timed out; it expires within one lease"),
        }
        for i in 0..self.slots.len() {
            self.stop(i);
        }
    }

    fn publish(&self) {
        let owned: std::collections::BTreeSet<String> = self
            .leading
            .iter()
            .map(|i| self.config.partitions[*i].clone())
            .collect();
        gauge!(m::OWNED, &self.labels.pair()).set(owned.len() as f64);
        let settling = self.settling();
        let live: Vec<String> = self.members.iter().map(|(r, _)| r.clone()).collect();
        let (cap, floor) = self.plan.map_or((0, 0), |p| (p.cap, p.floor));
        self.view.send_if_modified(|v| {
            let changed = v.owned != owned
                || v.live_replicas != live
                || v.cap != cap
                || v.floor != floor
                || v.settling != settling;
            v.owned = owned;
            v.live_replicas = live;
            v.cap = cap;
            v.floor = floor;
            v.settling = settling;
            changed
        });
    }
}
