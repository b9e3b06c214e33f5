//! Errors of the partition coordinator.

use leasehold_election::StoreError;
use thiserror::Error;

/// Why a coordinator is not (fully) taking part in its group.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum PartitionsError {
    /// Another live process heartbeats with this replica id. This replica claims
    /// nothing until that one stops heartbeating (a restarted replica waits at most one
    /// lease for its predecessor's heartbeat to expire).
    #[error("replica id {0:?} is already live in this group from another process")]
    DuplicateReplica(String),
    /// Live replicas of this group use a different partition list.
    #[error("live replicas of group {0:?} are configured with a different partition list")]
    PartitionListMismatch(String),
    /// A Redis call failed; retried on the next tick.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The coordinator has stopped.
    #[error("the partition coordinator has stopped")]
    Stopped,
}
