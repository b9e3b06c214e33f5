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
// server waits meanwhile): a claim of 25 partitions or an addition of 250 names stays
// within a few milliseconds on the project's machine at 100,000 partitions. They
// should not be considered stable.

/// How many partitions one claim script takes at most.
pub(crate) const CLAIM_BATCH: usize = 25;
/// How many partitions one release script gives back at most.
pub(crate) const RELEASE_BATCH: usize = 250;
/// How many names one script adds or removes (seeding, applying a list, the admin).
pub(crate) const SET_CHUNK: usize = 250;
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
    /// Every partition with its owner, in the order they were added. On a large group
    /// this is read in pages of a thousand, so it is not one atomic snapshot.
    pub partitions: Vec<PartitionOwner>,
    /// Live replicas with how many partitions each holds (`None`: still settling).
    pub replicas: Vec<(String, Option<usize>)>,
    /// Every live replica in detail, in the order of `replicas`. Read in one script
    /// with `replicas`, before the partitions.
    pub members: Vec<ReplicaStatus>,
    /// The version of the last versioned partition list applied to the group (0 if
    /// none: the set was seeded, or changed through [`crate::GroupAdmin`] only).
    pub list_version: u64,
    /// Whether the group balances by weight: a weight was set
    /// ([`crate::GroupAdmin::set_weight`]), or its replicas' capacities differ.
    pub weighted: bool,
    /// The partitions' weights, summed (P in an unweighted group).
    pub total_weight: u64,
}

/// What a live replica of a group is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaState {
    /// Just joined: heartbeating, claiming nothing yet.
    Settling,
    /// Taking part.
    Active,
    /// Shutting down: handing its partitions back.
    Leaving,
    /// Drained by an operator: handing its partitions over, claiming nothing.
    Draining,
    /// Restarting: its partitions are kept for its return (`rejoin_grace`).
    Away,
}

