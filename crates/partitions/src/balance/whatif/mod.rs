//! The what-if planner: which moves a change to a group (replicas added, removed or
//! drained, weights set) would make, and the loads it would leave, without changing
//! anything.
//!
//! Each member of its snapshot takes the replicas' own decision step ([`super::step`],
//! on the rules of [`super::plan`] by count and [`super::weighted`] by weight and
//! capacity), in rounds, until nothing is handed over and nothing is free:
//!
//! 1. **Claims.** Member after member (by id), each plans on the group as it is then and
//!    claims what its plan allows, oldest free partition first, as a replica does: by
//!    count, up to its allowance; by weight, batches of those that fit into the room its
//!    plan gave it, going on while a batch takes something (with the plan's fallback,
//!    the first claim takes the first free one when none fits; the next ones of the
//!    same plan do not). Passes repeat until one claims nothing.
//! 2. **Hand-overs.** Every member plans on the same view, and those whose plan sheds
//!    release those partitions; they are free from then on, newer than any freed
//!    before (those freed together, oldest first by name, as Redis orders them). By
//!    weight, the rule names each one's receiver, which takes it before the next claims
//!    (up to its bound, as `claim.lua` takes a reservation); one it declines is free to
//!    anyone.
//!
//! With preferences ([`super::prefer`]), as the replicas apply them: a claim takes the
//! free partitions preferred on its member first and leaves those preferred on another
//! member with room to it; a count-mode hand-over gives those preferred on a member
//! with room first (then, as without preferences, its last ones) and its own last; a
//! round that hands nothing over by the rule hands back, per member, one partition to
//! the member it is preferred on when the bound allows, or by a swap (the member takes
//! it beyond its allowance, then sheds one not preferred on it).
//!
//! A change starts with the weights set and the partitions of removed, drained (and
//! already leaving or draining) replicas freed.
//!
//! **Where the live group decides by chance, the planner decides alike every time**, and
//! says so with [`PlannedChange::exact`] `false`:
//! - A count-mode replica hands over a random sample of its partitions: the planner
//!   takes its last ones (by position in the set), and reports count-mode moves as
//!   counts per pair of replicas, never names.
//! - Which replica's claim lands first when several may claim at once: the planner lets
//!   them claim by id. `exact` turns `false` when that choice could change the outcome:
//!   in count mode, when those claiming want more than is free, or take partitions that
//!   came from several replicas (then the pairs may differ; the counts do not); by
//!   weight, whenever two replicas would claim from the same free partitions.
//! - Partitions nobody's plan claims (orphans) go, after a lease, to whoever asks
//!   first: the planner gives them to the first member by id.
//!
//! Replicas are taken as active members (settling and away ones too: they take part
//! once they are done, or back); timing (the two ticks a hand-over waits, its cooldown,
//! a move budget) changes when moves happen, not which.

use std::collections::{BTreeMap, BTreeSet};

use leasehold_election::ext::validate_name;

use super::plan::{Member, Plan, plan};
use super::prefer::{Standings, count_standings, hand_back, weighted_standings};
use super::step;
use super::weighted::{Loaded, Totals, WeightedPlan, shares, weighted_plan};
use crate::admin::MAX_WEIGHT;
use crate::config::{GroupConfigError, MAX_CAPACITY};
use crate::error::PartitionsError;
use crate::store::ops::moves::MoveCause;
use crate::store::{GroupStatus, ReplicaState};

mod change;
mod claims;

pub use self::change::{PlannedChange, PlannedLoad, PlannedMove, PlannedRole, WhatIf};

/// No plan takes more rounds of hand-overs than this (the rules converge long before:
/// a plan that does not is reported with [`PlannedChange::settled`] `false`).
const MAX_ROUNDS: usize = 10_000;

/// A replica in the simulation.
#[derive(Debug, Clone)]
struct Mem {
    id: String,
    role: PlannedRole,
    capacity: u32,
    /// Takes part (counted towards N, runs the rule).
    counts: bool,
    held: BTreeSet<usize>,
    count_before: usize,
    load_before: u64,
}

/// One move: from (member index), to, cause, partition.
type Step = (Option<usize>, usize, Option<MoveCause>, usize);

