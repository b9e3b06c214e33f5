//! The balancing rule of a weighted group (partitions with weights, or replicas with
//! different capacities), as a pure function of one replica's view of the group: every
//! member's load (the weights it holds, summed), partition count and capacity.
//!
//! **Shares.** With W the total weight of the set and C the capacities of the members
//! counted towards N summed, replica i's plain share is W × cᵢ / C. A member that holds
//! a single partition heavier than its share is **isolated**: nothing fits beside that
//! tenant, and moving it would only move the imbalance, so it keeps it, does nothing
//! else, and its share is that weight. The others balance what is left among
//! themselves: with W_S the weight no isolated member holds and C_S the others'
//! capacities summed, a member's share is W_S × cᵢ / C_S; that may isolate more members,
//! so the pass repeats until it isolates nobody. Setting a member aside whose load is
//! above its share lowers the others' shares: no share is above the plain one, and
//! with nobody isolated the shares are the plain ones. Below, *members* are the ones
//! not isolated, and w_S is the largest weight a member may hold: w_max (the largest
//! single weight) while some partition is free, else the largest `load − (count − 1)`
//! among the members, at most w_max (w_max again when nobody is isolated). The rule
//! keeps every member's load within `share − w_S ≤ load ≤ share + w_S`:
//!
//! - **Claims.** A member claims free partitions while its load is below its share:
//!   those that fit into the room left, oldest first. The one that may also take a
//!   partition that does not fit (if none does) is an under-loaded member (below), or
//!   else the member furthest below its share (ties by id). So a claim never takes a
//!   member past share + w_max.
//! - **Under-loaded first.** While some active member is *under* (load below
//!   share − w_S), only under members claim.
//! - **Hand-offs.** While some active member is under and nothing is free, the members
//!   above their share release the deficit between them, most loaded first (ties by
//!   id), each in whole weight units of its part (rounded down, so that a donor
//!   deciding before the others have given theirs never drops below its share for a
//!   fraction; if no donor has a whole unit to give, the most loaded gives one), each
//!   never below its own share − w_S. A member above share + w_S (its share
//!   shrank: a join, a weight change, a member isolated) releases the excess; with
//!   nobody under and nothing free, as the refining round below when that releases at
//!   least as much (one round where there were two).
//! - **Refining.** With nobody under and nothing free, one member above its share (i)
//!   may still hand weight to those below theirs, heaviest first, in one round: each
//!   partition into the first room it fits (a room reaching 2.5 % of the smaller of
//!   the two shares past the taker's share), until i is within 2.5 % of its own share;
//!   or, if none fits, its lightest partition if that weighs less than its gap to the
//!   one furthest below (j). It does so only while some member is more than 5 % from
//!   its share: within that, weights measured from load are noise, and so is filling
//!   the last 2.5 % with light partitions, a move each (a round ends there, leaving
//!   every member it touched well inside the 5 %, so that drift does not start
//!   another). Every replica must name the same i from loads and
//!   counts alone, without the others' weights: i is the member furthest above its
//!   share among those whose average partition weighs less than their gap to j (so
//!   their lightest surely does), or, if there is none, among those holding two or
//!   more. A member whose single partition weighs no less than its gap is never i.
//!
//! With different capacities, isolation goes by a member's own share: a tenant alone on
//! a small replica stays there even where a larger one could hold it beside others, and
//! a larger replica may then stay below its plain share − w_max (it is never below its
//! share here); with equal capacities every load is also within plain share ± w_max.
//!
//! Every replica evaluates the same rule on the same loads and counts (read from the
//! sessions in Redis), so they agree on who is isolated and who releases.
//!
//! **Why hand-offs stop.** Without outside events (joins, leaves, weight changes), the
//! isolated members only ever grow in number: an isolated member neither claims nor
//! releases, and a move among the others leaves W_S and C_S as they are unless it
//! isolates someone, which only lowers the shares, so nobody isolated is let go. That
//! happens at most N times. In between, the shares are fixed, and every hand-off moves
//! a partition of weight w from a member above its share (deviation dᵢ = load − share,
//! positive) to a taker k whose deviation stays below dᵢ: the partition fits into k's
//! room (d_k + w ≤ 0), or k is under (d_k < −w_S ≤ −w), or k is the one furthest below
//! and w is less than the gap. Each such move lowers the members' Σ (load − share)² by
//! 2w(dᵢ − d_k − w), a positive amount. A refining round hands over several partitions
//! at once; taken one after another, each goes from i while i is more than e above its
//! share (e: 2.5 % of i's share) to a k that ends at most e above its own (its room
//! reaches no further), so dᵢ − d_k − w > 0 holds for each of them in turn and the
//! round lowers Σ (load − share)² as much as those moves one by one would. Placements
//! are finite, so hand-offs stop. Once
//! they have, nobody is under, nobody is over, and either every member is within 5 %
//! of its share or the member named i has no partition lighter than its gap to the one
//! furthest below (an empty member is 100 % below its share): with equal capacities no
//! replica holds nothing while another holds two partitions or more (the empty one is
//! furthest below, a member above its share holds two or more, since a single one
//! heavier than its share is isolated, and its gap to the empty one is its whole
//! load, which its average partition weighs less than, so it is certain to help). With equal capacities the shares cancel out of
//! every comparison, and Σ load² falls with every hand-off, isolated or not.
//! Unweighted groups of equal capacities use the count rule ([`super::plan`]) instead.
//!
//! Arithmetic is in integers scaled by C_S (`load × C_S` against `W_S × c`), so
//! replicas reading the same view decide alike, without rounding.

