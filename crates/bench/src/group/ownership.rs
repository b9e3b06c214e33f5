//! Who owns what, by the replicas' own reports: the `joined`, `owned` and `released`
//! lines of every `partition-child`, folded in as they arrive.
//!
//! Each event updates per-replica owned sets and per-partition holder counts, so "every
//! partition owned" and "balanced" are answered from counters, never by rescanning the
//! log (at 100,000 partitions a cold start is 100,000 `owned` lines). Only *live*
//! replicas count: a replica the bench has killed is [retired](Ownership::retire) and
//! its later lines (still in the pipe) are ignored; a new incarnation of a replica id
//! replaces the old one.
//!
//! Instants are on the children's clock: the state after an event is dated by the
//! latest `at_us` seen so far (the lines of different replicas arrive interleaved, so
//! a line may be older than one read before it).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::group::event::PartitionEvent;
use crate::group::process::Logged;

/// How the bench judges a group balanced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Balance {
    /// Every replica within one partition of every other (spread ≤ 1).
    #[default]
    Count,
    /// Every replica's load within its capacity share of the total weight ± the largest
    /// weight (a weighted group, or replicas of different capacities).
    Load(Arc<Loads>),
}

/// The weights of a group's partitions and its replicas' capacities, as the bench set
/// them up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loads {
    /// Partition → weight (1 if absent).
    pub weights: HashMap<String, u64>,
    /// Replica → capacity (1 if absent).
    pub capacities: HashMap<String, u32>,
    /// The weights of the group's partitions, summed.
    pub total: u64,
    /// The largest weight.
    pub max_weight: u64,
}

impl Loads {
    /// The weight of `partition`.
    pub fn weight(&self, partition: &str) -> u64 {
        self.weights.get(partition).copied().unwrap_or(1)
    }

    /// The capacity of `replica`.
    pub fn capacity(&self, replica: &str) -> u32 {
        self.capacities.get(replica).copied().unwrap_or(1)
    }

    /// Each of `loads`' replicas' share of the total: total × capacity / the
    /// capacities of `loads`' replicas summed.
    pub fn shares<'a>(
        &self,
        loads: impl Iterator<Item = &'a str> + Clone,
    ) -> BTreeMap<String, f64> {
        let caps: u64 = loads.clone().map(|r| u64::from(self.capacity(r))).sum();
        loads
            .map(|r| {
                let share = self.total as f64 * f64::from(self.capacity(r)) / caps.max(1) as f64;
                (r.to_owned(), share)
            })
            .collect()
    }

    /// Whether every replica of `loads` (replica → load) is within its share ± the
    /// largest weight.
    pub fn within(&self, loads: &BTreeMap<String, u64>) -> bool {
        let shares = self.shares(loads.keys().map(String::as_str));
        loads.iter().all(|(r, l)| {
            let share = shares.get(r).copied().unwrap_or(0.0);
            (*l as f64 - share).abs() <= self.max_weight as f64 + 1e-9
        })
    }
}

/// One replica id's latest incarnation.
#[derive(Debug, Clone, Default)]
struct Replica {
    incarnation: u32,
    /// Started and not retired.
    live: bool,
    /// It printed `joined`.
    joined: bool,
    /// Its partitions: `owned` seen, `released` not yet.
    owned: HashSet<String>,
    /// Their weights, summed.
    load: u64,
}

/// The ownership of a group of `partitions` partitions, by the replicas' reports.
#[derive(Debug, Clone)]
pub struct Ownership {
    partitions: usize,
    replicas: BTreeMap<String, Replica>,
    /// Per partition, how many live replicas say they own it (absent: none).
    holders: HashMap<String, u32>,
    /// Partitions with at least one live holder.
    covered: usize,
    /// Partitions with two or more live holders.
    multi: usize,
    /// Latest instant seen (wall µs).
    clock_us: u64,
    milestones: Milestones,
    balance: Balance,
}

/// The first instants, since the last [`Ownership::reset_milestones`], at which each
/// condition held (wall µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Milestones {
    /// Every partition owned by a live replica.
    pub all_owned_us: Option<u64>,
    /// [`Progress::balanced`].
    pub balanced_us: Option<u64>,
}