/// The group while the plan runs.
struct Rehearsal {
    names: Vec<String>,
    weights: Vec<u64>,
    /// Weights were set: loads are weights (else counts; all weights are 1 then).
    set_weighted: bool,
    /// Balanced by [`weighted_plan`] (weights set, or capacities differ).
    weighted: bool,
    members: Vec<Mem>,
    owner: Vec<Option<usize>>,
    /// For a free partition: who held it last, and why it was let go.
    last: Vec<Option<(usize, MoveCause)>>,
    /// Free partitions, oldest first: (when freed, rank of the name).
    free: BTreeSet<(u64, usize)>,
    /// When each free partition was freed (its key in `free`).
    freed_at: Vec<u64>,
    by_rank: Vec<usize>,
    rank: Vec<usize>,
    clock: u64,
    steps: Vec<Step>,
    exact: bool,
    /// Each partition's preferred member, if it is preferred on one taking part.
    prefs: Vec<Option<usize>>,
    /// For a free partition handed over by name (weighted groups): its receiver, which
    /// takes it before anyone claims, up to its bound (as `claim.lua` takes a
    /// reservation first).
    reserved: Vec<Option<usize>>,
}

/// Plans `change` on the group `status` describes.
///
/// # Errors
/// [`PartitionsError::UnknownReplica`] (remove or drain a replica that is not live),
/// [`PartitionsError::UnknownPartition`], [`PartitionsError::InvalidWeight`],
/// [`PartitionsError::DuplicatePartition`] (a weight given twice),
/// [`PartitionsError::Config`] (a bad name or capacity),
/// [`PartitionsError::LastActiveReplica`] (drains that leave nobody taking part), or
/// [`PartitionsError::InvalidWhatIf`] (a replica added that is live, named twice,
/// removed and drained, or nobody left taking part).
pub(crate) fn simulate(
    status: &GroupStatus,
    change: &WhatIf,
) -> Result<PlannedChange, PartitionsError> {
    validate(status, change)?;
    let mut sim = Rehearsal::new(status, change);
    let (rounds, settled) = sim.run();
    Ok(sim.outcome(rounds, settled))
}

fn invalid(text: String) -> PartitionsError {
    PartitionsError::InvalidWhatIf(text)
}

fn validate(status: &GroupStatus, change: &WhatIf) -> Result<(), PartitionsError> {
    let live: BTreeSet<&str> = status.members.iter().map(|m| m.replica.as_str()).collect();
    let mut named = BTreeSet::new();
    for (id, capacity) in &change.add {
        validate_name("replica id", id)?;
        if !(1..=MAX_CAPACITY).contains(capacity) {
            return Err(GroupConfigError::CapacityOutOfRange(*capacity).into());
        }
        if live.contains(id.as_str()) {
            return Err(invalid(format!("replica {id:?} is live already")));
        }
        if !named.insert(id.as_str()) {
            return Err(invalid(format!("replica {id:?} is named twice")));
        }
    }
    for id in change.remove.iter().chain(&change.drain) {
        validate_name("replica id", id)?;
        if !live.contains(id.as_str()) {
            return Err(PartitionsError::UnknownReplica(id.clone()));
        }
        if !named.insert(id.as_str()) {
            return Err(invalid(format!("replica {id:?} is named twice")));
        }
    }
    let set: BTreeSet<&str> = status
        .partitions
        .iter()
        .map(|p| p.partition.as_str())
        .collect();
    let mut weighed = BTreeSet::new();
    for (p, w) in &change.weights {
        validate_name("partition name", p)?;
        if !(1..=MAX_WEIGHT).contains(w) {
            return Err(PartitionsError::InvalidWeight(*w));
        }
        if !set.contains(p.as_str()) {
            return Err(PartitionsError::UnknownPartition(p.clone()));
        }
        if !weighed.insert(p.as_str()) {
            return Err(PartitionsError::DuplicatePartition(p.clone()));
        }
    }
    let left = status
        .members
        .iter()
        .filter(|m| takes_part(m.state, m.drained))
        .filter(|m| !named.contains(m.replica.as_str()))
        .count()
        + change.add.len();
    if left == 0 {
        return Err(match change.drain.first() {
            Some(d) if change.remove.is_empty() => PartitionsError::LastActiveReplica(d.clone()),
            _ => invalid("no replica would be left taking part".to_owned()),
        });
    }
    Ok(())
}