use std::collections::{BTreeMap, BTreeSet};

/// A live member counted towards N, as a weighted view sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loaded {
    pub(crate) replica: String,
    /// The weights it holds, summed; `None` while it is still settling (it counts for
    /// the shares, but nobody hands over to it yet).
    pub(crate) load: Option<u64>,
    /// How many partitions it holds.
    pub(crate) held: usize,
    /// Its capacity (≥ 1).
    pub(crate) capacity: u32,
}

impl Loaded {
    /// A member counted towards N, as a tick or a status read lists it: in `state`,
    /// holding `held` partitions of `load` in all (no load while it settles).
    pub(crate) fn member(
        replica: &str,
        state: crate::store::ReplicaState,
        load: u64,
        held: usize,
        capacity: u32,
    ) -> Self {
        Self {
            replica: replica.to_owned(),
            load: (state != crate::store::ReplicaState::Settling).then_some(load),
            held,
            capacity,
        }
    }
}

/// The group-wide numbers of a weighted view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    /// The set's weights, summed (W).
    pub(crate) weight: u64,
    /// The largest single weight (w_max, ≥ 1).
    pub(crate) max_weight: u64,
    /// Partitions with no live owner.
    pub(crate) unowned: usize,
}

/// What this replica may do now, in a weighted group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WeightedPlan {
    /// Claim free partitions whose weights fit into this much room (0: claim nothing).
    pub(crate) room: u64,
    /// If none fits, take the first free one anyway.
    pub(crate) fallback: bool,
    /// Release these of its partitions (indices), so that an under-loaded replica gets
    /// them or this one is back within its bound.
    pub(crate) shed: Vec<usize>,
    /// The member each of `shed` is handed to: the one whose room the rule sheds it
    /// into ([`pack`]'s rooms, the under-loaded member the deficit is dealt to, the
    /// member with the most room). Every partition the rule sheds is named, so every
    /// hand-over has a taker that the rule itself chose, never whoever claims first.
    pub(crate) to: BTreeMap<usize, String>,
    /// Whole weight units this replica may take of the partitions handed to it by name
    /// (its bound: up to share + w_S; 0 when it sheds, settles or is isolated). A giver
    /// names it from a view a tick older than the receiver's, and its rooms reach a
    /// little past the receiver's share ([`pack`]), so the receiver takes what it was
    /// named for up to its bound, not only up to its share.
    pub(crate) bound: u64,
    /// This replica's share: W_S × its capacity / C_S, or the weight of its one
    /// partition if it is isolated.
    pub(crate) share: f64,
}

