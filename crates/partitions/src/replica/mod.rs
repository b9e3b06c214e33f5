//! One replica's decisions over time, as a pure state machine: no I/O, no clock, no
//! random numbers of its own. The driver ([`crate::coordinator`]) feeds it what
//! happened (a tick's reply, a claim's reply, an elector that ended, a notice, the
//! clock) and performs the [`Action`]s it returns.
//!
//! It is made of named parts, each with its rules and tests:
//! - [`session`]: how the replica stands in its group. The first tick of a session
//!   joins with a fresh token; a session the store reports lost is never renewed
//!   again (a new one starts at once, and every elector of the old one is refused its
//!   next renewal); a join that finds its replica's session `away` (a sticky restart),
//!   or whose replica id's old session it was waiting for (a sticky restart after a
//!   crash), resumes it.
//! - [`cadence`]: one tick per renew interval, sooner after a change.
//! - [`ledger`]: the only record of what the replica holds and runs. Every claim,
//!   regrant and release names a term (a partition and its fence), so a late or
//!   repeated one touches only the term it was meant for.
//! - [`policy`]: hysteresis and orphans, for both balancing rules.
//! - [`leave`]: a graceful leave, plain or sticky.
//! - [`list`]: the partition set: the copy kept to restore the group if Redis loses it,
//!   seeding, restoring, and applying a newer versioned list.
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
//!   ledger's differ on two ticks in a row with nothing in flight, or a weight changed,
//!   ask the store which terms the session holds (never with a claim or a hand-over in
//!   flight, whose answer the read could overtake).
//! - **Removed and drained.** A partition removed from the set is handed back
//!   (`Removed`); a drained replica hands everything over (`Drained`) and claims
//!   nothing until undrained.
//!
//! The timing constants are tuned for the tests and benchmarks in this repository and
//! should not be considered stable.

pub(crate) mod cadence;
pub(crate) mod leave;
pub(crate) mod ledger;
pub(crate) mod list;
pub(crate) mod loads;
pub(crate) mod policy;
pub(crate) mod session;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use leasehold_election::ext::{RenewGrid, token_with};
use leasehold_election::{Fence, StoreError};
use rand::seq::IndexedRandom;
use rand::{Rng, RngExt};
use tokio::time::Instant;

use self::cadence::{Cadence, QUICK};
pub(crate) use self::leave::Leaving;
use self::ledger::{Effect, Ledger, Phase};
use self::list::{Configured, SetSync};
pub(crate) use self::list::{SetAnswer, SetOp};
use self::policy::Policy;
use self::session::{Admitted, Session};
use crate::balance::plan::{Member, Plan, plan};
use crate::balance::prefer::{
    Standings, count_standings, hand_back, leave_to, shed_first, swap_claim, weighted_standings,
};
use crate::balance::receive::receivers;
use crate::balance::weighted::{Loaded, Totals, WeightedPlan, weighted_plan};
use crate::store::CLAIM_BATCH;
use crate::store::ops::moves::MoveCause;
use crate::store::protocol::{
    ClaimReply, Conflict, MemberInfo, MemberState, SessionReply, SetInfo, TickReply, TickRequest,
};

/// At most this many partitions preferred on a replica are named in one claim (to be
/// taken first); the others are taken as any free partition.
const PREFER_ARGS: usize = 64;

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
    /// This process, for operators (`host pid`).
    pub(crate) instance: String,
    /// This replica's capacity: its share of a weighted group's load is in proportion.
    pub(crate) capacity: u32,
    /// The group's move budget: hand-offs to even out the group per renew interval,
    /// taken out of a count Redis keeps before they are made (`None`: no limit).
    pub(crate) move_budget: Option<u32>,
    /// The budget counts the weights of the partitions handed over, not how many.
    pub(crate) budget_by_weight: bool,
}

/// A claim for the driver to send: the replica, process, session and ttl are the
/// current ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The request number: the same one again is the same request.
    pub(crate) seq: u64,
    /// Take up to this many free partitions.
    pub(crate) count: usize,
    /// Every fence at least this.
    pub(crate) floor: Fence,
    /// A weighted claim's room, and whether to take the first if none fits.
    pub(crate) room: Option<u64>,
    pub(crate) fallback: bool,
    /// A weighted claim takes the partitions handed to this replica by name up to this
    /// much weight (its bound), whether or not they fit into the room.
    pub(crate) bound: u64,
    /// Instead: new terms for these terms the session holds.
    pub(crate) regrant: Vec<(usize, Fence)>,
    /// Free partitions preferred on this replica, to take first.
    pub(crate) prefer: Vec<usize>,
    /// Take only those (a swap's first half).
    pub(crate) only_preferred: bool,
    /// Members (replica id, room) to leave the free partitions preferred on them to.
    pub(crate) leave_to: Vec<(String, u64)>,
}

/// Something for the driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Send this heartbeat (its renewal outcome goes to every waiting elector).
    Tick(TickRequest),
    /// Send this claim (or regrant).
    Claim(Claim),
    /// Start the elector of term `fence` of partition `index`, its deadline anchored at
    /// `sent`.
    Start {
        index: usize,
        fence: Fence,
        sent: Instant,
    },
    /// Hand these partitions over gracefully (cancel, grace, release), those named in
    /// `to` to that replica (reserved for it for a while: [`crate::balance::receive`]).
    Stop {
        indices: Vec<usize>,
        reason: MoveCause,
        to: BTreeMap<usize, String>,
    },
    /// Stop every elector (leaving; with `keep`, without releasing).
    StopAll { keep: bool },
    /// Take up to `want` out of the group's move budget (`budget` per renew interval:
    /// moves, or weight moved), then hand over what it grants of `indices`
    /// ([`ReplicaState::on_budget`]).
    Budget {
        indices: Vec<usize>,
        want: usize,
        budget: u32,
    },
    /// Ask the store which terms this session holds (`resume`: it was just resumed).
    Reconcile { resume: bool },
    /// These terms' electors no longer hold their partition: refuse their next renewal.
    Revoke(Vec<(usize, Fence)>),
    /// A step of changing or reading the partition set.
    Set(SetOp),
    /// End the session (the last step of a leave).
    End,
    /// Nothing left to do: the coordinator stops.
    Exit,
    /// Publish the group's notice: every replica ticks at once and plans again.
    Notify,
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

