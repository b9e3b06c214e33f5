//! One replica's decisions over time, as a pure state machine: no I/O, no clock, no
//! random numbers of its own. The driver ([`crate::coordinator`]) feeds it what
//! happened (a tick's reply, a claim's reply, an elector that ended, a notice, the
//! clock) and performs the [`Action`]s it returns.
//!
//! The rules it keeps, each unit-tested below:
//! - **Sessions.** The first tick of a session joins with a fresh token; a session the
//!   store reports lost is never renewed again: a new one starts at once, and every
//!   elector of the old one is refused its next renewal. A join that finds its replica's
//!   session `away` (a sticky restart) resumes it and regrants its partitions.
//! - **Settling.** After joining, claim nothing for `settle` (one renew interval after
//!   a lost session; nothing after resuming, or when joining a group an active member
//!   already serves).
//! - **The partition set is the group's.** P comes from the store. A group that does
//!   not exist is created from this replica's list; a newer versioned list is applied
//!   (its additions, then its removals); an older or unversioned one only follows.
//! - **Claims.** Up to the plan's allowance, in batches, one batch in flight at a time;
//!   nothing before the group's grant wait has passed.
//! - **Hysteresis.** Hand partitions over only when the plan asked for it on two ticks
//!   in a row, then not again for two renew intervals.
//! - **Availability before balance.** Partitions without a live owner for longer than
//!   lease + retry interval, while nobody is settling, are claimed above the cap.
//! - **Removed and drained.** A partition removed from the set is handed back
//!   (`Removed`); a drained replica hands everything over (`Drained`) and claims
//!   nothing until undrained.
//! - **Reconciling.** When the store's count of this session's partitions and the
//!   replica's own differ on two ticks in a row with nothing in flight (a claim or a
//!   release whose reply was lost), ask the store which partitions the session holds.
//! - **Leaving.** Tell the group first (so nobody waits for this replica's share), then
//!   stop every elector, and end the session once the last one has released. With a
//!   rejoin grace, keep the partitions instead: stop every elector without releasing,
//!   then mark the session `away` for the grace.
//!
//! The timing constants are tuned for the tests and benchmarks in this repository and
//! should not be considered stable.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use leasehold_election::{Fence, RenewGrid, StoreError};
use rand::seq::IndexedRandom;
use rand::{Rng, RngExt};
use tokio::time::Instant;

use super::plan::{Member, Plan, plan};
use super::weighted::{Loaded, Totals, WeightedPlan, weighted_plan};
use crate::backend::CLAIM_BATCH;
use crate::backend::protocol::{
    ClaimReply, Conflict, MemberState, SessionReply, SetInfo, TickReply, TickRequest,
};

/// Ticks run a twentieth of a renew interval (5–50 ms) after each grid point, so that
/// the electors' renewals, due on the grid points, are all waiting for them: waking a
/// thousand electors takes a few milliseconds, and a renewal that asks after the tick
/// was sent must wait for another one.
fn tick_offset(renew_interval: Duration) -> Duration {
    (renew_interval / 20).clamp(Duration::from_millis(5), Duration::from_millis(50))
}
/// How soon after something changed (a notice, an expiring member) to look again.
pub(crate) const QUICK: Duration = Duration::from_millis(5);
/// How soon after a release notice to tick: releases come in bursts of a few ms.
pub(crate) const NOTICE_DELAY: Duration = Duration::from_millis(1);

/// The settings the rules need.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) replica: String,
    pub(crate) lease: Duration,
    pub(crate) renew_interval: Duration,
    pub(crate) retry_interval: Duration,
    pub(crate) settle: Duration,
    /// The version of this replica's partition list (0: unversioned, a seed only).
    pub(crate) list_version: u64,
    /// The digest of this replica's partition list.
    pub(crate) digest: String,
    /// Keep the session (and every partition) this long across a graceful restart.
    pub(crate) rejoin_grace: Option<Duration>,
    /// This process, for operators (`host pid`).
    pub(crate) instance: String,
    /// This replica's capacity: its share of a weighted group's load is in proportion.
    pub(crate) capacity: u32,
}

/// How this replica stands in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// The next tick starts a session.
    Joining,
    /// Admitted; claims from `settled_at` on.
    Member { settled_at: Instant },
    /// Refused by the group; the next tick asks again.
    Refused(Conflict),
}

/// Where a graceful leave stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    No,
    /// Waiting for the tick that tells the group this replica is leaving.
    Announcing,
    /// Electors told to stop; waiting for the last one to end.
    Stopping,
    /// The session is being ended.
    Ending,
    /// Sticky: electors told to stop without releasing; waiting for the last one.
    Pausing,
    /// Sticky: the tick that marks the session `away` is due or in flight.
    Parking,
    /// Sticky: parked; nothing left to do.
    Parked,
}

/// Why this replica hands a partition over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// To even out the group.
    Rebalance,
    /// The replica is drained.
    Drained,
    /// The partition was removed from the set.
    Removed,
}

/// Something for the driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Send this heartbeat (its renewal outcome goes to every waiting elector).
    Tick(TickRequest),
    /// Claim up to `count` free partitions, issuing fences of at least `floor` (in a
    /// weighted group: those whose weights fit into `room`, and with `fallback` the
    /// first if none does).
    Claim {
        count: usize,
        floor: Fence,
        room: Option<u64>,
        fallback: bool,
    },
    /// New terms for these partitions, which the (resumed) session holds.
    Regrant { indices: Vec<usize>, floor: Fence },
    /// Apply this replica's partition list to the group (creating the group first if
    /// `create`).
    Apply { create: bool },
    /// Hand these partitions over gracefully (cancel, grace, release).
    Stop {
        indices: Vec<usize>,
        reason: StopReason,
    },
    /// Stop every elector (leaving; with `keep`, without releasing).
    StopAll { keep: bool },
    /// Ask the store which partitions this session holds (`resume`: to regrant them).
    Reconcile { resume: bool },
    /// Give back these partitions, which the session holds but no elector runs.
    Release(Vec<usize>),
    /// These electors no longer hold their partition: refuse their next renewal.
    Revoke(Vec<usize>),
    /// End the session (the last step of a leave).
    End { token: String },
    /// Nothing left to do: the coordinator stops (after a sticky leave).
    Exit,
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

/// The set of indices an elector serves, with O(1) insert, remove and random pick.
#[derive(Debug, Default)]
struct IndexSet {
    items: Vec<usize>,
    pos: HashMap<usize, usize>,
}

impl IndexSet {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn contains(&self, i: usize) -> bool {
        self.pos.contains_key(&i)
    }

    fn insert(&mut self, i: usize) -> bool {
        if self.contains(i) {
            return false;
        }
        self.pos.insert(i, self.items.len());
        self.items.push(i);
        true
    }

    fn remove(&mut self, i: usize) -> bool {
        let Some(p) = self.pos.remove(&i) else {
            return false;
        };
        self.items.swap_remove(p);
        if let Some(&moved) = self.items.get(p) {
            self.pos.insert(moved, p);
        }
        true
    }

    fn drain(&mut self) -> Vec<usize> {
        self.pos.clear();
        std::mem::take(&mut self.items)
    }
}

