//! The balancing rule, as a pure function of one replica's view of the group.
//!
//! Every replica evaluates it on its own after each group tick; the rule is written so
//! that replicas reading the same view agree on who moves, and nobody moves at all
//! once every active replica holds `floor(P/N)` or `ceil(P/N)` partitions.

/// A live member as seen in the group's heartbeat set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) replica: String,
    /// Partitions it owns; `None` while it is still settling (it counts towards N for
    /// everyone's claims, but nobody sheds for it yet).
    pub(crate) owned: Option<usize>,
}

/// What this replica may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Ownership this replica may grow to by campaigning for free partitions.
    pub(crate) allowance: usize,
    /// How many of its partitions to release now so an under-loaded replica gets them.
    pub(crate) shed: usize,
    /// ceil(P/N): the most partitions a replica holds at steady state.
    pub(crate) cap: usize,
    /// floor(P/N): the least.
    pub(crate) floor: usize,
}

/// The plan for replica `me`, which owns `mine` and is settling if `settling`.
///
/// - N counts every live member (settling ones too), so nobody claims a settling
///   replica's share.
/// - While some active replica holds fewer than floor(P/N), only such replicas claim,
///   and the most-loaded replicas (ties by id) release exactly the deficit between them.
/// - Otherwise every replica may claim up to ceil(P/N).
/// - A replica above ceil(P/N) of the *active* members (after taking orphans) sheds the
///   excess.
pub(crate) fn plan(
    partitions: usize,
    me: &str,
    mine: usize,
    settling: bool,
    members: &[Member],
    unowned: usize,
) -> Plan {
    let mut view: Vec<Member> = members
        .iter()
        .filter(|m| m.replica != me)
        .cloned()
        .collect();
    view.push(Member {
        replica: me.to_owned(),
        owned: (!settling).then_some(mine),
    });
    let n_all = view.len();
    let floor = partitions / n_all;
    let cap = partitions.div_ceil(n_all);
    if settling {
        return Plan {
            allowance: 0,
            shed: 0,
            cap,
            floor,
        };
    }
    let active: Vec<(&str, usize)> = view
        .iter()
        .filter_map(|m| m.owned.map(|c| (m.replica.as_str(), c)))
        .collect();
    let deficit: usize = active.iter().map(|(_, c)| floor.saturating_sub(*c)).sum();
    // Settling members will claim their floor as soon as they are done: free partitions
    // beyond the active replicas' deficit are theirs first, not surplus.
    let reserved = floor * (n_all - active.len());
    let active_cap = partitions.div_ceil(active.len());
    let shed = if mine > active_cap {
        mine - active_cap
    } else if deficit > unowned && mine > floor {
        // Free partitions already cover part of the deficit: shed only the rest, so a
        // hand-off in flight is never answered by a second one.
        shed_share(me, floor, deficit - unowned, &active)
    } else {
        0
    };
    let allowance = if shed > 0 {
        // Never claim while handing partitions over.
        mine - shed
    } else if deficit > 0 {
        let base = mine.max(floor);
        // Free partitions beyond what the under-loaded replicas need go to replicas
        // below the cap right away, dealt by (projected count, id) so that replicas
        // reading the same view never claim the same surplus twice.
        let surplus = unowned.saturating_sub(deficit + reserved);
        base + usize::from(gets_surplus(me, floor, cap, surplus, &active))
    } else {
        cap
    };
    Plan {
        allowance,
        shed,
        cap,
        floor,
    }
}

/// Whether `me` is among the first `surplus` active replicas below `cap`, ordered by
/// their count once every under-loaded replica has reached `floor`, then by id.
fn gets_surplus(
    me: &str,
    floor: usize,
    cap: usize,
    surplus: usize,
    active: &[(&str, usize)],
) -> bool {
    if surplus == 0 {
        return false;
    }
    let mut below: Vec<(usize, &str)> = active
        .iter()
        .map(|(r, c)| ((*c).max(floor), *r))
        .filter(|(c, _)| *c < cap)
        .collect();
    below.sort();
    below.iter().take(surplus).any(|(_, r)| *r == me)
}

