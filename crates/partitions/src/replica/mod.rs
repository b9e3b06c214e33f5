//! One replica's decisions over time, as a pure state machine: no I/O, no clock, no
//! random numbers of its own. The driver ([`crate::coordinator`]) feeds it what
//! happened (a tick's reply, a claim's reply, a runner that ended, a notice, the
//! clock) and performs the [`Action`]s it returns.
//!
//! It is made of named parts, each with its rules and tests:
//! - [`session`]: how the replica stands in its group. The first tick of a session
//!   joins with a fresh token; a session the store reports lost is never renewed
//!   again (a new one starts at once, and every runner of the old one is refused its
//!   next renewal); a join that finds its replica's session `away` (a sticky restart),
//!   or whose replica id's old session it was waiting for (a sticky restart after a
//!   crash), resumes it.
//! - [`cadence`]: one tick per renew interval, sooner after a change.
//! - [`holdings`]: the only record of what the replica holds and runs. Every claim,
//!   regrant and release names a term (a partition and its fence), so a late or
//!   repeated one touches only the term it was meant for.
//! - [`policy`]: hysteresis and orphans, for both balancing rules.
//! - [`leave`]: a graceful leave, plain or sticky.
//! - [`list`]: the partition set: the copy kept to restore the group if Redis loses it,
//!   seeding, restoring, and applying a newer versioned list.
//! - [`tick`]: a tick's reply taken in (session, roster, revocations, a lost session).
//! - [`decide`]: the decision step on the last tick's view: plan, hand over, claim
//!   (sized by [`crate::balance::step`], which the planner takes too).
//! - [`claim`]: claims, one in flight, their replies, and reconciling with the store.
//! - [`handover`]: what a replica over its share gives up, to whom, within the budget.
//! - [`prefer`]: preferences, taken in from the set's first page.
//! - [`warm`]: warm moves, the giver's side: hand-overs held while their receivers
//!   prepare, let go when ready or when the wait is over.
//! - [`loads`]: weights from load reports: their averages, and when they are written.
//! - [`view`]: what the state says of itself, for the driver and the view.
//!
//! This file holds the state, its construction and `poll`, and routes the driver's
//! events to the parts.
//!
//! Rules kept here, each unit-tested in [`tests`]:
//! - **Settling.** After joining, claim nothing for `settle` (at most until the group
//!   grants, in a group that grants nothing yet; one renew interval after a lost
//!   session; nothing after resuming, or when joining a group an active member already
//!   serves).
//! - **Claims.** Up to the plan's allowance, in batches, one batch in flight at a time
//!   (sent again with the same sequence number if its reply is lost: the store answers
//!   it once); nothing before the group's grant wait has passed.
//! - **Unserved terms** (a resumed session's, or a claim's whose reply never came) are
//!   granted again, a batch at a time, before anything new is claimed; the store gives
//!   back those removed, revoked or of a drained replica.
//! - **Reconciling.** When the store's count of this session's partitions and the
//!   holdings differ on two ticks in a row with nothing in flight, or a weight changed,
//!   ask the store which terms the session holds (never with a claim or a hand-over in
//!   flight, whose answer the read could overtake).
//! - **Removed and drained.** A partition removed from the set is handed back
//!   (`Removed`); a drained replica hands everything over (`Drained`) and claims
//!   nothing until undrained.
//!
//! The timing constants are tuned for the tests and benchmarks in this repository and
//! should not be considered stable.

pub(crate) mod cadence;
mod claim;
mod decide;
mod handover;
pub(crate) mod holdings;
pub(crate) mod leave;
pub(crate) mod list;
pub(crate) mod loads;
pub(crate) mod policy;
mod prefer;
pub(crate) mod session;
#[cfg(test)]
mod tests;
mod tick;
mod view;
pub(crate) mod warm;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::ext::RenewGrid;
use leasehold_election::{Fence, StoreError};
use rand::{Rng, RngExt};
use tokio::time::Instant;

use self::cadence::Cadence;
pub(crate) use self::claim::Claim;
use self::claim::Claims;
use self::handover::HandOvers;
use self::holdings::{Effect, Holdings};
pub(crate) use self::leave::Leaving;
use self::list::{Configured, SetSync};
pub(crate) use self::list::{SetAnswer, SetOp};
use self::loads::{Reports, TermKey};
use self::policy::Policy;
use self::prefer::Prefs;
use self::session::Session;
use self::view::View;
use self::warm::{Gate, Hold};
use crate::balance::plan::Plan;
use crate::balance::weighted::WeightedPlan;
use crate::config::LoadDamping;
use crate::store::ops::moves::{MoveCause, Predecessor};
use crate::store::protocol::{MemberInfo, ReplicaState, TickRequest};

