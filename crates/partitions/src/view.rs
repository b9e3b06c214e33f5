//! What a coordinator reports about itself.

use std::collections::BTreeSet;

use crate::error::PartitionsError;

/// This replica's view of its group, published when it changes (never on a tick that
/// changed nothing).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct GroupView {
    /// Partitions this replica holds: from the claim that won each one until its
    /// elector has stopped the callback and released it. A callback starts a moment
    /// after its partition appears here, and has stopped before it disappears.
    pub owned: BTreeSet<String>,
    /// Live replicas in the heartbeat set (this one included once it has joined).
    pub live_replicas: Vec<String>,
    /// ceil(P/N): the most partitions a replica holds at steady state.
    pub cap: usize,
    /// floor(P/N): the least.
    pub floor: usize,
    /// Still settling (heartbeating, claiming nothing yet).
    pub settling: bool,
    /// Whether the first group tick has succeeded.
    pub joined: bool,
    /// The last error (a Redis failure, or a conflict that stops this replica from
    /// claiming: a duplicate replica id).
    pub error: Option<PartitionsError>,
    /// Partitions released so that an under-loaded replica could take them.
    pub handoffs: u64,
    /// Partitions in the group's set (P), as of the last tick.
    pub partitions: usize,
    /// An operator drained this replica: it hands everything over and claims nothing
    /// until undrained.
    pub drained: bool,
    /// This replica's versioned partition list differs from the group's at the same
    /// version (the group's is followed; see `GroupConfigBuilder::list_version`).
    pub list_differs: bool,
    /// The group balances by weight: a partition has a weight, or the replicas'
    /// capacities differ. `cap` and `floor` are then 0: see `share`.
    pub weighted: bool,
    /// The weights of the partitions this replica holds, summed (the count of `owned`
    /// in an unweighted group).
    pub load: u64,
    /// This replica's capacity (`GroupConfigBuilder::capacity`).
    pub capacity: u32,
    /// In a weighted group: this replica's share of the total weight (total × its
    /// capacity / the capacities summed). Its load stays within share ± the largest
    /// weight.
    pub share: Option<f64>,
    /// The life and set version of this replica's copy of the group's set (kept to
    /// restore the group if Redis loses it), once it has read one. For Leasehold's own
    /// simulations.
    #[doc(hidden)]
    pub set_copy: Option<(String, u64)>,
}
