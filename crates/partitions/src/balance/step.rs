//! One member's decision step on a view of the group, as pure functions: how much it
//! claims and which of its partitions it hands over. A replica takes this step every
//! tick ([`crate::replica`]: it plans, then sizes its claim and picks what to hand over
//! here); the planner takes the same step for each member of its rehearsal
//! ([`super::whatif`]), so the two cannot drift apart.
//!
//! What differs between them is only what they feed in: a replica counts what it and
//! the store both know (the larger), may find partitions orphaned (unclaimed past a
//! lease while nobody settles) and hands over a random sample; the planner counts its
//! rehearsal's members, never waits a lease and hands over a member's last partitions.

use super::plan::Plan;
use super::prefer::{Standings, shed_first};
use super::weighted::WeightedPlan;

/// Where a member stands when it sizes a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Standing {
    /// The partitions it holds.
    pub(crate) held: usize,
    /// Its load now (its weights summed).
    pub(crate) load: u64,
    /// The partitions nobody owns.
    pub(crate) unowned: usize,
    /// Free partitions have gone unclaimed for a lease and a retry interval while
    /// nobody settles: they go to whoever asks, above any cap (availability before
    /// balance).
    pub(crate) orphaned: bool,
}

/// By count: how many free partitions to claim now, beyond what the member holds.
///
/// ```text
/// allowance 5, held 3, 4 unowned            -> 2
/// allowance 5, held 3, 4 unowned, orphaned  -> 4   (orphans go to whoever asks)
/// shed 1 (handing over)                     -> 0
/// ```
pub(crate) fn count_budget(plan: &Plan, now: Standing) -> usize {
    let mut budget = plan.allowance.saturating_sub(now.held);
    if now.orphaned && plan.shed == 0 {
        budget = budget.max(now.unowned);
    }
    budget.min(now.unowned)
}

/// By weight: the weight left for claims now, up to the plan's target (`base`, the
/// load it planned on, plus its room); 0 while it sheds, unbounded for orphans.
pub(crate) fn weighted_room(plan: &WeightedPlan, base: u64, now: Standing) -> u64 {
    if now.orphaned && plan.shed.is_empty() {
        return u64::MAX;
    }
    if !plan.shed.is_empty() {
        return 0;
    }
    base.saturating_add(plan.room).saturating_sub(now.load)
}

/// By weight: how much weight of the partitions handed to the member by name it may
/// take now, up to its bound; 0 while it sheds, unbounded for orphans.
pub(crate) fn weighted_bound(plan: &WeightedPlan, base: u64, now: Standing) -> u64 {
    if !plan.shed.is_empty() {
        return 0;
    }
    if now.orphaned {
        return u64::MAX;
    }
    base.saturating_add(plan.bound).saturating_sub(now.load)
}

/// By count: the `plan.shed` partitions to hand over, of `order` (the member's
/// partitions in the order it would give them): those preferred on a member with room
/// first, those preferred on `me` last.
pub(crate) fn count_shed<'a>(
    plan: &Plan,
    me: &str,
    order: &[usize],
    preferred: impl Fn(usize) -> Option<&'a str>,
    standings: &Standings,
) -> Vec<usize> {
    shed_first(me, order, preferred, standings)
        .into_iter()
        .take(plan.shed)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn count(allowance: usize, shed: usize) -> Plan {
        Plan {
            allowance,
            shed,
            cap: 5,
            floor: 4,
        }
    }

    fn at(held: usize, load: u64, unowned: usize, orphaned: bool) -> Standing {
        Standing {
            held,
            load,
            unowned,
            orphaned,
        }
    }

    fn weighted(room: u64, bound: u64, shed: Vec<usize>) -> WeightedPlan {
        WeightedPlan {
            room,
            fallback: false,
            shed,
            to: BTreeMap::new(),
            bound,
            share: 10.0,
        }
    }

    #[test]
    fn a_count_claim_fills_the_allowance_from_what_is_free() {
        assert_eq!(count_budget(&count(5, 0), at(3, 3, 4, false)), 2);
        assert_eq!(
            count_budget(&count(5, 0), at(3, 3, 1, false)),
            1,
            "only what is free"
        );
        assert_eq!(
            count_budget(&count(5, 0), at(6, 6, 4, false)),
            0,
            "above it"
        );
    }

    #[test]
    fn orphans_go_to_whoever_asks_unless_it_hands_over() {
        assert_eq!(count_budget(&count(5, 0), at(5, 5, 4, true)), 4);
        assert_eq!(count_budget(&count(4, 1), at(5, 5, 4, true)), 0);
        let w = weighted(3, 5, Vec::new());
        assert_eq!(weighted_room(&w, 10, at(3, 12, 4, true)), u64::MAX);
        assert_eq!(weighted_bound(&w, 10, at(3, 12, 4, true)), u64::MAX);
        let shedding = weighted(3, 5, vec![1]);
        assert_eq!(weighted_room(&shedding, 10, at(3, 12, 4, true)), 0);
        assert_eq!(weighted_bound(&shedding, 10, at(3, 12, 4, true)), 0);
    }

    #[test]
    fn a_weighted_claim_takes_what_is_left_of_its_target() {
        let w = weighted(3, 5, Vec::new());
        assert_eq!(weighted_room(&w, 10, at(3, 10, 4, false)), 3);
        assert_eq!(
            weighted_room(&w, 10, at(3, 12, 4, false)),
            1,
            "claimed since"
        );
        assert_eq!(weighted_room(&w, 10, at(3, 14, 4, false)), 0);
        assert_eq!(weighted_bound(&w, 10, at(3, 12, 4, false)), 3);
    }

    #[test]
    fn a_count_hand_over_gives_the_rules_number_those_preferred_elsewhere_first() {
        let order = [1, 2, 3, 4];
        let none = |_| None;
        assert_eq!(
            count_shed(&count(2, 2), "a", &order, none, &Standings::default()),
            [1, 2]
        );
        let prefs = |i: usize| (i == 1).then_some("a");
        assert_eq!(
            count_shed(&count(2, 2), "a", &order, prefs, &Standings::default()),
            [2, 3],
            "its own preferred one last"
        );
    }
}