/// What a tick means for the electors waiting on it.
#[derive(Debug, Clone)]
pub(crate) enum Renewal {
    /// The session `token` was extended: its electors' renewals succeed.
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

/// A claim in flight.
#[derive(Debug, Clone)]
struct Pending {
    claim: Claim,
    /// When it was first sent (its grants' deadlines are anchored there).
    sent: Instant,
    /// Waiting to be sent again (its reply was lost) at this instant.
    resend_at: Option<Instant>,
}

/// The group as the last tick saw it.
#[derive(Debug, Default)]
struct View {
    /// Live members counted towards N, for the plan.
    members: Vec<Member>,
    /// The same with their loads and capacities, for a weighted plan.
    loaded: Vec<Loaded>,
    /// Every live member's id.
    live: Vec<String>,
    /// The partition set (`None`: the group does not exist).
    set: Option<SetInfo>,
    /// This session's partitions and load as the store counted them.
    server_held: usize,
    server_load: u64,
    /// Partitions without a live owner.
    unowned: usize,
    /// Free partitions reserved for this replica (handed to it by name).
    reserved: usize,
}

/// One replica's view of its group and what it is doing about it.
#[derive(Debug)]
pub(crate) struct ReplicaState {
    s: Settings,
    session: Session,
    cadence: Cadence,
    ledger: Ledger,
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
    claim: Option<Pending>,
    /// The last claim's sequence number.
    seq: u64,
    /// A reconcile in flight (`Some(resume)`).
    reconciling: Option<bool>,
    /// No claim before this instant (the group's grant wait).
    claim_after: Option<Instant>,
    /// Consecutive quiet ticks whose count of this session's partitions differed.
    mismatch: u32,
    /// The group's weights version this replica's weights are from.
    weights_version: u64,
    /// The send time of the last tick that extended the current session.
    renewed_at: Option<Instant>,
    /// The highest fence this replica has seen in the group.
    highest: Fence,
    /// Partitions handed over to rebalance, in total.
    handoffs: u64,
    /// A take from the move budget is in flight: no other hand-over until it answers.
    budgeting: bool,
    /// A claim since the last weighted plan was allowed a partition past its room (the
    /// plan's `fallback`): the next claims of the same plan are not (the rule allows
    /// one such claim per plan, as its convergence argument assumes).
    fallback_spent: bool,
    /// The claims sent one after another since the last one that took nothing (or
    /// since a tick) took something.
    streak_took: bool,
    /// The granting server's lifetime as the last tick reply named it: a tick in
    /// another one lists what the session holds there, and only those terms go on.
    lifetime: String,
    /// The roster as this replica last read it, and its version: a tick carries the
    /// roster only when it changed.
    roster: (String, Vec<MemberInfo>),
    /// The state the tick in flight was sent with.
    ticked: Option<MemberState>,
    /// Preferences: partition (by index) → the replica id it is preferred on, as the
    /// last first page of the set carried them, and how many first pages were read
    /// then.
    prefs: BTreeMap<usize, String>,
    prefs_copy: u64,
    /// Whether this process has taken in the preferences of a first page of the set,
    /// and since when claims have waited for that.
    prefs_known: bool,
    prefs_wait: Option<Instant>,
    /// The standings of the members partitions are preferred on (and this replica's),
    /// as the last decision computed them (empty without preferences).
    standings: Standings,
    /// The state of the last tick, if its reply changed nothing (a live session
    /// extended, with no roster, nothing expired, ended, revoked or listed): a tick
    /// sent with the same state is likely quiet, and says so ([`TickRequest::quiet`]).
    quiet_as: Option<MemberState>,
}

impl ReplicaState {
    /// A replica that joins at its first tick, at `now`, with its configured list.
    pub(crate) fn new(
        s: Settings,
        configured: Configured,
        grid: RenewGrid,
        now: Instant,
        rng: &mut impl Rng,
    ) -> Self {
        Self {
            session: Session::new(&s.replica, rng),
            cadence: Cadence::new(grid, s.renew_interval, now),
            policy: Policy::new(s.renew_interval),
            s,
            ledger: Ledger::default(),
            leaving: Leaving::No,
            set: SetSync::new(configured),
            view: View::default(),
            plan: None,
            wplan: None,
            drained: false,
            claim: None,
            seq: 0,
            reconciling: None,
            claim_after: None,
            mismatch: 0,
            weights_version: 0,
            renewed_at: None,
            highest: Fence(0),
            handoffs: 0,
            budgeting: false,
            fallback_spent: false,
            streak_took: false,
            lifetime: String::new(),
            roster: (String::new(), Vec::new()),
            ticked: None,
            quiet_as: None,
            prefs: BTreeMap::new(),
            prefs_copy: 0,
            prefs_known: false,
            prefs_wait: None,
            standings: Standings::default(),
        }
    }

    // ---- What the driver and the view read. ----

    /// This process's token (it holds the session).
    pub(crate) fn process(&self) -> &str {
        self.session.process()
    }

    /// The granting server's lifetime as the last tick reply named it.
    pub(crate) fn lifetime(&self) -> &str {
        &self.lifetime
    }

    /// The current session's token.
    pub(crate) fn token(&self) -> &str {
        self.session.token()
    }

    /// The incarnation of the group the current session lives in.
    pub(crate) fn incarnation(&self) -> &str {
        self.session.incarnation()
    }

    /// When [`ReplicaState::poll`] has something to do next (`None`: only when some
    /// reply or event arrives).
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let tick = self.may_tick().then(|| self.cadence.due_at());
        let resend = self.claim.as_ref().and_then(|p| p.resend_at);
        [tick, self.claim_after, resend].into_iter().flatten().min()
    }

    /// No tick while one is in flight (its reply comes first), once the session is
    /// being ended or parked, or while leaving without a session (nothing to renew).
    fn may_tick(&self) -> bool {
        !self.cadence.in_flight()
            && !self.leaving.done_ticking()
            && (self.leaving == Leaving::No || self.session.member())
    }

    /// Still settling, not admitted, or refused: claiming nothing.
    pub(crate) fn settling(&self, now: Instant) -> bool {
        self.session.settling(now)
    }

    /// Until when the group grants nothing (it was just created, or its Redis
    /// restarted: leases granted before may still be held), if it is waiting now.
    pub(crate) fn grants_from(&self, now: Instant) -> Option<Instant> {
        self.claim_after.filter(|at| *at > now)
    }

    /// Whether a session has ever been admitted.
    pub(crate) fn joined(&self) -> bool {
        self.session.joined()
    }

    /// The conflict that keeps this replica out, if any.
    pub(crate) fn conflict(&self) -> Option<Conflict> {
        self.session.conflict()
    }

    /// Live members at the last tick.
    pub(crate) fn live(&self) -> &[String] {
        &self.view.live
    }

    /// The last plan (cap and floor for the view).
    pub(crate) fn plan(&self) -> Option<Plan> {
        self.plan
    }

    /// Partitions in the group's set at the last tick.
    pub(crate) fn partitions(&self) -> usize {
        self.view.set.as_ref().map_or(0, |s| s.count)
    }

    /// Whether this replica's configured list differs from the group's set (the
    /// group's wins).
    pub(crate) fn list_differs(&self) -> bool {
        self.set.list_differs(self.view.set.as_ref())
    }

    /// Which partitions differ between the configured list and the group's set.
    pub(crate) fn list_difference(&self) -> Option<&crate::view::ListDifference> {
        self.set.difference()
    }