/// What a live replica reports, for progress and error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaCount {
    /// The replica id.
    pub replica: String,
    /// Partitions it owns.
    pub owned: usize,
    /// Whether it printed `joined`.
    pub joined: bool,
    /// The weights of what it owns, summed (its count in an unweighted group).
    pub load: u64,
}

/// A snapshot of [`Ownership`]: counters only, cheap to take often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The group's partition count.
    pub partitions: usize,
    /// Partitions owned by at least one live replica.
    pub owned: usize,
    /// Partitions two or more live replicas say they own.
    pub owned_twice: usize,
    /// Every live replica, by id.
    pub replicas: Vec<ReplicaCount>,
    /// Latest instant seen (wall µs).
    pub clock_us: u64,
    /// The milestones so far.
    pub milestones: Milestones,
    /// How balance is judged.
    pub balance: Balance,
}

impl Progress {
    /// Every partition owned by a live replica.
    pub fn all_owned(&self) -> bool {
        self.owned == self.partitions
    }

    /// Every partition owned by exactly one live replica, every live replica joined,
    /// and max − min of their owned counts ≤ 1 (by load: every one within its share ±
    /// the largest weight).
    pub fn balanced(&self) -> bool {
        !self.replicas.is_empty()
            && self.all_owned()
            && self.owned_twice == 0
            && self.replicas.iter().all(|r| r.joined)
            && match &self.balance {
                Balance::Count => self.spread() <= 1,
                Balance::Load(loads) => loads.within(&self.loads()),
            }
    }

    /// Load per live replica.
    pub fn loads(&self) -> BTreeMap<String, u64> {
        self.replicas
            .iter()
            .map(|r| (r.replica.clone(), r.load))
            .collect()
    }

    /// max − min of the live replicas' owned counts (0 with none).
    pub fn spread(&self) -> usize {
        let max = self.replicas.iter().map(|r| r.owned).max().unwrap_or(0);
        let min = self.replicas.iter().map(|r| r.owned).min().unwrap_or(0);
        max - min
    }

    /// Owned count per live replica.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.replicas
            .iter()
            .map(|r| (r.replica.clone(), r.owned))
            .collect()
    }

    /// A one-line summary, for progress and error messages.
    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .replicas
            .iter()
            .map(|r| {
                let mark = if r.joined { "" } else { " (not joined)" };
                format!("{}={}{mark}", r.replica, r.owned)
            })
            .collect();
        let joined = self.replicas.iter().filter(|r| r.joined).count();
        format!(
            "{}/{} partitions owned ({} by two or more), {joined}/{} replicas joined, spread {}: [{}]",
            self.owned,
            self.partitions,
            self.owned_twice,
            self.replicas.len(),
            self.spread(),
            each.join(", ")
        )
    }
}

impl Ownership {
    /// Nothing known yet about a group of `partitions` partitions.
    pub fn new(partitions: usize) -> Self {
        Self {
            partitions,
            replicas: BTreeMap::new(),
            holders: HashMap::new(),
            covered: 0,
            multi: 0,
            clock_us: 0,
            milestones: Milestones::default(),
            balance: Balance::Count,
        }
    }

    /// Judges balance by `balance` from now on.
    pub fn set_balance(&mut self, balance: Balance) {
        self.balance = balance;
        let weight = |p: &str| match &self.balance {
            Balance::Count => 1,
            Balance::Load(l) => l.weight(p),
        };
        let loads: Vec<(String, u64)> = self
            .replicas
            .iter()
            .map(|(id, r)| (id.clone(), r.owned.iter().map(|p| weight(p)).sum()))
            .collect();
        for (id, load) in loads {
            if let Some(r) = self.replicas.get_mut(&id) {
                r.load = load;
            }
        }
        self.check();
    }

    fn weight(&self, partition: &str) -> u64 {
        match &self.balance {
            Balance::Count => 1,
            Balance::Load(l) => l.weight(partition),
        }
    }

    /// Incarnation `incarnation` of `replica` was started at `at_us`: it is live, not
    /// joined, owns nothing yet. An older incarnation's partitions no longer count.
    pub fn start(&mut self, replica: &str, incarnation: u32, at_us: u64) {
        self.tick(at_us);
        self.drop_owned(replica);
        self.replicas.insert(
            replica.to_owned(),
            Replica {
                incarnation,
                live: true,
                ..Replica::default()
            },
        );
        self.check();
    }