/// Which members of `view` balance among themselves (`true`) once those isolated are
/// set aside, and the weight (W_S) and capacities (C_S) left to them.
fn isolate(view: &[Loaded], weight: u128) -> (Vec<bool>, u128, u128) {
    let cap = |m: &Loaded| u128::from(m.capacity.max(1));
    let mut balancing = vec![true; view.len()];
    let mut w = weight;
    let mut c: u128 = view.iter().map(cap).sum();
    loop {
        // Every member above its share at once, so that the order does not matter.
        let heavy: Vec<usize> = (0..view.len())
            .filter(|&k| {
                let m = &view[k];
                balancing[k]
                    && m.held == 1
                    && m.load.is_some_and(|l| u128::from(l) * c > w * cap(m))
            })
            .collect();
        let hw: u128 = heavy
            .iter()
            .map(|&k| u128::from(view[k].load.unwrap_or(0)))
            .sum();
        let hc: u128 = heavy.iter().map(|&k| cap(&view[k])).sum();
        // Never everyone (the loads sum to at most W), nor more than W (a removed
        // partition still held can make them): then stop where it is.
        if heavy.is_empty() || hc >= c || hw > w {
            return (balancing, w, c);
        }
        for k in heavy {
            balancing[k] = false;
        }
        w -= hw;
        c -= hc;
    }
}

/// Every member's share, in the order of `members`, as [`weighted_plan`] computes its
/// own: W_S × c / C_S, or the weight of its one partition if it is isolated. For
/// operators (the status), so that they read the share the replicas balance to.
pub(crate) fn shares(members: &[Loaded], weight: u64) -> Vec<f64> {
    let (balancing, w, c_sum) = isolate(members, u128::from(weight));
    members
        .iter()
        .zip(balancing)
        .map(|(m, balancing)| {
            if balancing {
                w as f64 * f64::from(m.capacity.max(1)) / c_sum.max(1) as f64
            } else {
                m.load.unwrap_or(0) as f64
            }
        })
        .collect()
}

/// Every member's deviation from its share, in the order of `members`, scaled by C_S
/// (`load × C_S − W_S × c`, as [`weighted_plan`] compares them), and C_S (what one unit
/// of weight is worth in them): `None` for a member that is settling or isolated.
pub(crate) fn deviations(members: &[Loaded], weight: u64) -> (Vec<Option<i128>>, i128) {
    let (balancing, w, c_sum) = isolate(members, u128::from(weight));
    let devs = members
        .iter()
        .zip(balancing)
        .map(|(m, balancing)| {
            let load = m.load.filter(|_| balancing)?;
            let l = i128::try_from(u128::from(load) * c_sum).ok()?;
            let s = i128::try_from(w * u128::from(m.capacity.max(1))).ok()?;
            Some(l - s)
        })
        .collect();
    (devs, i128::try_from(c_sum).unwrap_or(i128::MAX))
}

