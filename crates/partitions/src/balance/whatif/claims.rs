//! The planner's claims, as a replica makes them: sized by the replica's own decision
//! step ([`step`]), oldest free partition first (preferred ones first), batches by
//! weight, and which claims race.

use std::collections::{BTreeMap, BTreeSet};

use crate::balance::prefer::{leave_to, swap_claim};
use crate::balance::step::{self, Standing};
use crate::store::CLAIM_BATCH;

use super::Rehearsal;

impl Rehearsal {
    /// The replica id partition `i` is preferred on, if on a member taking part.
    pub(super) fn preferred(&self, i: usize) -> Option<&str> {
        self.prefs[i].map(|k| self.members[k].id.as_str())
    }

    /// The free partitions member `k` claims from, in the order it takes them, as
    /// `claim.lua` orders them: those preferred on it first (oldest first), then the
    /// others oldest first, less those left to the members they are preferred on.
    pub(super) fn claim_order(&self, k: usize) -> Vec<usize> {
        if self.prefs.iter().all(Option::is_none) {
            return self.free_order().collect();
        }
        let me = self.members[k].id.as_str();
        let mut left: BTreeMap<String, u64> = leave_to(me, &self.standings()).into_iter().collect();
        let mut out: Vec<usize> = self
            .free_order()
            .filter(|&i| self.prefs[i] == Some(k))
            .collect();
        for i in self.free_order() {
            if self.prefs[i] == Some(k) {
                continue;
            }
            let w = self.weights_for_claim(i);
            match self.preferred(i).and_then(|r| left.get_mut(r)) {
                Some(room) if w <= *room => *room -= w,
                _ => out.push(i),
            }
        }
        out
    }

    /// What one weighted claim of member `k` would take now, with `room` and `fallback`
    /// as a plan gave them: those among the first free ones that fit, or the first if
    /// none does.
    pub(super) fn one_claim(&self, k: usize, room: u64, fallback: bool) -> Vec<usize> {
        let candidates: Vec<usize> = self
            .claim_order(k)
            .into_iter()
            .take(self.free.len().min(CLAIM_BATCH))
            .collect();
        let mut taken = Vec::new();
        let mut acc = 0;
        for &i in &candidates {
            if acc + self.weights_for_claim(i) <= room {
                taken.push(i);
                acc += self.weights_for_claim(i);
            }
        }
        if taken.is_empty()
            && fallback
            && let Some(&i) = candidates.first()
        {
            taken.push(i);
        }
        taken
    }

    pub(super) fn weights_for_claim(&self, i: usize) -> u64 {
        if self.set_weighted {
            self.weights[i]
        } else {
            1
        }
    }

    /// Where member `k` stands for the decision step: nothing is ever orphaned here
    /// (the rounds give orphans out at the end).
    pub(super) fn standing(&self, k: usize) -> Standing {
        Standing {
            held: self.members[k].held.len(),
            load: self.load(k),
            unowned: self.free.len(),
            orphaned: false,
        }
    }

    /// How many free partitions member `k` may claim now (by count), as the replica's
    /// decision step sizes it.
    pub(super) fn budget(&self, k: usize) -> usize {
        step::count_budget(&self.count_plan(k), self.standing(k))
    }

    /// Whether member `k`, at its allowance by count, claims one free partition
    /// preferred on it beyond it ([`swap_claim`]).
    pub(super) fn swaps(&self, k: usize) -> bool {
        let held = &self.members[k].held;
        let holds_other = held.iter().any(|&i| self.prefs[i] != Some(k));
        let misses_own =
            (0..self.prefs.len()).any(|i| self.prefs[i] == Some(k) && !held.contains(&i));
        swap_claim(
            &self.count_plan(k),
            held.len(),
            self.free.len(),
            holds_other,
            misses_own,
        )
    }

    /// Member `k` plans on the group as it is and claims what the plan lets it, batch
    /// after batch while one takes something (as a replica's claims go on at once).
    pub(super) fn claim_as(&mut self, k: usize) -> usize {
        if !self.weighted {
            let n = self.budget(k);
            let mut taken: Vec<usize> = self.claim_order(k).into_iter().take(n).collect();
            if n == 0 && self.swaps(k) {
                // A swap's first half: one preferred on it, beyond its allowance.
                taken.extend(self.free_order().find(|&i| self.prefs[i] == Some(k)));
            }
            for &i in &taken {
                self.take(k, i);
            }
            return taken.len();
        }
        let plan = self.weight_plan(k);
        if !plan.shed.is_empty() {
            return 0;
        }
        // The load the plan was made on: each claim's room is what is left of its
        // target, as the replica's decision step sizes it.
        let base = self.load(k);
        let mut took = 0;
        // A plan lets one claim take a partition past the room, not every claim.
        let mut fallback = plan.fallback;
        loop {
            let room = step::weighted_room(&plan, base, self.standing(k));
            if room == 0 && !fallback {
                return took;
            }
            let batch = self.one_claim(k, room, fallback);
            fallback = false;
            if batch.is_empty() {
                return took;
            }
            for &i in &batch {
                self.take(k, i);
            }
            took += batch.len();
        }
    }

    /// Whether the replicas claiming on the current view could end otherwise than in
    /// the planner's order (by id).
    pub(super) fn claims_race(&self) -> bool {
        let members = self.counting();
        if self.weighted {
            let takers = members
                .iter()
                .filter(|&&k| {
                    let plan = self.weight_plan(k);
                    plan.shed.is_empty() && !self.one_claim(k, plan.room, plan.fallback).is_empty()
                })
                .count();
            return takers > 1;
        }
        let budgets: Vec<usize> = members
            .iter()
            .map(|&k| self.budget(k))
            .filter(|b| *b > 0)
            .collect();
        if budgets.len() < 2 {
            return false;
        }
        let sources: BTreeSet<Option<usize>> = self
            .free_order()
            .map(|i| self.last[i].map(|(j, _)| j))
            .collect();
        budgets.iter().sum::<usize>() > self.free.len() || sources.len() > 1
    }

    /// Partitions handed over by name go to their receivers first, each up to its
    /// bound, heaviest reservation first in the order they were freed; a receiver
    /// handing over itself takes none. Reservations left (declined) are free to anyone.
    pub(super) fn deliver(&mut self) -> usize {
        let mut taken = 0;
        for k in self.counting() {
            let mine: Vec<usize> = self
                .free_order()
                .filter(|&i| self.reserved[i] == Some(k))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let plan = self.weight_plan(k);
            if !plan.shed.is_empty() {
                continue;
            }
            let mut left = step::weighted_bound(&plan, self.load(k), self.standing(k));
            for i in mine {
                let w = self.weights_for_claim(i);
                if w <= left {
                    left -= w;
                    self.take(k, i);
                    taken += 1;
                }
            }
        }
        self.reserved.iter_mut().for_each(|r| *r = None);
        taken
    }

    /// Claims until a pass claims nothing; returns how many were claimed.
    pub(super) fn claims(&mut self) -> usize {
        let mut total = self.deliver();
        while !self.free.is_empty() {
            if self.claims_race() {
                self.exact = false;
            }
            let mut pass = 0;
            for k in self.counting() {
                pass += self.claim_as(k);
            }
            if pass == 0 {
                break;
            }
            total += pass;
        }
        total
    }
}