    /// `replica` was killed (or taken out) at `at_us`: its partitions no longer count
    /// and its remaining lines are ignored. Returns the partitions it owned.
    pub fn retire(&mut self, replica: &str, at_us: u64) -> HashSet<String> {
        self.tick(at_us);
        let owned = self.drop_owned(replica);
        if let Some(r) = self.replicas.get_mut(replica) {
            r.live = false;
        }
        self.check();
        owned
    }

    /// Folds in one line of incarnation `incarnation` of `replica`.
    pub fn apply(&mut self, replica: &str, incarnation: u32, event: &PartitionEvent) {
        let entry = self.replicas.entry(replica.to_owned()).or_insert(Replica {
            incarnation,
            live: true,
            ..Replica::default()
        });
        if incarnation > entry.incarnation {
            // A restart the bench did not announce: the new process replaces the old.
            self.start(replica, incarnation, 0);
        }
        let Some(r) = self.replicas.get_mut(replica) else {
            return;
        };
        if !r.live || r.incarnation != incarnation {
            return;
        }
        match event {
            PartitionEvent::Joined { at_us } => {
                r.joined = true;
                self.tick(*at_us);
            }
            PartitionEvent::Owned {
                partition, at_us, ..
            } => {
                if r.owned.insert(partition.clone()) {
                    self.hold(partition);
                    let w = self.weight(partition);
                    if let Some(r) = self.replicas.get_mut(replica) {
                        r.load += w;
                    }
                }
                self.tick(*at_us);
            }
            PartitionEvent::Released {
                partition, at_us, ..
            } => {
                if r.owned.remove(partition) {
                    self.unhold(partition);
                    let w = self.weight(partition);
                    if let Some(r) = self.replicas.get_mut(replica) {
                        r.load = r.load.saturating_sub(w);
                    }
                }
                self.tick(*at_us);
            }
            _ => return,
        }
        self.check();
    }

    /// From now on the group has `partitions` partitions (its set changed). The
    /// milestones are kept; those not yet recorded are checked against the new count.
    pub fn expect_partitions(&mut self, partitions: usize) {
        self.partitions = partitions;
        self.check();
    }

    /// Forgets the milestones: the next instant each condition holds is recorded anew
    /// (at once if it holds now).
    pub fn reset_milestones(&mut self) {
        self.milestones = Milestones::default();
        self.check();
    }

    /// How many partitions the latest incarnation of `replica` owns (0 if unknown).
    pub fn owned_by(&self, replica: &str) -> usize {
        self.replicas.get(replica).map_or(0, |r| r.owned.len())
    }

    /// The counters now.
    pub fn progress(&self) -> Progress {
        Progress {
            partitions: self.partitions,
            owned: self.covered,
            owned_twice: self.multi,
            replicas: self
                .replicas
                .iter()
                .filter(|(_, r)| r.live)
                .map(|(id, r)| ReplicaCount {
                    replica: id.clone(),
                    owned: r.owned.len(),
                    joined: r.joined,
                    load: r.load,
                })
                .collect(),
            clock_us: self.clock_us,
            milestones: self.milestones,
            balance: self.balance.clone(),
        }
    }

    fn tick(&mut self, at_us: u64) {
        self.clock_us = self.clock_us.max(at_us);
    }

    /// Takes `replica`'s partitions out of the holder counts (if it is live).
    fn drop_owned(&mut self, replica: &str) -> HashSet<String> {
        let owned = match self.replicas.get_mut(replica) {
            Some(r) if r.live => {
                r.load = 0;
                std::mem::take(&mut r.owned)
            }
            _ => return HashSet::new(),
        };
        for p in &owned {
            self.unhold(p);
        }
        owned
    }

    fn hold(&mut self, partition: &str) {
        let n = self.holders.entry(partition.to_owned()).or_insert(0);
        *n += 1;
        match *n {
            1 => self.covered += 1,
            2 => self.multi += 1,
            _ => {}
        }
    }

    fn unhold(&mut self, partition: &str) {
        let Some(n) = self.holders.get_mut(partition) else {
            return;
        };
        *n -= 1;
        match *n {
            0 => {
                self.covered -= 1;
                self.holders.remove(partition);
            }
            1 => self.multi -= 1,
            _ => {}
        }
    }