/// The settings the rules need.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) replica: String,
    pub(crate) lease: Duration,
    pub(crate) renew_interval: Duration,
    pub(crate) retry_interval: Duration,
    pub(crate) settle: Duration,
    /// Keep the session (and every partition) this long across a graceful restart.
    pub(crate) rejoin_grace: Option<Duration>,
    /// This process, for operators: `host pid`, then a tab and the address the replica
    /// advertises, if it does (its field in the group's `INFO` hash).
    pub(crate) instance: String,
    /// This replica's capacity: its share of a weighted group's load is in proportion.
    pub(crate) capacity: u32,
    /// The group's move budget: hand-offs to even out the group per renew interval,
    /// taken out of a count Redis keeps before they are made (`None`: no limit).
    pub(crate) move_budget: Option<u32>,
    /// The budget counts the weights of the partitions handed over, not how many.
    pub(crate) budget_by_weight: bool,
    /// Warm moves: how long a term handed to a named receiver is held while the
    /// receiver prepares (`None`: moves are not warm).
    pub(crate) prepare_moves: Option<Duration>,
    /// Weights follow the loads the terms report, damped by this (`None`: they do not).
    pub(crate) load_damping: Option<LoadDamping>,
}

/// Something for the driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Send this heartbeat (its renewal outcome goes to every waiting runner).
    Tick(TickRequest),
    /// Send this claim (or regrant).
    Claim(Claim),
    /// Start the runner of term `fence` of partition `index`, its deadline anchored at
    /// `sent`, offered what `previous` handed off (`None`: a regrant, offered nothing).
    Start {
        index: usize,
        fence: Fence,
        sent: Instant,
        previous: Option<Predecessor>,
    },
    /// Hand these partitions over gracefully (cancel, grace, release), those named in
    /// `to` to that replica (reserved for it for a while: [`crate::balance::receive`]).
    /// Those in `held` are not stopped yet (a warm move): their receiver is asked to
    /// prepare, and each is stopped at its [`Action::LetGo`].
    Stop {
        indices: Vec<usize>,
        reason: MoveCause,
        to: BTreeMap<usize, String>,
        held: BTreeMap<usize, Hold>,
    },
    /// Stop term `fence` of partition `index`, held for a warm move, if its runner
    /// still runs: named for its receiver if it is `ready`, else to anyone (its wait
    /// is over: a plain move).
    LetGo {
        index: usize,
        fence: Fence,
        ready: bool,
    },
    /// Stop every runner (leaving; with `keep`, without releasing).
    StopAll { keep: bool },
    /// Take up to `want` out of the group's move budget (`budget` per renew interval:
    /// moves, or weight moved), then hand over what it grants of `indices`
    /// ([`ReplicaMachine::on_budget`]).
    Budget {
        indices: Vec<usize>,
        want: usize,
        budget: u32,
    },
    /// Ask the store which terms this session holds (`resume`: it was just resumed).
    Reconcile { resume: bool },
    /// These terms' runners no longer hold their partition: refuse their next renewal.
    Revoke(Vec<(usize, Fence)>),
    /// A step of changing or reading the partition set.
    Set(SetOp),
    /// End the session (the last step of a leave).
    End,
    /// Nothing left to do: the coordinator stops.
    Exit,
    /// Publish the group's notice: every replica ticks at once and plans again.
    Notify,
    /// Read the last load each running term reported, for [`ReplicaMachine::on_samples`].
    SampleLoads,
    /// Write these weights from load reports (term, weight), in one request; its answer
    /// goes to [`ReplicaMachine::on_reported`].
    Report(Vec<(TermKey, u64)>),
    /// Publish the group's load-step notice: a load jumped, every replica ticks at once
    /// (and holds hand-overs until the step's weights are in).
    LoadStep,
    /// Partitions handed to this replica by name (`count` of them, held back for it)
    /// that it does not claim now, and why: once the hold ends they go to anyone.
    Decline { count: usize, reason: Decline },
}

/// Why a replica does not take the partitions handed to it by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decline {
    /// It is draining: it takes nothing.
    Draining,
    /// It is settling (it claims nothing until it has seen the group).
    Settling,
    /// By its own view of the group it is at its bound (by weight) or its allowance
    /// (by count), or it is handing partitions over itself.
    Full,
}

impl Decline {
    /// A stable label (the metric's `reason`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Draining => "draining",
            Self::Settling => "settling",
            Self::Full => "full",
        }
    }
}

/// What a tick means for the runners waiting on it.
#[derive(Debug, Clone)]
pub(crate) enum Renewal {
    /// The session `token` was extended: its runners' renewals succeed.
    Renewed { token: String },
    /// No session was extended: every waiting renewal is refused.
    Refused,
    /// The tick failed; waiting renewals get this error and retry.
    Failed(StoreError),
}

