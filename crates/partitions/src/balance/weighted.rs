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
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;

    /// One replica's partitions (index → weight) and capacity; `None`: settling.
    #[derive(Debug, Clone)]
    struct Rep {
        id: String,
        capacity: u32,
        held: Option<BTreeMap<usize, u64>>,
    }

    struct World {
        weights: Vec<u64>,
        reps: Vec<Rep>,
        /// Rounds the last settle took (the last one changed nothing).
        rounds: usize,
    }

    impl World {
        fn new(weights: Vec<u64>, capacities: &[u32]) -> Self {
            let reps = capacities
                .iter()
                .enumerate()
                .map(|(i, c)| Rep {
                    id: format!("r{i:02}"),
                    capacity: *c,
                    held: Some(BTreeMap::new()),
                })
                .collect();
            Self {
                weights,
                reps,
                rounds: 0,
            }
        }

        fn free(&self) -> Vec<usize> {
            let held: BTreeSet<usize> = self
                .reps
                .iter()
                .filter_map(|r| r.held.as_ref())
                .flat_map(|h| h.keys().copied())
                .collect();
            (0..self.weights.len())
                .filter(|i| !held.contains(i))
                .collect()
        }

        fn load(r: &Rep) -> u64 {
            r.held.as_ref().map_or(0, |h| h.values().sum())
        }

        fn totals(&self) -> Totals {
            Totals {
                weight: self.weights.iter().sum(),
                max_weight: self.weights.iter().copied().max().unwrap_or(1),
                unowned: self.free().len(),
            }
        }

        fn members(&self) -> Vec<Loaded> {
            self.reps
                .iter()
                .map(|r| Loaded {
                    replica: r.id.clone(),
                    load: r.held.as_ref().map(|h| h.values().sum()),
                    held: r.held.as_ref().map_or(0, BTreeMap::len),
                    capacity: r.capacity,
                })
                .collect()
        }

        fn plan(&self, k: usize) -> WeightedPlan {
            let r = &self.reps[k];
            let mine: Vec<(usize, u64)> = r
                .held
                .as_ref()
                .map(|h| h.iter().map(|(i, w)| (*i, *w)).collect())
                .unwrap_or_default();
            weighted_plan(
                &r.id,
                Self::load(r),
                &mine,
                r.held.is_none(),
                r.capacity,
                &self.members(),
                self.totals(),
            )
        }

        /// The claim script: oldest free first, those that fit into the room; if none
        /// fit, the first one (with `fallback`).
        fn claim(&mut self, k: usize, room: u64, fallback: bool) -> u64 {
            if room == 0 && !fallback {
                return 0;
            }
            let free = self.free();
            let mut taken = Vec::new();
            let mut acc = 0;
            for &i in &free {
                let w = self.weights[i];
                if acc + w <= room {
                    taken.push(i);
                    acc += w;
                }
            }
            if taken.is_empty()
                && fallback
                && let Some(&i) = free.first()
            {
                taken.push(i);
                acc = self.weights[i];
            }
            let held = self.reps[k].held.as_mut().unwrap();
            for i in taken {
                held.insert(i, self.weights[i]);
            }
            acc
        }

        /// Every replica plans on the same view in turn (released partitions become
        /// free, claims take from the free set); until a round changes nothing. Returns
        /// the weight moved by hand-offs.
        fn settle(&mut self) -> u64 {
            let mut moved = 0;
            for round in 1..=1_000 {
                self.rounds = round;
                let mut changed = false;
                for k in 0..self.reps.len() {
                    if self.reps[k].held.is_none() {
                        continue;
                    }
                    let plan = self.plan(k);
                    let held = self.reps[k].held.as_mut().unwrap();
                    for i in &plan.shed {
                        moved += held.remove(i).unwrap();
                        changed = true;
                    }
                    if plan.shed.is_empty() && self.claim(k, plan.room, plan.fallback) > 0 {
                        changed = true;
                    }
                }
                if !changed {
                    return moved;
                }
            }
            panic!("no steady state after 1000 rounds: {:?}", self.loads());
        }

        /// As [`World::settle`], but as replicas really run: each round, every replica
        /// plans on the same view (the last tick's), then the hand-offs land, then the
        /// claims, each taking from what is free by then.
        fn settle_together(&mut self) {
            for round in 1..=1_000 {
                self.rounds = round;
                let plans: Vec<WeightedPlan> = (0..self.reps.len()).map(|k| self.plan(k)).collect();
                let mut changed = false;
                for (k, plan) in plans.iter().enumerate() {
                    if let Some(held) = self.reps[k].held.as_mut() {
                        for i in &plan.shed {
                            held.remove(i);
                            changed = true;
                        }
                    }
                }
                for (k, plan) in plans.iter().enumerate() {
                    if self.reps[k].held.is_some()
                        && plan.shed.is_empty()
                        && self.claim(k, plan.room, plan.fallback) > 0
                    {
                        changed = true;
                    }
                }
                if !changed {
                    return;
                }
            }
            panic!("no steady state after 1000 rounds: {:?}", self.loads());
        }

        fn loads(&self) -> Vec<(String, u64, f64)> {
            let t = self.totals();
            let c: u32 = self.reps.iter().map(|r| r.capacity).sum();
            self.reps
                .iter()
                .map(|r| {
                    let share = t.weight as f64 * f64::from(r.capacity) / f64::from(c);
                    (r.id.clone(), Self::load(r), share)
                })
                .collect()
        }

        /// Everything owned; every load within plain share + w_max, and, with equal
        /// capacities, above plain share − w_max; every member's within its share (as
        /// the rule computes it) ± w_S.
        fn assert_within_bounds(&self) {
            let t = self.totals();
            assert_eq!(t.unowned, 0, "everything owned: {:?}", self.loads());
            let equal = self.reps.windows(2).all(|r| r[0].capacity == r[1].capacity);
            for (id, load, share) in self.loads() {
                let wmax = t.max_weight as f64;
                assert!(
                    load as f64 <= share + wmax + 1e-9,
                    "{id}: load {load} > share {share} + w_max {wmax}: {:?}",
                    self.loads()
                );
                assert!(
                    !equal || load as f64 >= share - wmax - 1e-9,
                    "{id}: load {load} < share {share} − w_max {wmax}: {:?}",
                    self.loads()
                );
            }
            let shares = self.shares();
            let members: Vec<usize> = (0..self.reps.len()).filter(|&k| !shares[k].0).collect();
            let w_s = members
                .iter()
                .map(|&k| {
                    let n = self.reps[k].held.as_ref().map_or(0, BTreeMap::len) as u64;
                    (Self::load(&self.reps[k]) + 1).saturating_sub(n.max(1))
                })
                .max()
                .unwrap_or(1)
                .clamp(1, t.max_weight) as f64;
            for k in members {
                let (load, share) = (Self::load(&self.reps[k]) as f64, shares[k].1);
                assert!(
                    (load - share).abs() <= w_s + 1e-9,
                    "{}: load {load}, share {share}, w_S {w_s}: {:?}",
                    self.reps[k].id,
                    self.placement()
                );
            }
        }

        /// Partitions held and load per replica, with its capacity.
        fn placement(&self) -> Vec<(String, usize, u64, u32)> {
            self.reps
                .iter()
                .map(|r| {
                    let n = r.held.as_ref().map_or(0, BTreeMap::len);
                    (r.id.clone(), n, Self::load(r), r.capacity)
                })
                .collect()
        }

        /// The target: no replica holds nothing while another holds two partitions or
        /// more, one of which, moved to the empty one, would lower the larger of their
        /// loads per unit of capacity (with equal capacities: any of them would).
        fn assert_no_idle_replica(&self) -> Result<(), String> {
            for j in self.reps.iter().filter(|r| Self::load(r) == 0) {
                for i in &self.reps {
                    let Some(h) = i.held.as_ref().filter(|h| h.len() >= 2) else {
                        continue;
                    };
                    let li = Self::load(i) as f64 / f64::from(i.capacity);
                    if let Some((p, wp)) = h
                        .iter()
                        .find(|(_, wp)| (**wp as f64) / f64::from(j.capacity) < li - 1e-9)
                    {
                        return Err(format!(
                            "{} holds nothing while {} could hand it {p} (weight {wp}): {:?}",
                            j.id,
                            i.id,
                            self.placement()
                        ));
                    }
                }
            }
            Ok(())
        }

        /// The shares the rule balances to, as each replica computes them: (whether it
        /// is isolated, its share).
        fn shares(&self) -> Vec<(bool, f64)> {
            let (balancing, _, _) = isolate(&self.members(), u128::from(self.totals().weight));
            (0..self.reps.len())
                .map(|k| (!balancing[k], self.plan(k).share))
                .collect()
        }

        /// At rest, against the shares the rule balances to: the member furthest above
        /// its share (ties: the lowest id, as the rule picks it) has no partition
        /// lighter than its gap to the one furthest below.
        fn assert_refined(&self) -> Result<(), String> {
            let shares = self.shares();
            let dev: Vec<(f64, usize)> = (0..self.reps.len())
                .filter(|&k| !shares[k].0 && self.reps[k].held.is_some())
                .map(|k| (Self::load(&self.reps[k]) as f64 - shares[k].1, k))
                .collect();
            let Some(top) = dev.iter().map(|d| d.0).reduce(f64::max) else {
                return Ok(());
            };
            let &(di, i) = dev.iter().find(|d| (d.0 - top).abs() < 1e-9).unwrap();
            let &(dj, j) = dev.iter().min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
            // Every member within 5 % of its share: the group counts as balanced.
            if dev
                .iter()
                .all(|&(d, k)| d.abs() * 20.0 <= shares[k].1 + 1e-9)
            {
                return Ok(());
            }
            let lightest = self.reps[i].held.as_ref().unwrap().values().copied().min();
            match lightest {
                Some(l) if (l as f64) < di - dj - 1e-9 => Err(format!(
                    "{} could hand {l} to {} (gap {}): {:?}",
                    self.reps[i].id,
                    self.reps[j].id,
                    di - dj,
                    self.placement()
                )),
                _ => Ok(()),
            }
        }
    }

    /// The case CI's seed found: the member furthest above its share (r02, two
    /// tenants of weight 3) cannot help the empty r03, whose gap to it is 2.67; r00,
    /// less far above, could (a tenant of weight 1, gap 2.33). The rule used to wait on
    /// r02; it now picks r00, whose average partition (1.33) already weighs less than
    /// its gap, so everyone knows it can help.
    #[test]
    fn the_giver_is_one_that_surely_can_help() {
        let weights = vec![1, 2, 177, 576, 36, 3, 1, 3, 3];
        let mut w = World::new(weights.clone(), &[2, 1, 3, 1, 1, 3, 4]);
        for (k, held) in [
            (0, &[0, 1, 6][..]),
            (1, &[8]),
            (2, &[5, 7]),
            (4, &[3]),
            (5, &[2]),
            (6, &[4]),
        ] {
            let h = w.reps[k].held.as_mut().unwrap();
            for &i in held {
                h.insert(i, weights[i]);
            }
        }
        assert!(w.plan(2).shed.is_empty(), "r02 cannot help");
        assert_eq!(w.plan(0).shed.len(), 1, "r00 hands one over");
        w.settle_together();
        w.assert_within_bounds();
        assert!(
            w.assert_no_idle_replica().is_ok(),
            "{:?}",
            w.assert_no_idle_replica()
        );
        assert!(w.assert_refined().is_ok(), "{:?}", w.assert_refined());
    }

    /// How rare the unequal-capacity gap is: 5,000 random placements of the case
    /// above, each settled one replica at a time and all together. Idle endings (a
    /// replica holding nothing beside one that could hand it a partition) are counted;
    /// the old choice of giver (the member furthest above its share, helpful or not)
    /// left 99 of these 10,000 settles so, this one leaves 3.
    #[test]
    fn idle_endings_with_unequal_capacities_are_rare() {
        let mut seed: u64 = 12_345;
        let mut next = || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as u16
        };
        let (mut idle, mut settles) = (0, 0);
        for _ in 0..5_000 {
            let owners: Vec<u16> = (0..9).map(|_| next()).collect();
            for together in [false, true] {
                let mut w =
                    World::new(vec![1, 2, 177, 576, 36, 3, 1, 3, 3], &[2, 1, 3, 1, 1, 3, 4]);
                scatter(&mut w, &owners);
                if together {
                    w.settle_together();
                } else {
                    w.settle();
                }
                settles += 1;
                idle += usize::from(w.assert_no_idle_replica().is_err());
            }
        }
        eprintln!("{idle} of {settles} settles left a replica idle");
        assert!(
            idle * 200 <= settles,
            "{idle} of {settles} settles left a replica idle"
        );
    }

    #[test]
    fn a_heavy_tenant_alone_leaves_the_other_33_to_the_other_two() {
        // The case: 34 tenants, one of weight 250, on three replicas; a holds
        // the 33 light ones, b the heavy one, c nothing (it was just undrained).
        let mut weights = vec![1; 34];
        weights[2] = 250;
        let mut w = World::new(weights, &[1, 1, 1]);
        w.reps[0].held = Some((0..34).filter(|&i| i != 2).map(|i| (i, 1)).collect());
        w.reps[1].held = Some([(2, 250)].into_iter().collect());
        let moved = w.settle();
        let placement = w.placement();
        assert_eq!(placement[1], ("r01".into(), 1, 250, 1), "{placement:?}");
        let (a, c) = (placement[0].1, placement[2].1);
        assert_eq!(a + c, 33);
        assert!(a.abs_diff(c) <= 1, "{placement:?}");
        assert_eq!(moved, 16, "only what c takes moves");
        w.assert_within_bounds();
        w.assert_no_idle_replica().unwrap();
        let shares: Vec<f64> = w.shares().iter().map(|s| s.1).collect();
        assert_eq!(shares, vec![16.5, 250.0, 16.5]);
        for k in 0..3 {
            assert!(w.plan(k).shed.is_empty());
        }
    }

    #[test]
    fn under_the_plain_rule_that_case_stayed_put() {
        // The same view with nobody isolated (as the rule was): everyone is within
        // share ± 250, and b cannot give its one tenant to c, so nothing moved.
        let mut weights = vec![1; 34];
        weights[2] = 250;
        let w = World::new(weights, &[1, 1, 1]);
        let members: Vec<Loaded> = vec![
            Loaded {
                replica: "a".into(),
                load: Some(33),
                held: 33,
                capacity: 1,
            },
            Loaded {
                replica: "b".into(),
                load: Some(250),
                held: 1,
                capacity: 1,
            },
            Loaded {
                replica: "c".into(),
                load: Some(0),
                held: 0,
                capacity: 1,
            },
        ];
        let (balancing, ws, cs) = isolate(&members, u128::from(w.totals().weight));
        assert_eq!(balancing, vec![true, false, true]);
        assert_eq!((ws, cs), (33, 2));
        // Two tenants of 250 on b are not isolated: b is above share + w_max and
        // hands one over.
        let members = vec![
            Loaded {
                replica: "a".into(),
                load: Some(33),
                held: 33,
                capacity: 1,
            },
            Loaded {
                replica: "b".into(),
                load: Some(500),
                held: 2,
                capacity: 1,
            },
            Loaded {
                replica: "c".into(),
                load: Some(0),
                held: 0,
                capacity: 1,
            },
        ];
        let (balancing, _, _) = isolate(&members, 533);
        assert_eq!(balancing, vec![true, true, true]);
    }

    #[test]
    fn isolation_repeats_until_it_isolates_nobody() {
        // Shares 100: the 300 is isolated; then the others' shares are 33.3, and the 60
        // on its own is above that; then 20 each, and c and d hold several.
        let members = vec![
            Loaded {
                replica: "a".into(),
                load: Some(300),
                held: 1,
                capacity: 1,
            },
            Loaded {
                replica: "b".into(),
                load: Some(60),
                held: 1,
                capacity: 1,
            },
            Loaded {
                replica: "c".into(),
                load: Some(30),
                held: 10,
                capacity: 1,
            },
            Loaded {
                replica: "d".into(),
                load: Some(10),
                held: 10,
                capacity: 1,
            },
        ];
        let (balancing, w, c) = isolate(&members, 400);
        assert_eq!(balancing, vec![false, false, true, true]);
        assert_eq!((w, c), (40, 2));
    }

    #[test]
    fn equal_weights_and_capacities_claim_up_to_the_share() {
        let mut w = World::new(vec![1; 12], &[1, 1, 1]);
        assert_eq!(w.settle(), 0, "a cold start hands nothing over");
        w.assert_within_bounds();
        assert!(w.loads().iter().all(|(_, l, _)| *l == 4), "{:?}", w.loads());
    }

    #[test]
    fn a_heavy_tenant_counts_for_its_weight() {
        // One tenant as large as all the others together, on two replicas.
        let mut weights = vec![10];
        weights.extend([1; 10]);
        let mut w = World::new(weights, &[1, 1]);
        w.settle();
        w.assert_within_bounds();
        let loads: Vec<u64> = w.loads().iter().map(|(_, l, _)| *l).collect();
        assert_eq!(loads.iter().sum::<u64>(), 20);
        assert!(loads.iter().all(|l| (5..=15).contains(l)), "{loads:?}");
    }

    #[test]
    fn capacities_take_shares_in_proportion() {
        let mut w = World::new(vec![1; 60], &[1, 1, 2, 2]);
        w.settle();
        w.assert_within_bounds();
        let loads: Vec<u64> = w.loads().iter().map(|(_, l, _)| *l).collect();
        assert_eq!(loads, vec![10, 10, 20, 20]);
    }

    #[test]
    fn a_joiner_gets_about_its_share_and_only_that_moves() {
        let weights: Vec<u64> = (1..=40).map(|i| 1 + (i * 7) % 9).collect();
        let mut w = World::new(weights, &[1, 1, 1]);
        w.settle();
        let total: u64 = w.weights.iter().sum();
        w.reps.push(Rep {
            id: "r99".into(),
            capacity: 1,
            held: Some(BTreeMap::new()),
        });
        let moved = w.settle();
        w.assert_within_bounds();
        let share = total as f64 / 4.0;
        let wmax = 9.0;
        assert!(
            (moved as f64) <= share + wmax,
            "moved {moved} for a share of {share}: {:?}",
            w.loads()
        );
    }

    #[test]
    fn a_settling_member_gets_no_hand_offs_yet_but_its_share_is_left_free() {
        let mut w = World::new(vec![1; 12], &[1, 1]);
        w.reps.push(Rep {
            id: "r02".into(),
            capacity: 1,
            held: None,
        });
        w.settle();
        let loads: Vec<u64> = w.loads().iter().map(|(_, l, _)| *l).collect();
        assert_eq!(loads, vec![4, 4, 0], "the settler's share stays free");
        assert_eq!(w.free().len(), 4);
    }

    /// The what-if test's join of "g" (capacity 2) beside three replicas of 8 (24
    /// partitions of weight 1, shares 4.8 and 9.6): "c" handed its 3 over first and
    /// sees the others not yet. The deficit left (6.6) is the excess of "a2" and "j"
    /// (3.2 each) plus "c"'s 0.2: rounding that 0.2 up to a whole partition made "c"
    /// shed one more, below its share, and take one back from "j" later (a move the
    /// plan did not have). A donor gives whole units of its excess only.
    #[test]
    fn a_donor_never_sheds_below_its_share_for_a_fraction_of_a_unit() {
        let mine: Vec<(usize, u64)> = (0..5).map(|i| (i, 1)).collect();
        let mut g = member("g", 3, 3);
        g.capacity = 2;
        let members = [member("a2", 8, 8), member("c", 5, 5), member("j", 8, 8), g];
        let totals = Totals {
            weight: 24,
            max_weight: 1,
            unowned: 0,
        };
        let plan = weighted_plan("c", 5, &mine, false, 1, &members, totals);
        assert!(plan.shed.is_empty(), "{plan:?}");
        // The others still give their whole units: 3 each.
        let theirs: Vec<(usize, u64)> = (0..8).map(|i| (i, 1)).collect();
        for me in ["a2", "j"] {
            let plan = weighted_plan(me, 8, &theirs, false, 1, &members, totals);
            assert_eq!(plan.shed.len(), 3, "{me}: {plan:?}");
        }
    }

    fn member(id: &str, load: u64, held: usize) -> Loaded {
        Loaded {
            replica: id.into(),
            load: Some(load),
            held,
            capacity: 1,
        }
    }

    /// Nobody under (w_S is 40), nothing free: the giver (60 against a share of 28)
    /// hands both members below their share (12 each, rooms of 16) a partition of 10
    /// in the same round, not only the one furthest below; a third would fit no room.
    #[test]
    fn a_refining_round_hands_every_member_below_its_share_what_fits() {
        let mine: Vec<(usize, u64)> = (0..6).map(|i| (i, 10)).collect();
        let members = [
            member("r00", 60, 6),
            member("r01", 12, 3),
            member("r02", 12, 3),
        ];
        let totals = Totals {
            weight: 84,
            max_weight: 40,
            unowned: 0,
        };
        let plan = weighted_plan("r00", 60, &mine, false, 1, &members, totals);
        assert_eq!(plan.shed, [0, 1]);
        // The takers claim up to their share: each has room for one.
        let taker = weighted_plan("r01", 12, &[], false, 1, &members, totals);
        assert_eq!((taker.room, taker.shed.len()), (16, 0));
    }

    /// Within 5 % of every share nothing is refined, though a partition of 1 would
    /// fit both the giver's excess and the taker's room; 6 % out, it is.
    #[test]
    fn nothing_is_refined_within_five_percent_of_every_share() {
        let mine: Vec<(usize, u64)> = (0..20).map(|i| (i, 1)).chain([(20, 81)]).collect();
        let totals = Totals {
            weight: 303,
            max_weight: 81,
            unowned: 0,
        };
        let members = [
            member("r00", 101, 21),
            member("r01", 101, 21),
            member("r02", 101, 21),
        ];
        let balanced = |loads: [u64; 3]| {
            let m: Vec<Loaded> = members
                .iter()
                .zip(loads)
                .map(|(m, l)| Loaded {
                    load: Some(l),
                    ..m.clone()
                })
                .collect();
            weighted_plan("r00", loads[0], &mine, false, 1, &m, totals).shed
        };
        // Shares of 101: 105 is 4 % above, 97 4 % below.
        assert!(balanced([105, 99, 99]).is_empty());
        assert!(balanced([105, 101, 97]).is_empty());
        // 107 is 6 % above: it hands over until it is within 2.5 % of its share (4
        // of its 6 units above), into the others' rooms (3 each, and 2.5 % past).
        assert_eq!(balanced([107, 98, 98]).len(), 4);
    }

    /// Shares of 500 (w_S 400): the giver, 70 above, hands over the partition of 65
    /// that fits the room of 60 below r01's share once the room reaches 2.5 % past it
    /// (72), and stops there, 5 above its share: one move. Filling the rooms exactly
    /// took three light partitions (30, 25, 15) for the same balance within 5 %.
    #[test]
    fn a_refining_round_stops_within_half_the_tolerance_instead_of_moving_crumbs() {
        let mine = [
            (0, 400),
            (1, 65),
            (2, 30),
            (3, 25),
            (4, 20),
            (5, 15),
            (6, 15),
        ];
        let members = [
            member("r00", 570, 7),
            member("r01", 440, 9),
            member("r02", 480, 9),
            member("r03", 510, 9),
        ];
        let totals = Totals {
            weight: 2_000,
            max_weight: 400,
            unowned: 0,
        };
        let plan = weighted_plan("r00", 570, &mine, false, 1, &members, totals);
        assert_eq!(plan.shed, [1]);
        assert_eq!(
            plan.to,
            BTreeMap::from([(1, "r01".to_owned())]),
            "into r01's room"
        );
        let mut rooms = vec![(60, "r01"), (20, "r02")];
        assert_eq!(
            pack(&mine, 70, 0, &mut rooms),
            [(2, 0), (3, 0), (5, 1)],
            "rooms filled exactly"
        );
    }

    /// A shift in the shifting-load benchmark (seed 42): one replica at twice its share
    /// (2,384 against 1,198, w_S 1,000), nobody under. Past share + w_S, it used to
    /// release just the 186 above the bound (167 and 19), a round of its own before
    /// the refining round; now it is that refining round, in one go.
    #[test]
    fn a_member_over_its_bound_with_nobody_under_refines_in_one_round() {
        let mine: Vec<(usize, u64)> = vec![
            (37, 17),
            (39, 91),
            (40, 1_000),
            (43, 17),
            (44, 59),
            (45, 40),
            (46, 20),
            (47, 19),
            (48, 167),
            (49, 30),
            (50, 26),
            (51, 500),
            (52, 67),
            (53, 24),
            (54, 24),
            (57, 32),
            (58, 18),
            (59, 111),
            (60, 50),
            (61, 53),
            (63, 19),
        ];
        let members = [
            member("replica-1", 304, 11),
            member("replica-2", 1_481, 22),
            member("replica-3", 625, 10),
            member("replica-4", 2_384, 21),
        ];
        let totals = Totals {
            weight: 4_794,
            max_weight: 1_000,
            unowned: 0,
        };
        let plan = weighted_plan("replica-4", 2_384, &mine, false, 1, &members, totals);
        let shed: u64 = mine
            .iter()
            .filter(|(i, _)| plan.shed.contains(i))
            .map(|&(_, w)| w)
            .sum();
        assert!(
            plan.shed.contains(&51) && !plan.shed.contains(&40),
            "{plan:?}"
        );
        // Down to within 2.5 % of its share (1,198 ± 30), not to the bound (2,198).
        assert!(
            (2_384 - 1_198 - 30..=2_384 - 1_198).contains(&shed),
            "{shed}"
        );
        // One giver per round: replica-2, above its share too, waits.
        let other = weighted_plan("replica-2", 1_481, &[(0, 1)], false, 1, &members, totals);
        assert_eq!(other.shed, []);
    }

    #[test]
    fn stable_views_are_left_alone() {
        let mut w = World::new(vec![5, 3, 3, 2, 2, 1, 1, 1], &[1, 1, 1]);
        w.settle();
        for k in 0..3 {
            let plan = w.plan(k);
            assert!(plan.shed.is_empty(), "{:?}", w.loads());
            assert!(plan.room == 0 || w.free().is_empty());
        }
    }

    #[test]
    fn choose_prefers_the_heaviest_that_fit_then_the_lightest() {
        let mine = [(0, 5), (1, 3), (2, 2), (3, 1)];
        assert_eq!(choose(&mine, 4, u64::MAX), vec![1, 3]);
        assert_eq!(choose(&mine, 5, u64::MAX), vec![0]);
        // Nothing fits into 0.5 of a weight unit's need... need 1 takes the 1.
        assert_eq!(choose(&mine, 1, u64::MAX), vec![3]);
        // Everything heavier than the need: the lightest.
        assert_eq!(choose(&[(7, 4), (8, 6)], 2, u64::MAX), vec![7]);
        // Never beyond the limit.
        assert_eq!(choose(&[(7, 4), (8, 6)], 2, 3), Vec::<usize>::new());
    }

    fn zipf_like() -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec(1u64..=100, 1..80)
    }

    /// Skewed: mostly light tenants (1 to 3), and one to three heavy ones (20 to 1000,
    /// often more than a replica's share), anywhere in the order.
    fn skewed() -> impl Strategy<Value = Vec<u64>> {
        (
            prop::collection::vec(1u64..=3, 1..70),
            prop::collection::vec((20u64..=1000, any::<u16>()), 1..4),
        )
            .prop_map(|(mut light, heavy)| {
                for (w, at) in heavy {
                    let at = usize::from(at) % (light.len() + 1);
                    light.insert(at, w);
                }
                light
            })
    }

    /// Rounds within which any case must settle: one per partition and replica, and a
    /// few more (a cold start takes 2 or 3; 1024 cases took at most 0.75 × (P + N)).
    fn round_bound(w: &World) -> usize {
        w.weights.len() + w.reps.len() + 4
    }

    /// Every partition with a random owner (or none), as after a drain, a weight
    /// change or a crash.
    fn scatter(w: &mut World, owners: &[u16]) {
        let n = w.reps.len();
        for (i, o) in owners.iter().enumerate().take(w.weights.len()) {
            let k = usize::from(*o) % (n + 1);
            if k < n {
                let wt = w.weights[i];
                w.reps[k].held.as_mut().unwrap().insert(i, wt);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// From a cold start, any weights and capacities settle within the bounds.
        #[test]
        fn any_cold_start_settles_within_share_plus_the_largest_weight(
            weights in zipf_like(),
            capacities in prop::collection::vec(1u32..=4, 1..8),
        ) {
            let mut w = World::new(weights, &capacities);
            w.settle();
            w.assert_within_bounds();
        }

        /// Once settled, with equal capacities, the most loaded replica (against its
        /// plain share; ties: the lowest id, as the rule picks it) has no partition
        /// lighter than its gap to the least loaded one: no single move of its would
        /// help. (With different capacities, see the next test.)
        #[test]
        fn a_settled_group_has_no_improving_move(
            weights in zipf_like(),
            n in 2usize..7,
            c in 1u32..=3,
        ) {
            let mut w = World::new(weights, &vec![c; n]);
            w.settle();
            let loads = w.loads();
            let dev = |(_, l, s): &(String, u64, f64)| *l as f64 - s;
            let top = loads.iter().map(dev).fold(f64::MIN, f64::max);
            let i = loads.iter().find(|x| (dev(x) - top).abs() < 1e-9).unwrap();
            let j = loads.iter().min_by(|a, b| dev(a).total_cmp(&dev(b))).unwrap();
            let gap = dev(i) - dev(j);
            let k = w.reps.iter().position(|r| r.id == i.0).unwrap();
            let lightest = w.reps[k].held.as_ref().unwrap().values().copied().min();
            let balanced = loads.iter().all(|x| dev(x).abs() * 20.0 <= x.2 + 1e-9);
            prop_assert!(
                balanced || lightest.is_none_or(|l| l as f64 >= gap - 1e-9),
                "{} could hand {lightest:?} to {} (gap {gap}): {loads:?}",
                i.0,
                j.0
            );
        }

        /// Skewed weights, any capacities, from a cold start or from any placement
        /// (replicas deciding one at a time, or together on one view): settled within
        /// the round bound, within share ± w_max, no replica idle while another could
        /// hand it a partition, and refined against the shares the rule balances to.
        #[test]
        fn skewed_weights_settle_quickly_and_leave_no_replica_idle(
            weights in skewed(),
            capacities in prop::collection::vec(1u32..=4, 1..8),
            owners in prop::collection::vec(any::<u16>(), 0..80),
            together in any::<bool>(),
        ) {
            let mut w = World::new(weights, &capacities);
            scatter(&mut w, &owners);
            if together {
                w.settle_together();
            } else {
                w.settle();
            }
            prop_assert!(
                w.rounds <= round_bound(&w),
                "{} rounds: {:?}",
                w.rounds,
                w.placement()
            );
            w.assert_within_bounds();
            // With unequal capacities the rule can still leave a small replica idle
            // beside larger ones holding several tenants: when every member that could
            // hand it one has an average partition no lighter than its gap, and the one
            // furthest above cannot (nobody else knows their lightest): rare, see
            // `idle_endings_with_unequal_capacities_are_rare`; the next test holds it
            // for equal capacities.
            if capacities.iter().all(|c| *c == capacities[0]) {
                prop_assert!(w.assert_no_idle_replica().is_ok(), "{}", w.assert_no_idle_replica().unwrap_err());
            }
            prop_assert!(w.assert_refined().is_ok(), "{}", w.assert_refined().unwrap_err());
            for k in 0..w.reps.len() {
                prop_assert!(w.plan(k).shed.is_empty(), "settled, yet {} sheds", w.reps[k].id);
            }
        }

        /// The same with equal capacities, where no replica may hold nothing while
        /// another holds two partitions or more.
        #[test]
        fn skewed_weights_on_equal_replicas_leave_none_empty(
            weights in skewed(),
            n in 2usize..8,
            owners in prop::collection::vec(any::<u16>(), 0..80),
        ) {
            let mut w = World::new(weights, &vec![1; n]);
            scatter(&mut w, &owners);
            w.settle_together();
            prop_assert!(w.rounds <= round_bound(&w), "{} rounds: {:?}", w.rounds, w.placement());
            w.assert_within_bounds();
            let placement = w.placement();
            let empty = placement.iter().any(|p| p.1 == 0);
            let two = placement.iter().any(|p| p.1 >= 2);
            prop_assert!(!(empty && two), "{placement:?}");
        }

        /// The same when every replica decides on one view at a time, as they do.
        #[test]
        fn replicas_deciding_together_settle_within_the_bounds(
            weights in zipf_like(),
            capacities in prop::collection::vec(1u32..=4, 1..8),
            joiners in 0usize..3,
        ) {
            let mut w = World::new(weights, &capacities);
            w.settle_together();
            w.assert_within_bounds();
            for j in 0..joiners {
                w.reps.push(Rep {
                    id: format!("z{j}"),
                    capacity: 1,
                    held: Some(BTreeMap::new()),
                });
            }
            w.settle_together();
            w.assert_within_bounds();
        }

        /// Joins, leaves and weight changes: after each, the group settles within the
        /// bounds, and a settled group plans nothing more.
        #[test]
        fn membership_and_weight_changes_settle_within_the_bounds(
            weights in zipf_like(),
            capacities in prop::collection::vec(1u32..=3, 2..6),
            events in prop::collection::vec((0u8..3, any::<u16>(), 1u64..=100), 1..8),
        ) {
            let mut w = World::new(weights, &capacities);
            w.settle();
            let mut next = 100;
            for (kind, pick, weight) in events {
                match kind {
                    0 => {
                        next += 1;
                        w.reps.push(Rep {
                            id: format!("r{next}"),
                            capacity: 1 + u32::from(pick % 3),
                            held: Some(BTreeMap::new()),
                        });
                    }
                    1 if w.reps.len() > 1 => {
                        w.reps.remove(usize::from(pick) % w.reps.len());
                    }
                    _ => {
                        let i = usize::from(pick) % w.weights.len();
                        w.weights[i] = weight;
                        for r in &mut w.reps {
                            if let Some(h) = r.held.as_mut()
                                && let Some(x) = h.get_mut(&i)
                            {
                                *x = weight;
                            }
                        }
                    }
                }
                w.settle();
                w.assert_within_bounds();
                for k in 0..w.reps.len() {
                    let plan = w.plan(k);
                    prop_assert!(plan.shed.is_empty(), "settled, yet {:?} sheds", w.reps[k].id);
                }
            }
        }
    }
}