/// One replica's view of its group and what it is doing about it.
#[derive(Debug)]
pub(crate) struct GroupState {
    s: Settings,
    grid: RenewGrid,
    /// The current session's token (`<replica>:<hex>`); a new one per session.
    token: String,
    standing: Standing,
    /// Whether a session has been admitted before (a later join settles briefly).
    joined_once: bool,
    leaving: Leaving,
    /// Live members counted towards N, for the plan.
    members: Vec<Member>,
    /// The same with their loads and capacities, for a weighted plan.
    loaded: Vec<Loaded>,
    /// This session's load as the store counted it at the last tick.
    server_load: u64,
    /// The weights of this session's partitions other than 1, by index.
    weights: HashMap<usize, u64>,
    /// The group's weights version this replica's weights are from.
    weights_version: u64,
    /// The last weighted plan, and the load it lets this replica claim up to.
    wplan: Option<(WeightedPlan, u64)>,
    /// Every live member's id, for the view.
    live: Vec<String>,
    /// The group's partition set at the last tick (`None`: the group does not exist).
    set: Option<SetInfo>,
    /// This session's partitions as the store counted them at the last tick.
    server_held: usize,
    /// Partitions without a live owner at the last reply.
    unowned: usize,
    plan: Option<Plan>,
    /// This session's electors that serve their partition.
    serving: IndexSet,
    /// This session's electors told to hand over, not ended yet.
    stopping: HashSet<usize>,
    /// Electors of earlier sessions, not ended yet (they hold nothing any more).
    stale: HashSet<usize>,
    /// Partitions of a resumed session waiting for a new term.
    to_regrant: VecDeque<usize>,
    /// An operator drained this replica's session.
    drained: bool,
    tick_in_flight: bool,
    claiming: bool,
    applying: bool,
    reconciling: bool,
    /// No claim before this instant (the group's grant wait).
    claim_after: Option<Instant>,
    /// Consecutive ticks whose count of this session's partitions differed from ours.
    mismatch: u32,
    /// Consecutive ticks whose plan asked to hand partitions over.
    shed_streak: u32,
    /// No hand-over before this instant.
    cooldown_until: Option<Instant>,
    /// Since when partitions have been without a live owner while nobody settles.
    unowned_since: Option<Instant>,
    /// The next regular tick, and an earlier one if something changed.
    next_tick: Instant,
    soon: Option<Instant>,
    /// The highest fence this replica has seen in the group.
    highest: Fence,
    /// Partitions handed over to rebalance, in total.
    handoffs: u64,
}

fn new_token(replica: &str, rng: &mut impl Rng) -> String {
    format!("{replica}:{:032x}", rng.random::<u128>())
}

impl GroupState {
    /// A replica that joins at its first tick, at `now`.
    pub(crate) fn new(s: Settings, grid: RenewGrid, now: Instant, rng: &mut impl Rng) -> Self {
        Self {
            token: new_token(&s.replica, rng),
            s,
            grid,
            standing: Standing::Joining,
            joined_once: false,
            leaving: Leaving::No,
            members: Vec::new(),
            loaded: Vec::new(),
            server_load: 0,
            weights: HashMap::new(),
            weights_version: 0,
            wplan: None,
            live: Vec::new(),
            set: None,
            server_held: 0,
            unowned: 0,
            plan: None,
            serving: IndexSet::default(),
            stopping: HashSet::new(),
            stale: HashSet::new(),
            to_regrant: VecDeque::new(),
            drained: false,
            tick_in_flight: false,
            claiming: false,
            applying: false,
            reconciling: false,
            claim_after: None,
            mismatch: 0,
            shed_streak: 0,
            cooldown_until: None,
            unowned_since: None,
            next_tick: now,
            soon: None,
            highest: Fence(0),
            handoffs: 0,
        }
    }

    // ---- What the driver and the view read. ----

