//! The coordinator's driver: performs what [`ReplicaMachine`] decides and feeds it what
//! happened. It decides nothing itself, and never waits on I/O in its loop: every store
//! call runs in a lane of its own (tick, claim, release, chores), so a slow claim or a
//! burst of runner events never delays the tick that carries the renewals, and the
//! renewal answer is handed to the runners before anything else is done with a tick's
//! reply.
//!
//! Laid out by concern: the loop, `perform` and the replies that feed the state machine
//! here; [`calls`], the one path of its store calls and their lanes; [`chores`], the
//! calls that run one at a time; [`releases`], hand-overs and release batches;
//! [`moves`], warm moves on the group's channel; [`loads`], load reports; [`publish`],
//! the view and gauges; [`terms`], starting a term's runner; [`names`], partition
//! names by index.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use leasehold_election::ext::{RenewGrid, TermConfig};
use leasehold_election::{DutyResult, Fence, Leadership, StoreError};
use metrics::{counter, gauge, histogram};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::batch::{Outcome, Shared};
use super::logs::{EndsLog, TickLog};
use super::runners::{Ended, Runners};
use super::warm::PrepareFn;
use crate::config::{GroupConfig, MoveBudget};
use crate::error::{PartitionsError, STOPPED};
use crate::keys::GroupKeys;
use crate::metrics as m;
use crate::notice::GroupNotice;
use crate::ownership::Ownership;
use crate::replica::list::Configured;
use crate::replica::{Action, Claim, ClaimFailure, Renewal, ReplicaMachine, Settings};
use crate::store::GroupStore;
use crate::store::protocol::{ClaimReply, ClaimRequest, Conflict, TickReply};
use crate::view::{GroupView, ListDifference};

mod calls;
mod chores;
mod loads;
mod moves;
mod names;
mod publish;
mod releases;
mod terms;

use self::calls::{Calls, Lanes, next_of};
use self::names::{Names, instance};
pub(crate) use self::publish::Labels;
use self::publish::roster_bytes;
use self::releases::BATCH_WINDOW;

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What a driver runs on.
pub(crate) struct Parts<B, F> {
    pub(crate) store: B,
    pub(crate) config: GroupConfig,
    /// The settings of every partition term.
    pub(crate) template: TermConfig,
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
    /// The running terms, by partition (shared with the handle: `owns`).
    pub(crate) running: Running,
}

/// The running terms of a replica, by partition: each term's lease, put in when its
/// callback starts and taken out when it ends
/// ([`CoordinatorHandle::owns`](super::CoordinatorHandle::owns)).
pub(crate) type Running = Arc<dashmap::DashMap<Arc<str>, Leadership>>;

pub(crate) struct Driver<B, F> {
    /// The store, the group's keys and the limit of every call.
    calls: Calls<B>,
    config: Arc<GroupConfig>,
    names: Names,
    /// The decisions.
    state: ReplicaMachine,
    /// What the runners and the driver share: renewals, releases, revocations.
    shared: Arc<Shared>,
    runners: Runners,
    view: watch::Sender<GroupView>,
    labels: Labels,
    leave: Leave,
    notices: broadcast::Receiver<String>,
    rng: StdRng,
    /// The store calls in flight, one per lane, and the chores waiting for theirs.
    lanes: Lanes,
    /// The last store error, for the view (cleared by a successful tick).
    error: Option<StoreError>,
    logs: Logs,
    /// Bytes of roster received (see [`m::ROSTER_BYTES`]), shared with the handle.
    roster_bytes: Arc<AtomicU64>,
    terms: Terms<F>,
    background: Background,
}

/// How this replica's terms start.
struct Terms<F> {
    /// The settings of every partition term.
    template: TermConfig,
    callback: Arc<F>,
    /// The running terms, by partition.
    running: Running,
}

/// A graceful leave: asked for, by when, and how far it has gone.
struct Leave {
    shutdown: CancellationToken,
    /// The instant a shutdown must be over by, if one was given
    /// ([`CoordinatorHandle::shutdown_within`](super::CoordinatorHandle::shutdown_within)).
    by: watch::Receiver<Option<Instant>>,
    /// Every runner was asked to stop (the coordinator is shutting down): what they
    /// give back is given back as a leave.
    stopped_all: bool,
}

/// What the driver has logged once, so it is not logged on every tick.
#[derive(Default)]
struct Logs {
    /// Ends of partition terms, logged once per tick in one line.
    ends: EndsLog,
    /// The group's heartbeat failing and recovering, logged once each.
    ticks: TickLog,
    /// The list difference last logged.
    warned_list: Option<ListDifference>,
    /// Whether a same-version digest mismatch was logged (before the set is read).
    warned_digest: bool,
    /// Whether a sticky shutdown's dropped hand-off state was logged.
    warned_sticky_state: bool,
}

