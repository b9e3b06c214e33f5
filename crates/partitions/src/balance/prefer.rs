//! Preferences ([`crate::GroupAdmin::prefer`]), as pure functions of one replica's view
//! of the group: which members take the free partitions preferred on them, which of a
//! replica's partitions it hands over first, and which one it hands back to the
//! member it is preferred on.
//!
//! A preference never changes how many partitions (or how much weight) a replica
//! claims or hands over: the balancing rule ([`super::plan`] by count,
//! [`super::weighted`] by weight) decides that. It changes only *which*:
//!
//! - **Claims.** A replica claims the free partitions preferred on it before any other.
//!   It leaves the free partitions preferred on another member to that member if that
//!   member is active and has room under the rule (its [`Standing::room`]: the weight
//!   it would claim into now), or is settling (the rule keeps its share free for it
//!   anyway), as long as their weights fit into that room. The
//!   replica stops leaving them after one renew interval of partitions without an
//!   owner (the state machine's part): availability before preference.
//! - **Hand-overs.** When the rule asks a replica to hand partitions over (count rule:
//!   `n` of them), it picks first those preferred on a member with room, then those
//!   preferred on nobody (or on a member without room), and those preferred on itself
//!   last ([`shed_first`]).
//! - **Moving back.** A replica that holds a partition of weight w preferred on another
//!   active member R hands it back ([`hand_back`]) when R has room for it (room ≥ w) and
//!   the move keeps the group within its balance bound: the holder's deviation from
//!   its share (d = load − share; by count, the count) is at least R's plus w. Such a
//!   move changes Σ d² by 2w(d_R − d_H + w) ≤ 0, and leaves one partition fewer off
//!   its preferred replica. So the pair (Σ d², partitions off their preferred live
//!   replica) falls, in lexicographic order, with every move back, the rule's own
//!   moves lower Σ d² (see [`super::weighted`]), and without outside events moves
//!   stop. One partition per hand-over, through the same policy as the rule's (two
//!   ticks in a row, the cooldown, the move budget), and only while every partition
//!   has an owner and nobody settles.
//!
//! - **Swaps (by count).** A member R without room (at its allowance) that holds at
//!   most its cap, with at most as many partitions preferred on it as it holds, surely
//!   holds one that is not preferred on it while one preferred on it is elsewhere. A
//!   holder with at least as many partitions as R hands that one back anyway; R claims
//!   it beyond its allowance ([`swap_claim`]: one, while it holds one not preferred on
//!   it), which puts R one above its cap, and the rule has R hand one over, those
//!   preferred on it last. Counts end as they were (R passes through cap + 1 for one
//!   hand-over), with one partition more on its preferred replica.
//!
//! **Limits.** By weight there are no swaps: R must be at least w below its share,
//! else the partition waits where it is until loads allow. By count, a member with more
//! partitions preferred on it than it can hold gets what fits and no swaps.

use std::collections::{BTreeMap, BTreeSet};

use super::plan::{Member, Plan, plan};
use super::weighted::{Loaded, Totals, deviations, shares, weighted_plan};

/// A member as the preference rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Standing {
    pub(crate) replica: String,
    /// How far it is above its share, in scaled units ([`Standings::unit`] per unit of
    /// weight): by count, its count.
    pub(crate) dev: i128,
    /// The weight it would claim into now (by count, how many partitions); 0: none.
    /// For a settling member, what the rule keeps free for it to claim once it is done
    /// (by count its floor, by weight its share).
    pub(crate) room: u64,
    /// Still settling: claims leave it its preferred partitions (it is about to claim
    /// its share), but nobody hands one over to it yet.
    pub(crate) settling: bool,
    /// By count: it has no room, but takes one partition preferred on it in a swap
    /// ([`swap_claim`]): it is at most at its cap, and at most as many partitions are
    /// preferred on it as it holds, so it surely holds one that is not (one preferred
    /// on it is elsewhere), which it hands over next.
    pub(crate) swap: bool,
}

/// The standings of the members that matter to a replica's preferences (those
/// partitions are preferred on, and itself), and what one unit of weight is worth in
/// `dev`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Standings {
    pub(crate) members: Vec<Standing>,
    pub(crate) unit: i128,
}

impl Standings {
    fn of(&self, replica: &str) -> Option<&Standing> {
        self.members.iter().find(|s| s.replica == replica)
    }
}

