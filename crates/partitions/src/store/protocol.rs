//! The protocol between a coordinator and its store: the operations
//! ([`Protocol`]), each with its request and reply in [`super::ops`], and the types
//! they share. Public only so that the sealed [`super::GroupStore`] can name it; not
//! reachable from outside the crate.
#![allow(unreachable_pub)]

use std::future::Future;
use std::time::Duration;

use leasehold_election::{BackendWarning, Fence, StoreError};
use tokio::sync::broadcast;

use super::ops::Op;
pub use super::ops::adopt::{Adopt, AdoptReply, AdoptStep, NotAdopted};
pub use super::ops::change::{AddReply, Change, RemoveReply};
pub use super::ops::claim::{ClaimReply, ClaimRequest};
pub use super::ops::drain::DrainReply;
pub use super::ops::handoff::Taken;
pub use super::ops::moves::{Move, MoveCause, Predecessor};
pub use super::ops::prefer::PreferReply;
pub use super::ops::read::SetPage;
pub use super::ops::release::GivenBack;
pub use super::ops::restore::RestoreStep;
pub use super::ops::tick::{Conflict, RosterUpdate, SessionReply, TickReply, TickRequest};
pub use super::ops::version::VersionStep;
pub use super::ops::weight::WeightReply;
use crate::keys::GroupKeys;

/// What a member is doing, as the others see it: the public [`ReplicaState`].
pub use super::status::ReplicaState;

/// How the group (this lifetime of it) came to exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// From a replica's configured list (a new group, or one Redis lost whose set no
    /// live replica had seen).
    Seed,
    /// From the set a live replica saw before Redis lost the group.
    Restore,
    /// Seeded, and being brought to the set a replica saw of an earlier lifetime of it
    /// (`adopt.lua`); `Restore` once done.
    Adopt,
    /// Written by an older version of the protocol.
    Unknown,
}

impl Origin {
    pub fn parse(s: &str) -> Self {
        match s {
            "seed" => Self::Seed,
            "restore" => Self::Restore,
            "adopt" => Self::Adopt,
            _ => Self::Unknown,
        }
    }
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
    /// This lifetime of the group (a random id, new when it is created).
    pub life: String,
    /// Bumped by every change to the set: names, weights, drains, list version.
    pub set_version: u64,
    /// The highest fence the group has issued.
    pub highest_fence: Fence,
    /// How this lifetime began.
    pub origin: Origin,
    /// The lease of the replica that created it.
    pub lease: Duration,
    /// How many partitions a restore is to bring back (0 unless restored).
    pub restore_count: usize,
    /// This incarnation of the group: new whenever it is created (seeded, restored, or
    /// taken over by a newer restore). A session lives in one incarnation only.
    pub incarnation: String,
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
            life: String::new(),
            set_version: 0,
            highest_fence: Fence(0),
            origin: Origin::Seed,
            lease: Duration::ZERO,
            restore_count: 0,
            incarnation: String::new(),
        }
    }
}

/// A live member as a tick saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub replica: String,
    pub state: ReplicaState,
    /// Time left on its session (as a status read found it; a tick's roster carries
    /// none, and says zero).
    pub left: Duration,
    /// Partitions its session holds.
    pub held: usize,
    /// Their weights summed (`held` unless the group is weighted).
    pub load: u64,
    /// Its capacity (1 unless it said otherwise).
    pub capacity: u32,
}

/// A term of a partition: the partition and the fence it was granted with. Releases
/// and regrants name terms, so that a late or repeated one touches only the term it was
/// meant for.
pub type Term = (String, Fence);

/// A term a claim granted: the partition, its fence, its weight.
pub type Granted = (String, Fence, u64);

/// A weight a session reports for its term of a partition: the partition, the term's
/// fence, the weight.
pub type Reported = (String, Fence, u64);

/// The protocol a group store speaks: one entry point for every operation
/// ([`Protocol::run`], each operation a type in [`super::ops`] that knows its script,
/// its reply and its in-memory twin), and the three things that are not scripts
/// (publishing, listening, the server's warnings).
pub trait Protocol: Sync {
    /// Runs `op`: its script on Redis, its twin in memory, behind the simulation's
    /// faults on a simulated link.
    fn run<O: Op>(
        &self,
        keys: &GroupKeys,
        op: &O,
    ) -> impl Future<Output = Result<O::Reply, StoreError>> + Send;

    /// Sends `message` to every replica listening to the group's notices
    /// ([`Protocol::notices`]), best effort (Redis pub/sub): the messages of warm moves.
    fn publish(
        &self,
        keys: &GroupKeys,
        message: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Notices published by releases, leaves, member state changes, additions and
    /// removals (`keys.notice` for this group;
    /// `leasehold_election::ext::ANY_RELEASE` when some may have been missed).
    fn notices(&self, keys: &GroupKeys) -> broadcast::Receiver<String>;

    /// Server settings that weaken the guarantees (logged once per store).
    fn warnings(&self) -> impl Future<Output = Result<Vec<BackendWarning>, StoreError>> + Send;
}
