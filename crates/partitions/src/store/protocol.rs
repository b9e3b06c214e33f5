//! The protocol between a coordinator and its store: the operations
//! ([`Protocol`]), each with its request and reply in [`super::ops`], and the types
//! they share. Public only so that the sealed [`super::GroupStore`] can name it; not
//! reachable from outside the crate.
#![allow(unreachable_pub)]

use std::future::Future;
use std::time::Duration;

use leasehold_election::{BackendWarning, Fence, StoreError};
use tokio::sync::broadcast;

pub use super::ops::adopt::{Adopt, AdoptReply, AdoptStep, NotAdopted};
pub use super::ops::change::{AddReply, Change, RemoveReply};
pub use super::ops::claim::{ClaimReply, ClaimRequest};
pub use super::ops::drain::DrainReply;
pub use super::ops::handoff::Taken;
pub use super::ops::moves::{Move, MoveCause, Predecessor};
pub use super::ops::prefer::PreferReply;
pub use super::ops::read::{SetPage, StatusHead};
pub use super::ops::release::GivenBack;
pub use super::ops::restore::RestoreStep;
use super::ops::routes::RouteRead;
pub use super::ops::tick::{Conflict, RosterUpdate, SessionReply, TickReply, TickRequest};
pub use super::ops::version::VersionStep;
pub use super::ops::weight::WeightReply;
use super::status::PartitionOwner;
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

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Seed => "seed",
            Self::Restore => "restore",
            Self::Adopt => "adopt",
            Self::Unknown => "",
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

pub trait Protocol {
    /// Heartbeat: start, resume or extend the session, reap ended sessions, read the
    /// group. Safe to retry.
    fn tick(
        &self,
        keys: &GroupKeys,
        req: &TickRequest,
    ) -> impl Future<Output = Result<TickReply, StoreError>> + Send;

    /// Takes up to `count` free partitions (or regrants terms the session holds), and
    /// extends the session. Safe to retry with the same seq.
    fn claim(
        &self,
        keys: &GroupKeys,
        req: &ClaimRequest,
    ) -> impl Future<Output = Result<ClaimReply, StoreError>> + Send;

    /// Gives back the terms of `session` among `terms`, keeping the state each leaves
    /// its successor for `state_ttl` and reserving each one handed to a named receiver
    /// for it for `hold`; one flag per term (true: no term of the session holds it and
    /// no later one was granted). Safe to retry.
    fn release(
        &self,
        keys: &GroupKeys,
        session: &str,
        terms: &[GivenBack],
        state_ttl: Duration,
        hold: Duration,
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send;

    /// Takes the state each named term (partition, fence of the previous term) left
    /// for the next one. Safe to retry for a while ([`Taken`]).
    fn take_hand_offs(
        &self,
        keys: &GroupKeys,
        terms: &[Term],
    ) -> impl Future<Output = Result<Vec<Taken>, StoreError>> + Send;

    /// Ends `replica`'s session `session` (if it is the current one and `process` holds
    /// it) and frees what it still holds. Safe to retry.
    fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        process: &str,
        session: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Adds partitions to the set (see [`Change`]).
    fn add(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> impl Future<Output = Result<AddReply, StoreError>> + Send;

    /// Removes partitions from the set; their owners are told to give them up.
    fn remove(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> impl Future<Output = Result<RemoveReply, StoreError>> + Send;

    /// Up to `limit` partition names from position `offset` of the set.
    fn list_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

    /// The set as a replica keeps it (names with weights, drains, versions), a page;
    /// `None` if the group does not exist.
    fn set_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> impl Future<Output = Result<Option<SetPage>, StoreError>> + Send;

    /// A step of applying a versioned list.
    fn set_version(
        &self,
        keys: &GroupKeys,
        version: u64,
        step: VersionStep<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// A step of restoring a group Redis lost; false if another restore (or seed) won.
    fn restore(
        &self,
        keys: &GroupKeys,
        step: &RestoreStep,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// A step of bringing a seeded group to a replica's copy of an earlier lifetime.
    fn adopt(
        &self,
        keys: &GroupKeys,
        adopt: &Adopt,
    ) -> impl Future<Output = Result<AdoptReply, StoreError>> + Send;

    /// Drains (or undrains) `replica`; `op` names an operator's request, whose reply
    /// is kept for a retry.
    fn drain(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        replica: &str,
        on: bool,
        force: bool,
    ) -> impl Future<Output = Result<DrainReply, StoreError>> + Send;

    /// Sets the weights `session` reports for the terms it holds (its damped loads);
    /// one flag per weight (true: the partition now has it; false: the session no
    /// longer holds that term). Safe to retry.
    fn report(
        &self,
        keys: &GroupKeys,
        session: &str,
        weights: &[Reported],
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send;

    /// The terms the session holds, with their weights.
    fn held(
        &self,
        keys: &GroupKeys,
        session: &str,
    ) -> impl Future<Output = Result<Vec<Granted>, StoreError>> + Send;

    /// Sets a partition's weight (the group balances by weight from then on); the
    /// owner's load follows at once. `op`: the operator's request id, for a retry.
    fn set_weight(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        weight: u64,
    ) -> impl Future<Output = Result<WeightReply, StoreError>> + Send;

    /// Prefers `partition` on `replica` (`None`: removes its preference); replicas
    /// read it with the set. `op`: the operator's request id, for a retry.
    fn prefer(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        replica: Option<&str>,
    ) -> impl Future<Output = Result<PreferReply, StoreError>> + Send;

    /// One partition's owner; `None` if it is not in the set.
    fn owner(
        &self,
        keys: &GroupKeys,
        partition: &str,
    ) -> impl Future<Output = Result<Option<PartitionOwner>, StoreError>> + Send;

    /// Up to `limit` entries of the ledger of moves after the one with id `after`
    /// (from the oldest kept if `None`), oldest first.
    fn moves(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Move>, StoreError>> + Send;

    /// The newest `limit` entries of the ledger of moves, oldest first.
    fn newest_moves(
        &self,
        keys: &GroupKeys,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Move>, StoreError>> + Send;

    /// What a router reads: every partition's live owner (`after` = `None`), or the
    /// moves after the ledger entry `after` (at most `limit`); `None` if the group does
    /// not exist.
    fn routes(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<RouteRead>, StoreError>> + Send;

    /// Takes up to `want` moves out of the group's move budget (`budget` moves per
    /// `window`, on the server's clock); returns how many may be made now.
    fn take_budget(
        &self,
        keys: &GroupKeys,
        want: usize,
        budget: u32,
        window: Duration,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// The group without its partitions; `None` if it does not exist.
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
