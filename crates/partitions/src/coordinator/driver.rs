//! The coordinator's driver: performs what [`ReplicaState`] decides and feeds it what
//! happened. It decides nothing itself, and never waits on I/O in its loop: every store
//! call runs in a lane of its own (tick, claim, release, chores), so a slow claim or a
//! burst of elector events never delays the tick that carries the renewals, and the
//! renewal answer is handed to the electors before anything else is done with a tick's
//! reply.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold_election::ext::ANY_RELEASE;
use leasehold_election::ext::{Grant, RenewGrid};
use leasehold_election::{DutyResult, Elector, ElectorConfig, Fence, Leadership, StoreError};
use metrics::{counter, gauge, histogram};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::batch::{BatchedStore, Outcome, PendingRelease, Shared};
use super::handoff;
use super::loads::LoadReports;
use super::logs::{EndsLog, TickLog};
use super::slots::{Ended, Slots};
use super::warm::{Gate, Prepare, PrepareFn, Warm};
use crate::config::{GroupConfig, MoveBudget};
use crate::error::{PartitionsError, STOPPED};
use crate::keys::GroupKeys;
use crate::metrics as m;
use crate::ownership::{Ownership, TermShared};
use crate::replica::list::Configured;
use crate::replica::{
    Action, Claim, ClaimFailure, Leaving, Renewal, ReplicaState, SetAnswer, SetOp, Settings,
};
use crate::store::protocol::{
    Change, ClaimReply, ClaimRequest, Conflict, GivenBack, Granted, MemberInfo, MoveCause,
    Predecessor, TickReply, VersionStep,
};
use crate::store::{GroupStore, RELEASE_BATCH, RELEASE_STATE_BYTES, STATUS_PAGE};
use crate::view::{GroupView, ListDifference};

/// How long a queued release waits for others to share its batch.
const BATCH_WINDOW: Duration = Duration::from_millis(1);

type Lane<T> = Option<Pin<Box<dyn Future<Output = T> + Send>>>;
/// A tick's send time and reply.
type Ticked = (Instant, Result<TickReply, StoreError>);
/// A claim's session and reply.
type Claimed = (String, Result<ClaimReply, StoreError>);
/// A release batch and its reply (one flag per release).
type Released = (Vec<PendingRelease>, Result<Vec<bool>, StoreError>);
/// Weights written from load reports (by term) and the reply (one flag per weight).
type Reported = (Vec<((usize, Fence), u64)>, Result<Vec<bool>, StoreError>);