/// The plan for replica `me`, whose load the store counts as `load` and which holds
/// `mine` (index, weight), settling if `settling`.
pub(crate) fn weighted_plan(
    me: &str,
    load: u64,
    mine: &[(usize, u64)],
    settling: bool,
    capacity: u32,
    members: &[Loaded],
    totals: Totals,
) -> WeightedPlan {
    let held = members
        .iter()
        .find(|m| m.replica == me)
        .map_or(mine.len(), |m| m.held);
    let mut view: Vec<Loaded> = members
        .iter()
        .filter(|m| m.replica != me)
        .cloned()
        .collect();
    view.push(Loaded {
        replica: me.to_owned(),
        load: (!settling).then_some(load),
        held,
        capacity,
    });
    let (balancing, w, c_sum) = isolate(&view, u128::from(totals.weight));
    let isolated = !balancing[view.len() - 1];
    let view: Vec<Loaded> = view
        .into_iter()
        .zip(balancing)
        .filter_map(|(m, b)| b.then_some(m))
        .collect();
    let w_max = u128::from(totals.max_weight.max(1));
    // The largest weight a member may hold: each of its other partitions weighs ≥ 1.
    let w_s = if totals.unowned > 0 {
        w_max
    } else {
        view.iter()
            .filter(|m| m.held > 0)
            .filter_map(|m| {
                m.load
                    .map(|l| u128::from(l).saturating_sub(m.held as u128 - 1))
            })
            .max()
            .unwrap_or(1)
            .clamp(1, w_max)
    };
    // Everything scaled by C_S: a load ℓ with capacity c is compared as ℓ·C_S against
    // W_S·c.
    let scaled_share = |c: u32| w * u128::from(c.max(1));
    let share = if isolated {
        load as f64
    } else {
        w as f64 * f64::from(capacity.max(1)) / c_sum as f64
    };
    let nothing = WeightedPlan {
        room: 0,
        fallback: false,
        shed: Vec::new(),
        to: BTreeMap::new(),
        bound: 0,
        share,
    };
    if settling || isolated {
        return nothing;
    }
    let my_share = scaled_share(capacity);
    let my_load = u128::from(load) * c_sum;
    let slack = w_s * c_sum;
    let under = |m: &Loaded| {
        m.load
            .is_some_and(|l| u128::from(l) * c_sum + slack < scaled_share(m.capacity))
    };
    let nothing = WeightedPlan {
        bound: u64::try_from((my_share + slack).saturating_sub(my_load) / c_sum)
            .unwrap_or(u64::MAX),
        ..nothing
    };
    let weight_of = |i: usize| mine.iter().find(|(k, _)| *k == i).map_or(1, |&(_, w)| w);

    // Over the bound (its share shrank, or it took orphans): release the excess. With
    // nobody under and nothing free, as a refining round from here if that releases
    // at least as much: the round the rule would ask for next, in one go (releasing
    // just the excess first took a round of its own, a light partition or two to
    // land exactly on the bound).
    if my_load > my_share + slack {
        let need = ceil_div(my_load - my_share - slack, c_sum);
        if totals.unowned == 0 && !view.iter().any(under) {
            let refined = refine(me, mine, &view, c_sum, w, 0, 0, nothing.clone());
            let shed: BTreeSet<usize> = refined.shed.iter().copied().collect();
            let weight: u128 = mine
                .iter()
                .filter(|(i, _)| shed.contains(i))
                .map(|&(_, wt)| u128::from(wt))
                .sum();
            if weight >= need {
                return WeightedPlan {
                    shed: refined.shed,
                    to: refined.to,
                    bound: 0,
                    ..nothing
                };
            }
        }
        let shed = choose(mine, need, u64::MAX);
        let handed: Vec<(usize, u64)> = shed.iter().map(|&i| (i, weight_of(i))).collect();
        return WeightedPlan {
            to: most_room(me, &handed, &view, c_sum, w),
            shed,
            bound: 0,
            ..nothing
        };
    }
    // Whole weight units below the share: what a claim may add without passing it
    // (rounded down, so that a partition taken never weighs more than its taker's
    // deviation, which is what makes every move lower the squared deviations).
    let room = if my_load < my_share {
        u64::try_from((my_share - my_load) / c_sum).unwrap_or(u64::MAX)
    } else {
        0
    };
    let unders: Vec<&Loaded> = view.iter().filter(|m| under(m)).collect();
    if unders.is_empty() {
        return refine(me, mine, &view, c_sum, w, room, totals.unowned, nothing);
    }
    let me_under = unders.iter().any(|m| m.replica == me);
    if me_under {
        return WeightedPlan {
            room,
            fallback: true,
            ..nothing
        };
    }
    if totals.unowned > 0 {
        // The under-loaded replicas take what is free first.
        return nothing;
    }
    // Deal the deficit over the replicas above their share, most loaded first.
    let mut left: u128 = unders
        .iter()
        .map(|m| scaled_share(m.capacity) - u128::from(m.load.unwrap_or(0)) * c_sum)
        .sum();
    let mut donors: Vec<(u128, &str)> = view
        .iter()
        .filter_map(|m| {
            let l = u128::from(m.load?) * c_sum;
            let s = scaled_share(m.capacity);
            (l > s).then(|| (l - s, m.replica.as_str()))
        })
        .collect();
    donors.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    // Each donor's part of the deficit, in whole weight units (rounded down: a donor
    // that sheds a fraction's worth as a whole unit drops below its share while the
    // others still give theirs, and takes it back later, a move too many). If nobody
    // has a whole unit to give, the most loaded donor gives one, so that an under
    // member always gets something.
    let gives: Vec<(u128, u128, &str)> = donors
        .into_iter()
        .map(|(excess, replica)| {
            let give = excess.min(left);
            left -= give;
            (excess, give, replica)
        })
        .collect();
    let whole = gives.iter().any(|&(_, give, _)| give >= c_sum);
    for (k, &(excess, give, replica)) in gives.iter().enumerate() {
        if replica != me {
            continue;
        }
        let units = match (whole, k) {
            (true, _) => give / c_sum,
            (false, 0) => ceil_div(give, c_sum),
            (false, _) => 0,
        };
        if units == 0 {
            break;
        }
        // Never below its own share − w_S: at most its excess + w_S.
        let limit = u64::try_from(ceil_div(excess + slack, c_sum) - 1).unwrap_or(u64::MAX);
        let shed = choose(mine, units, limit);
        // Where this donor's part starts in the deficit dealt: after the whole units
        // of the donors before it (each donor computes every donor's part alike).
        let start: u128 = gives[..k]
            .iter()
            .enumerate()
            .map(|(k, &(_, give, _))| match (whole, k) {
                (true, _) => give / c_sum,
                (false, 0) => ceil_div(give, c_sum),
                (false, _) => 0,
            })
            .sum::<u128>()
            * c_sum;
        let handed: Vec<(usize, u64)> = shed.iter().map(|&i| (i, weight_of(i))).collect();
        let takers: Vec<(u128, &str)> = unders
            .iter()
            .map(|m| {
                let deficit = scaled_share(m.capacity) - u128::from(m.load.unwrap_or(0)) * c_sum;
                (deficit, m.replica.as_str())
            })
            .collect();
        return WeightedPlan {
            to: deal(&handed, start, c_sum, takers),
            shed,
            bound: 0,
            ..nothing
        };
    }
    nothing
}

