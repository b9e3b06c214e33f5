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
use super::ops::{self, Op};
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

/// The protocol a group store speaks: one entry point for every operation
/// ([`Protocol::run`], each operation a type in [`super::ops`] that knows its script,
/// its reply and its in-memory twin), and the three things that are not scripts
/// (publishing, listening, the server's warnings). The provided methods are the
/// operations under their old names, kept for the call sites.
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

    /// [`TickRequest`].
    fn tick(
        &self,
        keys: &GroupKeys,
        req: &TickRequest,
    ) -> impl Future<Output = Result<TickReply, StoreError>> + Send {
        self.run(keys, req)
    }

    /// [`ClaimRequest`].
    fn claim(
        &self,
        keys: &GroupKeys,
        req: &ClaimRequest,
    ) -> impl Future<Output = Result<ClaimReply, StoreError>> + Send {
        self.run(keys, req)
    }

    /// [`ops::release::Release`].
    fn release(
        &self,
        keys: &GroupKeys,
        session: &str,
        terms: &[GivenBack],
        state_ttl: Duration,
        hold: Duration,
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send {
        let op = ops::release::Release {
            session: session.to_owned(),
            terms: terms.to_vec(),
            state_ttl,
            hold,
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::handoff::TakeHandOffs`].
    fn take_hand_offs(
        &self,
        keys: &GroupKeys,
        terms: &[Term],
    ) -> impl Future<Output = Result<Vec<Taken>, StoreError>> + Send {
        let op = ops::handoff::TakeHandOffs(terms.to_vec());
        async move { self.run(keys, &op).await }
    }

    /// [`ops::leave::Leave`].
    fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        process: &str,
        session: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let op = ops::leave::Leave {
            replica: replica.to_owned(),
            process: process.to_owned(),
            session: session.to_owned(),
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::change::Add`].
    fn add(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> impl Future<Output = Result<AddReply, StoreError>> + Send {
        let op = ops::change::Add {
            mode: mode.clone(),
            names: names.to_vec(),
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::change::Remove`].
    fn remove(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> impl Future<Output = Result<RemoveReply, StoreError>> + Send {
        let op = ops::change::Remove {
            mode: mode.clone(),
            names: names.to_vec(),
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::read::ListPage`].
    fn list_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        async move { self.run(keys, &ops::read::ListPage { offset, limit }).await }
    }

    /// [`ops::read::ReadSetPage`].
    fn set_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> impl Future<Output = Result<Option<SetPage>, StoreError>> + Send {
        async move {
            self.run(keys, &ops::read::ReadSetPage { offset, limit })
                .await
        }
    }

    /// [`ops::version::SetVersion`].
    fn set_version(
        &self,
        keys: &GroupKeys,
        version: u64,
        step: VersionStep<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let op = ops::version::SetVersion::new(version, step);
        async move { self.run(keys, &op).await }
    }

    /// [`RestoreStep`].
    fn restore(
        &self,
        keys: &GroupKeys,
        step: &RestoreStep,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        self.run(keys, step)
    }

    /// [`Adopt`].
    fn adopt(
        &self,
        keys: &GroupKeys,
        adopt: &Adopt,
    ) -> impl Future<Output = Result<AdoptReply, StoreError>> + Send {
        self.run(keys, adopt)
    }

    /// [`ops::drain::Drain`].
    fn drain(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        replica: &str,
        on: bool,
        force: bool,
    ) -> impl Future<Output = Result<DrainReply, StoreError>> + Send {
        let op = ops::drain::Drain {
            op: op.map(str::to_owned),
            replica: replica.to_owned(),
            on,
            force,
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::report::Report`].
    fn report(
        &self,
        keys: &GroupKeys,
        session: &str,
        weights: &[Reported],
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send {
        let op = ops::report::Report {
            session: session.to_owned(),
            weights: weights.to_vec(),
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::held::Held`].
    fn held(
        &self,
        keys: &GroupKeys,
        session: &str,
    ) -> impl Future<Output = Result<Vec<Granted>, StoreError>> + Send {
        let op = ops::held::Held(session.to_owned());
        async move { self.run(keys, &op).await }
    }

    /// [`ops::weight::SetWeight`].
    fn set_weight(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        weight: u64,
    ) -> impl Future<Output = Result<WeightReply, StoreError>> + Send {
        let op = ops::weight::SetWeight {
            op: op.map(str::to_owned),
            partition: partition.to_owned(),
            weight,
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::prefer::Prefer`].
    fn prefer(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        replica: Option<&str>,
    ) -> impl Future<Output = Result<PreferReply, StoreError>> + Send {
        let op = ops::prefer::Prefer {
            op: op.map(str::to_owned),
            partition: partition.to_owned(),
            replica: replica.map(str::to_owned),
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::read::Owner`].
    fn owner(
        &self,
        keys: &GroupKeys,
        partition: &str,
    ) -> impl Future<Output = Result<Option<PartitionOwner>, StoreError>> + Send {
        let op = ops::read::Owner(partition.to_owned());
        async move { self.run(keys, &op).await }
    }

    /// [`ops::moves::Moves`].
    fn moves(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Move>, StoreError>> + Send {
        let op = ops::moves::Moves {
            after: after.map(str::to_owned),
            limit,
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::moves::NewestMoves`].
    fn newest_moves(
        &self,
        keys: &GroupKeys,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Move>, StoreError>> + Send {
        async move { self.run(keys, &ops::moves::NewestMoves { limit }).await }
    }

    /// [`ops::routes::Routes`].
    fn routes(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<RouteRead>, StoreError>> + Send {
        let op = ops::routes::Routes {
            after: after.map(str::to_owned),
            limit,
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::budget::TakeBudget`].
    fn take_budget(
        &self,
        keys: &GroupKeys,
        want: usize,
        budget: u32,
        window: Duration,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send {
        let op = ops::budget::TakeBudget {
            want,
            budget,
            window,
        };
        async move { self.run(keys, &op).await }
    }

    /// [`ops::read::ReadStatusHead`].
    fn status_head(
        &self,
        keys: &GroupKeys,
    ) -> impl Future<Output = Result<Option<StatusHead>, StoreError>> + Send {
        self.run(keys, &ops::read::ReadStatusHead)
    }

    /// [`ops::read::StatusPage`].
    fn status_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PartitionOwner>, StoreError>> + Send {
        async move {
            self.run(keys, &ops::read::StatusPage { offset, limit })
                .await
        }
    }
}
