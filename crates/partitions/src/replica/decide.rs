//! The decision step: the balancing rule applied to the last tick's view. A drained
//! replica hands everything over; otherwise it plans (by count or by weight), lets
//! preferences pick what to hand over, hands over if the policy says the rule has
//! insisted long enough (within the move budget), then claims.

use std::collections::BTreeMap;

use rand::Rng;
use rand::seq::IndexedRandom;
use tokio::time::Instant;

use super::holdings::Phase;
use super::{Action, ReplicaMachine};
use crate::balance::plan::plan;
use crate::balance::step;
use crate::balance::weighted::{Totals, weighted_plan};
use crate::store::ops::moves::MoveCause;
use crate::store::protocol::SetInfo;

impl ReplicaMachine {
    /// Applies the balancing rule to the last tick's view: hand over, then claim.
    pub(super) fn decide(&mut self, now: Instant, rng: &mut impl Rng) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.drained {
            // Hand everything over; the others take it (a draining member is not
            // counted towards N). Nothing is claimed until undrained.
            self.plan = None;
            self.wplan = None;
            let all = self.holdings.serving();
            for &i in &all {
                self.holdings.stop(i, MoveCause::Drain);
            }
            for (i, _) in self.holdings.in_phase(Phase::Starting) {
                self.holdings.unstart(i);
            }
            if !all.is_empty() {
                actions.push(Action::Stop {
                    indices: all,
                    reason: MoveCause::Drain,
                    to: BTreeMap::new(),
                    held: BTreeMap::new(),
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
            let mine = self.holdings.serving_weights();
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
            self.claims.fallback_spent = false;
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
        // store counts what the holdings hold.
        let landed = self.view.unowned == 0
            && self.holdings.at_rest()
            && self.view.server_held == self.held();
        let go = self.policy.hand_over(wants, landed, now);
        if let Some(after) = self.policy.look_again(go, now) {
            self.cadence.wake(now + after);
        }
        if go {
            let candidates = match named {
                Some(shed) => shed,
                None if !self.prefs.by_partition.is_empty() => {
                    // The rule says how many; preferences say which: a random order,
                    // those preferred on a member with room first, this replica's own
                    // last.
                    let mut serving = self.holdings.serving();
                    rand::seq::SliceRandom::shuffle(serving.as_mut_slice(), rng);
                    let prefs = &self.prefs.by_partition;
                    self.plan.map_or_else(Vec::new, |plan| {
                        step::count_shed(
                            &plan,
                            &self.s.replica,
                            &serving,
                            |i| prefs.get(&i).map(String::as_str),
                            &self.prefs.standings,
                        )
                    })
                }
                None => {
                    let n = self.plan.map_or(0, |p| p.shed);
                    self.holdings.serving().sample(rng, n).copied().collect()
                }
            };
            match self.s.move_budget {
                // Within the group's budget: ask for it first, hand over what it grants.
                Some(budget) if !candidates.is_empty() && !self.handovers.budgeting => {
                    self.handovers.budgeting = true;
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
                None => actions.extend(self.hand_over(candidates, usize::MAX, now)),
            }
        }
        actions.extend(self.claim(now));
        actions
    }
}