/// The receivers of `handed` (index, weight; a donor's part of the deficit) when the
/// under-loaded members' deficits `takers` (scaled by `c_sum`, with their ids) are
/// dealt to the donors in turn, this donor's part starting at `start`: furthest below
/// first (ties by id), each partition to the member whose part of the deficit its
/// first unit falls in (the last one past the end). Every donor deals on the same view,
/// so two donors do not both fill the member with the most room while another under
/// member waits.
fn deal(
    handed: &[(usize, u64)],
    start: u128,
    c_sum: u128,
    mut takers: Vec<(u128, &str)>,
) -> BTreeMap<usize, String> {
    takers.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut out = BTreeMap::new();
    let Some(&(_, last)) = takers.last() else {
        return out;
    };
    let mut at = start;
    for &(i, wt) in handed {
        let mut end = 0u128;
        let to = takers
            .iter()
            .find(|&&(deficit, _)| {
                end += deficit;
                at < end
            })
            .map_or(last, |&(_, r)| r);
        out.insert(i, to.to_owned());
        at += u128::from(wt) * c_sum;
    }
    out
}

/// The receivers of `handed` (index, weight), handed over by `me`: each to the member
/// below its share with the most room left that it fits into (whole units, ties to the
/// smaller id), or, if it fits none, to the member with the most room; each taking its
/// weight out of that member's room. `None`-load (settling) and isolated members are
/// not in `view`'s balancing part and get nothing.
fn most_room(
    me: &str,
    handed: &[(usize, u64)],
    view: &[Loaded],
    c_sum: u128,
    w: u128,
) -> BTreeMap<usize, String> {
    let mut rooms: Vec<(i128, &str)> = view
        .iter()
        .filter(|m| m.replica != me)
        .filter_map(|m| {
            let l = i128::try_from(u128::from(m.load?) * c_sum).ok()?;
            let s = i128::try_from(w * u128::from(m.capacity.max(1))).ok()?;
            Some((s - l, m.replica.as_str()))
        })
        .collect();
    let c = i128::try_from(c_sum).unwrap_or(i128::MAX);
    let mut out = BTreeMap::new();
    for &(i, wt) in handed {
        let wt = i128::from(wt) * c;
        // The most room that fits, else the most room; of equal rooms the smaller id.
        let best = |fits: bool| {
            rooms
                .iter()
                .enumerate()
                .filter(|(_, (room, _))| !fits || *room >= wt)
                .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.1.1.cmp(a.1.1)))
                .map(|(k, _)| k)
        };
        if let Some(k) = best(true).or_else(|| best(false)) {
            rooms[k].0 -= wt;
            out.insert(i, rooms[k].1.to_owned());
        }
    }
    out
}

