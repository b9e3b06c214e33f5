//! What the replica's state says of itself, for the driver and the view: its
//! session's names, its group as seen, its plan, standing and load.

use tokio::time::Instant;

use super::ReplicaMachine;
use super::holdings::Holdings;
use super::leave::Leaving;
use crate::balance::plan::{Member, Plan};
use crate::balance::weighted::Loaded;
use crate::store::protocol::{Conflict, ReplicaState, SetInfo};

/// The group as the last tick saw it.
#[derive(Debug, Default)]
pub(super) struct View {
    /// Live members counted towards N, for the plan.
    pub(super) members: Vec<Member>,
    /// The same with their loads and capacities, for a weighted plan.
    pub(super) loaded: Vec<Loaded>,
    /// Every live member's id.
    pub(super) live: Vec<String>,
    /// The partition set (`None`: the group does not exist).
    pub(super) set: Option<SetInfo>,
    /// This session's partitions and load as the store counted them.
    pub(super) server_held: usize,
    pub(super) server_load: u64,
    /// Partitions without a live owner.
    pub(super) unowned: usize,
    /// Free partitions reserved for this replica (handed to it by name).
    pub(super) reserved: usize,
}

impl ReplicaMachine {
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

    /// When [`ReplicaMachine::poll`] has something to do next (`None`: only when some
    /// reply or event arrives).
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let tick = self.may_tick().then(|| self.cadence.due_at());
        let resend = self.claims.pending.as_ref().and_then(|p| p.resend_at);
        [tick, self.claims.after, resend, self.warm.next_due()]
            .into_iter()
            .flatten()
            .min()
    }

    /// No tick while one is in flight (its reply comes first), once the session is
    /// being ended or parked, or while leaving without a session (nothing to renew).
    pub(super) fn may_tick(&self) -> bool {
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
        self.claims.after.filter(|at| *at > now)
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

    /// Members parked `away` at the last tick (a sticky restart, or a sticky replica's
    /// session that expired within its grace): their partitions wait for them.
    pub(crate) fn away(&self) -> Vec<String> {
        self.roster
            .1
            .iter()
            .filter(|m| m.state == ReplicaState::Away && m.replica != self.s.replica)
            .map(|m| m.replica.clone())
            .collect()
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
        self.handovers.count
    }

    /// Where the leave stands.
    pub(crate) fn leaving(&self) -> Leaving {
        self.leaving
    }

    /// Whether releases must be refused: a sticky restart keeps every partition.
    pub(crate) fn keeps_leases(&self) -> bool {
        self.leaving.keeps_leases()
    }

    /// The holdings (what runs, what the view shows).
    pub(crate) fn holdings(&self) -> &Holdings {
        &self.holdings
    }

    /// The partitions whose "owned" changed since the last call.
    pub(crate) fn take_owned_changes(&mut self) -> std::collections::BTreeSet<usize> {
        self.holdings.take_changes()
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
            self.holdings.load()
        } else {
            self.holdings.held_count() as u64
        }
    }

    /// The life and version of this replica's copy of the set, once it has one.
    pub(crate) fn set_copy(&self) -> Option<(String, u64)> {
        self.set.copy().map(|c| (c.life.clone(), c.set_version))
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

    pub(super) fn member_state(&self, now: Instant) -> ReplicaState {
        match self.leaving {
            Leaving::Parking | Leaving::ParkSent | Leaving::Parked => ReplicaState::Away,
            Leaving::No | Leaving::Pausing => {
                if self.drained {
                    ReplicaState::Draining
                } else if self.settling(now) {
                    ReplicaState::Settling
                } else {
                    ReplicaState::Active
                }
            }
            _ => ReplicaState::Leaving,
        }
    }

    pub(super) fn held(&self) -> usize {
        self.holdings.held_count()
    }

    /// Nothing in flight that a reconcile's answer could miss or overtake.
    pub(super) fn quiet(&self) -> bool {
        self.claims.pending.is_none() && self.claims.reconciling.is_none() && !self.holdings.busy()
    }
}
