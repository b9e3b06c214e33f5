//! The group operations on top of a [`LeaseStore`]: one tick per replica per renew
//! interval (heartbeat, owned count, batched renewals, scan for unowned partitions),
//! leaving, and a read-only status query.

use std::future::Future;
use std::time::Duration;

use leasehold_election::{Fence, LeaseStore, StoreError};

use crate::keys::GroupKeys;

/// One replica's tick.
#[derive(Debug, Clone)]
#[allow(unreachable_pub)]
pub struct TickRequest {
    pub replica: String,
    /// Random per coordinator instance: tells a restarted replica from a duplicate.
    pub instance: String,
    /// Heartbeat time-to-live (the lease).
    pub ttl: Duration,
    /// Owned partitions; `None` while settling.
    pub owned: Option<usize>,
    /// Lease length used by the renewals.
    pub lease: Duration,
    /// Digest of the partition list, and the list itself (newline-separated).
    pub digest: String,
    pub list: String,
    /// `(partition index, token)` of every lease to renew.
    pub renewals: Vec<(usize, String)>,
}

/// A partition with no live owner.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(unreachable_pub)]
pub struct Unowned {
    pub index: usize,
    /// The dead member still holding its lease, if any.
    pub holder: Option<String>,
    /// Time left on that lease.
    pub remaining: Option<Duration>,
}

/// What a tick found.
#[derive(Debug, Clone, Default)]
#[allow(unreachable_pub)]
pub struct TickReply {
    /// One per renewal, in order.
    pub renewed: Vec<bool>,
    /// Live members and their published counts (`None`: settling).
    pub members: Vec<(String, Option<usize>)>,
    /// Time left on each member's heartbeat, in the order of `members`.
    pub heartbeat_left: Vec<Duration>,
    pub unowned: Vec<Unowned>,
    pub conflict: Option<Conflict>,
}

/// Something that stops this replica from taking part.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(unreachable_pub)]
pub enum Conflict {
    /// Another live instance heartbeats with this replica id.
    DuplicateReplica,
    /// Live members use a different partition list.
    PartitionListMismatch,
}

/// The whole group as stored, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    /// Every partition with its owner, in the configured order.
    pub partitions: Vec<PartitionOwner>,
    /// Live replicas with the count they last published (`None`: still settling).
    pub replicas: Vec<(String, Option<usize>)>,
}

impl GroupStatus {
    /// Partitions owned per live replica, counted from the leases themselves.
    pub fn owned_counts(&self) -> Vec<(String, usize)> {
        self.replicas
            .iter()
            .map(|(r, _)| {
                let n = self
                    .partitions
                    .iter()
                    .filter(|p| p.owner.as_deref() == Some(r.as_str()))
                    .count();
                (r.clone(), n)
            })
            .collect()
    }

    /// max − min of [`GroupStatus::owned_counts`] (0 with no replicas).
    pub fn spread(&self) -> usize {
        let counts: Vec<usize> = self.owned_counts().into_iter().map(|(_, n)| n).collect();
        match (counts.iter().max(), counts.iter().min()) {
            (Some(max), Some(min)) => max - min,
            _ => 0,
        }
    }
}

/// One partition's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOwner {
    /// The partition.
    pub partition: String,
    /// Its owner's replica id, if leased.
    pub owner: Option<String>,
    /// The fence of the current (or last) term.
    pub fence: Fence,
    /// Lease left.
    pub remaining: Option<Duration>,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for leasehold_election::RedisStore {}
    impl Sealed for crate::MemoryGroupStore {}
}

/// A lease store that also runs group ticks. Implemented for
/// [`leasehold_election::RedisStore`] (one script per tick) and
/// [`crate::MemoryGroupStore`]; sealed.
pub trait GroupBackend: LeaseStore + sealed::Sealed {
    /// Runs one tick.
    #[doc(hidden)]
    fn tick(
        &self,
        keys: &GroupKeys,
        request: &TickRequest,
    ) -> impl Future<Output = Result<TickReply, StoreError>> + Send;

    /// Removes `replica` (if it is still `instance`) from the heartbeat set at once.
    fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        instance: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Reads the whole group; `None` if no replica has ever joined it.
    fn group_status(
        &self,
        keys: &GroupKeys,
    ) -> impl Future<Output = Result<Option<GroupStatus>, StoreError>> + Send;
}