/// Within this fraction of its share (1 / `BALANCED_WITHIN`: 5 %), a member counts as
/// balanced: refining stops once every member is. Weights from measured load are only
/// accurate to their threshold, and drift by less between writes: refining below this
/// would chase that drift, handing the same light partition back and forth.
const BALANCED_WITHIN: i128 = 20;

/// The refining stage (nobody under): claims up to the share (the member furthest
/// below it may take one that does not fit), and, with nothing free, one giver, the
/// member furthest above its share that can help, hands weight to those below theirs,
/// heaviest first, until it is within half the tolerance of its share ([`pack`]), or,
/// if none fits, its lightest partition if that weighs less than its gap to the one
/// furthest below. Nothing moves once every member is within 1 / [`BALANCED_WITHIN`]
/// of its share.
#[allow(clippy::too_many_arguments)]
fn refine(
    me: &str,
    mine: &[(usize, u64)],
    view: &[Loaded],
    c_sum: u128,
    w: u128,
    room: u64,
    unowned: usize,
    nothing: WeightedPlan,
) -> WeightedPlan {
    // Deviations from the shares, scaled by C_S, of the active members: (deviation,
    // id, load, partitions held, share).
    let dev: Vec<(i128, &str, i128, i128, i128)> = view
        .iter()
        .filter_map(|m| {
            let load = m.load?;
            let l = i128::try_from(u128::from(load) * c_sum).ok()?;
            let s = i128::try_from(w * u128::from(m.capacity.max(1))).ok()?;
            Some((l - s, m.replica.as_str(), l, m.held as i128, s))
        })
        .collect();
    let Some(&(d_j, j, ..)) = dev.iter().min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1))) else {
        return nothing;
    };
    // The giver: one above its share that can help j, which every replica must pick
    // alike from loads and counts alone. A member can help if its lightest partition
    // weighs less than its gap to j. That is certain when its average partition does
    // (or its one partition, if it holds one), and impossible when its one partition
    // does not; otherwise (its average weighs at least the gap) it may or may not. So
    // the giver is the one furthest above its share (ties by id) among those certain
    // to help, or else among those that may.
    let above = |surely: bool| {
        dev.iter()
            .filter(move |&&(d, _, l, h, _)| {
                // Its average (l / h) against the gap, in integers.
                let sure = l < (d - d_j) * h;
                d > 0 && h > 0 && (sure || (!surely && h > 1))
            })
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))
    };
    let highest = above(true).or_else(|| above(false));
    let (d_i, i) = highest.map_or((0, ""), |&(d, r, ..)| (d, r));
    let claims = WeightedPlan {
        room,
        fallback: j == me && d_j < 0,
        ..nothing.clone()
    };
    let balanced = dev
        .iter()
        .all(|&(d, _, _, _, s)| d.abs() * BALANCED_WITHIN <= s);
    if unowned > 0 || i != me || d_i <= 0 || d_j >= 0 || balanced {
        return claims;
    }
    let c = i128::try_from(c_sum).unwrap_or(i128::MAX);
    let s_i = dev.iter().find(|m| m.1 == me).map_or(0, |m| m.4);
    // The rooms of the members below their share, furthest below first (ties by id).
    let mut rooms: Vec<(i128, &str)> = dev
        .iter()
        .filter(|&&(d, r, ..)| d < 0 && r != me)
        .map(|&(d, r, _, _, s)| ((-d + s.min(s_i) / (2 * BALANCED_WITHIN)) / c, r))
        .collect();
    rooms.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let packed = pack(mine, d_i / c, s_i / (2 * BALANCED_WITHIN) / c, &mut rooms);
    if !packed.is_empty() {
        return WeightedPlan {
            shed: packed.iter().map(|&(i, _)| i).collect(),
            to: packed
                .into_iter()
                .map(|(i, r)| (i, rooms[r].1.to_owned()))
                .collect(),
            bound: 0,
            ..nothing
        };
    }
    // Else the lightest, to j, if it weighs less than the gap.
    let gap = d_i - d_j;
    let Some(&(idx, _)) = mine
        .iter()
        .min_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
        .filter(|(_, wt)| i128::from(*wt) * c < gap)
    else {
        return nothing;
    };
    WeightedPlan {
        shed: vec![idx],
        to: BTreeMap::from([(idx, j.to_owned())]),
        bound: 0,
        ..nothing
    }
}