/// Why a claim got nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimFailure {
    /// The call failed: it may or may not have been applied.
    Failed,
}

/// What the last tick was sent with, and whether its reply changed nothing.
#[derive(Debug, Default)]
struct LastTick {
    /// The state the tick in flight was sent with.
    sent_as: Option<ReplicaState>,
    /// The state of the last tick, if its reply changed nothing (a live session
    /// extended, with no roster, nothing expired, ended, revoked or listed): a tick
    /// sent with the same state is likely quiet, and says so ([`TickRequest::quiet`]).
    quiet_as: Option<ReplicaState>,
}

/// One replica's view of its group and what it is doing about it.
#[derive(Debug)]
pub(crate) struct ReplicaMachine {
    s: Settings,
    session: Session,
    cadence: Cadence,
    holdings: Holdings,
    policy: Policy,
    leaving: Leaving,
    set: SetSync,
    view: View,
    plan: Option<Plan>,
    /// The last weighted plan, and the load (as the store counted it) it was made at:
    /// claims go up to that load + the plan's room (those reserved for this replica up
    /// to that load + its bound).
    wplan: Option<(WeightedPlan, u64)>,
    /// An operator drained this replica.
    drained: bool,
    /// Claims: the one in flight, and what the next ones go by.
    claims: Claims,
    /// The group's weights version this replica's weights are from.
    weights_version: u64,
    /// The send time of the last tick that extended the current session.
    renewed_at: Option<Instant>,
    /// The highest fence this replica has seen in the group.
    highest: Fence,
    /// Hand-overs made, and a take from the move budget in flight.
    handovers: HandOvers,
    /// The granting server's lifetime as the last tick reply named it: a tick in
    /// another one lists what the session holds there, and only those terms go on.
    lifetime: String,
    /// The roster as this replica last read it, and its version: a tick carries the
    /// roster only when it changed.
    roster: (String, Vec<MemberInfo>),
    /// What the last tick was sent with, and whether its reply changed nothing.
    last_tick: LastTick,
    /// Preferences, as the set's first page carried them.
    prefs: Prefs,
    /// Hand-overs held while their receivers prepare (warm moves).
    warm: Gate,
    /// Weights from load reports: their averages, and when they are written.
    loads: Option<Reports>,
}

impl ReplicaMachine {
    /// A replica that joins at its first tick, at `now`, with its configured list.
    pub(crate) fn new(
        s: Settings,
        configured: Configured,
        grid: RenewGrid,
        now: Instant,
        rng: &mut impl Rng,
    ) -> Self {
        let loads = s
            .load_damping
            .map(|d| Reports::new(d, s.renew_interval, s.lease));
        Self {
            loads,
            session: Session::new(&s.replica, rng),
            cadence: Cadence::new(grid, s.renew_interval, now),
            policy: Policy::new(s.renew_interval),
            s,
            holdings: Holdings::default(),
            leaving: Leaving::No,
            set: SetSync::new(configured),
            view: View::default(),
            plan: None,
            wplan: None,
            drained: false,
            claims: Claims::default(),
            weights_version: 0,
            renewed_at: None,
            highest: Fence(0),
            handovers: HandOvers::default(),
            lifetime: String::new(),
            roster: (String::new(), Vec::new()),
            last_tick: LastTick::default(),
            prefs: Prefs::default(),
            warm: Gate::default(),
        }
    }

    // ---- Inputs. ----

    /// The clock reached [`ReplicaMachine::wake_at`].
    pub(crate) fn poll(&mut self, now: Instant) -> Vec<Action> {
        let mut actions: Vec<Action> = self.holds_due(now).collect();
        if let Some(p) = &mut self.claims.pending
            && p.resend_at.is_some_and(|at| at <= now)
        {
            p.resend_at = None;
            actions.push(Action::Claim(p.claim.clone()));
        }
        if self.claims.after.is_some_and(|c| c <= now) {
            self.claims.after = None;
            actions.extend(self.claim(now));
        }
        if self.may_tick() && now >= self.cadence.due_at() {
            self.cadence.sent(now);
            let ttl = match (self.leaving, self.s.rejoin_grace) {
                (Leaving::Parking, Some(grace)) => {
                    self.leaving = Leaving::ParkSent;
                    grace.max(self.s.lease)
                }
                _ => self.s.lease,
            };
            let state = self.member_state(now);
            let join = !self.session.member();
            self.last_tick.sent_as = Some(state);
            actions.push(Action::Tick(TickRequest {
                replica: self.s.replica.clone(),
                process: self.session.process().to_owned(),
                session: self.session.token().to_owned(),
                join,
                state,
                ttl,
                instance: self.s.instance.clone(),
                capacity: self.s.capacity,
                grace: self.s.rejoin_grace,
                incarnation: self.session.incarnation().to_owned(),
                lifetime: self.lifetime.clone(),
                roster: self.roster.0.clone(),
                quiet: !join && self.last_tick.quiet_as == Some(state),
            }));
        }
        actions
    }