/// Whether a live member takes part (counted towards N): settling, active or away, and
/// not drained.
fn takes_part(state: ReplicaState, drained: bool) -> bool {
    !drained
        && matches!(
            state,
            ReplicaState::Settling | ReplicaState::Active | ReplicaState::Away
        )
}

impl Rehearsal {
    fn new(status: &GroupStatus, change: &WhatIf) -> Self {
        let names: Vec<String> = status
            .partitions
            .iter()
            .map(|p| p.partition.clone())
            .collect();
        let old: Vec<u64> = status.partitions.iter().map(|p| p.weight.max(1)).collect();
        let mut weights = old.clone();
        let index: BTreeMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        for (p, w) in &change.weights {
            if let Some(&i) = index.get(p.as_str()) {
                weights[i] = *w;
            }
        }
        let mut prefs = vec![None; names.len()];
        let preferred: Vec<(usize, &str)> = status
            .preferences
            .iter()
            .filter_map(|(p, r)| Some((*index.get(p.as_str())?, r.as_str())))
            .collect();
        let mut by_rank: Vec<usize> = (0..names.len()).collect();
        by_rank.sort_by(|a, b| names[*a].cmp(&names[*b]));
        let mut rank = vec![0; names.len()];
        for (r, &i) in by_rank.iter().enumerate() {
            rank[i] = r;
        }

        let mut members: Vec<Mem> = status
            .members
            .iter()
            .map(|m| {
                let removed = change.remove.contains(&m.replica);
                let drained = change.drain.contains(&m.replica);
                let role = if removed || m.state == ReplicaState::Leaving {
                    PlannedRole::Removed
                } else if drained || m.drained || m.state == ReplicaState::Draining {
                    PlannedRole::Drained
                } else {
                    PlannedRole::Member
                };
                Mem {
                    id: m.replica.clone(),
                    role,
                    capacity: m.capacity.max(1),
                    counts: role == PlannedRole::Member,
                    held: BTreeSet::new(),
                    count_before: 0,
                    load_before: 0,
                }
            })
            .collect();
        members.extend(change.add.iter().map(|(id, capacity)| Mem {
            id: id.clone(),
            role: PlannedRole::Added,
            capacity: *capacity,
            counts: true,
            held: BTreeSet::new(),
            count_before: 0,
            load_before: 0,
        }));
        members.sort_by(|a, b| a.id.cmp(&b.id));
        let at: BTreeMap<String, usize> = members
            .iter()
            .enumerate()
            .map(|(k, m)| (m.id.clone(), k))
            .collect();

        for (i, r) in preferred {
            // Only on members taking part: a preference for any other replica waits.
            prefs[i] = at.get(r).copied().filter(|&k| members[k].counts);
        }
        let set_weighted = weights.iter().any(|w| *w != 1);
        let counting: Vec<u32> = members
            .iter()
            .filter(|m| m.counts)
            .map(|m| m.capacity)
            .collect();
        let weighted = set_weighted || counting.windows(2).any(|w| w[0] != w[1]);
        let mut sim = Self {
            names,
            weights,
            set_weighted,
            weighted,
            owner: vec![None; status.partitions.len()],
            last: vec![None; status.partitions.len()],
            members,
            free: BTreeSet::new(),
            freed_at: vec![0; status.partitions.len()],
            by_rank,
            rank,
            clock: 0,
            steps: Vec::new(),
            exact: true,
            prefs,
            reserved: vec![None; status.partitions.len()],
        };
        // Today's owners; what a leaving, removed or drained replica holds is freed
        // first, and what nobody live holds is free already.
        sim.clock = 1;
        for (i, p) in status.partitions.iter().enumerate() {
            let owner = p.owner.as_deref().and_then(|o| at.get(o).copied());
            match owner {
                Some(k) => {
                    let m = &mut sim.members[k];
                    m.count_before += 1;
                    m.load_before += old[i];
                    if m.counts {
                        m.held.insert(i);
                        sim.owner[i] = Some(k);
                    } else {
                        let cause = if m.role == PlannedRole::Removed {
                            MoveCause::Leave
                        } else {
                            MoveCause::Drain
                        };
                        sim.release(k, i, cause);
                    }
                }
                None => {
                    sim.free.insert((0, sim.rank[i]));
                }
            }
        }
        sim
    }