/// Which of `mine` to hand to the members below their share, whose rooms are `rooms`
/// (whole weight units, largest first, each reaching `enough` or less past its
/// taker's share), and into which room (its index in `rooms`: that member receives
/// it): the heaviest first, each into the first room it fits, never more
/// than `excess` in all (ties by index), and none once what is left of the excess is
/// `enough` or less (the lighter partitions that would fill the rest are a move each
/// for less than the noise in measured weights). Each partition so chosen leaves the
/// giver while it is more than `enough` above its share, for a taker that ends at most
/// `enough` above its own, so every move lowers Σ (load − share)².
fn pack(
    mine: &[(usize, u64)],
    excess: i128,
    enough: i128,
    rooms: &mut [(i128, &str)],
) -> Vec<(usize, usize)> {
    let mut sorted: Vec<(usize, u64)> = mine.to_vec();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut left = excess;
    let mut chosen = Vec::new();
    for (idx, wt) in sorted {
        if left <= enough {
            break;
        }
        let wt = i128::from(wt);
        if wt > left {
            continue;
        }
        if let Some(r) = rooms.iter().position(|(r, _)| *r >= wt) {
            rooms[r].0 -= wt;
            left -= wt;
            chosen.push((idx, r));
        }
    }
    chosen
}

/// Which of `mine` (index, weight) to release to give up at least `need` (or as close
/// as the weights allow), never more than `limit` in all: the heaviest that still fit
/// into what is needed first, then, if none fits, the lightest one (a hand-off must
/// make progress). Ties by index, so the choice does not depend on order.
fn choose(mine: &[(usize, u64)], need: u128, limit: u64) -> Vec<usize> {
    let mut sorted: Vec<(usize, u64)> = mine.to_vec();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let (mut chosen, mut given) = (Vec::new(), 0u128);
    for &(i, w) in &sorted {
        if given >= need {
            break;
        }
        let w = u128::from(w);
        if given + w <= need && given + w <= u128::from(limit) {
            chosen.push(i);
            given += w;
        }
    }
    if chosen.is_empty()
        && need > 0
        && let Some(&(i, w)) = sorted.last()
        && w <= limit
    {
        chosen.push(i);
    }
    chosen
}

fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b.max(1))
}

#[cfg(test)]
mod tests;