    /// Whether an operator drained this replica.
    pub(crate) fn drained(&self) -> bool {
        self.drained
    }

    /// Partitions handed over so far.
    pub(crate) fn handoffs(&self) -> u64 {
        self.handoffs
    }

    /// Where the leave stands.
    pub(crate) fn leaving(&self) -> Leaving {
        self.leaving
    }

    /// Whether releases must be refused: a sticky restart keeps every partition.
    pub(crate) fn keeps_leases(&self) -> bool {
        self.leaving.keeps_leases()
    }

    /// The ledger (what runs, what the view shows).
    pub(crate) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Whether this replica's session is a member of the group (joined, not ended).
    pub(crate) fn member(&self) -> bool {
        self.session.member()
    }

    /// The store has `weight` for term `fence` of `i` (this replica wrote it from the
    /// loads its callbacks report).
    pub(crate) fn weighed(&mut self, i: usize, fence: Fence, weight: u64) {
        self.ledger.weigh(i, fence, weight);
    }

    /// The partitions whose "owned" changed since the last call.
    pub(crate) fn take_owned_changes(&mut self) -> std::collections::BTreeSet<usize> {
        self.ledger.take_changes()
    }

    /// Whether the group balances by weight: a weight was set, or capacities differ.
    pub(crate) fn weighted(&self) -> bool {
        self.view.set.as_ref().is_some_and(|s| s.weighted)
            || self
                .view
                .loaded
                .iter()
                .any(|m| m.capacity != self.s.capacity)
    }

    /// This replica's load (the weights it holds, summed; its count unless weighted).
    pub(crate) fn load(&self) -> u64 {
        if self.view.set.as_ref().is_some_and(|s| s.weighted) {
            self.ledger.load()
        } else {
            self.ledger.held_count() as u64
        }
    }

    /// The life and version of this replica's copy of the set, once it has one.
    pub(crate) fn set_copy(&self) -> Option<(String, u64)> {
        self.set.copy().map(|c| (c.life.clone(), c.set_version))
    }

    /// The preferences of the last copy of the set, if a newer copy was read since
    /// this was last asked (partition names, for the driver to index:
    /// [`set_preferences`](Self::set_preferences)).
    pub(crate) fn new_preferences(&mut self) -> Option<Vec<(String, String)>> {
        let (read, prefs) = self.set.preferences();
        if read == self.prefs_copy {
            return None;
        }
        self.prefs_copy = read;
        Some(prefs.to_vec())
    }

    /// The group's preferences, by partition index (what
    /// [`new_preferences`](Self::new_preferences) said, indexed). The first ones a
    /// process takes in let the claims that waited for them go: returns those.
    pub(crate) fn set_preferences(
        &mut self,
        prefs: Vec<(usize, String)>,
        now: Instant,
    ) -> Vec<Action> {
        self.prefs = prefs.into_iter().collect();
        if std::mem::replace(&mut self.prefs_known, true) || self.claim.is_some() {
            return Vec::new();
        }
        self.claim(now)
    }

    /// This replica's share of the group's load, in a weighted group.
    pub(crate) fn share(&self) -> Option<f64> {
        self.wplan.as_ref().map(|(p, _)| p.share)
    }

    /// The set's largest weight, as of the last tick (1 in an unweighted group).
    pub(crate) fn max_weight(&self) -> u64 {
        self.view
            .set
            .as_ref()
            .filter(|s| s.weighted)
            .map_or(1, |s| s.max_weight)
    }

    fn member_state(&self, now: Instant) -> MemberState {
        match self.leaving {
            Leaving::Parking | Leaving::ParkSent | Leaving::Parked => MemberState::Away,
            Leaving::No | Leaving::Pausing => {
                if self.drained {
                    MemberState::Draining
                } else if self.settling(now) {
                    MemberState::Settling
                } else {
                    MemberState::Active
                }
            }
            _ => MemberState::Leaving,
        }
    }

    fn held(&self) -> usize {
        self.ledger.held_count()
    }

    /// Nothing in flight that a reconcile's answer could miss or overtake.
    fn quiet(&self) -> bool {
        self.claim.is_none() && self.reconciling.is_none() && !self.ledger.busy()
    }

    // ---- Inputs. ----

    /// The clock reached [`ReplicaState::wake_at`].
    pub(crate) fn poll(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Some(p) = &mut self.claim
            && p.resend_at.is_some_and(|at| at <= now)
        {
            p.resend_at = None;
            actions.push(Action::Claim(p.claim.clone()));
        }
        if self.claim_after.is_some_and(|c| c <= now) {
            self.claim_after = None;
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
            self.ticked = Some(state);
            actions.push(Action::Tick(TickRequest {
                replica: self.s.replica.clone(),
                process: self.session.process().to_owned(),
                session: self.session.token().to_owned(),
                join,
                state,
                ttl,
                instance: self.s.instance.clone(),
                capacity: self.s.capacity,
                sticky: self.s.rejoin_grace.is_some(),
                incarnation: self.session.incarnation().to_owned(),
                lifetime: self.lifetime.clone(),
                roster: self.roster.0.clone(),
                quiet: !join && self.quiet_as == Some(state),
            }));
        }
        actions
    }