    /// A member's load: its weights summed (its count unless weights were set).
    fn load(&self, k: usize) -> u64 {
        let m = &self.members[k];
        if self.set_weighted {
            m.held.iter().map(|&i| self.weights[i]).sum()
        } else {
            m.held.len() as u64
        }
    }

    fn counting(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&k| self.members[k].counts)
            .collect()
    }

    /// Every member taking part with its count, as a replica's view lists them.
    fn count_view(&self) -> Vec<Member> {
        self.counting()
            .into_iter()
            .map(|j| Member {
                replica: self.members[j].id.clone(),
                owned: Some(self.members[j].held.len()),
            })
            .collect()
    }

    fn count_plan(&self, k: usize) -> Plan {
        let m = &self.members[k];
        plan(
            self.names.len(),
            &m.id,
            m.held.len(),
            false,
            &self.count_view(),
            self.free.len(),
        )
    }

    fn weight_plan(&self, k: usize) -> WeightedPlan {
        let m = &self.members[k];
        let mine: Vec<(usize, u64)> = m.held.iter().map(|&i| (i, self.weights[i])).collect();
        weighted_plan(
            &m.id,
            self.load(k),
            &mine,
            false,
            m.capacity,
            &self.loaded(),
            self.totals(),
        )
    }

    fn loaded(&self) -> Vec<Loaded> {
        self.counting()
            .into_iter()
            .map(|j| Loaded {
                replica: self.members[j].id.clone(),
                load: Some(self.load(j)),
                held: self.members[j].held.len(),
                capacity: self.members[j].capacity,
            })
            .collect()
    }

    fn totals(&self) -> Totals {
        if self.set_weighted {
            Totals {
                weight: self.weights.iter().sum(),
                max_weight: self.weights.iter().copied().max().unwrap_or(1),
                unowned: self.free.len(),
            }
        } else {
            Totals {
                weight: self.names.len() as u64,
                max_weight: 1,
                unowned: self.free.len(),
            }
        }
    }

    /// Free partitions, oldest first.
    fn free_order(&self) -> impl Iterator<Item = usize> + '_ {
        self.free.iter().map(|&(_, r)| self.by_rank[r])
    }

    fn release(&mut self, k: usize, i: usize, cause: MoveCause) {
        self.members[k].held.remove(&i);
        self.owner[i] = None;
        self.last[i] = Some((k, cause));
        self.freed_at[i] = self.clock;
        self.free.insert((self.clock, self.rank[i]));
    }

    fn take(&mut self, k: usize, i: usize) {
        self.free.remove(&(self.freed_at[i], self.rank[i]));
        let (from, cause) = match self.last[i].take() {
            Some((j, c)) => (Some(j), Some(c)),
            None => (None, None),
        };
        self.steps.push((from, k, cause, i));
        self.owner[i] = Some(k);
        self.members[k].held.insert(i);
    }

    /// The standings of every member taking part, for preferences (none without).
    fn standings(&self) -> Standings {
        if self.prefs.iter().all(Option::is_none) {
            return Standings::default();
        }
        // Every member taking part, with how many partitions are preferred on it.
        let ids: BTreeMap<&str, usize> = self
            .counting()
            .into_iter()
            .map(|k| {
                let on = self.prefs.iter().filter(|p| **p == Some(k)).count();
                (self.members[k].id.as_str(), on)
            })
            .collect();
        if self.weighted {
            weighted_standings(
                &self.loaded(),
                self.totals(),
                &ids.keys().copied().collect(),
            )
        } else {
            count_standings(self.names.len(), &self.count_view(), self.free.len(), &ids)
        }
    }

    /// Every member plans on the same view; those that shed release. Returns how many
    /// were released.
    fn hand_overs(&mut self) -> usize {
        let mut sheds: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut named: Vec<(usize, String)> = Vec::new();
        let standings = self.standings();
        for k in self.counting() {
            let me = self.members[k].id.as_str();
            let mut shed: Vec<usize> = if self.weighted {
                let plan = self.weight_plan(k);
                for (&i, to) in &plan.to {
                    named.push((i, to.clone()));
                }
                plan.shed
            } else {
                let last: Vec<usize> = self.members[k].held.iter().rev().copied().collect();
                step::count_shed(
                    &self.count_plan(k),
                    me,
                    &last,
                    |i| self.preferred(i),
                    &standings,
                )
            };
            if shed.is_empty() && self.free.is_empty() && !standings.members.is_empty() {
                // Nothing to hand over by the rule: a partition preferred elsewhere
                // may go back (one per member and round, as one per hand-over).
                let mine: Vec<(usize, u64)> = self.members[k]
                    .held
                    .iter()
                    .map(|&i| (i, self.weights_for_claim(i)))
                    .collect();
                shed.extend(hand_back(me, &mine, |i| self.preferred(i), &standings));
            }
            if !shed.is_empty() {
                sheds.push((k, shed));
            }
        }
        self.clock += 1;
        let mut released = 0;
        for (k, shed) in sheds {
            for i in shed {
                if self.members[k].held.contains(&i) {
                    self.release(k, i, MoveCause::HandOff);
                    released += 1;
                }
            }
        }
        for (i, to) in named {
            if self.owner[i].is_none() {
                self.reserved[i] = self.members.iter().position(|m| m.id == to);
            }
        }
        released
    }

    /// Rounds of claims and hand-overs until neither moves anything; returns the rounds
    /// that handed something over and whether it came to rest.
    fn run(&mut self) -> (usize, bool) {
        let mut rounds = 0;
        for _ in 0..MAX_ROUNDS {
            self.claims();
            if self.hand_overs() > 0 {
                rounds += 1;
                continue;
            }
            if self.free.is_empty() {
                return (rounds, true);
            }
            // Orphans: after a lease they go to whoever asks; here the first by id.
            let Some(&k) = self.counting().first() else {
                return (rounds, true);
            };
            self.exact = false;
            let all: Vec<usize> = self.free_order().collect();
            for i in all {
                self.take(k, i);
            }
        }
        (rounds, false)
    }

    fn outcome(&self, rounds: usize, settled: bool) -> PlannedChange {
        let mut grouped: BTreeMap<(Option<String>, String, Option<MoveCause>), PlannedMove> =
            BTreeMap::new();
        for &(from, to, cause, i) in &self.steps {
            let from = from.map(|j| self.members[j].id.clone());
            let to = self.members[to].id.clone();
            let entry = grouped
                .entry((from.clone(), to.clone(), cause))
                .or_insert_with(|| PlannedMove {
                    from,
                    to,
                    cause,
                    count: 0,
                    weight: 0,
                    partitions: Vec::new(),
                });
            entry.count += 1;
            entry.weight += self.weights_for_claim(i);
            if self.weighted {
                entry.partitions.push(self.names[i].clone());
            }
        }
        let counting = self.counting();
        let shares: BTreeMap<String, f64> = if self.weighted {
            let loaded = self.loaded();
            counting
                .iter()
                .map(|&k| self.members[k].id.clone())
                .zip(shares(&loaded, self.totals().weight))
                .collect()
        } else {
            BTreeMap::new()
        };
        let loads = (0..self.members.len())
            .map(|k| {
                let m = &self.members[k];
                PlannedLoad {
                    replica: m.id.clone(),
                    role: m.role,
                    capacity: m.capacity,
                    count_before: m.count_before,
                    count: m.held.len(),
                    load_before: m.load_before,
                    load: self.load(k),
                    share: shares.get(&m.id).copied(),
                }
            })
            .collect();
        PlannedChange {
            weighted: self.weighted,
            moves: grouped.into_values().collect(),
            loads,
            rounds,
            settled,
            exact: self.exact,
            unowned: self.free.len(),
        }
    }
}

#[cfg(test)]
mod tests;