    /// A step of changing or reading the set came back.
    pub(crate) fn on_set(&mut self, answer: SetAnswer, now: Instant) -> Vec<Action> {
        let (next, changed) = self.set.on_answer(answer, self.view.live.len());
        if changed {
            // The set changed: look again (and claim) right away.
            self.cadence.wake(now);
        }
        next.map(Action::Set).into_iter().collect()
    }

    /// The runner of term `fence` of partition `i` has ended (after its release).
    pub(crate) fn on_stopped(&mut self, i: usize, fence: Fence, now: Instant) -> Vec<Action> {
        self.warm.forget((i, fence));
        self.load_ends(i, fence);
        let mut actions = Vec::new();
        if let Some(Effect::Start(i, fence, sent)) = self.holdings.ended(i, fence) {
            if self.leaving == Leaving::No {
                let sent = self.renewed_at.map_or(sent, |r| r.max(sent));
                self.load_starts(i, fence, now);
                actions.push(Action::Start {
                    index: i,
                    fence,
                    sent,
                    previous: self.holdings.held(i).and_then(|h| h.previous),
                });
            } else {
                self.holdings.discard(i, fence);
            }
        }
        actions.extend(self.end_if_done(now));
        actions
    }

    /// Once a leave has stopped every runner and no claim is in flight (one could
    /// still grant this session partitions nobody would serve): end the session, or
    /// (sticky) mark it away with the next tick.
    fn end_if_done(&mut self, now: Instant) -> Vec<Action> {
        if self.holdings.runners() > 0 || self.claims.pending.is_some() {
            return Vec::new();
        }
        match self.leaving {
            Leaving::Stopping => {
                self.leaving = Leaving::Ending;
                vec![Action::End]
            }
            Leaving::Pausing if self.session.member() => {
                self.leaving = Leaving::Parking;
                self.cadence.wake(now);
                Vec::new()
            }
            Leaving::Pausing => {
                // The session was lost meanwhile: nothing to park.
                self.leaving = Leaving::Parked;
                vec![Action::Exit]
            }
            _ => Vec::new(),
        }
    }

    /// Stops every runner; what no runner runs is left to the end of the session
    /// (plain) or kept with it (sticky).
    fn stop_everything(&mut self, keep: bool, now: Instant) -> Vec<Action> {
        for i in self.holdings.serving() {
            self.holdings.stop(i, MoveCause::Leave);
        }
        self.holdings.drop_unstarted();
        let mut actions = vec![Action::StopAll { keep }];
        actions.extend(self.end_if_done(now));
        actions
    }

    /// Something changed in the group (a release, a leave, a member's state, the set):
    /// look again soon (within a few ms in a small group; spread over more, and no
    /// more than one notice tick per ms between them, in a wide one: see
    /// [`Cadence::notice`]).
    pub(crate) fn on_notice(&mut self, now: Instant, rng: &mut impl Rng) {
        if self.leaving == Leaving::No {
            let members = self.view.live.len();
            self.cadence.notice(now, members, rng.random());
        }
    }

    /// The group said a partition's load stepped (a replica's report jumped): tick
    /// as on any notice; hand-overs wait for the step's weights, then the step stands
    /// in for a first ask (the policy's `hand_over`).
    pub(crate) fn on_step(&mut self, now: Instant, rng: &mut impl Rng) {
        self.policy.stepped(now);
        self.on_notice(now, rng);
    }

    /// A runner is waiting for a renewal.
    pub(crate) fn on_renew_wanted(&mut self, now: Instant) {
        self.cadence.renewal_wanted(now);
    }

    /// Shut down: announce, stop every runner, end the session. With a rejoin grace:
    /// stop every runner without releasing, then mark the session away.
    pub(crate) fn on_shutdown(&mut self, now: Instant) -> Vec<Action> {
        if self.leaving != Leaving::No {
            return Vec::new();
        }
        let member = self.session.member();
        if member && self.s.rejoin_grace.is_some() {
            self.leaving = Leaving::Pausing;
            return self.stop_everything(true, now);
        }
        if member {
            self.leaving = Leaving::Announcing;
            self.cadence.wake(now);
            return Vec::new();
        }
        self.leaving = Leaving::Stopping;
        self.stop_everything(false, now)
    }
}