/// By count: the standings of the members named in `eligible` (with how many
/// partitions are preferred on each), as `members` show them ([`plan`]'s view: a
/// member whose `owned` is `None` is settling, and holds none).
pub(crate) fn count_standings(
    partitions: usize,
    members: &[Member],
    unowned: usize,
    eligible: &BTreeMap<&str, usize>,
) -> Standings {
    let members_out = members
        .iter()
        .filter_map(|m| Some((m, *eligible.get(m.replica.as_str())?)))
        .map(|(m, preferred)| {
            let Some(owned) = m.owned else {
                let p = plan(partitions, &m.replica, 0, true, members, unowned);
                return Standing {
                    replica: m.replica.clone(),
                    dev: 0,
                    room: p.floor as u64,
                    settling: true,
                    swap: false,
                };
            };
            let p = plan(partitions, &m.replica, owned, false, members, unowned);
            let room = if p.shed == 0 {
                p.allowance.saturating_sub(owned)
            } else {
                0
            };
            Standing {
                replica: m.replica.clone(),
                dev: owned as i128,
                room: room as u64,
                settling: false,
                swap: room == 0
                    && p.shed == 0
                    && owned <= p.cap
                    && (1..=owned).contains(&preferred),
            }
        })
        .collect();
    Standings {
        members: members_out,
        unit: 1,
    }
}

/// By weight: the standings of the members named in `eligible` that balance (not
/// settling, not isolated: see [`super::weighted`]).
pub(crate) fn weighted_standings(
    members: &[Loaded],
    totals: Totals,
    eligible: &BTreeSet<&str>,
) -> Standings {
    let (devs, unit) = deviations(members, totals.weight);
    let shares = shares(members, totals.weight);
    let out = members
        .iter()
        .zip(devs)
        .zip(shares)
        .filter(|((m, _), _)| eligible.contains(m.replica.as_str()))
        .filter_map(|((m, dev), share)| {
            if m.load.is_none() {
                return Some(Standing {
                    replica: m.replica.clone(),
                    dev: 0,
                    // Whole weight units of its share (f64 to u64 saturates).
                    room: share.floor() as u64,
                    settling: true,
                    swap: false,
                });
            }
            let dev = dev?;
            let p = weighted_plan(&m.replica, m.load?, &[], false, m.capacity, members, totals);
            Some(Standing {
                replica: m.replica.clone(),
                dev,
                room: p.room,
                settling: false,
                swap: false,
            })
        })
        .collect();
    Standings { members: out, unit }
}

/// The members (not `me`) a claim of `me` leaves the free partitions preferred on
/// them to, with their rooms.
pub(crate) fn leave_to(me: &str, standings: &Standings) -> Vec<(String, u64)> {
    standings
        .members
        .iter()
        .filter(|s| s.replica != me && (s.room > 0 || s.swap))
        .map(|s| (s.replica.clone(), s.room.max(u64::from(s.swap))))
        .collect()
}

/// By count: whether a replica at its allowance (`held`, its `plan`) claims one free
/// partition preferred on it beyond it, a swap's first half: while something is free,
/// it hands nothing over, it is at most at its cap, it holds a partition not preferred
/// on it (`holds_other`, which it hands over next: it is then above its cap, and the
/// rule sheds one, those preferred on it last) and a partition preferred on it is
/// elsewhere (`misses_own`).
pub(crate) fn swap_claim(
    plan: &Plan,
    held: usize,
    unowned: usize,
    holds_other: bool,
    misses_own: bool,
) -> bool {
    unowned > 0
        && plan.shed == 0
        && held >= plan.allowance
        && held <= plan.cap
        && holds_other
        && misses_own
}

/// `candidates` (partitions `me` may hand over), those preferred on a member with room
/// first, those preferred on `me` last, each group in the order given.
pub(crate) fn shed_first<'a>(
    me: &str,
    candidates: &[usize],
    preferred: impl Fn(usize) -> Option<&'a str>,
    standings: &Standings,
) -> Vec<usize> {
    let class = |i: usize| match preferred(i) {
        Some(r) if r == me => 2,
        Some(r) if standings.of(r).is_some_and(|s| s.room > 0 && !s.settling) => 0,
        _ => 1,
    };
    let mut out = candidates.to_vec();
    out.sort_by_key(|&i| class(i));
    out
}

