//! The group protocol and its two implementations: Redis scripts ([`redis`]) and the
//! same rules in process memory ([`memory`]).
//!
//! A replica's partitions hang off its **session**: one entry in the group's sorted set
//! of members, scored by its expiry. A partition is held while its holder's session
//! lives; one heartbeat per replica per renew interval extends all of them at once, and
//! a session that expires (or leaves) frees all its partitions at once. Partitions
//! without a live owner wait in a sorted set of free partitions, oldest first, so
//! claiming k of them is O(k log P), and nothing in a steady tick grows with P.

use std::future::Future;
use std::time::Duration;

use leasehold_election::{Fence, StoreError};
use tokio::sync::broadcast;

use crate::keys::GroupKeys;

#[cfg(test)]
mod conformance;
pub(crate) mod memory;
pub(crate) mod redis;

// Batch sizes bound how long one script runs in Redis (every other client of that
// server waits meanwhile): at 250 partitions a script stays around a millisecond on the
// project's machine. They should not be considered stable.

/// How many partitions one claim script takes at most.
pub(crate) const CLAIM_BATCH: usize = 100;
/// How many partitions one release script gives back at most.
pub(crate) const RELEASE_BATCH: usize = 250;
/// How many names one seeding script stores.
pub(crate) const SEED_CHUNK: usize = 500;
/// How many partitions of ended sessions one script moves to the free set at most.
pub(crate) const DRAIN_BUDGET: usize = 250;
/// How many partitions one status page reads.
pub(crate) const STATUS_PAGE: usize = 1_000;

/// A store that can host partition groups: [`leasehold_election::RedisStore`] (one
/// script per operation) and [`crate::MemoryGroupStore`]. Sealed.
pub trait GroupBackend: protocol::Protocol + Clone + Send + Sync + 'static {}

impl GroupBackend for leasehold_election::RedisStore {}
impl GroupBackend for crate::MemoryGroupStore {}

/// The whole group as stored, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    /// Every partition with its owner, in the configured order. On a large group this
    /// is read in pages of a thousand, so it is not one atomic snapshot.
    pub partitions: Vec<PartitionOwner>,
    /// Live replicas with how many partitions each holds (`None`: still settling).
    pub replicas: Vec<(String, Option<usize>)>,
    /// Time left on each live replica's session, in the order of `replicas`: its
    /// partitions are held that long unless it heartbeats again. Read in one script
    /// with `replicas`, before the partitions.
    pub sessions: Vec<(String, Duration)>,
}

impl GroupStatus {
    /// Partitions owned per live replica, counted from the partitions themselves.
    pub fn owned_counts(&self) -> Vec<(String, usize)> {
        let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for p in &self.partitions {
            if let Some(owner) = p.owner.as_deref() {
                *counts.entry(owner).or_default() += 1;
            }
        }
        self.replicas
            .iter()
            .map(|(r, _)| (r.clone(), counts.get(r.as_str()).copied().unwrap_or(0)))
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

/// One partition's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOwner {
    /// The partition.
    pub partition: String,
    /// Its owner's replica id, if a live session holds it.
    pub owner: Option<String>,
    /// The fence of the current (or last) term.
    pub fence: Fence,
    /// Time left on the owner's session (when it is not renewed).
    pub remaining: Option<Duration>,
}

/// The protocol between a coordinator and its store. Public only so that the sealed
/// [`GroupBackend`] can name it; not reachable from outside the crate.
#[allow(unreachable_pub)]
pub(crate) mod protocol {
    use super::*;

    /// What a member is doing, as the others see it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MemberState {
        /// Heartbeating, claiming nothing yet; counts towards N.
        Settling,
        /// Taking part.
        Active,
        /// Handing everything back before it goes; no longer counts towards N.
        Leaving,
    }

    impl MemberState {
        pub fn as_str(self) -> &'static str {
            match self {
                Self::Settling => "settling",
                Self::Active => "active",
                Self::Leaving => "leaving",
            }
        }