/// One live replica, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// The replica id.
    pub replica: String,
    /// What it is doing.
    pub state: ReplicaState,
    /// Partitions its session holds.
    pub held: usize,
    /// Time left on its session: its partitions are held that long unless it
    /// heartbeats again.
    pub session_left: Duration,
    /// The process using it (`host pid`), as it said when it joined.
    pub instance: String,
    /// Whether an operator drained it.
    pub drained: bool,
    /// The weights of its partitions, summed (its partition count in an unweighted
    /// group).
    pub load: u64,
    /// Its capacity ([`crate::GroupConfigBuilder::capacity`]).
    pub capacity: u32,
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
    /// How long its owner has held it (since the claim that won it).
    pub held_for: Option<Duration>,
    /// Its weight (1 unless set).
    pub weight: u64,
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
        /// Drained by an operator: handing everything over, claiming nothing; not
        /// counted towards N.
        Draining,
        /// Gone for a restart, its session (and partitions) kept for its return.
        Away,
    }

    impl MemberState {
        pub fn as_str(self) -> &'static str {
            match self {
                Self::Settling => "settling",
                Self::Active => "active",
                Self::Leaving => "leaving",
                Self::Draining => "draining",
                Self::Away => "away",
            }
        }

        pub fn parse(s: &str) -> Self {
            match s {
                "active" => Self::Active,
                "leaving" => Self::Leaving,
                "draining" => Self::Draining,
                "away" => Self::Away,
                _ => Self::Settling,
            }
        }

        /// Whether the member counts towards N (it will hold its share).
        pub fn counts(self) -> bool {
            matches!(self, Self::Settling | Self::Active | Self::Away)
        }
    }

    /// One replica's heartbeat.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TickRequest {
        pub replica: String,
        /// This replica's capacity (stored when it joins).
        pub capacity: u32,
        /// The session this heartbeat is for (`<replica>:<hex>`).
        pub token: String,
        /// Start the session (true) or extend it (false). A session that has ended is
        /// never extended again: the replica starts a new one with a new token. A join
        /// finding its replica's session `away` resumes it instead.
        pub join: bool,
        pub state: MemberState,
        /// Session time-to-live: the lease (the rejoin grace for the last tick before a
        /// sticky restart).
        pub ttl: Duration,
        /// The process, for operators (`host pid`).
        pub instance: String,
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
    }

    /// The group's partition set, as stored.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SetInfo {
        /// Partitions in the set.
        pub count: usize,
        /// The version of the last versioned list applied (0: none).
        pub version: u64,
        /// That list's digest.
        pub digest: String,
        /// A weight was ever set: loads are weights summed, not counts.
        pub weighted: bool,
        /// The weights summed (`count` unless weighted).
        pub total_weight: u64,
        /// The largest weight (1 unless weighted).
        pub max_weight: u64,
        /// Bumped by every weight change.
        pub weights_version: u64,
    }

    impl SetInfo {
        /// An unweighted set of `count` partitions at list `version`.
        pub fn plain(count: usize, version: u64, digest: &str) -> Self {
            Self {
                count,
                version,
                digest: digest.to_owned(),
                weighted: false,
                total_weight: count as u64,
                max_weight: 1,
                weights_version: 0,
            }
        }
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
        /// Their weights summed (`held` unless the group is weighted).
        pub load: u64,
        /// Its capacity (1 unless it said otherwise).
        pub capacity: u32,
    }

    /// What a tick found.
    #[derive(Debug, Clone)]
    pub struct TickReply {
        pub session: SessionReply,
        /// The token of the `away` session this join resumed: from now on the replica's.
        pub resumed: Option<String>,
        /// The partition set; `None` if the group does not exist (never created, or
        /// Redis lost it).
        pub set: Option<SetInfo>,
        /// Live members, this one included once admitted.
        pub members: Vec<MemberInfo>,
        /// Partitions with no live owner (free, or held by ended sessions).
        pub unowned: usize,
        /// Time left before the group grants anything (after it was created, or
        /// created again when Redis lost its data).
        pub grant_wait: Duration,
        /// Sessions that ended holding partitions not yet freed.
        pub draining: usize,
        /// An operator drained this replica's session.
        pub drained: bool,
        /// Partitions this session holds and must give up, with why (`removed`).
        pub revoked: Vec<(String, String)>,
        /// Partitions held by sessions this tick found expired (their replica crashed,
        /// was killed or paused past its lease): each is counted by one tick only.
        pub expired: usize,
    }

    /// A batch claim of free partitions, or (with `regrant`) new terms for partitions
    /// the session already holds (a resumed session).
    #[derive(Debug, Clone)]
    pub struct ClaimRequest {
        pub replica: String,
        pub token: String,
        pub ttl: Duration,
        /// Take at most this many free partitions (oldest free first).
        pub count: usize,
        /// Every fence issued is at least this (the highest this replica has seen + 1).
        pub floor: Fence,
        /// Instead of free partitions: these, if the session holds them.
        pub regrant: Vec<String>,
        /// A weighted claim: take the free partitions (oldest first, among the next
        /// `count`) whose weights fit into this much room. `None`: the first `count`.
        pub room: Option<u64>,
        /// With a room: if none fits, take the first free one anyway.
        pub fallback: bool,
    }

    /// What a claim got.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum ClaimReply {
        /// These partitions with their new fences and weights; `unowned` are left.
        Claimed {
            partitions: Vec<(String, Fence, u64)>,
            unowned: usize,
        },
        /// The group grants nothing for this long yet.
        Wait(Duration),
        /// The session has ended.
        Lost,
    }

    /// How an addition or a removal treats the set it finds.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Change {
        /// An operator's change: nothing if one name is already there (an addition) or
        /// unknown, or if the set would be empty (a removal).
        Strict,
        /// Whatever is not done yet (creating a group from a replica's list).
        Ensure,
        /// As `Ensure`, but only while the group's list version is this one: a newer
        /// list applied meanwhile wins.
        Versioned(u64),
    }

    /// A step of applying a versioned list.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum VersionStep<'a> {
        /// Takes the version (if the group's is older, or this one is still being
        /// applied), leaving the digest empty until `Done`: nobody else applies an older
        /// list from now on, and one that is newer stops this one.
        Begin,
        /// The list is applied: records its digest, if the group is still at this
        /// version.
        Done(&'a str),
    }

    /// What adding partitions did.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum AddReply {
        /// This many were new.
        Added(usize),
        /// (strict) This one is in the set already; nothing was added.
        Exists(String),
        /// (versioned) The group is at another list version now; nothing was added.
        Stale,
    }

    /// What removing partitions did.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum RemoveReply {
        /// This many were removed.
        Removed(usize),
        /// (strict) This one is not in the set; nothing was removed.
        Unknown(String),
        /// (strict) It would leave the set empty; nothing was removed.
        Last,
        /// (versioned) The group is at another list version now; nothing was removed.
        Stale,
    }

    /// What setting a weight did.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum WeightReply {
        /// Set; this was the weight before.
        Set(u64),
        /// The partition is not in the set.
        Unknown,
    }

    /// The head of a status read: everything but the partitions.
    #[derive(Debug, Clone)]
    pub struct StatusHead {
        pub set: SetInfo,
        pub members: Vec<MemberInfo>,
        /// Each member's process (`host pid`), in the order of `members`.
        pub instances: Vec<String>,
        /// Members an operator drained.
        pub drained: Vec<String>,
    }

    pub trait Protocol {
        /// Heartbeat: start, resume or extend the session, reap ended sessions, read the
        /// group.
        fn tick(
            &self,
            keys: &GroupKeys,
            req: &TickRequest,
        ) -> impl Future<Output = Result<TickReply, StoreError>> + Send;

        /// Takes up to `count` free partitions (or regrants `regrant`) for the session,
        /// and extends it.
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

        /// Adds partitions to the set (creating the group, which then grants nothing for
        /// `grant_delay`, if it does not exist). `strict`: refuse if one is there
        /// already.
        fn add(
            &self,
            keys: &GroupKeys,
            mode: Change,
            grant_delay: Duration,
            names: &[String],
        ) -> impl Future<Output = Result<AddReply, StoreError>> + Send;

        /// Removes partitions from the set; their owners are told to give them up.
        /// `strict`: refuse an unknown one, or emptying the set.
        fn remove(
            &self,
            keys: &GroupKeys,
            mode: Change,
            names: &[String],
        ) -> impl Future<Output = Result<RemoveReply, StoreError>> + Send;

        /// Up to `limit` partition names from position `offset` of the set.
        fn list_page(
            &self,
            keys: &GroupKeys,
            offset: usize,
            limit: usize,
        ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

        /// Records that the list `version` (with `digest`) is applied, if it is newer.
        fn set_version(
            &self,
            keys: &GroupKeys,
            version: u64,
            step: VersionStep<'_>,
        ) -> impl Future<Output = Result<bool, StoreError>> + Send;

        /// Drains (or undrains) `replica`'s current session; false if it is not live.
        fn drain(
            &self,
            keys: &GroupKeys,
            replica: &str,
            on: bool,
        ) -> impl Future<Output = Result<bool, StoreError>> + Send;

        /// The partitions the session `token` holds, with their weights (to reconcile,
        /// to resume, or after a weight change).
        fn held(
            &self,
            keys: &GroupKeys,
            token: &str,
        ) -> impl Future<Output = Result<Vec<(String, u64)>, StoreError>> + Send;

        /// Sets a partition's weight (the group balances by weight from then on); the
        /// owner's load follows at once.
        fn set_weight(
            &self,
            keys: &GroupKeys,
            partition: &str,
            weight: u64,
        ) -> impl Future<Output = Result<WeightReply, StoreError>> + Send;

        /// One partition's owner; `None` if it is not in the set.
        fn owner(
            &self,
            keys: &GroupKeys,
            partition: &str,
        ) -> impl Future<Output = Result<Option<PartitionOwner>, StoreError>> + Send;

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

        /// Notices published by releases, leaves, member state changes, additions and
        /// removals (`keys.notice` for this group;
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
    let mut partitions = Vec::with_capacity(head.set.count);
    while partitions.len() < head.set.count {
        let page = backend
            .status_page(keys, partitions.len(), STATUS_PAGE)
            .await?;
        if page.is_empty() {
            break;
        }
        partitions.extend(page);
    }
    let members: Vec<ReplicaStatus> = head
        .members
        .iter()
        .zip(
            head.instances
                .iter()
                .chain(std::iter::repeat(&String::new())),
        )
        .map(|(m, instance)| ReplicaStatus {
            replica: m.replica.clone(),
            state: match m.state {
                MemberState::Settling => ReplicaState::Settling,
                MemberState::Active => ReplicaState::Active,
                MemberState::Leaving => ReplicaState::Leaving,
                MemberState::Draining => ReplicaState::Draining,
                MemberState::Away => ReplicaState::Away,
            },
            held: m.held,
            session_left: m.left,
            instance: instance.clone(),
            drained: head.drained.contains(&m.replica),
            load: m.load,
            capacity: m.capacity,
        })
        .collect();
    let weighted = head.set.weighted
        || head
            .members
            .windows(2)
            .any(|w| w[0].capacity != w[1].capacity);
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
        members,
        list_version: head.set.version,
        weighted,
        total_weight: head.set.total_weight,
    }))
}