/// The partition of `mine` (index, weight) that `me` hands back to the member it is
/// preferred on, if any: one whose member has room for it and whose move keeps the
/// group within its bound (`me`'s deviation at least that member's plus its weight).
/// Of several, the one whose member is furthest below its share (then by member id,
/// then by index).
pub(crate) fn hand_back<'a>(
    me: &str,
    mine: &[(usize, u64)],
    preferred: impl Fn(usize) -> Option<&'a str>,
    standings: &Standings,
) -> Option<usize> {
    let my_dev = standings.of(me).filter(|s| !s.settling)?.dev;
    mine.iter()
        .filter_map(|&(i, w)| {
            let r = preferred(i).filter(|r| *r != me)?;
            let s = standings.of(r).filter(|s| !s.settling)?;
            let w128 = i128::from(w);
            let within = s.room >= w && my_dev - s.dev >= w128 * standings.unit;
            // A swap (by count): `me` holds as many as the member or more, and it takes
            // this one, then hands over one not preferred on it.
            let swap = s.swap && w == 1 && standings.unit == 1 && my_dev >= s.dev;
            (within || swap).then_some((s.dev, s.replica.as_str(), i))
        })
        .min()
        .map(|(_, _, i)| i)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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

    fn all<'a>(names: &[&'a str]) -> BTreeSet<&'a str> {
        names.iter().copied().collect()
    }

    /// Every one of `names`, each with many partitions preferred on it (no swaps).
    fn many<'a>(names: &[&'a str]) -> BTreeMap<&'a str, usize> {
        names.iter().map(|n| (*n, usize::MAX)).collect()
    }

    #[test]
    fn a_member_below_its_cap_has_room_a_settling_one_none() {
        // P = 10 on 3: cap 4, floor 3.
        let ms = members(&[("a", Some(4)), ("b", Some(3)), ("c", None)]);
        let s = count_standings(10, &ms, 3, &many(&["a", "b", "c"]));
        let rooms: Vec<_> = s
            .members
            .iter()
            .map(|s| (s.replica.as_str(), s.room))
            .collect();
        assert_eq!(
            rooms,
            vec![("a", 0), ("b", 1), ("c", 3)],
            "b may claim up to the cap; c, settling, its floor once done"
        );
        assert!(s.members[2].settling);
        // Everyone active and at floor: each may claim up to the cap.
        let ms = members(&[("a", Some(3)), ("b", Some(3)), ("c", Some(3))]);
        let s = count_standings(10, &ms, 1, &many(&["a", "b"]));
        assert_eq!(s.members.len(), 2, "only those asked for");
        assert!(s.members.iter().all(|s| s.room == 1), "{s:?}");
        assert_eq!(leave_to("a", &s), vec![("b".to_owned(), 1)]);
    }

    #[test]
    fn hand_overs_pick_what_a_member_with_room_prefers_first_and_keep_their_own() {
        let ms = members(&[("a", Some(5)), ("b", Some(3)), ("c", Some(4))]);
        // P = 12: cap 4; b has room, c has none.
        let s = count_standings(12, &ms, 0, &many(&["a", "b", "c"]));
        let prefs: BTreeMap<usize, &str> = [(0, "a"), (1, "c"), (3, "b")].into();
        let order = shed_first("a", &[0, 1, 2, 3, 4], |i| prefs.get(&i).copied(), &s);
        assert_eq!(order, vec![3, 1, 2, 4, 0]);
    }

    #[test]
    fn a_partition_moves_back_only_within_the_bound() {
        let prefs: BTreeMap<usize, &str> = [(0, "b"), (1, "b"), (7, "c")].into();
        let pref = |i: usize| prefs.get(&i).copied();
        // P = 10 on 3 (cap 4): a holds 4, b 3, c 3: a hands one of b's back.
        let ms = members(&[("a", Some(4)), ("b", Some(3)), ("c", Some(3))]);
        let s = count_standings(10, &ms, 0, &many(&["a", "b", "c"]));
        let mine = [(0, 1), (1, 1), (2, 1), (3, 1)];
        assert_eq!(hand_back("a", &mine, pref, &s), Some(0));
        // b at 4 = cap: no room; c holding 3 against b's 3 would only swap.
        let ms = members(&[("a", Some(3)), ("b", Some(4)), ("c", Some(3))]);
        let s = count_standings(10, &ms, 0, &many(&["a", "b", "c"]));
        assert_eq!(hand_back("a", &mine, pref, &s), None);
        let theirs = [(7, 1), (8, 1), (9, 1)];
        assert_eq!(
            hand_back("a", &theirs, pref, &s),
            None,
            "a (3) to c (3): not within the bound"
        );
        // Exactly balanced (12 on 3, everyone at 4): nothing moves, no swaps.
        let ms = members(&[("a", Some(4)), ("b", Some(4)), ("c", Some(4))]);
        let s = count_standings(12, &ms, 0, &many(&["a", "b", "c"]));
        assert_eq!(hand_back("a", &mine, pref, &s), None);
    }

    #[test]
    fn in_an_exactly_balanced_group_a_partition_moves_back_by_a_swap() {
        // 12 on 3, everyone at 4: b has no room, but it holds 4 and only 2 are
        // preferred on it, so it surely holds one that is not: a swap.
        let prefs: BTreeMap<usize, &str> = [(0, "b"), (5, "b")].into();
        let pref = |i: usize| prefs.get(&i).copied();
        let ms = members(&[("a", Some(4)), ("b", Some(4)), ("c", Some(4))]);
        let on: BTreeMap<&str, usize> = [("a", 0), ("b", 2), ("c", 0)].into();
        let s = count_standings(12, &ms, 0, &on);
        assert!(s.members[1].swap && s.members[1].room == 0, "{s:?}");
        let mine = [(0, 1), (1, 1), (2, 1), (3, 1)];
        assert_eq!(hand_back("a", &mine, pref, &s), Some(0));
        assert_eq!(leave_to("a", &s), vec![("b".to_owned(), 1)]);
        // With more preferred on b than it holds, b may hold nothing else: no swap.
        let on: BTreeMap<&str, usize> = [("a", 0), ("b", 5), ("c", 0)].into();
        let s = count_standings(12, &ms, 0, &on);
        assert_eq!(hand_back("a", &mine, pref, &s), None);
        // b's half: at its allowance, it claims the free one preferred on it, if it
        // holds one that is not and nothing has it hand over.
        let p = plan(12, "b", 4, false, &ms, 1);
        assert!(swap_claim(&p, 4, 1, true, true));
        assert!(!swap_claim(&p, 4, 1, false, true), "all of b's are its own");
        assert!(!swap_claim(&p, 4, 0, true, true), "nothing free");
        let over = plan(12, "b", 5, false, &ms, 0);
        assert!(
            !swap_claim(&over, 5, 1, true, true),
            "above its cap: it sheds"
        );
    }

    #[test]
    fn by_weight_the_member_needs_room_for_the_partition() {
        let loaded = |r: &str, load: u64, held: usize| Loaded {
            replica: r.to_owned(),
            load: Some(load),
            held,
            capacity: 1,
        };
        // W = 30 on 3: shares 10. a holds 12, b 8, c 10.
        let ms = vec![loaded("a", 12, 4), loaded("b", 8, 3), loaded("c", 10, 3)];
        let totals = Totals {
            weight: 30,
            max_weight: 5,
            unowned: 0,
        };
        let s = weighted_standings(&ms, totals, &all(&["a", "b", "c"]));
        let prefs: BTreeMap<usize, &str> = [(0, "b"), (1, "b")].into();
        let pref = |i: usize| prefs.get(&i).copied();
        // A 3 does not fit b's room of 2; a 2 does (12 - 8 >= 2).
        assert_eq!(hand_back("a", &[(0, 3)], pref, &s), None);
        assert_eq!(hand_back("a", &[(0, 3), (1, 2)], pref, &s), Some(1));
    }

    /// A count-rule group at rest (every replica within floor and cap, nothing free),
    /// with random preferences: moves back one at a time, by whoever wants to first.
    /// The first member (in id order) whose `hand_back` names a partition moves it to
    /// the member it is preferred on; whether one did.
    fn move_back_once(
        owner: &mut [usize],
        ids: &[String],
        weight: impl Fn(usize) -> u64,
        prefs: &[Option<usize>],
        s: &Standings,
    ) -> bool {
        for (h, id) in ids.iter().enumerate() {
            let mine: Vec<(usize, u64)> = (0..owner.len())
                .filter(|&i| owner[i] == h)
                .map(|i| (i, weight(i)))
                .collect();
            let pref = |i: usize| prefs[i].map(|r| ids[r].as_str());
            if let Some(i) = hand_back(id, &mine, pref, s) {
                owner[i] = prefs[i].unwrap();
                return true;
            }
        }
        false
    }

    fn settle_counts(owner: &mut [usize], n: usize, prefs: &[Option<usize>]) -> usize {
        let p = owner.len();
        let ids: Vec<String> = (0..n).map(|k| format!("r{k}")).collect();
        // Moves within the bound only (swaps pass through cap + 1: see the unit test).
        let eligible: BTreeMap<&str, usize> =
            ids.iter().map(|r| (r.as_str(), usize::MAX)).collect();
        let off = |owner: &[usize]| {
            (0..p)
                .filter(|&i| prefs[i].is_some_and(|r| r != owner[i]))
                .count()
        };
        let sq = |owner: &[usize]| {
            let mut c = vec![0i64; n];
            for &o in owner {
                c[o] += 1;
            }
            c.iter().map(|c| c * c).sum::<i64>()
        };
        let mut moves = 0;
        loop {
            let mut counts = vec![0usize; n];
            for &o in owner.iter() {
                counts[o] += 1;
            }
            let view: Vec<Member> = (0..n)
                .map(|k| Member {
                    replica: ids[k].clone(),
                    owned: Some(counts[k]),
                })
                .collect();
            let s = count_standings(p, &view, 0, &eligible);
            let before = (sq(owner), off(owner));
            if !move_back_once(owner, &ids, |_| 1, prefs, &s) {
                return moves;
            }
            moves += 1;
            let after = (sq(owner), off(owner));
            assert!(after < before, "{before:?} -> {after:?}");
            let (floor, cap) = (p / n, p.div_ceil(n));
            let mut counts = vec![0usize; n];
            for &o in owner.iter() {
                counts[o] += 1;
            }
            assert!(
                counts.iter().all(|c| (floor..=cap).contains(c)),
                "{counts:?}"
            );
        }
    }

    /// By weight: a group with random weights, capacities and placement, random
    /// preferences; moves back one at a time, by whoever wants to first, each putting
    /// one more partition on its preferred replica and never raising Σ d². Returns the
    /// moves made.
    fn settle_weights(
        owner: &mut [usize],
        weights: &[u64],
        caps: &[u32],
        prefs: &[Option<usize>],
    ) -> usize {
        let n = caps.len();
        let ids: Vec<String> = (0..n).map(|k| format!("r{k}")).collect();
        let eligible: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let total: u64 = weights.iter().sum();
        let view = |owner: &[usize]| -> Vec<Loaded> {
            (0..n)
                .map(|k| Loaded {
                    replica: ids[k].clone(),
                    load: Some(
                        (0..owner.len())
                            .filter(|&i| owner[i] == k)
                            .map(|i| weights[i])
                            .sum(),
                    ),
                    held: owner.iter().filter(|&&o| o == k).count(),
                    capacity: caps[k],
                })
                .collect()
        };
        let potential = |owner: &[usize]| {
            let (devs, _) = deviations(&view(owner), total);
            let sq: i128 = devs.iter().flatten().map(|d| d * d).sum();
            let off = (0..owner.len())
                .filter(|&i| prefs[i].is_some_and(|r| r != owner[i]))
                .count();
            (sq, off)
        };
        let mut moves = 0;
        loop {
            let totals = Totals {
                weight: total,
                max_weight: weights.iter().copied().max().unwrap_or(1),
                unowned: 0,
            };
            let s = weighted_standings(&view(owner), totals, &eligible);
            let before = potential(owner);
            let isolated = |owner: &[usize]| -> Vec<bool> {
                deviations(&view(owner), total)
                    .0
                    .iter()
                    .map(Option::is_none)
                    .collect()
            };
            let isolated_before = isolated(owner);
            if !move_back_once(owner, &ids, |i| weights[i], prefs, &s) {
                return moves;
            }
            moves += 1;
            let after = potential(owner);
            assert!(after.1 < before.1, "{before:?} -> {after:?}");
            // The squared deviations from the shares never grow (compared while the
            // shares stay: a move that isolates a member changes them).
            if isolated(owner) == isolated_before {
                assert!(after.0 <= before.0, "{before:?} -> {after:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn by_weight_moving_back_stops(
            caps in proptest::collection::vec(1u32..4, 2..5),
            parts in proptest::collection::vec((1u64..20, 0usize..8, 0usize..8, any::<bool>()), 2..30),
        ) {
            let n = caps.len();
            let weights: Vec<u64> = parts.iter().map(|p| p.0).collect();
            let mut owner: Vec<usize> = parts.iter().map(|p| p.1 % n).collect();
            let prefs: Vec<Option<usize>> = parts.iter().map(|p| p.3.then_some(p.2 % n)).collect();
            let moves = settle_weights(&mut owner, &weights, &caps, &prefs);
            prop_assert!(moves <= parts.len(), "each partition moves back at most once: {moves}");
        }

        #[test]
        fn moving_back_stays_within_the_bound_and_stops(
            n in 2usize..6,
            p in 2usize..40,
            pick in proptest::collection::vec((0usize..8, any::<bool>()), 40),
        ) {
            // Dealt round robin: within floor and cap.
            let mut owner: Vec<usize> = (0..p).map(|i| i % n).collect();
            let prefs: Vec<Option<usize>> = (0..p)
                .map(|i| pick[i].1.then_some(pick[i].0 % n))
                .collect();
            let moves = settle_counts(&mut owner, n, &prefs);
            prop_assert!(moves <= p, "each partition moves back at most once: {moves}");
        }
    }
}