    /// A tick sent at `sent` came back; `revoked` are the partitions (by index) it says
    /// this session must give up, and `holdings` everything the session holds if the
    /// granting server changed since the last tick (by index, fence and weight): every
    /// other term is revoked (the actions start with it, and the driver applies it
    /// before this tick's renewal reaches the electors).
    pub(crate) fn on_tick(
        &mut self,
        reply: Result<TickReply, StoreError>,
        revoked: &[usize],
        holdings: Option<&[(usize, Fence, u64)]>,
        sent: Instant,
        now: Instant,
        rng: &mut impl Rng,
    ) -> (Renewal, Vec<Action>) {
        self.cadence.answered();
        let mut actions = Vec::new();
        match self.leaving {
            Leaving::Announcing => {
                // Told the group (or could not): now hand everything back.
                self.leaving = Leaving::Stopping;
                actions.extend(self.stop_everything(false, now));
            }
            Leaving::ParkSent => {
                // Marked away (or could not: then it expires within one lease).
                self.leaving = Leaving::Parked;
                actions.push(Action::Exit);
            }
            _ => {}
        }
        let ticked = self.ticked.take();
        self.quiet_as = None;
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return (Renewal::Failed(e), actions),
        };
        let changed_nothing = reply.session == SessionReply::Live
            && reply.resumed.is_none()
            && !reply.roster.is_sent()
            && reply.expired == 0
            && reply.ending == 0
            && reply.revoked.is_empty()
            && reply.holdings.is_none();
        if changed_nothing {
            self.quiet_as = ticked;
        }
        self.follow_roster(&reply);
        let renewal = match reply.session {
            SessionReply::Live => {
                let served = self.roster.1.iter().any(|m| {
                    m.replica != self.s.replica && m.state == MemberState::Active && m.held > 0
                });
                // Settling lets replicas started together see each other before anyone
                // claims. A replica joining a group that is already being served (a
                // restart in a rolling deploy, a scale-up) has nobody to wait for: it
                // takes its share at once, so that nothing freed for it sits unowned
                // while it settles. In a group that grants nothing yet (just created:
                // one renew interval on a server older than a lease, else a lease) the
                // replicas started together gather until it grants, and claim then.
                let settle = if served {
                    Duration::ZERO
                } else if self.session.joined() {
                    self.s.renew_interval
                } else if !reply.grant_wait.is_zero() {
                    self.s.settle.min(reply.grant_wait)
                } else {
                    self.s.settle
                };
                let incarnation = reply.set.as_ref().map_or("", |s| s.incarnation.as_str());
                match self
                    .session
                    .live(reply.resumed.as_deref(), settle, incarnation, now)
                {
                    Admitted::Resumed => {
                        // Back from a sticky restart: this process holds the session,
                        // with every partition it held, each to get a new term.
                        self.renewed_at = Some(sent);
                        self.reconcile(true, &mut actions);
                    }
                    Admitted::Joined => {
                        self.renewed_at = Some(sent);
                        self.cadence.wake(now + settle);
                    }
                    Admitted::Extended => {
                        self.renewed_at = Some(sent);
                        if let Some(held) = holdings {
                            // The server changed: it may have lost claims of ours.
                            actions.extend(self.adopt(held, now));
                        }
                    }
                }
                Renewal::Renewed {
                    token: self.session.token().to_owned(),
                }
            }
            SessionReply::Lost => {
                // Whatever this session held is gone; its electors are refused from now
                // on, also if a join resumes the same session again (a failover may give
                // back a parked copy of it). Start a new session at once.
                let gone = self.session_over(now, rng);
                if !gone.is_empty() {
                    actions.push(Action::Revoke(gone));
                }
                if matches!(
                    self.leaving,
                    Leaving::Parking | Leaving::ParkSent | Leaving::Pausing
                ) {
                    // A sticky leave whose session is gone has nothing to park.
                    self.leaving = Leaving::Pausing;
                    actions.extend(self.end_if_done(now));
                }
                Renewal::Refused
            }
            SessionReply::Refused(c) => {
                self.session.refused(c);
                Renewal::Refused
            }
            // No group to join yet: the set sync seeds or restores it, the next tick
            // joins.
            SessionReply::NoGroup => Renewal::Refused,
        };
        self.lifetime.clone_from(&reply.lifetime);
        self.observe(&reply, now);
        if matches!(self.leaving, Leaving::Stopping | Leaving::Pausing) {
            // The reply may have cleared the last thing a leave waited for.
            actions.extend(self.end_if_done(now));
        }
        if self.leaving == Leaving::No {
            // Also a replica kept out (a duplicate id) keeps its copy of the set and may
            // restore the group: the set is everyone's.
            let set = self.view.set.clone();
            let mut life = || token_with("life", rng);
            if let Some(op) =
                self.set
                    .on_tick(set.as_ref(), reply.grant_wait, &reply.lifetime, &mut life)
            {
                actions.push(Action::Set(op));
            }
        }
        if self.session.member() && self.leaving == Leaving::No {
            actions.extend(self.revoke(revoked));
            actions.extend(self.check_count());
            actions.extend(self.refresh_weights());
            actions.extend(self.decide(now, rng));
        }
        (renewal, actions)
    }

    /// Hands back partitions removed from the set.
    fn revoke(&mut self, revoked: &[usize]) -> Vec<Action> {
        let mut stop = Vec::new();
        for &i in revoked {
            match self.ledger.held(i).map(|h| h.phase) {
                Some(Phase::Serving) => {
                    self.ledger.stop(i, MoveCause::Removal);
                    stop.push(i);
                }
                // Not started yet: it is given back by the next regrant.
                Some(Phase::Starting) => self.ledger.unstart(i),
                _ => {}
            }
        }
        if stop.is_empty() {
            return Vec::new();
        }
        vec![Action::Stop {
            indices: stop,
            reason: MoveCause::Removal,
            to: BTreeMap::new(),
        }]
    }

    /// Brings the kept roster to the version a tick read: all of it, what changed of
    /// it, or nothing (kept by replica id, so that its order does not depend on when
    /// it was read).
    fn follow_roster(&mut self, reply: &TickReply) {
        reply.roster.apply(&mut self.roster.1);
        self.roster.0.clone_from(&reply.roster_version);
    }

    /// Takes in the members, counts and timers of a tick reply.
    fn observe(&mut self, reply: &TickReply, now: Instant) {
        let v = &mut self.view;
        v.unowned = reply.unowned;
        v.reserved = reply.reserved;
        v.set.clone_from(&reply.set);
        if let Some(set) = &reply.set {
            self.highest = self.highest.max(set.highest_fence);
        }
        self.drained = reply.drained;
        self.claim_after = (!reply.grant_wait.is_zero()).then(|| now + reply.grant_wait);
        let members = &self.roster.1;
        v.live = members.iter().map(|m| m.replica.clone()).collect();
        v.members = members
            .iter()
            .filter(|m| m.state.counts())
            .map(|m| Member {
                replica: m.replica.clone(),
                owned: (m.state != MemberState::Settling).then_some(m.held),
            })
            .collect();
        v.loaded = members
            .iter()
            .filter(|m| m.state.counts())
            .map(|m| Loaded {
                replica: m.replica.clone(),
                load: (m.state != MemberState::Settling).then_some(m.load),
                held: m.held,
                capacity: m.capacity,
            })
            .collect();
        let me = members.iter().find(|m| m.replica == self.s.replica);
        v.server_held = me.map_or(0, |m| m.held);
        v.server_load = me.map_or(0, |m| m.load);
        // A member that stops heartbeating ends when its session expires: look again
        // right after the earliest expiry if that comes before the next regular tick,
        // so its partitions move within one lease of its last heartbeat plus a tick.
        if let Some(left) = reply.soonest
            && now + left < self.cadence.next()
        {
            self.cadence.wake(now + left + QUICK);
        }
        // Ended sessions whose partitions are still being freed, chunk by chunk.
        if reply.ending > 0 {
            self.cadence.wake(now + QUICK);
        }
    }

    /// Starts over with a new session (the last one ended).
    /// The session has ended: returns the terms it held (each to be refused).
    fn session_over(&mut self, now: Instant, rng: &mut impl Rng) -> Vec<(usize, Fence)> {
        let gone: Vec<(usize, Fence)> = self.ledger.terms().map(|(i, h)| (i, h.fence)).collect();
        self.session.lost(rng);
        self.ledger.session_lost();
        // A claim or a read in flight was for the old session: its answer is ignored.
        self.claim = None;
        self.reconciling = None;
        self.renewed_at = None;
        self.view.server_held = 0;
        self.mismatch = 0;
        self.policy.reset();
        self.plan = None;
        self.cadence.wake(now);
        gone
    }

    fn reconcile(&mut self, resume: bool, actions: &mut Vec<Action>) {
        self.mismatch = 0;
        self.reconciling = Some(resume);
        actions.push(Action::Reconcile { resume });
    }

    /// Two quiet ticks in a row with the store counting this session's partitions
    /// otherwise than the ledger: reconcile.
    fn check_count(&mut self) -> Vec<Action> {
        if self.quiet() && self.view.server_held != self.held() {
            self.mismatch += 1;
        } else {
            self.mismatch = 0;
        }
        let mut actions = Vec::new();
        if self.mismatch >= 2 {
            self.reconcile(false, &mut actions);
        }
        actions
    }

    /// A weight changed since this replica last read its partitions' weights: read
    /// them again (the same read as a reconcile), once nothing is in flight.
    fn refresh_weights(&mut self) -> Vec<Action> {
        let Some(set) = &self.view.set else {
            return Vec::new();
        };
        if !set.weighted || set.weights_version == self.weights_version || !self.quiet() {
            return Vec::new();
        }
        self.weights_version = set.weights_version;
        let mut actions = Vec::new();
        if self.held() > 0 {
            self.reconcile(false, &mut actions);
        }
        actions
    }

    /// Applies the balancing rule to the last tick's view: hand over, then claim.
    fn decide(&mut self, now: Instant, rng: &mut impl Rng) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.drained {
            // Hand everything over; the others take it (a draining member is not
            // counted towards N). Nothing is claimed until undrained.
            self.plan = None;
            self.wplan = None;
            let all = self.ledger.serving();
            for &i in &all {
                self.ledger.stop(i, MoveCause::Drain);
            }
            for (i, _) in self.ledger.in_phase(Phase::Starting) {
                self.ledger.unstart(i);
            }
            if !all.is_empty() {
                actions.push(Action::Stop {
                    indices: all,
                    reason: MoveCause::Drain,
                    to: BTreeMap::new(),
                });
            }
            // Unserved terms are given back by a regrant.
            actions.extend(self.claim(now));
            return actions;
        }
        let settling = self.settling(now);
        // Which partitions to hand over if the rule insists (`None`: a count to pick).
        let (wants, named) = if self.weighted() {
            self.plan = None;
            let set = self
                .view
                .set
                .clone()
                .unwrap_or_else(|| SetInfo::plain(0, 0, ""));
            let mine: Vec<(usize, u64)> = self
                .ledger
                .terms()
                .filter(|(_, h)| h.phase == Phase::Serving)
                .map(|(i, h)| (i, h.weight))
                .collect();
            let wplan = weighted_plan(
                &self.s.replica,
                self.view.server_load,
                &mine,
                settling,
                self.s.capacity,
                &self.view.loaded,
                Totals {
                    weight: set.total_weight,
                    max_weight: set.max_weight,
                    unowned: self.view.unowned,
                },
            );
            let anyone = settling || self.view.loaded.iter().any(|m| m.load.is_none());
            self.policy.observe(self.view.unowned, anyone, now);
            let shed = wplan.shed.clone();
            self.wplan = Some((wplan, self.view.server_load));
            self.fallback_spent = false;
            (!shed.is_empty(), Some(shed))
        } else {
            self.wplan = None;
            let p = plan(
                self.partitions(),
                &self.s.replica,
                self.view.server_held,
                settling,
                &self.view.members,
                self.view.unowned,
            );
            self.plan = Some(p);
            let anyone = settling || self.view.members.iter().any(|m| m.owned.is_none());
            self.policy.observe(self.view.unowned, anyone, now);
            (p.shed > 0, None)
        };
        let (wants, named) = self.with_preferences(settling, wants, named);
        // The last hand-over has landed: released, every partition owned again, and the
        // store counts what the ledger holds.
        let landed =
            self.view.unowned == 0 && self.ledger.at_rest() && self.view.server_held == self.held();
        let go = self.policy.hand_over(wants, landed, now);
        if let Some(after) = self.policy.look_again(go, now) {
            self.cadence.wake(now + after);
        }
        if go {
            let candidates = match named {
                Some(shed) => shed,
                None if !self.prefs.is_empty() => {
                    // The rule says how many; preferences say which: a random order,
                    // those preferred on a member with room first, this replica's own
                    // last.
                    let n = self.plan.map_or(0, |p| p.shed);
                    let mut serving = self.ledger.serving();
                    rand::seq::SliceRandom::shuffle(serving.as_mut_slice(), rng);
                    let prefs = &self.prefs;
                    let ordered = shed_first(
                        &self.s.replica,
                        &serving,
                        |i| prefs.get(&i).map(String::as_str),
                        &self.standings,
                    );
                    ordered.into_iter().take(n).collect()
                }
                None => {
                    let n = self.plan.map_or(0, |p| p.shed);
                    self.ledger.serving().sample(rng, n).copied().collect()
                }
            };
            match self.s.move_budget {
                // Within the group's budget: ask for it first, hand over what it grants.
                Some(budget) if !candidates.is_empty() && !self.budgeting => {
                    self.budgeting = true;
                    let want = if self.s.budget_by_weight {
                        let w: u64 = candidates.iter().map(|&i| self.weight_of(i)).sum();
                        usize::try_from(w).unwrap_or(usize::MAX)
                    } else {
                        candidates.len()
                    };
                    actions.push(Action::Budget {
                        indices: candidates,
                        want,
                        budget,
                    });
                }
                Some(_) => {}
                None => actions.extend(self.hand_over(candidates, usize::MAX)),
            }
        }
        actions.extend(self.claim(now));
        actions
    }

    /// Takes the group's preferences into a decision: the standings of the members
    /// partitions are preferred on (for claims and hand-overs), and, when the rule
    /// hands nothing over (`wants` false), every partition has an owner and nobody
    /// settles, one partition to hand back to the member it is preferred on, if that
    /// keeps the group within its bound ([`hand_back`]). Returns what to hand over.
    fn with_preferences(
        &mut self,
        settling: bool,
        wants: bool,
        named: Option<Vec<usize>>,
    ) -> (bool, Option<Vec<usize>>) {
        self.standings = Standings::default();
        if self.prefs.is_empty() || settling {
            return (wants, named);
        }
        let me = self.s.replica.as_str();
        // Settling members too: claims leave them their preferred partitions (the
        // rule keeps their share free for them anyway), nobody hands one over to them.
        let active: BTreeSet<&str> = self
            .roster
            .1
            .iter()
            .filter(|m| matches!(m.state, MemberState::Active | MemberState::Settling))
            .map(|m| m.replica.as_str())
            .collect();
        // Each of them with how many partitions are preferred on it.
        let mut eligible: BTreeMap<&str, usize> = BTreeMap::new();
        for r in self.prefs.values().map(String::as_str) {
            if active.contains(r) {
                *eligible.entry(r).or_default() += 1;
            }
        }
        eligible.entry(me).or_default();
        self.standings = match &self.wplan {
            Some(_) => {
                let set = self.view.set.as_ref();
                weighted_standings(
                    &self.view.loaded,
                    crate::balance::weighted::Totals {
                        weight: set.map_or(0, |s| s.total_weight),
                        max_weight: set.map_or(1, |s| s.max_weight),
                        unowned: self.view.unowned,
                    },
                    &eligible.keys().copied().collect(),
                )
            }
            None => count_standings(
                self.partitions(),
                &self.view.members,
                self.view.unowned,
                &eligible,
            ),
        };
        let anyone_settling = self
            .roster
            .1
            .iter()
            .any(|m| m.state == MemberState::Settling);
        if wants || self.view.unowned > 0 || anyone_settling {
            return (wants, named);
        }
        let mine: Vec<(usize, u64)> = self
            .ledger
            .terms()
            .filter(|(_, h)| h.phase == Phase::Serving)
            .map(|(i, h)| (i, h.weight))
            .collect();
        let prefs = &self.prefs;
        match hand_back(
            me,
            &mine,
            |i| prefs.get(&i).map(String::as_str),
            &self.standings,
        ) {
            Some(i) => (true, Some(vec![i])),
            None => (wants, named),
        }
    }

    /// Hands over up to `limit` of `candidates` (the first ones still served) to even
    /// out the group.
    fn hand_over(&mut self, candidates: Vec<usize>, limit: usize) -> Option<Action> {
        let mut chosen = Vec::new();
        for i in candidates {
            if chosen.len() == limit {
                break;
            }
            let weight = self.weight_of(i);
            if self.ledger.stop(i, MoveCause::HandOff) {
                chosen.push((i, weight));
            }
        }
        self.handoffs += chosen.len() as u64;
        let to = self.receivers(&chosen);
        (!chosen.is_empty()).then_some(Action::Stop {
            indices: chosen.into_iter().map(|(i, _)| i).collect(),
            reason: MoveCause::HandOff,
            to,
        })
    }

    /// Names a receiver for each of `handed` (index, weight) that a member has room
    /// for ([`receivers`]), from the last tick's view of every member.
    fn receivers(&self, handed: &[(usize, u64)]) -> BTreeMap<usize, String> {
        if handed.is_empty() {
            return BTreeMap::new();
        }
        let standings = match &self.wplan {
            Some(_) => {
                let set = self.view.set.as_ref();
                let everyone = self
                    .view
                    .loaded
                    .iter()
                    .map(|m| m.replica.as_str())
                    .collect();
                weighted_standings(
                    &self.view.loaded,
                    Totals {
                        weight: set.map_or(0, |s| s.total_weight),
                        max_weight: set.map_or(1, |s| s.max_weight),
                        unowned: self.view.unowned,
                    },
                    &everyone,
                )
            }
            None => {
                let everyone = self
                    .view
                    .members
                    .iter()
                    .map(|m| (m.replica.as_str(), 0))
                    .collect();
                count_standings(
                    self.partitions(),
                    &self.view.members,
                    self.view.unowned,
                    &everyone,
                )
            }
        };
        let prefs = &self.prefs;
        let mut out = receivers(
            &self.s.replica,
            handed,
            |i| prefs.get(&i).map(String::as_str),
            &standings,
        );
        // By weight, the rule names a receiver for every partition it sheds: the
        // member whose room it sheds it into. That name stands, unless the partition
        // goes to the member it is preferred on (which has room for it).
        if let Some((wplan, _)) = &self.wplan {
            for &(i, _) in handed {
                let Some(to) = wplan.to.get(&i) else { continue };
                let preferred = prefs.get(&i).is_some_and(|r| out.get(&i) == Some(r));
                if !preferred {
                    out.insert(i, to.clone());
                }
            }
        }
        out
    }

    /// The move budget granted `granted` of what the hand-overs of `indices` asked for
    /// ([`Action::Budget`]; 0 if the take failed): hands over that many of them (with a
    /// budget by weight, the first ones whose weights fit into it; one heavier than the
    /// whole budget goes alone when it is granted a whole window), the first ones still
    /// served. The rule asks again at a later tick for the rest: the next one if it got
    /// none, else after the hand-over's cooldown.
    pub(crate) fn on_budget(&mut self, indices: Vec<usize>, granted: usize) -> Vec<Action> {
        self.budgeting = false;
        if self.leaving != Leaving::No || !self.session.member() {
            return Vec::new();
        }
        let granted = if self.s.budget_by_weight {
            self.fitting(&indices, granted)
        } else {
            granted
        };
        if granted == 0 {
            // Nothing moved, so no count lags behind: ask again at the next tick (the
            // next window), not after a cooldown. Replicas tick on one grid, so
            // otherwise every window after a contended one would go unused.
            self.policy.refund();
            return Vec::new();
        }
        self.hand_over(indices, granted).into_iter().collect()
    }

    /// How many of the first of `indices` (those still served) fit into `weight`; the
    /// first alone if it is heavier than the whole budget and `weight` is all of it (it
    /// could never fit otherwise).
    fn fitting(&self, indices: &[usize], weight: usize) -> usize {
        let weight = weight as u64;
        let whole = self.s.move_budget.map_or(0, u64::from);
        let (mut n, mut used) = (0, 0);
        for &i in indices {
            let Some(h) = self.ledger.held(i).filter(|h| h.phase == Phase::Serving) else {
                continue;
            };
            let w = h.weight;
            if used + w <= weight {
                used += w;
                n += 1;
            } else {
                if n == 0 && w > whole && weight >= whole {
                    n = 1;
                }
                break;
            }
        }
        n
    }

    /// The weight of partition `i` as this replica holds it (1 if it holds none).
    fn weight_of(&self, i: usize) -> u64 {
        self.ledger.held(i).map_or(1, |h| h.weight)
    }

    /// Partitions nobody has claimed for longer than lease + retry interval while
    /// nobody settles.
    fn orphaned(&self, now: Instant) -> bool {
        self.policy
            .orphaned(self.s.lease + self.s.retry_interval, now)
    }

    /// In a weighted group: the room left for claims now (`None` in a count group).
    fn room(&self, now: Instant) -> Option<u64> {
        let (wplan, base) = self.wplan.as_ref()?;
        if self.orphaned(now) && wplan.shed.is_empty() {
            return Some(u64::MAX);
        }
        if !wplan.shed.is_empty() {
            return Some(0);
        }
        let target = base.saturating_add(wplan.room);
        Some(target.saturating_sub(self.ledger.load().max(self.view.server_load)))
    }

    /// In a weighted group: how much weight of the partitions handed to this replica by
    /// name it may take now (up to its bound; `None` in a count group).
    fn bound(&self, now: Instant) -> Option<u64> {
        let (wplan, base) = self.wplan.as_ref()?;
        if !wplan.shed.is_empty() {
            return Some(0);
        }
        if self.orphaned(now) {
            return Some(u64::MAX);
        }
        let target = base.saturating_add(wplan.bound);
        Some(target.saturating_sub(self.ledger.load().max(self.view.server_load)))
    }

    /// How many partitions to claim now beyond what this replica holds.
    fn budget(&self, now: Instant) -> usize {
        let Some(plan) = self.plan else { return 0 };
        let held = self.held().max(self.view.server_held);
        let mut budget = plan.allowance.saturating_sub(held);
        // Availability before balance: partitions nobody has claimed for longer than
        // lease + retry interval while nobody settles go to whoever asks, above the cap.
        if self.orphaned(now) && plan.shed == 0 {
            budget = budget.max(self.view.unowned);
        }
        budget.min(self.view.unowned)
    }

    /// By count, at its allowance: whether to claim one free partition preferred on
    /// this replica beyond it, a swap's first half ([`swap_claim`]).
    fn swap_wanted(&self) -> bool {
        let Some(plan) = self.plan else { return false };
        if self.prefs.is_empty() {
            return false;
        }
        let me = self.s.replica.as_str();
        let mut holds_other = false;
        for (i, _) in self.ledger.terms() {
            if self.prefs.get(&i).is_none_or(|r| r != me) {
                holds_other = true;
                break;
            }
        }
        let misses_own = self
            .prefs
            .iter()
            .any(|(i, r)| r == me && self.ledger.held(*i).is_none());
        swap_claim(
            &plan,
            self.held().max(self.view.server_held),
            self.view.unowned,
            holds_other,
            misses_own,
        )
    }

    fn claim(&mut self, now: Instant) -> Vec<Action> {
        // No claim while reconciling either: the answer must not miss a partition that a
        // claim sent after it grants.
        if !self.session.member()
            || self.leaving != Leaving::No
            || self.claim.is_some()
            || self.reconciling.is_some()
            || self.claim_after.is_some_and(|c| c > now)
        {
            return Vec::new();
        }
        let floor = Fence(self.highest.max(self.set.highest_fence()).get() + 1);
        // Unserved terms first: granted again, or given back by the store (removed,
        // revoked, drained).
        let unserved: Vec<(usize, Fence)> = self
            .ledger
            .in_phase(Phase::Unserved)
            .into_iter()
            .take(CLAIM_BATCH)
            .collect();
        let mut claim = Claim {
            seq: self.seq + 1,
            count: 0,
            floor,
            room: None,
            fallback: false,
            bound: 0,
            regrant: Vec::new(),
            prefer: Vec::new(),
            only_preferred: false,
            leave_to: Vec::new(),
        };
        if !unserved.is_empty() {
            self.ledger.mark(&unserved, Phase::Regranting);
            claim.regrant = unserved;
        } else {
            if self.settling(now) || self.drained {
                let reason = if self.drained {
                    Decline::Draining
                } else {
                    Decline::Settling
                };
                return self.declined(reason);
            }
            // The first claims of this process wait for the set's first page, which
            // says which partitions are preferred on whom, for one renew interval at
            // most (availability first); its answer claims at once.
            if !self.prefs_known {
                let since = *self.prefs_wait.get_or_insert(now);
                if now.saturating_duration_since(since) < self.s.renew_interval {
                    return Vec::new();
                }
            }
            let room = self.room(now);
            // Orphans go to whoever asks; else the plan says who may take one that does
            // not fit.
            let orphans = room == Some(u64::MAX);
            let fallback = orphans
                || !self.fallback_spent
                    && self
                        .wplan
                        .as_ref()
                        .is_some_and(|(p, _)| p.fallback && p.shed.is_empty());
            let mut count = match room {
                Some(0) if !fallback => 0,
                Some(_) => self.view.unowned.min(CLAIM_BATCH),
                None => self.budget(now).min(CLAIM_BATCH),
            };
            // Partitions handed to this replica by name: the giver's rule chose it for
            // them, so it takes them up to its bound (by weight), whatever its room.
            let bound = self.bound(now).unwrap_or(0);
            if self.view.reserved > 0 && bound > 0 {
                count = count.max(self.view.reserved.min(CLAIM_BATCH));
            }
            if count == 0 && room.is_none() && self.swap_wanted() {
                count = 1;
                claim.only_preferred = true;
            }
            if count == 0 {
                return self.declined(Decline::Full);
            }
            claim.count = count;
            claim.room = room;
            claim.fallback = fallback;
            claim.bound = bound;
            if !self.prefs.is_empty() {
                let me = self.s.replica.as_str();
                claim.prefer = self
                    .prefs
                    .iter()
                    .filter(|(i, r)| r.as_str() == me && self.ledger.held(**i).is_none())
                    .map(|(i, _)| *i)
                    .take(PREFER_ARGS)
                    .collect();
                // Availability before preference: not for orphans, nor once
                // partitions have gone without an owner for a renew interval.
                if !orphans
                    && !self.orphaned(now)
                    && self.policy.may_leave(self.s.renew_interval, now)
                {
                    claim.leave_to = leave_to(me, &self.standings);
                }
            }
            self.fallback_spent |= fallback && !orphans;
        }
        self.seq = claim.seq;
        self.claim = Some(Pending {
            claim: claim.clone(),
            sent: now,
            resend_at: None,
        });
        vec![Action::Claim(claim)]
    }

    /// No claim now: partitions handed to this replica by name, if any, are declined
    /// (the driver logs and counts why).
    fn declined(&self, reason: Decline) -> Vec<Action> {
        if self.view.reserved == 0 {
            return Vec::new();
        }
        vec![Action::Decline {
            count: self.view.reserved,
            reason,
        }]
    }

    /// A claim came back (it was sent for session `token`); the granted partitions are
    /// named by index.
    pub(crate) fn on_claimed(
        &mut self,
        reply: Result<ClaimReply, ClaimFailure>,
        granted: &[(usize, Fence, u64)],
        returned: &[usize],
        token: &str,
        now: Instant,
    ) -> Vec<Action> {
        if token != self.session.token() {
            // For a session that has ended: whatever it granted went with the session.
            return Vec::new();
        }
        let Some(pending) = self.claim.take() else {
            return Vec::new();
        };
        let regrant = pending.claim.regrant.clone();
        match reply {
            Ok(ClaimReply::Claimed {
                unowned, fell_back, ..
            }) => {
                self.view.unowned = unowned;
                // A claim takes what is reserved for it first.
                if regrant.is_empty() {
                    self.view.reserved = self.view.reserved.saturating_sub(granted.len());
                }
                let mut actions = Vec::new();
                let sent = self
                    .renewed_at
                    .map_or(pending.sent, |r| r.max(pending.sent));
                let mut won = false;
                for &(i, fence, weight) in granted {
                    self.highest = self.highest.max(fence);
                    won = true;
                    if self.leaving != Leaving::No {
                        // Sent before the leave began: the end of the session (or the
                        // parked session) has it.
                        continue;
                    }
                    if let Some(Effect::Start(i, fence, sent)) =
                        self.ledger.grant(i, fence, weight, sent)
                    {
                        actions.push(Action::Start {
                            index: i,
                            fence,
                            sent,
                        });
                    }
                }
                // Regranted terms not granted again were given back, or were not the
                // session's any more.
                let kept: std::collections::BTreeSet<usize> =
                    granted.iter().map(|(i, _, _)| *i).collect();
                let gone: Vec<(usize, Fence)> = regrant
                    .iter()
                    .copied()
                    .filter(|(i, _)| !kept.contains(i) || returned.contains(i))
                    .collect();
                self.ledger.drop_terms(&gone);
                if self.leaving != Leaving::No {
                    actions.extend(self.end_if_done(now));
                    return actions;
                }
                // More to take (or regrant), and the last batch was not empty-handed:
                // go on at once.
                let more = if won || !regrant.is_empty() {
                    self.claim(now)
                } else {
                    Vec::new()
                };
                // By weight, partitions still free once this replica's claims are done
                // (or after its fallback took one that fit nowhere) fit nobody's room as
                // every replica planned it: the loads moved since, and so may who is
                // furthest below its share. Every replica plans again now, rather than
                // at its next regular tick (a killed replica's last orphans came back a
                // renew interval after the others). Each round takes at least one.
                self.streak_took |= won;
                if !more.iter().any(|a| matches!(a, Action::Claim(_))) {
                    let took = std::mem::take(&mut self.streak_took);
                    if self.wplan.is_some() && unowned > 0 && (fell_back || took) {
                        actions.push(Action::Notify);
                    }
                } else if self.wplan.is_some() && unowned > 0 && fell_back {
                    actions.push(Action::Notify);
                }
                actions.extend(more);
                actions
            }
            Ok(ClaimReply::Wait(d)) => {
                self.ledger.unsend(&regrant);
                self.claim_after = Some(now + d);
                self.end_if_done(now)
            }
            Ok(ClaimReply::Lost) => {
                // The next tick confirms it and starts a new session.
                self.ledger.unsend(&regrant);
                self.cadence.wake(now);
                self.end_if_done(now)
            }
            Ok(ClaimReply::Stale) => {
                // Overtaken by a later request of this process: ask what it holds.
                self.ledger.unsend(&regrant);
                let mut actions = self.end_if_done(now);
                if self.leaving == Leaving::No {
                    self.reconcile(false, &mut actions);
                }
                actions
            }
            Err(ClaimFailure::Failed) if self.leaving != Leaving::No => {
                // Ending the session frees whatever it may have taken.
                self.ledger.unsend(&regrant);
                self.end_if_done(now)
            }
            Err(ClaimFailure::Failed) => {
                // It may or may not have been applied: send the same request again; the
                // store applies it once and answers it again.
                self.claim = Some(Pending {
                    resend_at: Some(now + (self.s.renew_interval / 4).min(QUICK * 20)),
                    ..pending
                });
                Vec::new()
            }
        }
    }

    /// The store said which terms session `token` holds (by index; `None`: the read
    /// failed).
    pub(crate) fn on_reconciled(
        &mut self,
        held: Option<Vec<(usize, Fence, u64)>>,
        token: &str,
        now: Instant,
    ) -> Vec<Action> {
        if token != self.session.token() {
            return Vec::new();
        }
        let Some(resume) = self.reconciling.take() else {
            return Vec::new();
        };
        let Some(held) = held else {
            if resume {
                // Ask again at once: the resumed partitions wait for it.
                let mut actions = Vec::new();
                self.reconcile(true, &mut actions);
                return actions;
            }
            return self.claim(now);
        };
        let mut actions = self.adopt(&held, now);
        actions.extend(self.claim(now));
        actions
    }

    /// Takes the store's word for which terms this session holds (`held`: index, fence,
    /// weight): terms the ledger holds that the store does not are revoked (their
    /// electors refused their next renewal), the store's are weighed, and those no
    /// elector of ours serves wait for a regrant.
    fn adopt(&mut self, held: &[(usize, Fence, u64)], now: Instant) -> Vec<Action> {
        let store: BTreeMap<usize, (Fence, u64)> =
            held.iter().map(|(i, f, w)| (*i, (*f, *w))).collect();
        let mut revoke = Vec::new();
        // Terms the ledger holds that the store does not (under this fence).
        let ours: Vec<(usize, Fence, Phase)> = self
            .ledger
            .terms()
            .map(|(i, h)| (i, h.fence, h.phase))
            .collect();
        for (i, fence, phase) in ours {
            if store.get(&i).is_some_and(|(f, _)| *f == fence) {
                continue;
            }
            if matches!(phase, Phase::Stopping(_)) {
                // Handing over already; its release finds it gone.
                continue;
            }
            if self.ledger.forget(i, fence) {
                revoke.push((i, fence));
            }
        }
        // Terms the store holds: weights, and those no elector of ours runs.
        for (&i, &(fence, weight)) in &store {
            match self.ledger.held(i) {
                Some(h) if h.fence == fence => self.ledger.weigh(i, fence, weight),
                Some(_) => {}
                None => self.ledger.unserved(i, fence, weight, now),
            }
        }
        let mut actions = Vec::new();
        if !revoke.is_empty() {
            actions.push(Action::Revoke(revoke));
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

    /// The elector of term `fence` of partition `i` has ended (after its release).
    pub(crate) fn on_stopped(&mut self, i: usize, fence: Fence, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Some(Effect::Start(i, fence, sent)) = self.ledger.ended(i, fence) {
            if self.leaving == Leaving::No {
                let sent = self.renewed_at.map_or(sent, |r| r.max(sent));
                actions.push(Action::Start {
                    index: i,
                    fence,
                    sent,
                });
            } else {
                self.ledger.discard(i, fence);
            }
        }
        actions.extend(self.end_if_done(now));
        actions
    }

    /// Once a leave has stopped every elector and no claim is in flight (one could
    /// still grant this session partitions nobody would serve): end the session, or
    /// (sticky) mark it away with the next tick.
    fn end_if_done(&mut self, now: Instant) -> Vec<Action> {
        if self.ledger.electors() > 0 || self.claim.is_some() {
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

    /// Stops every elector; what no elector runs is left to the end of the session
    /// (plain) or kept with it (sticky).
    fn stop_everything(&mut self, keep: bool, now: Instant) -> Vec<Action> {
        for i in self.ledger.serving() {
            self.ledger.stop(i, MoveCause::Leave);
        }
        self.ledger.drop_unstarted();
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

    /// An elector is waiting for a renewal.
    pub(crate) fn on_renew_wanted(&mut self, now: Instant) {
        self.cadence.renewal_wanted(now);
    }

    /// Shut down: announce, stop every elector, end the session. With a rejoin grace:
    /// stop every elector without releasing, then mark the session away.
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
