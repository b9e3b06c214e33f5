//! The group protocol and its two implementations: Redis scripts ([`redis`]) and the
//! same rules in process memory ([`memory`]).
//!
//! A replica's partitions hang off its **session**: one entry in the group's sorted set
//! of members, scored by its expiry. A partition is held while its holder's session
//! lives; one heartbeat per replica per renew interval extends all of them at once, and
//! a session that expires (or leaves) frees all its partitions at once. Partitions
//! without a live owner wait in a sorted set of free partitions, oldest first, so
//! claiming k of them is O(k log P), and nothing in a steady tick grows with P.

#[cfg(test)]
mod conformance;
pub(crate) mod memory;
pub(crate) mod ops;
pub(crate) mod protocol;
pub(crate) mod redis;
#[cfg(test)]
mod roster_check;
pub(crate) mod status;

pub(crate) use self::status::read_status;
#[cfg(test)]
pub(crate) use self::status::split_info;
pub use self::status::{GroupStatus, PartitionOwner, ReplicaState, ReplicaStatus};

// Batch sizes bound how long one script runs in Redis (every other client of that
// server waits meanwhile): a claim of 25 partitions or an addition of 250 names stays
// within a few milliseconds on the project's machine at 100,000 partitions. They
// should not be considered stable.

/// How many partitions one claim script takes at most.
pub(crate) const CLAIM_BATCH: usize = 25;
/// How many partitions one release script gives back at most.
pub(crate) const RELEASE_BATCH: usize = 250;
/// How many bytes of hand-off state one release script carries at most (a term whose
/// state alone is larger, up to `MAX_HAND_OFF_BYTES`, goes in a script of its own): a
/// batch of 250 states of 1 MiB would hold the server for seconds.
pub(crate) const RELEASE_STATE_BYTES: usize = 4 << 20;
/// How many names one script adds or removes (seeding, applying a list, restoring, the
/// admin).
pub(crate) const SET_CHUNK: usize = 250;
/// How many partitions of ended sessions one script frees at most.
pub(crate) const REAP_BUDGET: usize = 250;
/// How many partitions one status page (or set page) reads.
pub(crate) const STATUS_PAGE: usize = 1_000;

/// A store that can host partition groups: [`leasehold_election::RedisStore`] (one
/// script per operation) and [`crate::MemoryGroupStore`]. Sealed.
pub trait GroupStore: protocol::Protocol + Clone + Send + Sync + 'static {
    /// A copy whose heartbeats and claims count only once `replicas` replicas have
    /// acknowledged them, waiting at most `timeout` (`GroupConfig::min_replicas_acked`).
    /// The in-memory store has no replicas: nothing to wait for.
    fn with_replica_acks(&self, replicas: usize, timeout: std::time::Duration) -> Self {
        let _ = (replicas, timeout);
        self.clone()
    }
}

impl GroupStore for leasehold_election::RedisStore {
    fn with_replica_acks(&self, replicas: usize, timeout: std::time::Duration) -> Self {
        leasehold_election::LeaseStore::with_replica_acks(self, replicas, timeout)
    }
}
impl GroupStore for crate::MemoryGroupStore {}