        pub fn parse(s: &str) -> Self {
            match s {
                "active" => Self::Active,
                "leaving" => Self::Leaving,
                _ => Self::Settling,
            }
        }
    }

    /// One replica's heartbeat.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TickRequest {
        pub replica: String,
        /// The session this heartbeat is for (`<replica>:<hex>`).
        pub token: String,
        /// Start the session (true) or extend it (false). A session that has ended is
        /// never extended again: the replica starts a new one with a new token.
        pub join: bool,
        pub state: MemberState,
        /// Session time-to-live: the lease.
        pub ttl: Duration,
        /// Digest of the partition list.
        pub digest: String,
    }

    /// What became of the heartbeat's session.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SessionReply {
        /// Live until at least the tick's server time + ttl.
        Live,
        /// Ended (expired, or Redis lost it): every partition it held is gone.
        Lost,
        /// Not admitted.
        Refused(Conflict),
    }

    /// Something that keeps a replica out of its group.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Conflict {
        /// Another live session uses this replica id.
        DuplicateReplica,
        /// Live members use a different partition list.
        PartitionListMismatch,
    }

    /// Whether the group's partition list must be stored first.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SeedNeed {
        /// Stored.
        No,
        /// Store it from `offset` on (a new group, or one a seeder left half done).
        From(usize),
        /// The group has another list and nobody else is live: replace it.
        Replace,
    }

    /// A live member as a tick saw it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct MemberInfo {
        pub replica: String,
        pub state: MemberState,
        /// Time left on its session.
        pub left: Duration,
        /// Partitions its session holds.
        pub held: usize,
    }

    /// What a tick found.
    #[derive(Debug, Clone)]
    pub struct TickReply {
        pub session: SessionReply,
        pub seed: SeedNeed,
        /// Live members, this one included once admitted.
        pub members: Vec<MemberInfo>,
        /// Partitions with no live owner (free, or not stored yet).
        pub unowned: usize,
        /// Time left before the group grants anything (after it was created, or
        /// re-created when Redis lost its data).
        pub grant_wait: Duration,
        /// Sessions that ended holding partitions not yet freed.
        pub draining: usize,
    }

    /// A batch claim.
    #[derive(Debug, Clone)]
    pub struct ClaimRequest {
        pub replica: String,
        pub token: String,
        pub ttl: Duration,
        /// Take at most this many (oldest free first).
        pub count: usize,
        /// Every fence issued is at least this (the highest this replica has seen + 1).
        pub floor: Fence,
    }

    /// What a claim got.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum ClaimReply {
        /// These partitions with their new fences; `unowned` are left.
        Claimed {
            partitions: Vec<(String, Fence)>,
            unowned: usize,
        },
        /// The group grants nothing for this long yet.
        Wait(Duration),
        /// The session has ended.
        Lost,
    }

    /// One chunk of the partition list.
    #[derive(Debug, Clone)]
    pub struct SeedRequest {
        pub replica: String,
        pub digest: String,
        pub count: usize,
        pub offset: usize,
        /// Replace another list (only if no other member is live).
        pub replace: bool,
        /// No partition is granted before this long after the group is created.
        pub grant_delay: Duration,
        pub names: Vec<String>,
    }

    /// What a seeding chunk did.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SeedReply {
        /// Names stored so far.
        Seeded(usize),
        /// Someone else is storing the list; it has this many so far.
        Moved(usize),
        /// Live members use another list.
        Mismatch,
    }

    /// The head of a status read: everything but the partitions.
    #[derive(Debug, Clone)]
    pub struct StatusHead {
        pub count: usize,
        pub members: Vec<MemberInfo>,
    }

    pub trait Protocol {
        /// Heartbeat: start or extend the session, reap ended sessions, read the group.
        fn tick(
            &self,
            keys: &GroupKeys,
            req: &TickRequest,
        ) -> impl Future<Output = Result<TickReply, StoreError>> + Send;

        /// Takes up to `count` free partitions for the session (and extends it).
        fn claim(
            &self,
            keys: &GroupKeys,
            req: &ClaimRequest,
        ) -> impl Future<Output = Result<ClaimReply, StoreError>> + Send;

        /// Gives back those of `names` that `token` holds; one flag per name.
        fn release(
            &self,
            keys: &GroupKeys,
            token: &str,
            names: &[String],
        ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send;

        /// Ends the session `token` of `replica` (if it is the current one) and frees
        /// what it still holds.
        fn leave(
            &self,
            keys: &GroupKeys,
            replica: &str,
            token: &str,
        ) -> impl Future<Output = Result<(), StoreError>> + Send;

        /// Stores one chunk of the partition list.
        fn seed(
            &self,
            keys: &GroupKeys,
            req: &SeedRequest,
        ) -> impl Future<Output = Result<SeedReply, StoreError>> + Send;

        /// The partitions the session `token` holds (to reconcile after a lost reply).
        fn held(
            &self,
            keys: &GroupKeys,
            token: &str,
        ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

        /// One partition's owner.
        fn owner(
            &self,
            keys: &GroupKeys,
            partition: &str,
        ) -> impl Future<Output = Result<PartitionOwner, StoreError>> + Send;

        /// The group without its partitions; `None` if it was never created.
        fn status_head(
            &self,
            keys: &GroupKeys,
        ) -> impl Future<Output = Result<Option<StatusHead>, StoreError>> + Send;

        /// Up to `limit` partitions from position `offset`, with their owners.
        fn status_page(
            &self,
            keys: &GroupKeys,
            offset: usize,
            limit: usize,
        ) -> impl Future<Output = Result<Vec<PartitionOwner>, StoreError>> + Send;

        /// Notices published by releases and leaves (`keys.notice` for this group;
        /// `leasehold_election::store::ANY_RELEASE` when some may have been missed).
        fn notices(&self, keys: &GroupKeys) -> broadcast::Receiver<String>;

        /// Server settings that weaken the guarantees (logged once per store).
        fn warnings(
            &self,
        ) -> impl Future<Output = Result<Vec<leasehold_election::BackendWarning>, StoreError>> + Send;
    }
}

/// Reads the whole group: the head, then the partitions page by page.
pub(crate) async fn read_status<B: GroupBackend>(
    backend: &B,
    keys: &GroupKeys,
) -> Result<Option<GroupStatus>, StoreError> {
    use protocol::MemberState;
    let Some(head) = backend.status_head(keys).await? else {
        return Ok(None);
    };
    let mut partitions = Vec::with_capacity(head.count);
    while partitions.len() < head.count {
        let page = backend
            .status_page(keys, partitions.len(), STATUS_PAGE)
            .await?;
        if page.is_empty() {
            break;
        }
        partitions.extend(page);
    }
    let sessions = head
        .members
        .iter()
        .map(|m| (m.replica.clone(), m.left))
        .collect();
    let replicas = head
        .members
        .into_iter()
        .map(|m| {
            let held = (m.state != MemberState::Settling).then_some(m.held);
            (m.replica, held)
        })
        .collect();
    Ok(Some(GroupStatus {
        partitions,
        replicas,
        sessions,
    }))
}