/// Deals `deficit` releases round-robin over the replicas above `floor`, most loaded
/// first (ties by id), never taking a replica below `floor`; returns `me`'s share.
fn shed_share(me: &str, floor: usize, deficit: usize, active: &[(&str, usize)]) -> usize {
    let mut donors: Vec<(&str, usize)> = active
        .iter()
        .filter(|(_, c)| *c > floor)
        .map(|(r, c)| (*r, c - floor))
        .collect();
    donors.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut given = vec![0usize; donors.len()];
    let mut left = deficit;
    while left > 0 {
        let mut progressed = false;
        for (i, (_, extra)) in donors.iter().enumerate() {
            if left > 0 && given[i] < *extra {
                given[i] += 1;
                left -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    donors
        .iter()
        .zip(given)
        .find(|((r, _), _)| *r == me)
        .map_or(0, |(_, g)| g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(counts: &[(&str, Option<usize>)]) -> Vec<Member> {
        counts
            .iter()
            .map(|(r, c)| Member {
                replica: (*r).to_owned(),
                owned: *c,
            })
            .collect()
    }

    /// Plans every member of a view at once; partitions nobody holds are unowned.
    fn all(p: usize, counts: &[(&str, Option<usize>)]) -> Vec<Plan> {
        let ms = members(counts);
        let held: usize = counts.iter().filter_map(|(_, c)| *c).sum();
        counts
            .iter()
            .map(|(r, c)| {
                plan(
                    p,
                    r,
                    c.unwrap_or(0),
                    c.is_none(),
                    &ms,
                    p.saturating_sub(held),
                )
            })
            .collect()
    }

    #[test]
    fn a_joiner_gets_its_share_from_the_most_loaded() {
        // P=12, N 4 -> 5: the cap stays 3, so the cap alone would starve the joiner.
        let plans = all(
            12,
            &[
                ("a", Some(3)),
                ("b", Some(3)),
                ("c", Some(3)),
                ("d", Some(3)),
                ("e", Some(0)),
            ],
        );
        let shed: Vec<_> = plans.iter().map(|p| p.shed).collect();
        assert_eq!(shed, vec![1, 1, 0, 0, 0], "exactly the deficit moves");
        assert_eq!(plans[4].allowance, 2, "the joiner claims up to floor");
        assert!(plans[..4].iter().all(|p| p.allowance <= 3));
    }

    #[test]
    fn balanced_views_are_left_alone() {
        for counts in [
            vec![
                ("a", Some(3)),
                ("b", Some(3)),
                ("c", Some(2)),
                ("d", Some(2)),
                ("e", Some(2)),
            ],
            vec![
                ("a", Some(16)),
                ("b", Some(16)),
                ("c", Some(16)),
                ("d", Some(16)),
            ],
        ] {
            let p: usize = counts.iter().map(|(_, c)| c.unwrap()).sum();
            for plan in all(p, &counts) {
                assert_eq!(plan.shed, 0, "{counts:?}");
            }
        }
    }

    #[test]
    fn a_settling_replica_counts_for_claims_but_triggers_no_shedding() {
        let plans = all(
            12,
            &[
                ("a", Some(3)),
                ("b", Some(3)),
                ("c", Some(3)),
                ("d", Some(3)),
                ("e", None),
            ],
        );
        assert!(plans.iter().all(|p| p.shed == 0), "{plans:?}");
        assert_eq!(plans[4].allowance, 0, "settling: no claims yet");
        assert_eq!(plans[0].cap, 3);
    }

    #[test]
    fn cold_start_claims_stop_at_floor_then_cap() {
        // Everything free: floors for all, the remainder dealt by id, summing to P.
        let plans = all(10, &[("a", Some(0)), ("b", Some(0)), ("c", Some(0))]);
        let allowances: Vec<_> = plans.iter().map(|p| p.allowance).collect();
        assert_eq!(allowances, vec![4, 3, 3]);
        assert!(plans.iter().all(|p| p.shed == 0));
        // Once everyone reached floor with nothing free, anyone may claim up to cap.
        let ms = members(&[("a", Some(3)), ("b", Some(3)), ("c", Some(3))]);
        assert!(
            ["a", "b", "c"]
                .iter()
                .all(|r| plan(10, r, 3, false, &ms, 1).allowance == 4)
        );
    }

    #[test]
    fn orphans_taken_above_cap_are_shed_later() {
        // b took a dead replica's partitions while membership still counted it.
        let plans = all(12, &[("a", Some(4)), ("b", Some(8))]);
        assert_eq!(plans[1].shed, 2, "b sheds down to ceil(12/2)");
        assert_eq!(plans[0].allowance, 6);
    }

    #[test]
    fn the_remainder_is_dealt_at_once_when_free_partitions_exceed_the_deficit() {
        // A dead replica's 16 partitions are free; 3 survivors hold 16 each, P=64:
        // floor 21 needs 15, the 16th goes to exactly one survivor right away.
        let plans = all(64, &[("a", Some(16)), ("b", Some(16)), ("c", Some(16))]);
        let total: usize = plans.iter().map(|p| p.allowance - 16).sum();
        assert_eq!(total, 16, "{plans:?}");
        assert_eq!(plans.iter().filter(|p| p.allowance == 22).count(), 1);
    }

    #[test]
    fn a_replica_that_sheds_claims_nothing() {
        let plans = all(
            12,
            &[
                ("a", Some(3)),
                ("b", Some(3)),
                ("c", Some(3)),
                ("d", Some(3)),
                ("e", Some(0)),
            ],
        );
        for p in &plans[..2] {
            assert_eq!(p.shed, 1);
            assert_eq!(
                p.allowance, 2,
                "after shedding one, no budget to claim: {p:?}"
            );
        }
    }

    #[test]
    fn a_dead_replicas_share_is_claimed_by_the_survivors() {
        // 15 free, deficit 5 + 5 + 4 = 14: one surplus, dealt to the first by id.
        let ms = members(&[("a", Some(16)), ("b", Some(16)), ("c", Some(17))]);
        let plans: Vec<_> = ["a", "b", "c"]
            .iter()
            .zip([16, 16, 17])
            .map(|(r, c)| plan(64, r, c, false, &ms, 15))
            .collect();
        assert_eq!(
            plans.iter().map(|p| p.allowance).collect::<Vec<_>>(),
            vec![22, 21, 21]
        );
    }

    #[test]
    fn free_partitions_a_settling_replica_will_need_are_not_dealt_as_surplus() {
        // P=10 on 3 replicas, b and c still settling: a claims its floor (3) plus the
        // one partition left once everyone has its floor, not the 7 "spare" ones.
        let ms = members(&[("a", Some(0)), ("b", None), ("c", None)]);
        let first = plan(10, "a", 0, false, &ms, 10);
        assert_eq!(first.allowance, 4);
        // b finishes settling next and takes its floor; c's floor stays reserved.
        let ms = members(&[("a", Some(4)), ("b", Some(0)), ("c", None)]);
        assert_eq!(plan(10, "b", 0, false, &ms, 6).allowance, 3);
        let ms = members(&[("a", Some(4)), ("b", Some(3)), ("c", Some(0))]);
        assert_eq!(plan(10, "c", 0, false, &ms, 3).allowance, 3);
        assert!(
            [("a", 4), ("b", 3)]
                .iter()
                .all(|(r, c)| plan(10, r, *c, false, &ms, 3).shed == 0),
            "every claim fits: nobody hands anything over"
        );
    }

    #[test]
    fn deficits_larger_than_one_donor_spread_over_several() {
        let plans = all(
            20,
            &[
                ("a", Some(10)),
                ("b", Some(10)),
                ("c", Some(0)),
                ("d", Some(0)),
            ],
        );
        let shed: Vec<_> = plans.iter().map(|p| p.shed).collect();
        assert_eq!(shed, vec![5, 5, 0, 0]);
    }
}
