//! Errors of the partition coordinator.

use leasehold_election::{ConfigError, StoreError};
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
    /// The configuration's public fields were changed after it was built, to values
    /// the builder rejects.
    #[error("invalid group configuration: {0}")]
    Config(#[source] ConfigError),
    /// The coordinator has stopped.
    #[error("the partition coordinator has stopped")]
    Stopped,
}

impl PartitionsError {
    /// Whether this error keeps the replica out of its group until someone changes
    /// something (another process, or the configuration), as opposed to a Redis fault
    /// that is retried.
    pub fn keeps_out(&self) -> bool {
        matches!(
            self,
            Self::DuplicateReplica(_) | Self::PartitionListMismatch(_) | Self::Config(_)
        )
    }
}
