//! The planner's vocabulary: the change to plan ([`WhatIf`]) and what it would do
//! ([`PlannedChange`]: its moves, roles and loads).

use crate::store::ops::moves::MoveCause;

/// A change to plan ([`crate::GroupAdmin::plan`]): replicas to add, remove or drain,
/// weights to set. Nothing in it is applied.
///
/// ```
/// use leasehold_partitions::WhatIf;
///
/// let change = WhatIf::new()
///     .add_replica("replica-d", 2)
///     .drain("replica-a")
///     .weight("tenant-7", 250);
/// assert!(!change.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WhatIf {
    /// Replicas that join, with their capacities (1 ..= [`MAX_CAPACITY`](crate::config::MAX_CAPACITY)).
    pub add: Vec<(String, u32)>,
    /// Live replicas that leave: their partitions become free.
    pub remove: Vec<String>,
    /// Live replicas drained: they hand everything over and no longer count.
    pub drain: Vec<String>,
    /// Partitions given these weights (1 ..= [`MAX_WEIGHT`](crate::admin::MAX_WEIGHT)).
    pub weights: Vec<(String, u64)>,
}

impl WhatIf {
    /// No change (its plan moves nothing unless the group is out of balance now).
    pub fn new() -> Self {
        Self::default()
    }

    /// Replica `replica` joins with capacity `capacity`.
    #[must_use = "a WhatIf is only a description: pass it to GroupAdmin::plan"]
    pub fn add_replica(mut self, replica: impl Into<String>, capacity: u32) -> Self {
        self.add.push((replica.into(), capacity));
        self
    }

    /// Live replica `replica` leaves (shuts down).
    #[must_use = "a WhatIf is only a description: pass it to GroupAdmin::plan"]
    pub fn remove_replica(mut self, replica: impl Into<String>) -> Self {
        self.remove.push(replica.into());
        self
    }

    /// Live replica `replica` is drained.
    #[must_use = "a WhatIf is only a description: pass it to GroupAdmin::plan"]
    pub fn drain(mut self, replica: impl Into<String>) -> Self {
        self.drain.push(replica.into());
        self
    }

    /// Partition `partition` gets weight `weight`.
    #[must_use = "a WhatIf is only a description: pass it to GroupAdmin::plan"]
    pub fn weight(mut self, partition: impl Into<String>, weight: u64) -> Self {
        self.weights.push((partition.into(), weight));
        self
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty()
            && self.remove.is_empty()
            && self.drain.is_empty()
            && self.weights.is_empty()
    }
}

/// Moves of a plan from one replica to another for one cause, taken together.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlannedMove {
    /// The replica it moves from (`None`: the partition had no owner).
    pub from: Option<String>,
    /// The replica it moves to.
    pub to: String,
    /// Why the old term ends, as the ledger of moves will say ([`MoveCause::HandOff`],
    /// [`MoveCause::Drain`], [`MoveCause::Leave`], ...); `None` with no owner before.
    pub cause: Option<MoveCause>,
    /// How many partitions.
    pub count: usize,
    /// Their weights, summed (`count` in an unweighted group).
    pub weight: u64,
    /// Which, in a weighted group (by weight, the rule names the partitions it hands
    /// over; which replica claims a free one is still the planner's tie-break). Empty
    /// in a group balanced by count, whose replicas hand over a random sample.
    pub partitions: Vec<String>,
}

/// What a replica is in a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlannedRole {
    /// A member that stays.
    Member,
    /// Joins with the change.
    Added,
    /// Leaves with the change (or is leaving already).
    Removed,
    /// Drained by the change (or draining already).
    Drained,
}

impl PlannedRole {
    /// A stable label: `member`, `added`, `removed`, `drained`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Added => "added",
            Self::Removed => "removed",
            Self::Drained => "drained",
        }
    }
}

/// One replica before and after a plan.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PlannedLoad {
    /// The replica id.
    pub replica: String,
    /// What it is in the plan.
    pub role: PlannedRole,
    /// Its capacity.
    pub capacity: u32,
    /// Partitions it holds now.
    pub count_before: usize,
    /// Partitions it holds after.
    pub count: usize,
    /// Its load now (the weights it holds, summed, at today's weights).
    pub load_before: u64,
    /// Its load after (at the planned weights).
    pub load: u64,
    /// In a weighted group, the share it balances to after (as
    /// [`GroupStatus::shares`](crate::GroupStatus::shares)); `None` by count, or if it no longer takes part.
    pub share: Option<f64>,
}

/// What a change would do ([`crate::GroupAdmin::plan`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PlannedChange {
    /// Whether the group balances by weight after the change (a weight set, or
    /// capacities that differ).
    pub weighted: bool,
    /// The moves, per (from, to, cause), ordered by them.
    pub moves: Vec<PlannedMove>,
    /// Every replica (live, added), by id.
    pub loads: Vec<PlannedLoad>,
    /// Rounds of hand-overs until nothing moves (0: claims of free partitions alone).
    pub rounds: usize,
    /// Whether the rules came to rest (they always should).
    pub settled: bool,
    /// Whether the live group can only make these moves: `false` if some tie the live
    /// group breaks by chance (which claim lands first, orphans) could change them (see
    /// the module docs). The counts per replica are the rule's either way, up to which
    /// replicas hold the larger counts.
    pub exact: bool,
    /// Partitions left without an owner (none unless nobody takes part).
    pub unowned: usize,
}

impl PlannedChange {
    /// Partitions moved in all (a partition that moves twice counts twice).
    pub fn moved(&self) -> usize {
        self.moves.iter().map(|m| m.count).sum()
    }

    /// Weight moved in all.
    pub fn moved_weight(&self) -> u64 {
        self.moves.iter().map(|m| m.weight).sum()
    }
}