    /// Records the milestones that hold now and were not yet recorded. O(replicas).
    fn check(&mut self) {
        if self.milestones.all_owned_us.is_some() && self.milestones.balanced_us.is_some() {
            return;
        }
        let all_owned = self.covered == self.partitions;
        if all_owned && self.milestones.all_owned_us.is_none() {
            self.milestones.all_owned_us = Some(self.clock_us);
        }
        if all_owned && self.milestones.balanced_us.is_none() && self.progress().balanced() {
            self.milestones.balanced_us = Some(self.clock_us);
        }
    }
}

/// Owner changes in a log, from the `owned` lines: a partition's `owned` line from a
/// replica other than its previous owner is one change. Changes dated before `since_us`
/// only set the previous owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerChanges {
    /// Owner changes at or after `since_us`.
    pub changes: u64,
    /// The same changes by (from, to).
    pub moves: BTreeMap<(String, String), u64>,
    /// The same changes by partition.
    pub per_partition: BTreeMap<String, u64>,
}

impl OwnerChanges {
    /// Counts the changes in `log` (read order) dated `since_us` ≤ at ≤ `until_us`.
    pub fn count(log: &[Logged], since_us: u64, until_us: u64) -> Self {
        let mut last: HashMap<&str, &str> = HashMap::new();
        let mut out = Self::default();
        for l in log {
            let PartitionEvent::Owned {
                partition, at_us, ..
            } = &l.event
            else {
                continue;
            };
            if *at_us > until_us {
                continue;
            }
            let prev = last.insert(partition.as_str(), l.replica.as_str());
            match prev {
                Some(prev) if prev != l.replica && *at_us >= since_us => {
                    out.changes += 1;
                    *out.moves
                        .entry((prev.to_owned(), l.replica.clone()))
                        .or_default() += 1;
                    *out.per_partition.entry(partition.clone()).or_default() += 1;
                }
                _ => {}
            }
        }
        out
    }