    /// The current session's token.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// When [`GroupState::poll`] has something to do next (`None`: only when some
    /// reply or event arrives).
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let tick = self
            .may_tick()
            .then(|| self.soon.map_or(self.next_tick, |s| s.min(self.next_tick)));
        [tick, self.claim_after].into_iter().flatten().min()
    }

    /// No tick while one is in flight (its reply comes first), once the session is
    /// being ended or parked, or while leaving without a session (nothing to renew).
    fn may_tick(&self) -> bool {
        let member = matches!(self.standing, Standing::Member { .. });
        !self.tick_in_flight
            && !matches!(self.leaving, Leaving::Ending | Leaving::Parked)
            && (self.leaving == Leaving::No || member)
    }

    /// Still settling, not admitted, or refused: claiming nothing.
    pub(crate) fn settling(&self, now: Instant) -> bool {
        match self.standing {
            Standing::Member { settled_at } => now < settled_at,
            _ => true,
        }
    }

    /// Whether a session has ever been admitted.
    pub(crate) fn joined(&self) -> bool {
        self.joined_once
    }

    /// The conflict that keeps this replica out, if any.
    pub(crate) fn conflict(&self) -> Option<Conflict> {
        match self.standing {
            Standing::Refused(c) => Some(c),
            _ => None,
        }
    }

    /// Live members at the last tick.
    pub(crate) fn live(&self) -> &[String] {
        &self.live
    }

    /// The last plan (cap and floor for the view).
    pub(crate) fn plan(&self) -> Option<Plan> {
        self.plan
    }

    /// Partitions in the group's set at the last tick.
    pub(crate) fn partitions(&self) -> usize {
        self.set.as_ref().map_or(0, |s| s.count)
    }

    /// Whether this replica's versioned list differs from the group's at the same
    /// version (the group's wins).
    pub(crate) fn list_differs(&self) -> bool {
        self.set.as_ref().is_some_and(|set| {
            self.s.list_version > 0
                && set.version == self.s.list_version
                && !set.digest.is_empty()
                && set.digest != self.s.digest
        })
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
        matches!(
            self.leaving,
            Leaving::Pausing | Leaving::Parking | Leaving::Parked
        )
    }

    /// Electors still running, of any session.
    pub(crate) fn running(&self) -> usize {
        self.serving.len() + self.stopping.len() + self.stale.len()
    }

    fn held(&self) -> usize {
        self.serving.len() + self.stopping.len()
    }

    fn weight_of(&self, i: usize) -> u64 {
        self.weights.get(&i).copied().unwrap_or(1)
    }

    /// The weights of what this session holds, summed, as this replica knows them.
    fn held_load(&self) -> u64 {
        self.serving
            .items
            .iter()
            .chain(self.stopping.iter())
            .map(|&i| self.weight_of(i))
            .sum()
    }

    /// Whether the group balances by weight: a weight was set, or capacities differ.
    pub(crate) fn weighted(&self) -> bool {
        self.set.as_ref().is_some_and(|s| s.weighted)
            || self.loaded.iter().any(|m| m.capacity != self.s.capacity)
    }

    /// This replica's load (the weights it holds, summed; its count unless weighted).
    pub(crate) fn load(&self) -> u64 {
        if self.set.as_ref().is_some_and(|s| s.weighted) {
            self.held_load()
        } else {
            self.held() as u64
        }
    }

    /// This replica's share of the group's load, in a weighted group.
    pub(crate) fn share(&self) -> Option<f64> {
        self.wplan.as_ref().map(|(p, _)| p.share)
    }

    fn member_state(&self, now: Instant) -> MemberState {
        match self.leaving {
            Leaving::Parking | Leaving::Parked => MemberState::Away,
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

    fn wake(&mut self, at: Instant) {
        self.soon = Some(self.soon.map_or(at, |s| s.min(at)));
    }

    // ---- Inputs. ----

    /// The clock reached [`GroupState::wake_at`].
    pub(crate) fn poll(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.claim_after.is_some_and(|c| c <= now) {
            self.claim_after = None;
            actions.extend(self.claim(now));
        }
        if self.wake_at().is_some_and(|at| now >= at) && self.may_tick() {
            self.soon = None;
            // The next regular tick is just after the next grid point.
            self.next_tick = self.grid.next_after(now) + tick_offset(self.s.renew_interval);
            self.tick_in_flight = true;
            let ttl = match (self.leaving, self.s.rejoin_grace) {
                (Leaving::Parking, Some(grace)) => grace.max(self.s.lease),
                _ => self.s.lease,
            };
            actions.push(Action::Tick(TickRequest {
                replica: self.s.replica.clone(),
                token: self.token.clone(),
                join: !matches!(self.standing, Standing::Member { .. }),
                state: self.member_state(now),
                ttl,
                instance: self.s.instance.clone(),
                capacity: self.s.capacity,
            }));
        }
        actions
    }

    /// A tick came back; `revoked` are the partitions (by index) it says this session
    /// must give up.
    pub(crate) fn on_tick(
        &mut self,
        reply: Result<TickReply, StoreError>,
        revoked: &[usize],
        now: Instant,
        rng: &mut impl Rng,
    ) -> (Renewal, Vec<Action>) {
        self.tick_in_flight = false;
        let mut actions = Vec::new();
        match self.leaving {
            Leaving::Announcing => {
                // Told the group (or could not): now hand everything back.
                self.leaving = Leaving::Stopping;
                actions.push(Action::StopAll { keep: false });
                self.stopping.extend(self.serving.drain());
                actions.extend(self.end_if_done(now));
            }
            Leaving::Parking => {
                // Marked away (or could not: then it expires within one lease).
                self.leaving = Leaving::Parked;
                actions.push(Action::Exit);
            }
            _ => {}
        }
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return (Renewal::Failed(e), actions),
        };
        let renewal = match reply.session {
            SessionReply::Live => {
                if let Some(resumed) = &reply.resumed {
                    // Back from a sticky restart: this process takes the session over,
                    // with every partition it held, each of which gets a new term.
                    self.token.clone_from(resumed);
                    self.standing = Standing::Member { settled_at: now };
                    self.joined_once = true;
                    self.reconciling = true;
                    actions.push(Action::Reconcile { resume: true });
                } else if !matches!(self.standing, Standing::Member { .. }) {
                    // Settling lets replicas started together see each other before
                    // anyone claims. A replica joining a group that is already being
                    // served (a restart in a rolling deploy, a scale-up) has nobody to
                    // wait for: it takes its share at once, so that nothing freed for
                    // it sits unowned while it settles. Joiners arriving together are
                    // still counted before anyone hands over: that takes two ticks.
                    let served = reply.members.iter().any(|m| {
                        m.replica != self.s.replica && m.state == MemberState::Active && m.held > 0
                    });
                    let settle = if served {
                        Duration::ZERO
                    } else if self.joined_once {
                        self.s.renew_interval
                    } else {
                        self.s.settle
                    };
                    self.standing = Standing::Member {
                        settled_at: now + settle,
                    };
                    self.joined_once = true;
                    // Look again once settled, not a renew interval later.
                    self.wake(now + settle);
                }
                Renewal::Renewed {
                    token: self.token.clone(),
                }
            }
            SessionReply::Lost => {
                // Whatever this session held is gone; its electors are refused at their
                // next renewal. Start a new session at once.
                self.session_over(now, rng);
                Renewal::Refused
            }
            SessionReply::Refused(c) => {
                self.standing = Standing::Refused(c);
                Renewal::Refused
            }
        };
        self.observe(&reply, now);
        let member = matches!(self.standing, Standing::Member { .. });
        if member && matches!(self.leaving, Leaving::No) {
            actions.extend(self.maybe_apply());
            actions.extend(self.revoke(revoked));
            actions.extend(self.check_count());
            actions.extend(self.refresh_weights());
            actions.extend(self.decide(now, rng));
        }
        (renewal, actions)
    }

    /// Creates the group, or applies a newer versioned list, once per change.
    fn maybe_apply(&mut self) -> Vec<Action> {
        if self.applying {
            return Vec::new();
        }
        let action = match &self.set {
            None => Action::Apply { create: true },
            // A newer list, or this version's left half-applied (its digest is recorded
            // last).
            Some(set)
                if self.s.list_version > set.version
                    || (self.s.list_version > 0
                        && self.s.list_version == set.version
                        && set.digest.is_empty()) =>
            {
                Action::Apply { create: false }
            }
            Some(_) => return Vec::new(),
        };
        self.applying = true;
        vec![action]
    }

    /// Hands back partitions removed from the set.
    fn revoke(&mut self, revoked: &[usize]) -> Vec<Action> {
        let (mut stop, mut release) = (Vec::new(), Vec::new());
        for &i in revoked {
            if self.serving.remove(i) {
                self.stopping.insert(i);
                stop.push(i);
            } else if !self.stopping.contains(&i) {
                // Held by the session but run by no elector (a regrant pending, say).
                self.to_regrant.retain(|r| *r != i);
                release.push(i);
            }
        }
        let mut actions = Vec::new();
        if !stop.is_empty() {
            actions.push(Action::Stop {
                indices: stop,
                reason: StopReason::Removed,
            });
        }
        if !release.is_empty() {
            actions.push(Action::Release(release));
        }
        actions
    }

    /// Takes in the members, counts and timers of a tick reply.
    fn observe(&mut self, reply: &TickReply, now: Instant) {
        self.unowned = reply.unowned;
        self.set.clone_from(&reply.set);
        self.drained = reply.drained;
        self.claim_after = (!reply.grant_wait.is_zero()).then(|| now + reply.grant_wait);
        self.live = reply.members.iter().map(|m| m.replica.clone()).collect();
        self.members = reply
            .members
            .iter()
            .filter(|m| m.state.counts())
            .map(|m| Member {
                replica: m.replica.clone(),
                owned: (m.state != MemberState::Settling).then_some(m.held),
            })
            .collect();
        self.loaded = reply
            .members
            .iter()
            .filter(|m| m.state.counts())
            .map(|m| Loaded {
                replica: m.replica.clone(),
                load: (m.state != MemberState::Settling).then_some(m.load),
                capacity: m.capacity,
            })
            .collect();
        let me = reply.members.iter().find(|m| m.replica == self.s.replica);
        self.server_held = me.map_or(0, |m| m.held);
        self.server_load = me.map_or(0, |m| m.load);
        // A member that stops heartbeating ends when its session expires: look again
        // right after the earliest expiry if that comes before the next regular tick,
        // so its partitions move within one lease of its last heartbeat plus a tick.
        if let Some(left) = reply
            .members
            .iter()
            .filter(|m| m.replica != self.s.replica)
            .map(|m| m.left)
            .min()
            && now + left < self.next_tick
        {
            self.wake(now + left + QUICK);
        }
        // Ended sessions whose partitions are still being freed, chunk by chunk.
        if reply.draining > 0 {
            self.wake(now + QUICK);
        }
    }

    /// Starts over with a new session (the last one ended).
    fn session_over(&mut self, now: Instant, rng: &mut impl Rng) {
        self.token = new_token(&self.s.replica, rng);
        self.standing = Standing::Joining;
        self.stale.extend(self.serving.drain());
        self.stale.extend(self.stopping.drain());
        self.to_regrant.clear();
        self.server_held = 0;
        self.mismatch = 0;
        self.shed_streak = 0;
        self.drained = false;
        self.plan = None;
        self.wake(now);
    }

    /// Two ticks in a row with the store counting this session's partitions otherwise
    /// than we do, and nothing in flight that explains it: reconcile.
    fn check_count(&mut self) -> Vec<Action> {
        let quiet = !self.claiming
            && !self.reconciling
            && self.stopping.is_empty()
            && self.to_regrant.is_empty();
        if quiet && self.server_held != self.held() {
            self.mismatch += 1;
        } else {
            self.mismatch = 0;
        }
        if self.mismatch >= 2 {
            self.mismatch = 0;
            self.reconciling = true;
            return vec![Action::Reconcile { resume: false }];
        }
        Vec::new()
    }

    /// A weight changed since this replica last read its partitions' weights: read
    /// them again (the same read as a reconcile).
    fn refresh_weights(&mut self) -> Vec<Action> {
        let Some(set) = &self.set else {
            return Vec::new();
        };
        if !set.weighted || set.weights_version == self.weights_version || self.reconciling {
            return Vec::new();
        }
        self.weights_version = set.weights_version;
        if self.held() == 0 {
            return Vec::new();
        }
        self.reconciling = true;
        vec![Action::Reconcile { resume: false }]
    }

    /// Applies the balancing rule to the last tick's view: hand over, then claim.
    fn decide(&mut self, now: Instant, rng: &mut impl Rng) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.drained {
            // Hand everything over; the others take it (a draining member is not
            // counted towards N). Nothing is claimed until undrained.
            self.plan = None;
            let all = self.serving.drain();
            if !all.is_empty() {
                self.stopping.extend(all.iter().copied());
                actions.push(Action::Stop {
                    indices: all,
                    reason: StopReason::Drained,
                });
            }
            return actions;
        }
        let settling = self.settling(now);
        if self.weighted() {
            return self.decide_weighted(now, settling);
        }
        self.wplan = None;
        let plan = plan(
            self.partitions(),
            &self.s.replica,
            self.server_held,
            settling,
            &self.members,
            self.unowned,
        );
        self.plan = Some(plan);
        let anyone_settling = settling || self.members.iter().any(|m| m.owned.is_none());
        if self.unowned > 0 && !anyone_settling {
            self.unowned_since.get_or_insert(now);
        } else {
            self.unowned_since = None;
        }
        self.shed_streak = if plan.shed > 0 {
            self.shed_streak + 1
        } else {
            0
        };
        if self.shed_streak >= 2 && self.cooldown_until.is_none_or(|c| now >= c) {
            let chosen: Vec<usize> = self.serving.items.sample(rng, plan.shed).copied().collect();
            for &i in &chosen {
                self.serving.remove(i);
                self.stopping.insert(i);
            }
            self.handoffs += chosen.len() as u64;
            self.shed_streak = 0;
            self.cooldown_until = Some(now + 2 * self.s.renew_interval);
            if !chosen.is_empty() {
                actions.push(Action::Stop {
                    indices: chosen,
                    reason: StopReason::Rebalance,
                });
            }
        }
        actions.extend(self.claim(now));
        actions
    }

    /// The weighted rule ([`weighted_plan`]) on the last tick's view, with the same
    /// hysteresis and availability rules as the count rule.
    fn decide_weighted(&mut self, now: Instant, settling: bool) -> Vec<Action> {
        let mut actions = Vec::new();
        self.plan = None;
        let set = self.set.clone().unwrap_or_else(|| SetInfo::plain(0, 0, ""));
        let mine: Vec<(usize, u64)> = self
            .serving
            .items
            .iter()
            .map(|&i| (i, self.weight_of(i)))
            .collect();
        let wplan = weighted_plan(
            &self.s.replica,
            self.server_load,
            &mine,
            settling,
            self.s.capacity,
            &self.loaded,
            Totals {
                weight: set.total_weight,
                max_weight: set.max_weight,
                unowned: self.unowned,
            },
        );
        let anyone_settling = settling || self.loaded.iter().any(|m| m.load.is_none());
        if self.unowned > 0 && !anyone_settling {
            self.unowned_since.get_or_insert(now);
        } else {
            self.unowned_since = None;
        }
        self.shed_streak = if wplan.shed.is_empty() {
            0
        } else {
            self.shed_streak + 1
        };
        if self.shed_streak >= 2 && self.cooldown_until.is_none_or(|c| now >= c) {
            let chosen: Vec<usize> = wplan
                .shed
                .iter()
                .copied()
                .filter(|i| self.serving.remove(*i))
                .collect();
            for &i in &chosen {
                self.stopping.insert(i);
            }
            self.handoffs += chosen.len() as u64;
            self.shed_streak = 0;
            self.cooldown_until = Some(now + 2 * self.s.renew_interval);
            if !chosen.is_empty() {
                actions.push(Action::Stop {
                    indices: chosen,
                    reason: StopReason::Rebalance,
                });
            }
        }
        let target = self.server_load.saturating_add(wplan.room);
        self.wplan = Some((wplan, target));
        actions.extend(self.claim(now));
        actions
    }

    /// In a weighted group: the room left for claims now (`None` in a count group).
    fn room(&self, now: Instant) -> Option<u64> {
        let (wplan, target) = self.wplan.as_ref()?;
        if self.orphaned(now) && wplan.shed.is_empty() {
            return Some(u64::MAX);
        }
        if !wplan.shed.is_empty() {
            return Some(0);
        }
        Some(target.saturating_sub(self.held_load().max(self.server_load)))
    }

    /// Partitions nobody has claimed for longer than lease + retry interval while
    /// nobody settles.
    fn orphaned(&self, now: Instant) -> bool {
        self.unowned_since.is_some_and(|t| {
            now.saturating_duration_since(t) > self.s.lease + self.s.retry_interval
        })
    }

    /// How many partitions to claim now beyond what this replica holds.
    fn budget(&self, now: Instant) -> usize {
        let Some(plan) = self.plan else { return 0 };
        let held = self.held().max(self.server_held);
        let mut budget = plan.allowance.saturating_sub(held);
        // Availability before balance: partitions nobody has claimed for longer than
        // lease + retry interval while nobody settles go to whoever asks, above the cap.
        if self.orphaned(now) && plan.shed == 0 {
            budget = budget.max(self.unowned);
        }
        budget.min(self.unowned)
    }

    fn claim(&mut self, now: Instant) -> Vec<Action> {
        let admitted = matches!(self.standing, Standing::Member { .. });
        // No claim while reconciling either: the answer must not miss a partition that a
        // claim sent after it grants.
        if !admitted
            || self.leaving != Leaving::No
            || self.claiming
            || self.reconciling
            || self.claim_after.is_some_and(|c| c > now)
        {
            return Vec::new();
        }
        let floor = Fence(self.highest.get() + 1);
        if !self.to_regrant.is_empty() {
            let n = self.to_regrant.len().min(CLAIM_BATCH);
            let indices: Vec<usize> = self.to_regrant.drain(..n).collect();
            self.claiming = true;
            return vec![Action::Regrant { indices, floor }];
        }
        if self.settling(now) || self.drained {
            return Vec::new();
        }
        let room = self.room(now);
        // Orphans go to whoever asks; else the plan says who may take one that does
        // not fit.
        let fallback = room == Some(u64::MAX)
            || self
                .wplan
                .as_ref()
                .is_some_and(|(p, _)| p.fallback && p.shed.is_empty());
        let count = match room {
            Some(0) if !fallback => 0,
            Some(_) => self.unowned.min(CLAIM_BATCH),
            None => self.budget(now).min(CLAIM_BATCH),
        };
        if count == 0 {
            return Vec::new();
        }
        self.claiming = true;
        vec![Action::Claim {
            count,
            floor,
            room,
            fallback,
        }]
    }

    /// A claim (or a regrant) came back; `granted` are the partitions won (by index)
    /// with their fences, for the driver to start electors for.
    pub(crate) fn on_claimed(
        &mut self,
        reply: Result<(Vec<Granted<usize>>, usize), ClaimError>,
        now: Instant,
    ) -> Vec<Action> {
        self.claiming = false;
        match reply {
            Ok((granted, unowned)) => {
                let won = !granted.is_empty();
                let leaving = self.leaving != Leaving::No;
                for (i, fence, weight) in granted {
                    if weight == 1 {
                        self.weights.remove(&i);
                    } else {
                        self.weights.insert(i, weight);
                    }
                    self.stale.remove(&i);
                    self.highest = self.highest.max(fence);
                    if leaving {
                        // Sent before the leave began: hand it straight back.
                        self.serving.remove(i);
                        self.stopping.insert(i);
                    } else {
                        self.stopping.remove(&i);
                        self.serving.insert(i);
                    }
                }
                self.unowned = unowned;
                if leaving {
                    let mut actions = if won {
                        vec![Action::StopAll {
                            keep: self.keeps_leases(),
                        }]
                    } else {
                        Vec::new()
                    };
                    actions.extend(self.end_if_done(now));
                    return actions;
                }
                // More to take (or regrant), and the last batch was not empty-handed:
                // go on at once.
                if won || !self.to_regrant.is_empty() {
                    self.claim(now)
                } else {
                    Vec::new()
                }
            }
            // Ending the session frees whatever it may have taken.
            Err(_) if self.leaving != Leaving::No => self.end_if_done(now),
            Err(ClaimError::Wait(d)) => {
                self.claim_after = Some(now + d);
                Vec::new()
            }
            Err(ClaimError::Lost) => {
                // The next tick confirms it and starts a new session.
                self.wake(now);
                Vec::new()
            }
            Err(ClaimError::Failed) => {
                // It may have taken partitions we never heard of: ask.
                self.reconciling = true;
                vec![Action::Reconcile { resume: false }]
            }
        }
    }

    /// The store said which partitions this session holds (by index; names outside
    /// the group are the driver's to give back). On a resume, they are all to regrant.
    pub(crate) fn on_reconciled(
        &mut self,
        held: Option<HashMap<usize, u64>>,
        resume: bool,
        now: Instant,
    ) -> Vec<Action> {
        self.reconciling = false;
        let Some(held) = held else {
            if resume {
                // Ask again at the next tick's count check.
                self.mismatch = 0;
            }
            return self.claim(now);
        };
        for (&i, &w) in &held {
            if w == 1 {
                self.weights.remove(&i);
            } else {
                self.weights.insert(i, w);
            }
        }
        let held: HashSet<usize> = held.into_keys().collect();
        if resume {
            let mut all: Vec<usize> = held.into_iter().collect();
            all.sort_unstable();
            self.to_regrant.extend(all);
            return self.claim(now);
        }
        let extra: Vec<usize> = held
            .iter()
            .copied()
            .filter(|i| !self.serving.contains(*i) && !self.stopping.contains(i))
            .collect();
        let missing: Vec<usize> = self
            .serving
            .items
            .iter()
            .copied()
            .filter(|i| !held.contains(i))
            .collect();
        let mut actions = Vec::new();
        if !extra.is_empty() {
            actions.push(Action::Release(extra));
        }
        if !missing.is_empty() {
            actions.push(Action::Revoke(missing));
        }
        actions.extend(self.claim(now));
        actions
    }

    /// This replica's list was applied to the group (or could not be: then again at
    /// the next tick).
    pub(crate) fn on_applied(&mut self, ok: bool, now: Instant) {
        self.applying = false;
        if ok {
            // The set changed: look again (and claim) right away.
            self.wake(now);
        }
    }

    /// The elector of partition `i` has ended (after its release).
    pub(crate) fn on_stopped(&mut self, i: usize, now: Instant) -> Vec<Action> {
        self.serving.remove(i);
        self.stopping.remove(&i);
        self.stale.remove(&i);
        self.end_if_done(now)
    }

    /// Once a leave has stopped every elector and no claim is in flight (one could
    /// still grant this session partitions nobody would serve): end the session, or
    /// (sticky) mark it away with the next tick.
    fn end_if_done(&mut self, now: Instant) -> Vec<Action> {
        if self.running() > 0 || self.claiming {
            return Vec::new();
        }
        match self.leaving {
            Leaving::Stopping => {
                self.leaving = Leaving::Ending;
                vec![Action::End {
                    token: self.token.clone(),
                }]
            }
            Leaving::Pausing => {
                self.leaving = Leaving::Parking;
                self.wake(now);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Something changed in the group (a release, a leave, a member's state, the set):
    /// look again right away.
    pub(crate) fn on_notice(&mut self, now: Instant) {
        if self.leaving == Leaving::No {
            self.wake(now + NOTICE_DELAY);
        }
    }

    /// An elector is waiting for a renewal: if the next tick is far (the renewal asked
    /// just after one was sent, or retries after an error), tick one offset from now,
    /// which gathers every straggler into that one extra tick.
    pub(crate) fn on_renew_wanted(&mut self, now: Instant) {
        let offset = tick_offset(self.s.renew_interval);
        if self.next_tick > now + 2 * offset {
            self.wake(now + offset);
        }
    }

    /// Shut down: announce, stop every elector, end the session. With a rejoin grace:
    /// stop every elector without releasing, then mark the session away.
    pub(crate) fn on_shutdown(&mut self, now: Instant) -> Vec<Action> {
        if self.leaving != Leaving::No {
            return Vec::new();
        }
        let member = matches!(self.standing, Standing::Member { .. });
        if member && self.s.rejoin_grace.is_some() {
            self.leaving = Leaving::Pausing;
            self.stopping.extend(self.serving.drain());
            self.to_regrant.clear();
            let mut actions = vec![Action::StopAll { keep: true }];
            actions.extend(self.end_if_done(now));
            return actions;
        }
        if member {
            self.leaving = Leaving::Announcing;
            self.wake(now);
            return Vec::new();
        }
        self.leaving = Leaving::Stopping;
        self.stopping.extend(self.serving.drain());
        let mut actions = vec![Action::StopAll { keep: false }];
        actions.extend(self.end_if_done(now));
        actions
    }
}

/// A partition a claim won (by name, or by index), its fence and its weight.
pub(crate) type Granted<P> = (P, Fence, u64);

/// Why a claim won nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimError {
    /// The group grants nothing for this long yet.
    Wait(Duration),
    /// The session has ended.
    Lost,
    /// The call failed; it may or may not have taken partitions.
    Failed,
}

impl ClaimError {
    /// The claim reply as the state machine sees it (names already mapped to indices).
    pub(crate) fn split(
        reply: Result<ClaimReply, StoreError>,
    ) -> Result<(Vec<Granted<String>>, usize), ClaimError> {
        match reply {
            Ok(ClaimReply::Claimed {
                partitions,
                unowned,
            }) => Ok((partitions, unowned)),
            Ok(ClaimReply::Wait(d)) => Err(Self::Wait(d)),
            Ok(ClaimReply::Lost) => Err(Self::Lost),
            Err(_) => Err(Self::Failed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::protocol::MemberInfo;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const LEASE: Duration = Duration::from_millis(900);
    const RI: Duration = Duration::from_millis(300);

    fn settings() -> Settings {
        Settings {
            replica: "a".into(),
            lease: LEASE,
            renew_interval: RI,
            retry_interval: RI,
            settle: LEASE,
            list_version: 0,
            digest: "d".into(),
            rejoin_grace: None,
            instance: "host 1".into(),
            capacity: 1,
        }
    }

    struct Sim {
        st: GroupState,
        now: Instant,
        rng: StdRng,
        p: usize,
    }

    fn member(r: &str, state: MemberState, held: usize) -> MemberInfo {
        MemberInfo {
            replica: r.into(),
            state,
            left: LEASE,
            held,
            load: held as u64,
            capacity: 1,
        }
    }

    impl Sim {
        fn new(p: usize) -> Self {
            Self::with(p, settings())
        }

        fn with(p: usize, s: Settings) -> Self {
            let now = Instant::now();
            let mut rng = StdRng::seed_from_u64(1);
            let st = GroupState::new(s, RenewGrid::new(now, RI), now, &mut rng);
            Self { st, now, rng, p }
        }

        fn reply(
            &self,
            session: SessionReply,
            members: Vec<MemberInfo>,
            unowned: usize,
        ) -> TickReply {
            TickReply {
                session,
                resumed: None,
                set: Some(SetInfo::plain(self.p, 0, "d")),
                members,
                unowned,
                grant_wait: Duration::ZERO,
                draining: 0,
                drained: false,
                revoked: Vec::new(),
                expired: 0,
            }
        }

        fn advance(&mut self, d: Duration) {
            self.now += d;
        }

        /// Moves the clock to the next wake-up if that is later.
        fn until_wake(&mut self) {
            let at = self.st.wake_at().expect("something to wake for");
            self.now = self.now.max(at);
        }

        /// Waits for the next tick (if not due yet), polls, answers it.
        fn tick(&mut self, r: TickReply) -> (Renewal, Vec<Action>) {
            self.tick_revoking(r, &[])
        }

        fn tick_revoking(&mut self, r: TickReply, revoked: &[usize]) -> (Renewal, Vec<Action>) {
            self.until_wake();
            let actions = self.st.poll(self.now);
            assert!(
                actions.iter().any(|a| matches!(a, Action::Tick(_))),
                "a tick was due: {actions:?}"
            );
            self.st.on_tick(Ok(r), revoked, self.now, &mut self.rng)
        }

        /// The request of the tick due now.
        fn next_request(&mut self) -> TickRequest {
            self.until_wake();
            self.st
                .poll(self.now)
                .into_iter()
                .find_map(|a| match a {
                    Action::Tick(req) => Some(req),
                    _ => None,
                })
                .expect("a tick was due")
        }

        /// Joins and settles with `others` active, then returns the first decisions.
        fn settled(&mut self, others: &[(&str, usize)], unowned: usize) -> Vec<Action> {
            let mut members = vec![member("a", MemberState::Settling, 0)];
            members.extend(
                others
                    .iter()
                    .map(|(r, h)| member(r, MemberState::Active, *h)),
            );
            let r = self.reply(SessionReply::Live, members, unowned);
            self.tick(r);
            self.advance(LEASE);
            let mut members = vec![member("a", MemberState::Active, 0)];
            members.extend(
                others
                    .iter()
                    .map(|(r, h)| member(r, MemberState::Active, *h)),
            );
            let r = self.reply(SessionReply::Live, members, unowned);
            self.tick(r).1
        }

        fn claimed(&mut self, from: usize, n: usize, unowned: usize) -> Vec<Action> {
            let granted = (from..from + n)
                .map(|i| (i, Fence(100 + i as u64), 1))
                .collect();
            self.st.on_claimed(Ok((granted, unowned)), self.now)
        }
    }

    #[test]
    fn a_replica_joining_a_served_group_claims_its_share_without_settling() {
        // A restart in a rolling deploy: the others hold what the leaver freed and more.
        let mut sim = Sim::new(8);
        let r = sim.reply(
            SessionReply::Live,
            vec![
                member("a", MemberState::Settling, 0),
                member("b", MemberState::Active, 3),
                member("c", MemberState::Active, 3),
            ],
            2,
        );
        let (_, actions) = sim.tick(r);
        assert!(!sim.st.settling(sim.now));
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::Claim { count: 2, .. })),
            "{actions:?}"
        );

        // Replicas started together (nobody serving yet) still settle.
        let mut sim = Sim::new(8);
        let r = sim.reply(
            SessionReply::Live,
            vec![
                member("a", MemberState::Settling, 0),
                member("b", MemberState::Settling, 0),
            ],
            8,
        );
        let (_, actions) = sim.tick(r);
        assert!(sim.st.settling(sim.now));
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Claim { .. })),
            "{actions:?}"
        );
    }

    #[test]
    fn a_settling_replica_claims_nothing_then_claims_its_share_in_batches() {
        // Two replicas, each with a floor of one batch and 100 more.
        let p = 2 * (CLAIM_BATCH + 100);
        let mut sim = Sim::new(p);
        let r = sim.reply(
            SessionReply::Live,
            vec![
                member("a", MemberState::Settling, 0),
                member("b", MemberState::Active, 0),
            ],
            p,
        );
        let (renewal, actions) = sim.tick(r);
        assert!(matches!(renewal, Renewal::Renewed { .. }));
        assert!(actions.is_empty(), "settling: {actions:?}");
        assert!(sim.st.settling(sim.now));
        sim.advance(LEASE);
        let r = sim.reply(
            SessionReply::Live,
            vec![
                member("a", MemberState::Active, 0),
                member("b", MemberState::Active, 0),
            ],
            p,
        );
        let actions = sim.tick(r);
        assert_eq!(
            actions.1,
            vec![Action::Claim {
                count: CLAIM_BATCH,
                floor: Fence(1),
                room: None,
                fallback: false,
            }]
        );
        // One batch in flight at a time; the next one as soon as it is back.
        assert!(
            sim.st
                .poll(sim.now)
                .iter()
                .all(|a| !matches!(a, Action::Claim { .. }))
        );
        let next = sim.claimed(0, CLAIM_BATCH, p - CLAIM_BATCH);
        assert_eq!(
            next,
            vec![Action::Claim {
                count: 100.min(CLAIM_BATCH),
                floor: Fence(100 + CLAIM_BATCH as u64),
                room: None,
                fallback: false,
            }],
            "up to floor(P/2), with fences above every fence seen"
        );
        assert!(
            sim.claimed(CLAIM_BATCH, 100, p - CLAIM_BATCH - 100)
                .is_empty(),
            "allowance reached"
        );
    }

    #[test]
    fn nothing_is_claimed_before_the_groups_grant_wait() {
        let mut sim = Sim::new(10);
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            10,
        );
        sim.tick(r);
        sim.advance(LEASE);
        let mut r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Active, 0)],
            10,
        );
        r.grant_wait = Duration::from_millis(200);
        let (_, actions) = sim.tick(r);
        assert!(actions.is_empty(), "{actions:?}");
        assert_eq!(sim.st.wake_at(), Some(sim.now + Duration::from_millis(200)));
        sim.advance(Duration::from_millis(200));
        let actions = sim.st.poll(sim.now);
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::Claim { count: 10, .. })),
            "{actions:?}"
        );
    }

    #[test]
    fn a_group_that_does_not_exist_is_created_and_a_newer_list_is_applied_once() {
        let mut sim = Sim::with(
            4,
            Settings {
                list_version: 3,
                ..settings()
            },
        );
        let mut r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            0,
        );
        r.set = None;
        let (_, actions) = sim.tick(r);
        assert_eq!(actions, vec![Action::Apply { create: true }]);
        // While it is applied, the next tick does not ask again.
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            4,
        );
        let (_, actions) = sim.tick(r);
        assert!(actions.is_empty(), "{actions:?}");
        sim.st.on_applied(true, sim.now);
        // The group stands at version 0 (seeded): this replica's version 3 is newer.
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            4,
        );
        let (_, actions) = sim.tick(r);
        assert_eq!(actions, vec![Action::Apply { create: false }]);
        sim.st.on_applied(true, sim.now);
        let mut r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            4,
        );
        r.set = Some(SetInfo::plain(4, 3, "other"));
        let (_, actions) = sim.tick(r);
        assert!(actions.is_empty(), "applied: {actions:?}");
        assert!(
            sim.st.list_differs(),
            "same version, another list: the group's wins"
        );
        // An older (or unversioned) replica only follows.
        let mut old = Sim::new(4);
        let mut r = old.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            4,
        );
        r.set = Some(SetInfo::plain(7, 3, "other"));
        assert!(old.tick(r).1.is_empty());
        assert_eq!(old.st.partitions(), 7, "P is the group's");
        // A version left half-applied (its applier died before recording the digest) is
        // applied again by a replica of that version.
        let mut r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            4,
        );
        r.set = Some(SetInfo::plain(4, 3, ""));
        let (_, actions) = sim.tick(r);
        assert_eq!(actions, vec![Action::Apply { create: false }]);
        assert!(!sim.st.list_differs(), "no digest yet: nothing to compare");
    }

    #[test]
    fn a_lost_session_refuses_its_electors_and_starts_a_new_one_that_settles_briefly() {
        let mut sim = Sim::new(4);
        sim.settled(&[], 4);
        sim.claimed(0, 4, 0);
        let old = sim.st.token().to_owned();
        sim.advance(RI);
        let r = sim.reply(SessionReply::Lost, vec![], 4);
        let (renewal, actions) = sim.tick(r);
        assert!(matches!(renewal, Renewal::Refused));
        assert!(actions.is_empty());
        assert_ne!(sim.st.token(), old, "a lost session is never renewed again");
        assert_eq!(sim.st.wake_at(), Some(sim.now), "rejoin at once");
        let req = sim.next_request();
        assert!(req.join);
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Settling, 0)],
            4,
        );
        sim.st.on_tick(Ok(r), &[], sim.now, &mut sim.rng);
        assert!(sim.st.settling(sim.now + RI - Duration::from_millis(1)));
        assert!(
            !sim.st.settling(sim.now + RI),
            "a rejoin settles one renew interval"
        );
        // The old electors still run until they are refused, but hold nothing.
        assert_eq!(sim.st.running(), 4);
        assert_eq!(sim.st.held(), 0);
    }

    #[test]
    fn hand_overs_need_two_ticks_in_a_row_and_then_wait_out_a_cooldown() {
        let mut sim = Sim::new(12);
        sim.settled(&[("b", 6)], 6);
        sim.claimed(0, 6, 0);
        // c joined and finished settling: 6 / 6 / 0, floor 4.
        let view = || {
            vec![
                member("a", MemberState::Active, 6),
                member("b", MemberState::Active, 6),
                member("c", MemberState::Active, 0),
            ]
        };
        let r = sim.reply(SessionReply::Live, view(), 0);
        let (_, first) = sim.tick(r);
        assert!(
            first.is_empty(),
            "one tick of imbalance is not enough: {first:?}"
        );
        let r = sim.reply(SessionReply::Live, view(), 0);
        let (_, second) = sim.tick(r);
        let shed_at = sim.now;
        let [
            Action::Stop {
                indices: chosen,
                reason: StopReason::Rebalance,
            },
        ] = second.as_slice()
        else {
            panic!("{second:?}");
        };
        assert_eq!(chosen.len(), 2, "a hands over its half of c's floor");
        assert_eq!(sim.st.handoffs(), 2);
        // Counts lag behind the hand-over: no second one during the cooldown, even with
        // the imbalance seen twice more.
        while sim.st.wake_at().is_some_and(|w| w < shed_at + 2 * RI) {
            let r = sim.reply(SessionReply::Live, view(), 0);
            let (_, actions) = sim.tick(r);
            assert!(actions.is_empty(), "{actions:?}");
        }
    }

    #[test]
    fn unowned_partitions_are_claimed_above_the_cap_after_lease_plus_retry() {
        // b is live and active but never claims its share.
        let mut sim = Sim::new(10);
        sim.settled(&[("b", 0)], 10);
        let since = sim.now;
        sim.claimed(0, 5, 5);
        let view = vec![
            member("a", MemberState::Active, 5),
            member("b", MemberState::Active, 0),
        ];
        loop {
            let r = sim.reply(SessionReply::Live, view.clone(), 5);
            let (_, actions) = sim.tick(r);
            if let Some(Action::Claim { count, .. }) = actions.first() {
                assert_eq!(*count, 5, "every orphan, above the cap");
                break;
            }
            assert!(
                sim.now - since <= LEASE + 3 * RI,
                "never claimed the orphans"
            );
        }
        let waited = sim.now - since;
        assert!(waited > LEASE + RI, "claimed orphans too early: {waited:?}");
    }

    #[test]
    fn orphan_clocks_stop_while_anyone_settles() {
        let mut sim = Sim::new(10);
        sim.settled(&[("b", 0)], 10);
        sim.claimed(0, 5, 5);
        for _ in 0..20 {
            let r = sim.reply(
                SessionReply::Live,
                vec![
                    member("a", MemberState::Active, 5),
                    member("b", MemberState::Settling, 0),
                ],
                5,
            );
            let (_, actions) = sim.tick(r);
            assert!(actions.is_empty(), "{actions:?}");
        }
    }

    #[test]
    fn a_replica_refused_by_the_group_claims_nothing_and_asks_again_each_tick() {
        let mut sim = Sim::new(4);
        let r = sim.reply(
            SessionReply::Refused(Conflict::DuplicateReplica),
            vec![member("a", MemberState::Active, 4)],
            0,
        );
        let (renewal, actions) = sim.tick(r);
        assert!(matches!(renewal, Renewal::Refused));
        assert!(actions.is_empty());
        assert_eq!(sim.st.conflict(), Some(Conflict::DuplicateReplica));
        assert!(sim.next_request().join);
    }

    #[test]
    fn a_count_mismatch_seen_twice_with_nothing_in_flight_reconciles() {
        let mut sim = Sim::new(4);
        sim.settled(&[], 4);
        sim.claimed(0, 2, 0);
        // The store says 3: a claim whose reply was lost took one more.
        for expect in [false, true] {
            let r = sim.reply(
                SessionReply::Live,
                vec![member("a", MemberState::Active, 3)],
                0,
            );
            let (_, actions) = sim.tick(r);
            assert_eq!(
                actions.contains(&Action::Reconcile { resume: false }),
                expect,
                "{actions:?}"
            );
        }
        let actions =
            sim.st
                .on_reconciled(Some([(0, 1), (3, 1)].into_iter().collect()), false, sim.now);
        assert_eq!(
            actions,
            vec![Action::Release(vec![3]), Action::Revoke(vec![1])],
            "give back what no elector runs; refuse what the store no longer lists"
        );
    }

    #[test]
    fn a_failed_claim_reconciles_at_once() {
        let mut sim = Sim::new(4);
        let actions = sim.settled(&[], 4);
        assert!(matches!(actions[..], [Action::Claim { .. }]));
        let actions = sim.st.on_claimed(Err(ClaimError::Failed), sim.now);
        assert_eq!(actions, vec![Action::Reconcile { resume: false }]);
    }

    #[test]
    fn a_leave_announces_then_stops_everything_then_ends_the_session() {
        let mut sim = Sim::new(4);
        sim.settled(&[], 4);
        sim.claimed(0, 4, 0);
        assert!(sim.st.on_shutdown(sim.now).is_empty());
        let req = sim.next_request();
        assert_eq!(req.state, MemberState::Leaving);
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Leaving, 4)],
            0,
        );
        let (_, actions) = sim.st.on_tick(Ok(r), &[], sim.now, &mut sim.rng);
        assert_eq!(
            actions,
            vec![Action::StopAll { keep: false }],
            "and no claim while leaving"
        );
        for i in 0..3 {
            assert!(sim.st.on_stopped(i, sim.now).is_empty());
        }
        let token = sim.st.token().to_owned();
        assert_eq!(sim.st.on_stopped(3, sim.now), vec![Action::End { token }]);
    }

    #[test]
    fn a_claim_that_comes_back_after_the_leave_began_is_handed_back() {
        let mut sim = Sim::new(4);
        let actions = sim.settled(&[], 4);
        assert!(matches!(actions[..], [Action::Claim { .. }]));
        sim.st.on_shutdown(sim.now);
        sim.next_request();
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Leaving, 0)],
            4,
        );
        let (_, actions) = sim.st.on_tick(Ok(r), &[], sim.now, &mut sim.rng);
        assert_eq!(actions, vec![Action::StopAll { keep: false }]);
        // The claim sent before the shutdown comes back now.
        assert_eq!(sim.claimed(0, 4, 0), vec![Action::StopAll { keep: false }]);
        for i in 0..3 {
            assert!(sim.st.on_stopped(i, sim.now).is_empty());
        }
        assert!(
            matches!(sim.st.on_stopped(3, sim.now)[..], [Action::End { .. }]),
            "the leave completes once the late claim's electors have ended too"
        );
    }

    #[test]
    fn a_sticky_leave_keeps_every_partition_and_parks_the_session_for_the_grace() {
        let grace = Duration::from_secs(5);
        let mut sim = Sim::with(
            4,
            Settings {
                rejoin_grace: Some(grace),
                ..settings()
            },
        );
        sim.settled(&[], 4);
        sim.claimed(0, 4, 0);
        assert_eq!(
            sim.st.on_shutdown(sim.now),
            vec![Action::StopAll { keep: true }]
        );
        assert!(sim.st.keeps_leases(), "the electors' releases are refused");
        // Ticks go on (state active) while the electors finish their grace.
        let req = sim.next_request();
        assert_eq!((req.state, req.ttl), (MemberState::Active, LEASE));
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Active, 4)],
            0,
        );
        sim.st.on_tick(Ok(r), &[], sim.now, &mut sim.rng);
        for i in 0..4 {
            assert!(
                sim.st.on_stopped(i, sim.now).is_empty(),
                "no End: the session stays"
            );
        }
        let req = sim.next_request();
        assert_eq!(
            (req.state, req.ttl),
            (MemberState::Away, grace),
            "parked for the grace"
        );
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Away, 4)],
            0,
        );
        let (_, actions) = sim.st.on_tick(Ok(r), &[], sim.now, &mut sim.rng);
        assert_eq!(actions, vec![Action::Exit]);
        assert_eq!(sim.st.wake_at(), None, "nothing left to do");
    }

    #[test]
    fn a_resumed_session_takes_its_token_and_regrants_what_it_holds_without_settling() {
        let mut sim = Sim::new(300);
        let old = "a:parked".to_owned();
        let mut r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Away, 150)],
            0,
        );
        r.resumed = Some(old.clone());
        let (renewal, actions) = sim.tick(r);
        assert!(matches!(renewal, Renewal::Renewed { token } if token == old));
        assert_eq!(sim.st.token(), old, "this process is the session now");
        assert!(
            !sim.st.settling(sim.now),
            "nothing to settle: it holds its share"
        );
        assert_eq!(actions, vec![Action::Reconcile { resume: true }]);
        let held: HashMap<usize, u64> = (0..150).map(|i| (i, 1)).collect();
        let actions = sim.st.on_reconciled(Some(held), true, sim.now);
        let [Action::Regrant { indices, .. }] = actions.as_slice() else {
            panic!("{actions:?}");
        };
        assert_eq!(indices.len(), CLAIM_BATCH.min(150));
        let granted = indices.iter().map(|&i| (i, Fence(7), 1)).collect();
        let next = sim.st.on_claimed(Ok((granted, 0)), sim.now);
        if 150 > CLAIM_BATCH {
            assert!(matches!(next[..], [Action::Regrant { .. }]), "{next:?}");
        }
    }

    #[test]
    fn a_removed_partition_is_handed_back_and_a_drained_replica_hands_everything_over() {
        let mut sim = Sim::new(6);
        sim.settled(&[("b", 3)], 3);
        sim.claimed(0, 3, 0);
        let view = || {
            vec![
                member("a", MemberState::Active, 3),
                member("b", MemberState::Active, 3),
            ]
        };
        let r = sim.reply(SessionReply::Live, view(), 0);
        let (_, actions) = sim.tick_revoking(r, &[1]);
        assert_eq!(
            actions,
            vec![Action::Stop {
                indices: vec![1],
                reason: StopReason::Removed
            }]
        );
        let mut r = sim.reply(SessionReply::Live, view(), 0);
        r.drained = true;
        let (_, actions) = sim.tick(r);
        let [Action::Stop { indices, reason }] = actions.as_slice() else {
            panic!("{actions:?}");
        };
        assert_eq!(*reason, StopReason::Drained);
        assert_eq!(indices.len(), 2, "the two it still serves");
        assert_eq!(sim.next_request().state, MemberState::Draining);
        // Undrained: back to the rule.
        let r = sim.reply(SessionReply::Live, view(), 0);
        sim.st.on_tick(Ok(r), &[], sim.now, &mut sim.rng);
        assert!(!sim.st.drained());
        assert_eq!(sim.next_request().state, MemberState::Active);
    }

    #[test]
    fn a_dying_member_is_looked_at_right_after_its_session_expires() {
        let mut sim = Sim::new(4);
        sim.settled(&[("b", 2)], 2);
        let mut b = member("b", MemberState::Active, 2);
        b.left = Duration::from_millis(40);
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", MemberState::Active, 2), b],
            0,
        );
        sim.tick(r);
        assert_eq!(
            sim.st.wake_at(),
            Some(sim.now + Duration::from_millis(40) + QUICK)
        );
    }

    #[test]
    fn the_index_set_removes_and_picks_in_constant_time() {
        let mut set = IndexSet::default();
        for i in 0..5 {
            assert!(set.insert(i));
        }
        assert!(!set.insert(3));
        assert!(set.remove(0));
        assert!(!set.remove(0));
        assert_eq!(set.len(), 4);
        for i in 1..5 {
            assert!(set.contains(i));
            assert_eq!(set.items[set.pos[&i]], i);
        }
    }
}
