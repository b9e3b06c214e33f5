//! Who receives a hand-over: a pure function of one replica's view of the group.
//!
//! When the rule has a replica hand partitions over to even out the group, the
//! replica names a receiver for each one it can: the member the partition is
//! preferred on, if that member has room for it; else the member with the most room
//! (by count, how many partitions it would claim now; by weight, the weight), ties to
//! the smaller replica id. Each partition named for a member takes its weight out of
//! that member's room, so a hand-over of several partitions spreads them over the
//! members that can take them. A partition no member has room for is named for
//! nobody: it goes to whoever claims it first, as every hand-over did before.
//!
//! A name is a hint the store enforces for a short hold (`release.lua`: the
//! partition is reserved for its receiver, whose claims take it first, while others'
//! skip it); it never changes how many partitions move, and never makes two owners:
//! the switch is a release followed by a claim, as for any move. A receiver that does
//! not claim in time (it died, or its own view says it has no room) leaves the
//! partition to anyone once the hold ends.

use std::collections::BTreeMap;

use super::prefer::Standings;

/// Names a receiver for each of `handed` (index, weight), handed over by `me`, in
/// order: see the module's docs. Settling members receive nothing (the rule keeps
/// their share free for them to claim).
pub(crate) fn receivers<'a>(
    me: &str,
    handed: &[(usize, u64)],
    preferred: impl Fn(usize) -> Option<&'a str>,
    standings: &Standings,
) -> BTreeMap<usize, String> {
    let mut rooms: BTreeMap<&str, u64> = standings
        .members
        .iter()
        .filter(|s| s.replica != me && !s.settling && s.room > 0)
        .map(|s| (s.replica.as_str(), s.room))
        .collect();
    let mut out = BTreeMap::new();
    for &(i, w) in handed {
        let w = w.max(1);
        let to = preferred(i)
            .filter(|r| rooms.get(r).is_some_and(|&room| room >= w))
            .or_else(|| {
                // The most room; of equal rooms the smaller id (a BTreeMap iterates in
                // id order and `max_by_key` keeps the last maximum, so reverse it).
                rooms
                    .iter()
                    .rev()
                    .filter(|&(_, &room)| room >= w)
                    .max_by_key(|&(_, &room)| room)
                    .map(|(r, _)| *r)
            });
        if let Some(r) = to {
            if let Some(room) = rooms.get_mut(r) {
                *room -= w;
            }
            out.insert(i, r.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::balance::prefer::Standing;

    fn standings(rooms: &[(&str, u64, bool)]) -> Standings {
        Standings {
            members: rooms
                .iter()
                .map(|&(r, room, settling)| Standing {
                    replica: r.to_owned(),
                    dev: 0,
                    room,
                    settling,
                    swap: false,
                })
                .collect(),
            unit: 1,
        }
    }

    fn named(out: &BTreeMap<usize, String>) -> Vec<(usize, &str)> {
        out.iter().map(|(i, r)| (*i, r.as_str())).collect()
    }

    #[test]
    fn each_partition_goes_to_the_member_with_the_most_room_left() {
        let s = standings(&[("a", 5, false), ("b", 2, false), ("c", 1, false)]);
        let out = receivers("a", &[(0, 1), (1, 1), (2, 1), (3, 1)], |_| None, &s);
        // `a` is the giver; b has 2, c has 1: b, then b and c tie at 1 (smaller id b),
        // then c.
        assert_eq!(named(&out), [(0, "b"), (1, "b"), (2, "c")]);
    }

    #[test]
    fn a_preferred_member_with_room_comes_first() {
        let s = standings(&[("b", 3, false), ("c", 1, false)]);
        let out = receivers("a", &[(0, 1), (1, 1)], |i| (i == 1).then_some("c"), &s);
        assert_eq!(named(&out), [(0, "b"), (1, "c")]);
    }

    #[test]
    fn settling_members_and_members_without_room_receive_nothing() {
        let s = standings(&[("b", 4, true), ("c", 0, false), ("d", 2, false)]);
        let out = receivers(
            "a",
            &[(0, 3), (1, 2), (2, 1)],
            |i| Some(["b", "c", "d"][i]),
            &s,
        );
        // Weight 3 fits nobody (d has 2); weight 2 fits d; then d has no room left.
        assert_eq!(named(&out), [(1, "d")]);
    }

    proptest! {
        /// Nobody is named for more than its room, the giver and settling members are
        /// never named, and a partition is left unnamed only if no member that could
        /// receive it had room for it then.
        #[test]
        fn names_stay_within_every_room(
            rooms in prop::collection::vec((0u64..6, any::<bool>()), 1..6),
            weights in prop::collection::vec(1u64..4, 0..12),
        ) {
            let ids: Vec<String> = (0..rooms.len()).map(|k| format!("r{k}")).collect();
            let s = standings(
                &ids.iter().zip(&rooms).map(|(r, &(room, settling))| (r.as_str(), room, settling))
                    .collect::<Vec<_>>(),
            );
            let handed: Vec<(usize, u64)> = weights.iter().copied().enumerate().collect();
            let out = receivers("r0", &handed, |_| None, &s);
            let mut used: BTreeMap<&str, u64> = BTreeMap::new();
            for &(i, w) in &handed {
                match out.get(&i) {
                    Some(r) => {
                        prop_assert_ne!(r.as_str(), "r0");
                        let k = ids.iter().position(|x| x == r).unwrap();
                        prop_assert!(!rooms[k].1, "settling {r} named");
                        *used.entry(ids[k].as_str()).or_default() += w;
                        prop_assert!(used[ids[k].as_str()] <= rooms[k].0);
                    }
                    None => {
                        let fits = ids.iter().zip(&rooms).skip(1).any(|(r, &(room, settling))| {
                            !settling && room >= used.get(r.as_str()).copied().unwrap_or(0) + w
                        });
                        prop_assert!(!fits, "partition {i} unnamed though a member had room");
                    }
                }
            }
        }
    }
}
