//! Preferences: partitions an operator prefers on a replica, taken in from the set's
//! first page and applied to claims and hand-overs.

use std::collections::{BTreeMap, BTreeSet};

use tokio::time::Instant;

use super::{Action, ReplicaMachine};
use crate::balance::prefer::{
    Standings, count_standings, hand_back, swap_claim, weighted_standings,
};
use crate::store::protocol::ReplicaState;

/// Preferences: partition (by index) → the replica id it is preferred on, as the last
/// first page of the set carried them.
#[derive(Debug, Default)]
pub(super) struct Prefs {
    pub(super) by_partition: BTreeMap<usize, String>,
    /// How many first pages of the set were read when they were taken in.
    pub(super) copy: u64,
    /// Whether this process has taken in the preferences of a first page of the set,
    /// and since when claims have waited for that.
    pub(super) known: bool,
    pub(super) wait: Option<Instant>,
    /// The standings of the members partitions are preferred on (and this replica's),
    /// as the last decision computed them (empty without preferences).
    pub(super) standings: Standings,
}

impl ReplicaMachine {
    /// The preferences of the last copy of the set, if a newer copy was read since
    /// this was last asked (partition names, for the driver to index:
    /// [`set_preferences`](Self::set_preferences)).
    pub(crate) fn new_preferences(&mut self) -> Option<Vec<(String, String)>> {
        let (read, prefs) = self.set.preferences();
        if read == self.prefs.copy {
            return None;
        }
        self.prefs.copy = read;
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
        self.prefs.by_partition = prefs.into_iter().collect();
        if std::mem::replace(&mut self.prefs.known, true) || self.claims.pending.is_some() {
            return Vec::new();
        }
        self.claim(now)
    }

    /// Takes the group's preferences into a decision: the standings of the members
    /// partitions are preferred on (for claims and hand-overs), and, when the rule
    /// hands nothing over (`wants` false), every partition has an owner and nobody
    /// settles, one partition to hand back to the member it is preferred on, if that
    /// keeps the group within its bound ([`hand_back`]). Returns what to hand over.
    pub(super) fn with_preferences(
        &mut self,
        settling: bool,
        wants: bool,
        named: Option<Vec<usize>>,
    ) -> (bool, Option<Vec<usize>>) {
        self.prefs.standings = Standings::default();
        if self.prefs.by_partition.is_empty() || settling {
            return (wants, named);
        }
        let me = self.s.replica.as_str();
        // Settling members too: claims leave them their preferred partitions (the
        // rule keeps their share free for them anyway), nobody hands one over to them.
        let active: BTreeSet<&str> = self
            .roster
            .1
            .iter()
            .filter(|m| matches!(m.state, ReplicaState::Active | ReplicaState::Settling))
            .map(|m| m.replica.as_str())
            .collect();
        // Each of them with how many partitions are preferred on it.
        let mut eligible: BTreeMap<&str, usize> = BTreeMap::new();
        for r in self.prefs.by_partition.values().map(String::as_str) {
            if active.contains(r) {
                *eligible.entry(r).or_default() += 1;
            }
        }
        eligible.entry(me).or_default();
        self.prefs.standings = match &self.wplan {
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
            .any(|m| m.state == ReplicaState::Settling);
        if wants || self.view.unowned > 0 || anyone_settling {
            return (wants, named);
        }
        let mine = self.holdings.serving_weights();
        let prefs = &self.prefs.by_partition;
        match hand_back(
            me,
            &mine,
            |i| prefs.get(&i).map(String::as_str),
            &self.prefs.standings,
        ) {
            Some(i) => (true, Some(vec![i])),
            None => (wants, named),
        }
    }

    /// By count, at its allowance: whether to claim one free partition preferred on
    /// this replica beyond it, a swap's first half ([`swap_claim`]).
    pub(super) fn swap_wanted(&self) -> bool {
        let Some(plan) = self.plan else { return false };
        if self.prefs.by_partition.is_empty() {
            return false;
        }
        let me = self.s.replica.as_str();
        let mut holds_other = false;
        for (i, _) in self.holdings.terms() {
            if self.prefs.by_partition.get(&i).is_none_or(|r| r != me) {
                holds_other = true;
                break;
            }
        }
        let misses_own = self
            .prefs
            .by_partition
            .iter()
            .any(|(i, r)| r == me && self.holdings.held(*i).is_none());
        swap_claim(
            &plan,
            self.held().max(self.view.server_held),
            self.view.unowned,
            holds_other,
            misses_own,
        )
    }
}
