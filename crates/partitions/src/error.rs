//! Errors of the partition coordinator and of the group admin.

use leasehold_election::{ConfigError, Stopped, StoreError};

use crate::config::GroupConfigError;

/// What a stopped coordinator's calls and waits return.
pub(crate) const STOPPED: Stopped = leasehold_election::ext::stopped("partition coordinator");

/// A result whose error is a [`PartitionsError`] unless another is named.
pub type Result<T, E = PartitionsError> = std::result::Result<T, E>;
use thiserror::Error;

/// Why a coordinator is not (fully) taking part in its group, or why an admin call
/// ([`crate::GroupAdmin`]) was refused.
///
/// [`PartitionsError::Store`] is retried by the coordinator on its next tick; every
/// other variant needs someone to change something.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum PartitionsError {
    /// Another live process heartbeats with this replica id. This replica claims
    /// nothing until that one stops heartbeating (a restarted replica waits at most one
    /// lease for its predecessor's heartbeat to expire).
    #[error(
        "replica id {0:?} is already live in this group from another process; this clears \
         once that process's session expires (within one lease of its last heartbeat), or \
         use another replica id"
    )]
    DuplicateReplica(String),
    /// A Redis call failed; retried on the next tick.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A name or duration broke one of the rules (an empty name, a control character,
    /// a hash-tag brace, a duplicate in one call...).
    #[error("invalid group configuration")]
    Config(#[from] GroupConfigError),
    /// The same partition was named twice in one call.
    #[error("partition {0:?} appears more than once")]
    DuplicatePartition(String),
    /// The partition is in the group already (nothing was added).
    #[error("partition {0:?} is already in the group")]
    AlreadyPresent(String),
    /// No such partition in the group (nothing was removed).
    #[error("partition {0:?} is not in the group")]
    UnknownPartition(String),
    /// Removing these would leave the group without partitions (nothing was removed).
    #[error("a group keeps at least one partition; nothing was removed")]
    LastPartition,
    /// The replica has no live session in the group.
    #[error("replica {0:?} is not live in the group")]
    UnknownReplica(String),
    /// Draining this replica would leave no replica taking part: every partition would
    /// go unowned (nothing was changed; `GroupAdmin::drain_forced` does it anyway).
    #[error("replica {0:?} is the last one taking part in the group; nothing was drained")]
    LastActiveReplica(String),
    /// The group does not exist (no replica ever created it, or Redis lost it).
    #[error("group {0:?} does not exist")]
    UnknownGroup(String),
    /// A weight outside 1 ..= [`crate::MAX_WEIGHT`] (nothing was changed).
    #[error("a partition weight must be between 1 and {max}, got {0}", max = crate::MAX_WEIGHT)]
    InvalidWeight(u64),
    /// A what-if change ([`crate::GroupAdmin::plan`]) that cannot happen: a replica
    /// added that is live already, a replica named twice (added, removed or drained),
    /// or nobody left taking part. Nothing is read beyond the group's status.
    #[error("invalid what-if: {0}")]
    InvalidWhatIf(String),
    /// The coordinator has stopped.
    #[error(transparent)]
    Stopped(Stopped),
}

impl From<ConfigError> for PartitionsError {
    /// A name or lease that broke a rule: [`PartitionsError::Config`].
    fn from(e: ConfigError) -> Self {
        Self::Config(GroupConfigError::Invalid(e))
    }
}

impl PartitionsError {
    /// Whether this error keeps the replica out of its group until someone changes
    /// something (another process, or the configuration), as opposed to a Redis fault
    /// that is retried.
    pub fn keeps_out(&self) -> bool {
        matches!(self, Self::DuplicateReplica(_) | Self::Config(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 45: the message says when a duplicate id clears.
    #[test]
    fn a_duplicate_replica_says_when_it_clears() {
        let e = PartitionsError::DuplicateReplica("r1".to_owned()).to_string();
        assert!(e.contains("\"r1\""), "{e}");
        assert!(e.contains("within one lease"), "{e}");
    }

    /// Issue 59: an error's text says what failed at its level and its source the
    /// cause, so the chain shows the Redis client's message exactly once.
    #[test]
    fn a_chain_shows_the_redis_cause_once() {
        use std::error::Error as _;
        use std::sync::Arc;

        use leasehold_election::ErrorChain;
        use leasehold_election::redis::{ErrorKind, RedisError, ServerErrorKind};

        const CAUSE: &str = "the disk is on fire";
        let redis = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "ERR",
            CAUSE.to_owned(),
        ));
        let store = StoreError::Server(Arc::new(redis));
        assert!(!store.to_string().contains(CAUSE), "{store}");
        let e = PartitionsError::from(store);
        assert!(!e.to_string().contains(CAUSE), "{e}");
        assert!(e.source().is_some(), "the Redis error is the source");
        let text = ErrorChain(&e).to_string();
        assert_eq!(text.matches(CAUSE).count(), 1, "{text}");
        assert!(text.starts_with("redis error: "), "{text}");

        // Wrapped once more: the readiness probe's text.
        let refused = crate::NotReady::Refused(e);
        let text = ErrorChain(&refused).to_string();
        assert_eq!(text.matches(CAUSE).count(), 1, "{text}");
        assert!(
            text.starts_with("kept out of the group: redis error: "),
            "{text}"
        );
    }

    /// A group configuration error is the source of `PartitionsError::Config`, not
    /// repeated in its text.
    #[test]
    fn a_config_error_is_the_source() {
        let e = PartitionsError::Config(GroupConfigError::EmptyPartitionList);
        assert_eq!(e.to_string(), "invalid group configuration");
        let text = leasehold_election::ErrorChain(&e).to_string();
        assert_eq!(
            text.matches("the partition list is empty").count(),
            1,
            "{text}"
        );
    }
}