/// Work in the background: warm-move messages and notices of steps in load being sent,
/// and preparations running.
struct Background {
    /// What this replica runs when asked to prepare for a warm move.
    prepare: Option<PrepareFn>,
    tasks: JoinSet<()>,
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
            running,
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
        let state = ReplicaMachine::new(
            Settings {
                replica: config.replica_id.clone(),
                lease: config.lease,
                renew_interval: config.renew_interval,
                retry_interval: config.retry_interval,
                settle: config.settle,
                rejoin_grace: config.rejoin_grace,
                instance: instance(config.advertise()),
                capacity: config.capacity,
                move_budget: config.move_budget.map(MoveBudget::per_interval),
                budget_by_weight: matches!(config.move_budget, Some(MoveBudget::Weight(_))),
                prepare_moves: config.prepare_moves,
                load_damping: config.load_damping,
            },
            configured,
            RenewGrid::new(epoch, config.renew_interval),
            epoch,
            &mut rng,
        );
        let keys = Arc::new(GroupKeys::new(&config.key_prefix, &config.group));
        let mut names = Names::default();
        for p in &config.partitions {
            names.intern(p);
        }
        Self {
            notices: store.notices(&keys),
            calls: Calls {
                store,
                keys,
                limit: config.renew_interval,
            },
            labels: Labels::new(&config),
            config: Arc::new(config),
            names,
            state,
            shared: Arc::new(Shared::default()),
            runners: Runners::default(),
            view,
            leave: Leave {
                shutdown,
                by: leave_by,
                stopped_all: false,
            },
            rng,
            lanes: Lanes::default(),
            error: None,
            logs: Logs::default(),
            roster_bytes,
            terms: Terms {
                template,
                callback,
                running,
            },
            background: Background {
                prepare,
                tasks: JoinSet::new(),
            },
        }
    }

    pub(crate) async fn run(mut self) {
        let mut shutting = false;
        let mut notices_open = true;
        loop {
            let timer = [self.state.wake_at(), self.lanes.release_due]
                .into_iter()
                .flatten()
                .min();
            let done = tokio::select! {
                biased;
                (sent, reply) = next_of(&mut self.lanes.tick) => self.on_tick(sent, reply),
                () = self.leave.shutdown.cancelled(), if !shutting => {
                    shutting = true;
                    info!("leaving the group");
                    let actions = self.state.on_shutdown(Instant::now());
                    self.perform(actions)
                }
                Ok(()) = self.leave.by.changed(), if self.leave.stopped_all => {
                    let at = self.abort_at();
                    self.runners.stop_all_by(at);
                    false
                }
                (token, reply) = next_of(&mut self.lanes.claim) => self.on_claim(&token, reply),
                (batch, reply) = next_of(&mut self.lanes.release) => self.on_release(batch, reply),
                chore = next_of(&mut self.lanes.chore) => self.on_chore(chore),
                (weights, reply) = next_of(&mut self.lanes.report) => self.on_report(&weights, reply),
                ended = self.runners.next() => self.on_ended(ended),
                () = self.shared.wanted.notified() => {
                    self.state.on_renew_wanted(Instant::now());
                    false
                }
                () = self.shared.released.notified() => {
                    self.lanes.release_due.get_or_insert(Instant::now() + BATCH_WINDOW);
                    false
                }
                Some(_) = self.background.tasks.join_next(), if !self.background.tasks.is_empty() => false,
                notice = self.notices.recv(), if notices_open => {
                    match notice {
                        Ok(n) => self.on_notice(&n),
                        Err(broadcast::error::RecvError::Closed) => notices_open = false,
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            self.state.on_notice(Instant::now(), &mut self.rng);
                        }
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
        self.logs.ends.flush();
        info!("left the group");
    }

    /// When the callbacks of a shutdown with a deadline are aborted, if they have not
    /// returned: early enough before the deadline for their releases and the session's
    /// end (a fifth of the time left, at most half a renew interval).
    fn abort_at(&mut self) -> Option<Instant> {
        let by = (*self.leave.by.borrow_and_update())?;
        let left = by.saturating_duration_since(Instant::now());
        Some(by - (left / 5).min(self.config.renew_interval / 2))
    }

    fn on_timer(&mut self) -> bool {
        let now = Instant::now();
        if self.lanes.release_due.is_some_and(|at| at <= now) {
            self.lanes.release_due = None;
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
                    let sent = Instant::now();
                    let call = self
                        .calls
                        .call(|store, keys| async move { store.run(&keys, &req).await });
                    self.lanes.tick = Some(Box::pin(async move { (sent, call.await) }));
                }
                Action::Claim(claim) => self.send_claim(claim),
                Action::Start {
                    index,
                    fence,
                    sent,
                    previous,
                } => self.start(index, fence, sent, previous.as_ref()),
                Action::Stop {
                    indices,
                    reason,
                    to,
                    held,
                } => self.stop(indices, reason, &to, &held),
                Action::LetGo {
                    index,
                    fence,
                    ready,
                } => self.let_go(index, fence, ready),
                Action::StopAll { .. } => {
                    self.leave.stopped_all = true;
                    self.runners.stop_all();
                    let at = self.abort_at();
                    self.runners.stop_all_by(at);
                }
                Action::Revoke(terms) => self.revoke(&terms),
                Action::Exit => done = true,
                Action::Notify => {
                    let call = self.calls.call(|store, keys| async move {
                        let Some(changed) = GroupNotice::Changed.encode(&keys.notice) else {
                            return Ok(());
                        };
                        store.publish(&keys, &changed).await
                    });
                    self.background.tasks.spawn(async move {
                        let _ = call.await;
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
                Action::SampleLoads => {
                    let samples = self.runners.loads();
                    let actions = self.state.on_samples(&samples, Instant::now());
                    done |= self.perform(actions);
                }
                Action::Report(weights) => self.send_loads(weights),
                Action::LoadStep => {
                    let call = self.calls.call(|store, keys| async move {
                        let Some(step) = GroupNotice::LoadStep.encode(&keys.notice) else {
                            return Ok(());
                        };
                        store.publish(&keys, &step).await
                    });
                    self.background.tasks.spawn(async move {
                        let _ = call.await;
                    });
                }
                chore @ (Action::Reconcile { .. }
                | Action::Set(_)
                | Action::End
                | Action::Budget { .. }) => {
                    self.lanes.chores.push_back(chore);
                    self.next_chore();
                }
            }
        }
        self.publish_owned();
        done
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
        let session = req.session.clone();
        let call = self
            .calls
            .call(|store, keys| async move { store.run(&keys, &req).await });
        self.lanes.claim = Some(Box::pin(async move { (session, call.await) }));
    }

    fn on_tick(&mut self, sent: Instant, reply: Result<TickReply, StoreError>) -> bool {
        let now = Instant::now();
        self.logs.ends.flush();
        self.logs.ticks.answered(reply.as_ref().map(|_| ()), now);
        if let Err(e) = &reply {
            debug!(error = %crate::ErrorChain(e), "group tick failed");
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
        // reaches any runner: it must not extend them.
        let (revocations, actions): (Vec<Action>, Vec<Action>) = actions
            .into_iter()
            .partition(|a| matches!(a, Action::Revoke(_)));
        for action in revocations {
            if let Action::Revoke(terms) = action {
                self.revoke(&terms);
            }
        }
        // The runners first: nothing else in this reply is urgent.
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
            warn!(error = %crate::ErrorChain(&e), "not claiming partitions");
        }
        let difference = self.state.list_difference().cloned();
        if difference != self.logs.warned_list {
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
            self.logs.warned_list = difference;
        } else if difference.is_none() && self.state.list_differs() && !self.logs.warned_digest {
            self.logs.warned_digest = true;
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
        self.perform(actions)
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
            debug!(error = %crate::ErrorChain(&e), "a claim failed; sending it again");
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
        }
        let actions = self
            .state
            .on_claimed(reply, &granted, &returned, token, now);
        self.perform(actions)
    }

    /// Refuses every later renewal of these terms: the store no longer lists them
    /// under this session. The one place a term is revoked.
    fn revoke(&mut self, terms: &[(usize, Fence)]) {
        for &(i, _) in terms {
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
        self.runners.revoke(terms);
    }

    fn on_ended(&mut self, ended: Ended) -> bool {
        let name = self.names.get(ended.index);
        if let Some(panic) = &ended.panic {
            error!(partition = %name, error = %panic, "a partition term's runner task failed");
        }
        self.logs
            .ends
            .ended(&name, ended.cause, ended.reason.as_ref());
        let reason = super::logs::end_label(ended.cause, ended.reason.as_ref());
        counter!(m::RELEASES, "group" => self.labels.group.clone(), "replica" => self.labels.replica.clone(), "reason" => reason).increment(1);
        let actions = self
            .state
            .on_stopped(ended.index, ended.fence, Instant::now());
        self.perform(actions)
    }
}
