//! Hand-overs: which partitions a replica over its share gives up, to whom, and
//! within the group's move budget.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::holdings::Phase;
use super::leave::Leaving;
use super::{Action, ReplicaMachine};
use crate::balance::prefer::{count_standings, weighted_standings};
use crate::balance::receive::receivers;
use crate::balance::step;
use crate::balance::weighted::Totals;
use crate::store::ops::moves::MoveCause;

/// Hand-overs made, and a take from the move budget in flight.
#[derive(Debug, Default)]
pub(super) struct HandOvers {
    /// Partitions handed over to rebalance, in total.
    pub(super) count: u64,
    /// A take from the move budget is in flight: no other hand-over until it answers.
    pub(super) budgeting: bool,
}

impl ReplicaMachine {
    /// Hands over up to `limit` of `candidates` (the first ones still served) to even
    /// out the group.
    /// Those with a receiver are held while it prepares, if moves are warm.
    pub(super) fn hand_over(
        &mut self,
        candidates: Vec<usize>,
        limit: usize,
        now: Instant,
    ) -> Option<Action> {
        let mut chosen = Vec::new();
        for i in candidates {
            if chosen.len() == limit {
                break;
            }
            let weight = self.weight_of(i);
            if self.holdings.stop(i, MoveCause::HandOff) {
                chosen.push((i, weight));
            }
        }
        self.handovers.count += chosen.len() as u64;
        let to = self.receivers(&chosen);
        let indices: Vec<usize> = chosen.into_iter().map(|(i, _)| i).collect();
        let held = self.hold(&indices, &to, now);
        (!indices.is_empty()).then_some(Action::Stop {
            indices,
            reason: MoveCause::HandOff,
            to,
            held,
        })
    }

    /// Names a receiver for each of `handed` (index, weight) that a member has room
    /// for ([`receivers`]), from the last tick's view of every member.
    pub(super) fn receivers(&self, handed: &[(usize, u64)]) -> BTreeMap<usize, String> {
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
        let prefs = &self.prefs.by_partition;
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
    pub(crate) fn on_budget(
        &mut self,
        indices: Vec<usize>,
        granted: usize,
        now: Instant,
    ) -> Vec<Action> {
        self.handovers.budgeting = false;
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
        self.hand_over(indices, granted, now).into_iter().collect()
    }

    /// How many of the first of `indices` (those still served) fit into `weight`; the
    /// first alone if it is heavier than the whole budget and `weight` is all of it (it
    /// could never fit otherwise).
    pub(super) fn fitting(&self, indices: &[usize], weight: usize) -> usize {
        let weight = weight as u64;
        let whole = self.s.move_budget.map_or(0, u64::from);
        let (mut n, mut used) = (0, 0);
        for &i in indices {
            let Some(h) = self.holdings.held(i).filter(|h| h.phase == Phase::Serving) else {
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
    pub(super) fn weight_of(&self, i: usize) -> u64 {
        self.holdings.held(i).map_or(1, |h| h.weight)
    }

    /// How many partitions to claim now beyond what this replica holds.
    pub(super) fn budget(&self, now: Instant) -> usize {
        self.plan
            .map_or(0, |plan| step::count_budget(&plan, self.standing(now)))
    }
}