    /// The moves as `from→to ×n` text, for progress lines.
    pub fn describe(&self) -> String {
        let moves: Vec<String> = self
            .moves
            .iter()
            .map(|((from, to), n)| format!("{from}→{to} ×{n}"))
            .collect();
        moves.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(p: &str, at_us: u64) -> PartitionEvent {
        PartitionEvent::Owned {
            partition: p.into(),
            fence: 1,
            at_us,
            handed_over: None,
            handed_over_bytes: None,
            no_hand_off: None,
            no_hand_off_cause: None,
        }
    }

    fn released(p: &str, at_us: u64) -> PartitionEvent {
        PartitionEvent::Released {
            partition: p.into(),
            fence: 1,
            at_us,
            writes: 0,
            write_errors: 0,
            reason: None,
            sent_at_us: None,
            handed_off: None,
            hand_off_error: None,
            successor: None,
        }
    }

    fn joined(at_us: u64) -> PartitionEvent {
        PartitionEvent::Joined { at_us }
    }

    #[test]
    fn all_owned_and_balanced_from_events() {
        let mut o = Ownership::new(3);
        o.start("a", 1, 1);
        o.start("b", 1, 1);
        o.apply("a", 1, &joined(5));
        o.apply("a", 1, &owned("p0", 10));
        o.apply("a", 1, &owned("p1", 11));
        o.apply("a", 1, &owned("p2", 12));
        let p = o.progress();
        assert!(p.all_owned());
        assert!(!p.balanced(), "b has not joined: {}", p.describe());
        assert_eq!(p.milestones.all_owned_us, Some(12));
        assert_eq!(p.milestones.balanced_us, None);

        o.apply("b", 1, &joined(13));
        assert!(!o.progress().balanced(), "spread 3");
        o.apply("a", 1, &released("p2", 20));
        assert!(!o.progress().all_owned());
        // A line read late, dated earlier: the clock does not go back.
        o.apply("b", 1, &owned("p2", 19));
        let p = o.progress();
        assert!(p.balanced(), "{}", p.describe());
        assert_eq!(p.milestones.balanced_us, Some(20));
        assert_eq!(
            p.milestones.all_owned_us,
            Some(12),
            "the first instant stays"
        );
        assert_eq!(
            p.counts(),
            BTreeMap::from([("a".into(), 2), ("b".into(), 1)])
        );
    }

    #[test]
    fn a_partition_owned_twice_is_not_balanced() {
        let mut o = Ownership::new(2);
        o.start("a", 1, 0);
        o.start("b", 1, 0);
        for r in ["a", "b"] {
            o.apply(r, 1, &joined(1));
        }
        o.apply("a", 1, &owned("p0", 2));
        o.apply("b", 1, &owned("p1", 3));
        o.apply("b", 1, &owned("p0", 4));
        let p = o.progress();
        assert_eq!((p.owned, p.owned_twice), (2, 1));
        assert!(p.all_owned() && !p.balanced());
        o.apply("a", 1, &released("p0", 5));
        // Duplicate lines do not count twice.
        o.apply("a", 1, &released("p0", 5));
        o.apply("b", 1, &owned("p0", 4));
        let p = o.progress();
        assert_eq!((p.owned, p.owned_twice), (2, 0));
        assert_eq!(
            p.counts(),
            BTreeMap::from([("a".into(), 0), ("b".into(), 2)])
        );
        assert_eq!(p.spread(), 2);
    }

    #[test]
    fn a_retired_replica_no_longer_counts_and_its_late_lines_are_ignored() {
        let mut o = Ownership::new(2);
        o.start("a", 1, 0);
        o.start("b", 1, 0);
        o.apply("a", 1, &owned("p0", 1));
        o.apply("b", 1, &owned("p1", 1));
        o.reset_milestones();
        assert_eq!(
            o.progress().milestones.all_owned_us,
            Some(1),
            "holds at once"
        );
        let gone = o.retire("a", 100);
        assert_eq!(gone, HashSet::from(["p0".to_owned()]));
        o.reset_milestones();
        o.apply("a", 1, &owned("p1", 101));
        let p = o.progress();
        assert_eq!((p.owned, p.owned_twice, p.replicas.len()), (1, 0, 1));
        assert_eq!(p.milestones.all_owned_us, None);
        o.apply("b", 1, &owned("p0", 150));
        assert_eq!(o.progress().milestones.all_owned_us, Some(150));
    }

    #[test]
    fn a_new_incarnation_replaces_the_old_one() {
        let mut o = Ownership::new(4);
        o.start("a", 1, 0);
        o.apply("a", 1, &owned("p0", 1));
        o.apply("a", 1, &owned("p1", 2));
        assert_eq!(o.owned_by("a"), 2);
        o.apply("a", 2, &owned("p2", 3));
        assert_eq!(o.owned_by("a"), 1);
        o.apply("a", 1, &owned("p3", 4));
        assert_eq!(o.owned_by("a"), 1, "the old process's lines are ignored");
        assert_eq!(o.progress().owned, 1);
        assert_eq!(o.owned_by("nobody"), 0);
    }

    #[test]
    fn progress_describes_what_was_last_seen() {
        let mut o = Ownership::new(3);
        o.start("a", 1, 0);
        o.start("b", 1, 0);
        o.apply("a", 1, &joined(1));
        o.apply("a", 1, &owned("p0", 2));
        assert_eq!(
            o.progress().describe(),
            "1/3 partitions owned (0 by two or more), 1/2 replicas joined, spread 1: [a=1, b=0 (not joined)]"
        );
    }

    fn logged(replica: &str, event: PartitionEvent) -> Logged {
        Logged {
            replica: replica.into(),
            incarnation: 1,
            event,
        }
    }

    #[test]
    fn owner_changes_count_moves_in_the_window() {
        let log = vec![
            logged("a", owned("p0", 10)),
            logged("a", owned("p1", 10)),
            logged("b", owned("p0", 20)),
            logged("a", released("p1", 25)),
            logged("c", owned("p1", 30)),
            logged("c", owned("p2", 31)),
            logged("c", owned("p0", 40)),
            logged("a", owned("p0", 99)),
        ];
        let all = OwnerChanges::count(&log, 0, 50);
        assert_eq!(all.changes, 3);
        assert_eq!(all.describe(), "a→b ×1, a→c ×1, b→c ×1");
        let late = OwnerChanges::count(&log, 30, 50);
        assert_eq!(late.changes, 2, "{late:?}");
    }
}