/// Waits for the lane's call to finish (pending forever when the lane is idle).
async fn next_of<T>(lane: &mut Lane<T>) -> T {
    match lane {
        Some(call) => {
            let out = call.await;
            *lane = None;
            out
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The calls that run one at a time beside the tick, claim and release lanes.
enum Chore {
    Reconciled {
        token: String,
        reply: Result<Vec<Granted>, StoreError>,
    },
    Set(SetAnswer),
    Ended,
    /// The move budget granted this many of the hand-overs of `indices` (0: it failed).
    Budget {
        indices: Vec<usize>,
        granted: usize,
    },
}

/// The size of the roster a tick's reply carried, in bytes of its strings (what
/// [`m::ROSTER_BYTES`] counts): per member sent, its replica id and its entry
/// (`state \t capacity \t held \t load`); per member gone, its replica id; and the
/// roster version.
fn roster_bytes(members: &[MemberInfo], gone: &[String], version: &str) -> u64 {
    let digits = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
    let each: usize = members
        .iter()
        .map(|m| {
            m.replica.len()
                + m.state.as_str().len()
                + 3
                + digits(u64::from(m.capacity))
                + digits(m.held as u64)
                + digits(m.load)
        })
        .sum();
    let gone: usize = gone.iter().map(String::len).sum();
    (each + gone + version.len()) as u64
}

/// The message on the group's channel that says a partition's load stepped (a jump
/// of its damped average): every replica ticks, as on a release notice, holds
/// hand-overs until the step's weights are in, then lets the step stand in for a first
/// ask to hand over. A replica of an older version ignores it (it reads it as a warm
/// move's message it does not know).
fn step_notice(notice: &str) -> String {
    format!("{notice}\tstep")
}

/// Whether `message` on the group's channel `notice` is a step's ([`step_notice`]).
fn is_step(notice: &str, message: &str) -> bool {
    message.strip_prefix(notice) == Some("\tstep")
}

/// This process, as operators see it in the group: `host pid`.
fn instance() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host} {}", std::process::id())
}

#[derive(Debug, Clone)]
pub(crate) struct Labels {
    group: String,
    replica: String,
}

impl Labels {
    pub(crate) fn new(c: &GroupConfig) -> Self {
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

    /// The pair and one more label.
    fn with(&self, key: &'static str, value: &'static str) -> [(&'static str, String); 3] {
        let [g, r] = self.pair();
        [g, r, (key, value.to_owned())]
    }
}

/// Partition names by a local index: interned as the group names them (claims,
/// revocations, reads), since the set changes at runtime.
#[derive(Debug, Default)]
struct Names {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, usize>,
}

impl Names {
    fn intern(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let name: Arc<str> = Arc::from(name);
        let i = self.names.len();
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }

    fn get(&self, i: usize) -> Arc<str> {
        self.names[i].clone()
    }

    /// The index of `name`, if it has one.
    fn find(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// What a driver runs on.
pub(crate) struct Parts<B, F> {
    pub(crate) store: B,
    pub(crate) config: GroupConfig,
    /// Every partition elector's configuration but its duty name.
    pub(crate) template: ElectorConfig,
    pub(crate) callback: Arc<F>,
    pub(crate) view: watch::Sender<GroupView>,
    pub(crate) shutdown: CancellationToken,
    /// The instant a shutdown must be over by, if one was given
    /// ([`CoordinatorHandle::shutdown_within`](super::CoordinatorHandle::shutdown_within)).
    pub(crate) leave_by: watch::Receiver<Option<Instant>>,
    /// The renew grid's epoch.
    pub(crate) epoch: Instant,
    /// Draw random numbers from this seed (a simulation), or from the system.
    pub(crate) seed: Option<u64>,
    /// Bytes of roster received (see [`m::ROSTER_BYTES`]), shared with the handle.
    pub(crate) roster_bytes: Arc<AtomicU64>,
    /// What this replica runs when asked to prepare for a warm move.
    pub(crate) prepare: Option<PrepareFn>,
}

pub(crate) struct Driver<B, F> {
    store: B,
    keys: Arc<GroupKeys>,
    config: Arc<GroupConfig>,
    template: ElectorConfig,
    names: Names,
    callback: Arc<F>,
    state: ReplicaState,
    shared: Arc<Shared>,
    slots: Slots,
    view: watch::Sender<GroupView>,
    labels: Labels,
    shutdown: CancellationToken,
    /// The instant a shutdown must be over by, if one was given.
    leave_by: watch::Receiver<Option<Instant>>,
    notices: broadcast::Receiver<String>,
    rng: StdRng,
    tick: Lane<Ticked>,
    claim: Lane<Claimed>,
    release: Lane<Released>,
    chore: Lane<Chore>,
    chores: VecDeque<Action>,
    /// Weights from load reports being written.
    report: Lane<Reported>,
    /// The load reports of this replica's terms, if it takes them.
    loads: Option<LoadReports>,
    /// When to send the queued releases.
    release_due: Option<Instant>,
    /// The last store error, for the view (cleared by a successful tick).
    error: Option<StoreError>,
    /// Whether this replica's list differing from the group's was logged.
    /// Ends of partition terms, logged once per tick in one line.
    ends: EndsLog,
    /// The group's heartbeat failing and recovering, logged once each.
    ticks: TickLog,
    /// The list difference last logged.
    warned_list: Option<ListDifference>,
    /// Whether a same-version digest mismatch was logged (before the set is read).
    warned_digest: bool,
    /// Bytes of roster received (see [`m::ROSTER_BYTES`]), shared with the handle.
    roster_bytes: Arc<AtomicU64>,
    /// Why this replica asked a running term to end (by partition index and fence),
    /// for the ledger of moves its release writes; forgotten when the term's elector
    /// ends. A term ended by its callback (or a step-down) is `Released`.
    causes: HashMap<(usize, Fence), (MoveCause, Option<String>)>,
    /// What the claim that granted a term said of the partition's previous term, until
    /// the term's elector starts (it decides what the term is offered of the state the
    /// previous one handed off). A term not here was regranted to its session.
    previous: HashMap<(usize, Fence), Predecessor>,
    /// Every elector was asked to stop (the coordinator is shutting down): what they
    /// give back is given back as a leave.
    stopped_all: bool,
    /// Whether a sticky shutdown's dropped hand-off state was logged.
    warned_sticky_state: bool,
    /// Warm moves: terms kept running while their receivers prepare.
    gate: Gate,
    /// What this replica runs when asked to prepare for a warm move.
    prepare: Option<PrepareFn>,
    /// Warm-move messages and notices of steps in load being sent, and preparations
    /// running.
    warm: JoinSet<()>,
}

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// A driver for this replica, its first tick due at once.
    pub(crate) fn new(parts: Parts<B, F>) -> Self {
        let Parts {
            store,
            config,
            template,
            callback,
            view,
            shutdown,
            leave_by,
            epoch,
            seed,
            roster_bytes,
            prepare,
        } = parts;
        let mut rng = match seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_rng(&mut rand::rng()),
        };
        let configured = Configured {
            names: config.partitions.clone().into(),
            version: config.list_version,
            // Computed once: it reads the whole list.
            digest: config.digest(),
            lease: config.lease,
            gather: config.renew_interval,
        };
        let state = ReplicaState::new(
            Settings {
                replica: config.replica_id.clone(),
                lease: config.lease,
                renew_interval: config.renew_interval,
                retry_interval: config.retry_interval,
                settle: config.settle,
                rejoin_grace: config.rejoin_grace,
                instance: instance(),
                capacity: config.capacity,
                move_budget: config.move_budget.map(MoveBudget::per_interval),
                budget_by_weight: matches!(config.move_budget, Some(MoveBudget::Weight(_))),
            },
            configured,
            RenewGrid::new(epoch, config.renew_interval),
            epoch,
            &mut rng,
        );
        let keys = Arc::new(GroupKeys::new(&config.key_prefix, &config.group));
        let loads = config
            .load_damping
            .map(|d| LoadReports::new(d, config.renew_interval, config.lease));
        let mut names = Names::default();
        for p in &config.partitions {
            names.intern(p);
        }
        Self {
            notices: store.notices(&keys),
            store,
            keys,
            labels: Labels::new(&config),
            config: Arc::new(config),
            template,
            names,
            callback,
            state,
            shared: Arc::new(Shared::default()),
            slots: Slots::default(),
            view,
            shutdown,
            leave_by,
            rng,
            tick: None,
            claim: None,
            release: None,
            chore: None,
            chores: VecDeque::new(),
            report: None,
            loads,
            release_due: None,
            error: None,
            ends: EndsLog::default(),
            ticks: TickLog::default(),
            warned_list: None,
            warned_digest: false,
            roster_bytes,
            causes: HashMap::new(),
            previous: HashMap::new(),
            stopped_all: false,
            warned_sticky_state: false,
            gate: Gate::default(),
            prepare,
            warm: JoinSet::new(),
        }
    }

    pub(crate) async fn run(mut self) {
        let mut shutting = false;
        let mut notices_open = true;
        loop {
            let timer = [self.state.wake_at(), self.release_due, self.gate.next_due()]
                .into_iter()
                .flatten()
                .min();
            let done = tokio::select! {
                biased;
                (sent, reply) = next_of(&mut self.tick) => self.on_tick(sent, reply),
                () = self.shutdown.cancelled(), if !shutting => {
                    shutting = true;
                    info!("leaving the group");
                    let actions = self.state.on_shutdown(Instant::now());
                    self.perform(actions)
                }
                Ok(()) = self.leave_by.changed(), if self.stopped_all => {
                    let at = self.abort_at();
                    self.slots.stop_all_by(at);
                    false
                }
                (token, reply) = next_of(&mut self.claim) => self.on_claim(&token, reply),
                (batch, reply) = next_of(&mut self.release) => self.on_release(batch, reply),
                chore = next_of(&mut self.chore) => self.on_chore(chore),
                (weights, reply) = next_of(&mut self.report) => self.on_report(&weights, reply),
                ended = self.slots.next() => self.on_ended(ended),
                () = self.shared.wanted.notified() => {
                    self.state.on_renew_wanted(Instant::now());
                    false
                }
                () = self.shared.released.notified() => {
                    self.release_due.get_or_insert(Instant::now() + BATCH_WINDOW);
                    false
                }
                Some(_) = self.warm.join_next(), if !self.warm.is_empty() => false,
                notice = self.notices.recv(), if notices_open => {
                    match notice {
                        Ok(n) if is_step(&self.keys.notice, &n) => {
                            self.state.on_step(Instant::now(), &mut self.rng);
                        }
                        Ok(n) if n != self.keys.notice && n != ANY_RELEASE => self.on_message(&n),
                        Err(broadcast::error::RecvError::Closed) => notices_open = false,
                        _ => self.state.on_notice(Instant::now(), &mut self.rng),
                    }
                    false
                }
                () = sleep_until_opt(timer) => self.on_timer(),
            };
            if done {
                break;
            }
        }
        self.shared.close();
        self.view.send_modify(|v| {
            v.owned.clear();
            v.error = Some(PartitionsError::Stopped(STOPPED));
        });
        gauge!(m::OWNED, &self.labels.pair()).set(0.0);
        self.ends.flush();
        info!("left the group");
    }

    /// When the callbacks of a shutdown with a deadline are aborted, if they have not
    /// returned: early enough before the deadline for their releases and the session's
    /// end (a fifth of the time left, at most half a renew interval).
    fn abort_at(&mut self) -> Option<Instant> {
        let by = (*self.leave_by.borrow_and_update())?;
        let left = by.saturating_duration_since(Instant::now());
        Some(by - (left / 5).min(self.config.renew_interval / 2))
    }

    fn limit(&self) -> Duration {
        self.config.renew_interval
    }

    fn on_timer(&mut self) -> bool {
        let now = Instant::now();
        for (i, fence) in self.gate.due(now) {
            counter!(m::WARM_MOVES, &self.labels.with("outcome", "timed_out")).increment(1);
            debug!(partition = %self.names.get(i), "the receiver did not prepare in time; handing the partition to anyone");
            self.let_go(i, fence, false);
        }
        if self.release_due.is_some_and(|at| at <= now) {
            self.release_due = None;
            self.flush_releases();
        }
        let actions = self.state.poll(now);
        self.perform(actions)
    }

    /// Performs `actions`; returns true when the coordinator is done.
    fn perform(&mut self, actions: Vec<Action>) -> bool {
        let mut done = false;
        for action in actions {
            match action {
                Action::Tick(req) => {
                    let (store, keys, limit) =
                        (self.store.clone(), self.keys.clone(), self.limit());
                    let sent = Instant::now();
                    self.tick = Some(Box::pin(async move {
                        let reply = timeout(limit, store.tick(&keys, &req))
                            .await
                            .unwrap_or(Err(StoreError::Timeout(limit)));
                        (sent, reply)
                    }));
                }
                Action::Claim(claim) => self.send_claim(claim),
                Action::Start { index, fence, sent } => self.start(index, fence, sent),
                Action::Stop {
                    indices,
                    reason,
                    to,
                } => self.stop(indices, reason, &to),
                Action::StopAll { .. } => {
                    self.stopped_all = true;
                    self.slots.stop_all();
                    let at = self.abort_at();
                    self.slots.stop_all_by(at);
                }
                Action::Revoke(terms) => {
                    for &(i, _) in &terms {
                        debug!(partition = %self.names.get(i), "the store no longer lists this partition under this session; stepping down");
                    }
                    if !terms.is_empty() {
                        warn!(
                            partitions = terms.len(),
                            "the store no longer lists {} of this session's partitions under it \
                             (they expired while Redis was out of reach, or Redis lost them); \
                             stepping down from them",
                            terms.len()
                        );
                    }
                    self.shared.revoke(terms);
                }
                Action::Exit => done = true,
                Action::Notify => {
                    let (store, keys, limit) =
                        (self.store.clone(), self.keys.clone(), self.limit());
                    self.warm.spawn(async move {
                        let _ = timeout(limit, store.publish(&keys, &keys.notice)).await;
                    });
                }
                Action::Decline { count, reason } => {
                    counter!(
                        m::RECEPTIONS_DECLINED,
                        &self.labels.with("reason", reason.as_str())
                    )
                    .increment(count as u64);
                    debug!(
                        partitions = count,
                        reason = reason.as_str(),
                        "not claiming the partitions handed to this replica by name; \
                         they go to anyone when the giver's hold ends"
                    );
                }
                chore @ (Action::Reconcile { .. }
                | Action::Set(_)
                | Action::End
                | Action::Budget { .. }) => {
                    self.chores.push_back(chore);
                    self.next_chore();
                }
            }
        }
        self.publish_owned();
        done
    }

    fn stop(&mut self, indices: Vec<usize>, cause: MoveCause, to: &BTreeMap<usize, String>) {
        let counted = cause == MoveCause::HandOff;
        let warm = self
            .config
            .prepare_moves
            .filter(|_| cause == MoveCause::HandOff);
        for i in indices {
            let receiver = to.get(&i);
            if let (Some(within), Some(r), Some(fence)) = (warm, receiver, self.slots.fence(i)) {
                // A warm move: the receiver prepares first; the term ends when it is
                // ready, or when the wait is over.
                self.causes.insert((i, fence), (cause, Some(r.clone())));
                counter!(m::HANDOFFS, &self.labels.pair()).increment(1);
                let partition = self.names.get(i).to_string();
                debug!(%partition, to = %r, "asking the receiver to prepare");
                self.gate.hold(i, fence, r.clone(), Instant::now() + within);
                self.send(&Warm::Prepare {
                    partition,
                    from: self.config.replica_id.clone(),
                    to: r.clone(),
                    fence,
                    within,
                });
                continue;
            }
            if let Some(fence) = self.slots.fence(i) {
                self.causes
                    .entry((i, fence))
                    .or_insert_with(|| (cause, receiver.cloned()));
            }
            debug!(partition = %self.names.get(i), reason = cause.as_str(), to = receiver.map(String::as_str), "handing a partition over");
            if counted {
                counter!(m::HANDOFFS, &self.labels.pair()).increment(1);
            }
            self.slots.stop(i, cause, receiver.map(String::as_str));
        }
        let handoffs = self.state.handoffs();
        self.view.send_if_modified(|v| {
            let changed = v.handoffs != handoffs;
            v.handoffs = handoffs;
            changed
        });
    }

    /// Ends a term a warm move held, if it still runs: named for its receiver once it
    /// is `ready`, else to anyone (a plain move).
    fn let_go(&mut self, i: usize, fence: Fence, ready: bool) {
        if self.slots.fence(i) != Some(fence) {
            return;
        }
        let to = match self.causes.get_mut(&(i, fence)) {
            Some((_, to)) if ready => to.clone(),
            // A plain move: its release reserves nothing.
            Some((_, to)) => {
                *to = None;
                None
            }
            None => None,
        };
        self.slots.stop(i, MoveCause::HandOff, to.as_deref());
    }

    /// A message on the group's channel that is not a release notice or a step's: a
    /// warm move's.
    fn on_message(&mut self, message: &str) {
        let Some(warm) = Warm::decode(&self.keys.notice, message) else {
            return;
        };
        let me = self.config.replica_id.as_str();
        match warm {
            Warm::Ready {
                partition,
                from,
                to,
                fence,
            } if from == me => {
                let Some(i) = self.names.find(&partition) else {
                    return;
                };
                if self.gate.ready(i, fence, &to) {
                    counter!(m::WARM_MOVES, &self.labels.with("outcome", "prepared")).increment(1);
                    debug!(%partition, %to, "the receiver is ready");
                    self.let_go(i, fence, true);
                }
            }
            Warm::Prepare {
                partition,
                from,
                to,
                fence,
                within,
            } if to == me && !self.stopped_all => {
                let ready = Warm::Ready {
                    partition: partition.clone(),
                    from: from.clone(),
                    to,
                    fence,
                };
                let run = self.prepare.clone();
                let (store, keys, limit) = (self.store.clone(), self.keys.clone(), self.limit());
                let job = Prepare {
                    partition,
                    from,
                    within,
                };
                self.warm.spawn(
                    async move {
                        // Nothing to prepare: ready at once.
                        if let Some(run) = run
                            && timeout(within, run(job)).await.is_err()
                        {
                            debug!("preparing took longer than the owner waits; not answering");
                            return;
                        }
                        if let Some(m) = ready.encode(&keys.notice) {
                            let _ = timeout(limit, store.publish(&keys, &m)).await;
                        }
                    }
                    .in_current_span(),
                );
            }
            _ => {}
        }
    }

    /// Sends a warm-move message, in the background.
    fn send(&mut self, warm: &Warm) {
        let Some(message) = warm.encode(&self.keys.notice) else {
            return;
        };
        let (store, keys, limit) = (self.store.clone(), self.keys.clone(), self.limit());
        self.warm.spawn(async move {
            let _ = timeout(limit, store.publish(&keys, &message)).await;
        });
    }

    fn send_claim(&mut self, claim: Claim) {
        let regrant = claim
            .regrant
            .iter()
            .map(|&(i, f)| (self.names.get(i).to_string(), f))
            .collect();
        let req = ClaimRequest {
            replica: self.config.replica_id.clone(),
            process: self.state.process().to_owned(),
            session: self.state.token().to_owned(),
            seq: claim.seq,
            ttl: self.config.lease,
            count: claim.count,
            floor: claim.floor,
            regrant,
            room: claim.room,
            fallback: claim.fallback,
            bound: claim.bound,
            incarnation: self.state.incarnation().to_owned(),
            prefer: claim
                .prefer
                .iter()
                .map(|&i| self.names.get(i).to_string())
                .collect(),
            only_preferred: claim.only_preferred,
            leave_to: claim.leave_to.clone(),
        };
        let (store, keys, limit) = (self.store.clone(), self.keys.clone(), self.limit());
        self.claim = Some(Box::pin(async move {
            let reply = timeout(limit, store.claim(&keys, &req))
                .await
                .unwrap_or(Err(StoreError::Timeout(limit)));
            (req.session, reply)
        }));
    }

    fn next_chore(&mut self) {
        if self.chore.is_some() {
            return;
        }
        let Some(action) = self.chores.pop_front() else {
            return;
        };
        let (store, keys, limit) = (self.store.clone(), self.keys.clone(), self.limit());
        let timed_out = move || StoreError::Timeout(limit);
        self.chore = Some(match action {
            Action::Reconcile { resume } => {
                if resume {
                    info!(
                        "resumed this replica's session after a restart: its partitions get new terms"
                    );
                }
                let token = self.state.token().to_owned();
                Box::pin(async move {
                    let r = timeout(limit, store.held(&keys, &token)).await;
                    Chore::Reconciled {
                        token,
                        reply: r.unwrap_or_else(|_| Err(timed_out())),
                    }
                })
            }
            Action::Set(op) => {
                if let SetOp::Seed { .. } | SetOp::Restore(_) = &op {
                    info!(op = ?op_name(&op), "creating the group, which does not exist");
                }
                Box::pin(async move {
                    let answer = timeout(limit, set_op(&store, &keys, &op))
                        .await
                        .unwrap_or(SetAnswer::Failed);
                    Chore::Set(answer)
                })
            }
            Action::End => {
                let replica = self.config.replica_id.clone();
                let process = self.state.process().to_owned();
                let token = self.state.token().to_owned();
                Box::pin(async move {
                    match timeout(limit, store.leave(&keys, &replica, &process, &token)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            warn!(error = %e, "could not end the session; it expires within one lease");
                        }
                        Err(_) => {
                            warn!("ending the session timed out; it expires within one lease")
                        }
                    }
                    Chore::Ended
                })
            }
            Action::Budget {
                indices,
                want,
                budget,
            } => {
                let window = self.config.renew_interval;
                Box::pin(async move {
                    let granted = match timeout(
                        limit,
                        store.take_budget(&keys, want, budget, window),
                    )
                    .await
                    {
                        Ok(Ok(n)) => n,
                        Ok(Err(e)) => {
                            debug!(error = %e, "taking moves from the move budget failed; asking again at a later tick");
                            0
                        }
                        Err(_) => 0,
                    };
                    Chore::Budget { indices, granted }
                })
            }
            _ => return,
        });
    }

    fn on_tick(&mut self, sent: Instant, reply: Result<TickReply, StoreError>) -> bool {
        let now = Instant::now();
        self.ends.flush();
        self.ticks.answered(reply.as_ref().map(|_| ()), now);
        if let Err(e) = &reply {
            debug!(error = %e, "group tick failed");
            counter!(m::TICK_ERRORS, &self.labels.pair()).increment(1);
            self.error = Some(e.clone());
        } else {
            self.error = None;
        }
        if let Ok(r) = &reply
            && r.roster.is_sent()
        {
            let bytes = roster_bytes(r.roster.members(), r.roster.gone(), &r.roster_version);
            self.roster_bytes.fetch_add(bytes, Ordering::Relaxed);
            counter!(m::ROSTER_BYTES, &self.labels.pair()).increment(bytes);
        }
        if let Ok(r) = &reply
            && r.expired > 0
        {
            info!(
                partitions = r.expired,
                "a replica's session expired holding partitions: they are free for others"
            );
            counter!(m::EXPIRED, "group" => self.labels.group.clone()).increment(r.expired as u64);
        }
        let revoked: Vec<usize> = match &reply {
            Ok(r) => r
                .revoked
                .iter()
                .map(|(p, _)| self.names.intern(p))
                .collect(),
            Err(_) => Vec::new(),
        };
        let holdings: Option<Vec<(usize, Fence, u64)>> = match &reply {
            Ok(r) => r.holdings.as_ref().map(|held| {
                held.iter()
                    .map(|(p, f, w)| (self.names.intern(p), *f, *w))
                    .collect()
            }),
            Err(_) => None,
        };
        let session = self.state.token().to_owned();
        let (renewal, actions) = self.state.on_tick(
            reply,
            &revoked,
            holdings.as_deref(),
            sent,
            now,
            &mut self.rng,
        );
        let refused = matches!(renewal, Renewal::Refused);
        // Terms the store no longer lists are refused before this tick's renewal
        // reaches any elector: it must not extend them.
        for action in &actions {
            if let Action::Revoke(terms) = action {
                self.shared.revoke(terms.iter().copied());
            }
        }
        // The electors first: nothing else in this reply is urgent.
        self.shared.answer(Outcome {
            sent,
            result: match renewal {
                Renewal::Renewed { token } => Ok(Some(token.into())),
                Renewal::Refused => Ok(None),
                Renewal::Failed(e) => Err(e),
            },
        });
        if self.state.token() != session && refused {
            warn!(
                "this replica's group session has ended (it was not renewed in time, or \
                 Redis lost its data); its partitions are gone, starting a new session"
            );
            counter!(m::SESSIONS_LOST, &self.labels.pair()).increment(1);
        }
        if let Some(c) = self.state.conflict() {
            let e = self.conflict_error(c);
            warn!(error = %e, "not claiming partitions");
        }
        let difference = self.state.list_difference().cloned();
        if difference != self.warned_list {
            match &difference {
                Some(d) => warn!(
                    group = %self.labels.group,
                    configured_version = d.configured_version,
                    group_version = d.group_version,
                    "this replica's partition list differs from the group's set: {d}; \
                     serving the group's set (a configured list only seeds a new group, \
                     or replaces the set when its list_version is newer; the set also \
                     changes with `leasehold partitions add|remove`)"
                ),
                None => info!(
                    group = %self.labels.group,
                    "this replica's partition list matches the group's set again"
                ),
            }
            self.warned_list = difference;
        } else if difference.is_none() && self.state.list_differs() && !self.warned_digest {
            self.warned_digest = true;
            warn!(
                version = self.config.list_version,
                "the group's partition list at this version differs from this replica's; following the group's"
            );
        }
        gauge!(m::GROUP_PARTITIONS, "group" => self.labels.group.clone())
            .set(self.state.partitions() as f64);
        gauge!(m::LIVE_REPLICAS, "group" => self.labels.group.clone())
            .set(self.state.live().len() as f64);
        self.publish(now);
        let done = self.perform(actions);
        self.send_loads(now);
        done
    }

    /// Writes the weights the load reports moved past the threshold, at most once per
    /// renew interval (after a tick), in one request.
    fn send_loads(&mut self, now: Instant) {
        let Some(loads) = self.loads.as_mut() else {
            return;
        };
        if !self.state.member() {
            return;
        }
        let weights = loads.due(self.state.ledger(), now);
        if weights.is_empty() {
            return;
        }
        let named: Vec<(String, Fence, u64)> = weights
            .iter()
            .map(|&((i, fence), w)| (self.names.get(i).to_string(), fence, w))
            .collect();
        let session = self.state.token().to_owned();
        let (store, keys, limit) = (self.store.clone(), self.keys.clone(), self.limit());
        self.report = Some(Box::pin(async move {
            let reply = timeout(limit, store.report(&keys, &session, &named))
                .await
                .unwrap_or(Err(StoreError::Timeout(limit)));
            (weights, reply)
        }));
    }

    /// The weights from load reports were written (those flagged), or not.
    fn on_report(
        &mut self,
        weights: &[((usize, Fence), u64)],
        reply: Result<Vec<bool>, StoreError>,
    ) -> bool {
        let Some(loads) = self.loads.as_mut() else {
            return false;
        };
        match &reply {
            Ok(flags) => {
                if loads.answered(weights, Some(flags)) {
                    // A step in load: every replica ticks now, not at its next tick,
                    // and holds hand-overs until the step's weights are in.
                    let (store, keys, limit) =
                        (self.store.clone(), self.keys.clone(), self.limit());
                    self.warm.spawn(async move {
                        let step = step_notice(&keys.notice);
                        let _ = timeout(limit, store.publish(&keys, &step)).await;
                    });
                }
                let mut written = 0u64;
                for (&((i, fence), w), &ok) in weights.iter().zip(flags) {
                    if ok {
                        self.state.weighed(i, fence, w);
                        written += 1;
                    }
                }
                counter!(m::LOAD_WEIGHTS, &self.labels.pair()).increment(written);
                let load = self.state.load();
                self.view.send_if_modified(|v| {
                    let changed = v.load != load;
                    v.load = load;
                    changed
                });
            }
            Err(e) => {
                loads.answered(weights, None);
                debug!(error = %e, "writing weights from load reports failed; tried again at a later tick");
            }
        }
        false
    }

    fn conflict_error(&self, c: Conflict) -> PartitionsError {
        match c {
            Conflict::DuplicateReplica => {
                PartitionsError::DuplicateReplica(self.config.replica_id.clone())
            }
        }
    }

    fn on_claim(&mut self, token: &str, reply: Result<ClaimReply, StoreError>) -> bool {
        let now = Instant::now();
        let (granted, returned): (Vec<(usize, Fence, u64)>, Vec<usize>) = match &reply {
            Ok(ClaimReply::Claimed {
                partitions,
                returned,
                ..
            }) => (
                partitions
                    .iter()
                    .map(|(name, fence, weight)| (self.names.intern(name), *fence, *weight))
                    .collect(),
                returned.iter().map(|n| self.names.intern(n)).collect(),
            ),
            _ => (Vec::new(), Vec::new()),
        };
        let reply = reply.map_err(|e| {
            debug!(error = %e, "a claim failed; sending it again");
            ClaimFailure::Failed
        });
        if !granted.is_empty() {
            counter!(m::ACQUISITIONS, &self.labels.pair()).increment(granted.len() as u64);
        }
        if let Ok(ClaimReply::Claimed { moves, .. }) = &reply {
            for p in moves {
                if let Some(d) = p.unowned {
                    histogram!(m::UNOWNED_SECONDS, "group" => self.labels.group.clone(), "replica" => self.labels.replica.clone(), "cause" => p.cause.as_str())
                        .record(d.as_secs_f64());
                }
            }
            // A claim of free partitions names the previous term of each, in order (a
            // regrant names none).
            for (&(i, fence, _), p) in granted.iter().zip(moves) {
                self.previous.insert((i, fence), *p);
            }
        }
        let actions = self
            .state
            .on_claimed(reply, &granted, &returned, token, now);
        self.perform(actions)
    }

    /// Starts the elector of term `fence` of partition `i`.
    fn start(&mut self, i: usize, fence: Fence, sent: Instant) {
        let name = self.names.get(i);
        let config = leasehold_election::ext::with_duty(&self.template, &name);
        let weight = self.state.ledger().held(i).map_or(1, |h| h.weight);
        let load = self
            .loads
            .as_mut()
            .map(|l| l.start((i, fence), weight, Instant::now()));
        let term = TermShared::new(load);
        let store = BatchedStore {
            store: self.store.clone(),
            keys: self.keys.clone(),
            shared: self.shared.clone(),
            partition: name.clone(),
            index: i,
            fence,
            term: term.clone(),
        };
        let callback = self.callback.clone();
        let partition = name.clone();
        let grant = Grant {
            fence,
            sent,
            token: self.state.token().to_owned(),
        };
        let inherit = handoff::inherit(self.previous.remove(&(i, fence)).as_ref());
        let (group_store, keys, limit) = (self.store.clone(), self.keys.clone(), self.limit());
        let labels = self.labels.pair();
        let shared = term.clone();
        let elector = Elector::new(store, config, move |lead: Leadership| {
            let (callback, partition, inherit) =
                (callback.clone(), partition.clone(), inherit.clone());
            let lease = Ownership::new(lead, shared.clone());
            let (store, keys, labels, shared) = (
                group_store.clone(),
                keys.clone(),
                labels.clone(),
                shared.clone(),
            );
            async move {
                // Boxed: the take is rare, and its state would otherwise be part of
                // every partition's duty future.
                Box::pin(handoff::offer(
                    &lease, &shared, inherit, &store, &keys, &partition, limit, labels,
                ))
                .await;
                callback(partition.to_string(), lease).await
            }
        });
        let elector = leasehold_election::ext::granted(elector, grant);
        let (handle, run) = elector.pair();
        self.slots.start(
            i,
            fence,
            handle,
            term,
            run,
            info_span!("partition", partition = %name),
        );
    }

    fn on_ended(&mut self, ended: Ended) -> bool {
        let name = self.names.get(ended.index);
        if let Some(panic) = &ended.panic {
            error!(partition = %name, error = %panic, "a partition elector task failed");
        }
        self.ends.ended(&name, ended.cause, ended.reason.as_ref());
        let reason = super::logs::end_label(ended.cause, ended.reason.as_ref());
        counter!(m::RELEASES, "group" => self.labels.group.clone(), "replica" => self.labels.replica.clone(), "reason" => reason).increment(1);
        self.shared.forget((ended.index, ended.fence));
        self.causes.remove(&(ended.index, ended.fence));
        self.previous.remove(&(ended.index, ended.fence));
        if let Some(l) = self.loads.as_mut() {
            l.end((ended.index, ended.fence));
        }
        let actions = self
            .state
            .on_stopped(ended.index, ended.fence, Instant::now());
        self.perform(actions)
    }

    /// Brings the view's owned partitions and load up to date with the ledger.
    fn publish_owned(&mut self) {
        let changed = self.state.take_owned_changes();
        if changed.is_empty() {
            return;
        }
        let ledger = self.state.ledger();
        let (add, remove): (Vec<usize>, Vec<usize>) =
            changed.into_iter().partition(|&i| ledger.owned(i));
        let load = self.state.load();
        let names = &self.names;
        self.view.send_modify(|v| {
            for i in remove {
                v.owned.remove(&*names.get(i));
            }
            for i in add {
                v.owned.insert(names.get(i).to_string());
            }
            v.load = load;
        });
        gauge!(m::OWNED, &self.labels.pair()).set(self.state.ledger().owned_count() as f64);
    }

    fn flush_releases(&mut self) {
        if self.release.is_some() {
            return;
        }
        if self.state.keeps_leases() {
            // A sticky restart keeps every partition for its return, and sends nothing:
            // the state its terms handed off is not kept (its return regrants them).
            let mut dropped = 0;
            for p in self.shared.take_releases(usize::MAX, usize::MAX) {
                dropped += usize::from(p.state.is_some());
                let _ = p.reply.send(Ok(false));
            }
            if dropped > 0 && !self.warned_sticky_state {
                self.warned_sticky_state = true;
                warn!(
                    terms = dropped,
                    "a sticky shutdown keeps its partitions, not the state their terms handed \
                     off: persist what the restarted process needs yourself"
                );
            }
            return;
        }
        let mut batch = self
            .shared
            .take_releases(RELEASE_BATCH, RELEASE_STATE_BYTES);
        let Some(first) = batch.first() else {
            return;
        };
        let token = first.token.clone();
        // Named once for the batch, before its first attempt: a retry after a failover
        // still names the server the decision was made on.
        let lifetime = self.state.lifetime().to_owned();
        let terms: Vec<GivenBack> = batch
            .iter_mut()
            .map(|p| {
                let i = self.names.intern(&p.partition);
                let (cause, to) = self.causes.get(&(i, p.fence)).cloned().unwrap_or((
                    if self.stopped_all {
                        MoveCause::Leave
                    } else {
                        MoveCause::Released
                    },
                    None,
                ));
                GivenBack {
                    term: (p.partition.to_string(), p.fence),
                    cause,
                    state: p.state.take(),
                    to,
                    lifetime: lifetime.clone(),
                }
            })
            .collect();
        let (store, keys, limit) = (self.store.clone(), self.keys.clone(), self.limit());
        let (state_ttl, hold) = (self.config.hand_off_ttl, self.config.renew_interval);
        self.release = Some(Box::pin(async move {
            let reply = timeout(limit, store.release(&keys, &token, &terms, state_ttl, hold))
                .await
                .unwrap_or(Err(StoreError::Timeout(limit)));
            (batch, reply)
        }));
    }

    fn on_release(
        &mut self,
        batch: Vec<PendingRelease>,
        reply: Result<Vec<bool>, StoreError>,
    ) -> bool {
        match reply {
            Ok(flags) => {
                let flags = flags.into_iter().chain(std::iter::repeat(false));
                for (p, ok) in batch.into_iter().zip(flags) {
                    p.span
                        .in_scope(|| debug!(released = ok, "release batch answered"));
                    let _ = p.reply.send(Ok(ok));
                }
            }
            Err(e) => {
                warn!(error = %e, "a release batch failed; its partitions free when the session ends");
                for p in batch {
                    p.span
                        .in_scope(|| debug!(error = %e, "release batch failed"));
                    let _ = p.reply.send(Err(e.clone()));
                }
            }
        }
        if self.shared.has_releases() {
            self.release_due = Some(Instant::now());
        }
        false
    }

    /// Returns true when the coordinator is done.
    fn on_chore(&mut self, chore: Chore) -> bool {
        let now = Instant::now();
        let actions = match chore {
            Chore::Reconciled { token, reply } => match reply {
                Ok(held) => {
                    let held: Vec<(usize, Fence, u64)> = held
                        .iter()
                        .map(|(name, fence, weight)| (self.names.intern(name), *fence, *weight))
                        .collect();
                    self.state.on_reconciled(Some(held), &token, now)
                }
                Err(e) => {
                    debug!(error = %e, "reconciling failed");
                    self.state.on_reconciled(None, &token, now)
                }
            },
            Chore::Set(answer) => {
                if matches!(answer, SetAnswer::Failed) {
                    debug!("a change to the partition set failed; taken up again at a later tick");
                }
                let mut actions = self.state.on_set(answer, now);
                if let Some(prefs) = self.state.new_preferences() {
                    let prefs = prefs
                        .iter()
                        .map(|(p, r)| (self.names.intern(p), r.clone()))
                        .collect();
                    actions.extend(self.state.set_preferences(prefs, now));
                }
                let copy = self.state.set_copy();
                self.view.send_if_modified(|v| {
                    let changed = v.set_copy != copy;
                    v.set_copy = copy;
                    changed
                });
                actions
            }
            Chore::Ended => {
                if self.state.leaving() == Leaving::Ending {
                    return true;
                }
                Vec::new()
            }
            Chore::Budget { indices, granted } => self.state.on_budget(indices, granted),
        };
        let done = self.perform(actions);
        self.next_chore();
        done
    }

    /// Publishes membership, plan and standing if they changed.
    fn publish(&self, now: Instant) {
        let settling = self.state.settling(now);
        let grants_from = self.state.grants_from(now);
        let (cap, floor) = self.state.plan().map_or((0, 0), |p| (p.cap, p.floor));
        let joined = self.state.joined();
        let partitions = self.state.partitions();
        let drained = self.state.drained();
        let list_differs = self.state.list_differs();
        let list_difference = self.state.list_difference();
        let error = match self.state.conflict() {
            Some(c) => Some(self.conflict_error(c)),
            None => self.error.clone().map(PartitionsError::from),
        };
        let live = self.state.live();
        let weighted = self.state.weighted();
        let load = self.state.load();
        let share = self.state.share();
        let max_weight = self.state.max_weight();
        let capacity = self.config.capacity;
        self.view.send_if_modified(|v| {
            let changed = v.live_replicas != live
                || v.cap != cap
                || v.floor != floor
                || v.weighted != weighted
                || v.load != load
                || v.share != share
                || v.max_weight != max_weight
                || v.capacity != capacity
                || v.settling != settling
                || v.grants_from != grants_from
                || v.joined != joined
                || v.partitions != partitions
                || v.drained != drained
                || v.list_differs != list_differs
                || v.list_difference.as_ref() != list_difference
                || v.error.as_ref().map(ToString::to_string)
                    != error.as_ref().map(ToString::to_string);
            if changed {
                v.live_replicas = live.to_vec();
                v.cap = cap;
                v.floor = floor;
                v.settling = settling;
                v.grants_from = grants_from;
                v.joined = joined;
                v.partitions = partitions;
                v.drained = drained;
                v.list_differs = list_differs;
                v.list_difference = list_difference.cloned();
                v.error = error;
                v.weighted = weighted;
                v.load = load;
                v.share = share;
                v.max_weight = max_weight;
                v.capacity = capacity;
            }
            changed
        });
        gauge!(m::LOAD, &self.labels.pair()).set(load as f64);
        gauge!(m::CAPACITY, &self.labels.pair()).set(f64::from(capacity));
    }
}

/// What a set step does, for logs.
fn op_name(op: &SetOp) -> &'static str {
    match op {
        SetOp::Seed { .. } => "seed from this replica's list",
        SetOp::Restore(_) => "restore the set this replica saw",
        _ => "change the set",
    }
}

/// Performs one step of changing or reading the set.
async fn set_op<B: GroupStore>(store: &B, keys: &GroupKeys, op: &SetOp) -> SetAnswer {
    let answer = match op {
        SetOp::Read { offset } => store
            .set_page(keys, *offset, STATUS_PAGE)
            .await
            .map(SetAnswer::Page),
        SetOp::Seed {
            life,
            names,
            grant_delay,
            lease,
            gather,
        } => store
            .add(
                keys,
                &Change::Seed {
                    life: life.clone(),
                    grant_delay: *grant_delay,
                    lease: *lease,
                    gather: *gather,
                },
                names,
            )
            .await
            .map(SetAnswer::Added),
        SetOp::Restore(step) => store.restore(keys, step).await.map(SetAnswer::Ok),
        SetOp::Add { version, names } => store
            .add(keys, &Change::Versioned(*version), names)
            .await
            .map(SetAnswer::Added),
        SetOp::List { offset } => store
            .list_page(keys, *offset, STATUS_PAGE)
            .await
            .map(SetAnswer::Listed),
        SetOp::Remove { version, names } => store
            .remove(keys, &Change::Versioned(*version), names)
            .await
            .map(SetAnswer::Removed),
        SetOp::Begin { version } => store
            .set_version(keys, *version, VersionStep::Begin)
            .await
            .map(SetAnswer::Ok),
        SetOp::Done { version, digest } => store
            .set_version(keys, *version, VersionStep::Done(digest))
            .await
            .map(SetAnswer::Ok),
    };
    answer.unwrap_or_else(|e| {
        debug!(error = %e, "a step on the partition set failed");
        SetAnswer::Failed
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::protocol::MemberState;

    #[test]
    fn a_step_message_is_told_apart_from_notices_and_other_groups_messages() {
        let notice = "lh:{g}";
        assert!(is_step(notice, &step_notice(notice)));
        assert!(!is_step(notice, notice), "a release notice");
        assert!(!is_step("lh:{h}", &step_notice(notice)), "another group's");
        assert!(!is_step(notice, &format!("{notice}\tstep\tmore")));
        let warm = "lh:{g}\twarm\tready\tp\ta\tb\t7\t0";
        assert!(!is_step(notice, warm));
        assert_eq!(
            Warm::decode(notice, &step_notice(notice)),
            None,
            "not a warm move's"
        );
    }

    #[test]
    fn a_roster_counts_the_bytes_of_its_strings() {
        let member = |replica: &str, state| MemberInfo {
            replica: replica.to_owned(),
            state,
            left: Duration::from_secs(1),
            held: 12,
            load: 120,
            capacity: 1,
        };
        let members = [
            member("replica-1", MemberState::Active),
            member("r2", MemberState::Settling),
        ];
        // `replica-1` and `active\t1\t12\t120`, `r2` and `settling\t1\t12\t120`,
        // a member gone, the version.
        assert_eq!(
            roster_bytes(&members, &["r3".to_owned()], "v:7"),
            (9 + 15) + (2 + 17) + 2 + 3
        );
        assert_eq!(roster_bytes(&[], &[], ""), 0);
    }
}
