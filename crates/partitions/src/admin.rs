//! Changing a group at runtime without being one of its replicas.

use std::collections::HashSet;
use std::time::Duration;

use leasehold_election::ext::validate_name;
use leasehold_election::{DEFAULT_KEY_PREFIX, StoreError};
use rand::RngExt;

use crate::balance::whatif::{PlannedChange, WhatIf, simulate};
use crate::error::PartitionsError;
use crate::keys::GroupKeys;
use crate::store::ops::{self, Op};
use crate::store::protocol::{
    AddReply, Change, DrainReply, Move, PreferReply, RemoveReply, WeightReply,
};
use crate::store::{GroupStatus, GroupStore, PartitionOwner, SET_CHUNK, read_status};

/// How often a change retries while the group is being created again (each time after
/// the wait the group names; the window is one lease).
const RESTORE_RETRIES: usize = 20;

/// A new request id: a change sent again with it (after its reply was lost) gets the
/// first answer.
fn request_id() -> String {
    format!("{:032x}", rand::rng().random::<u128>())
}

/// Changes a group's partition set and drains its replicas at runtime, for operators,
/// control planes and tools: it needs no replica of its own (the `leasehold` CLI's
/// `partitions`, `drain` and `owner` commands use it).
///
/// Every replica sees a change at its next tick (at most one renew interval, usually
/// at once: a change publishes a notice): a new partition is claimed by the fair-share
/// rule, a removed one is handed back by its owner (its callback is cancelled with
/// [`MoveCause::Removal`](crate::MoveCause::Removal), then it is
/// released), a drained replica hands everything over.
///
/// The admin changes a group its replicas created; it never creates one (so a change
/// that lands just after Redis lost the group cannot shrink it to that change: the
/// replicas restore the set they saw). Every change is safe to retry: if its reply is
/// lost and the store sends it again, it still answers what it did. While a group that
/// Redis lost is being created again (one lease), a change waits for it.
///
/// ```no_run
/// use leasehold_election::RedisStore;
/// use leasehold_partitions::GroupAdmin;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::connect("redis://127.0.0.1:6379/")?;
/// let admin = GroupAdmin::new(store, "tenants")?;
/// admin.add(["tenant-33"]).await?;
/// admin.remove(["tenant-7"]).await?;
/// println!("{:?}", admin.owner("tenant-33").await?.owner);
/// admin.drain("replica-c").await?; // before maintenance; undrain() after
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct GroupAdmin<B> {
    store: B,
    keys: GroupKeys,
}

fn names(
    partitions: impl IntoIterator<Item = impl Into<String>>,
) -> Result<Vec<String>, PartitionsError> {
    let names: Vec<String> = partitions.into_iter().map(Into::into).collect();
    let mut seen = HashSet::new();
    for n in &names {
        validate_name("partition name", n)?;
        if !seen.insert(n.as_str()) {
            return Err(PartitionsError::DuplicatePartition(n.clone()));
        }
    }
    Ok(names)
}

/// The largest weight a partition may have ([`GroupAdmin::set_weight`]).
pub const MAX_WEIGHT: u64 = 1_000_000;

/// A strict change is never refused as stale, nor kept waiting by a restore for longer
/// than a few of its windows: if a store says so, it broke the protocol.
fn never_stale() -> PartitionsError {
    PartitionsError::Store(StoreError::Protocol(
        "a strict change was answered as stale, or waited out too many restores".to_owned(),
    ))
}

impl<B: GroupStore> GroupAdmin<B> {
    /// An admin of the group `keys` name (a coordinator's own).
    pub(crate) fn from_parts(store: B, keys: GroupKeys) -> Self {
        Self { store, keys }
    }

    /// The admin of `group`, under the default key prefix (`leasehold`, as the
    /// replicas' [`GroupConfigBuilder::key_prefix`](crate::GroupConfigBuilder::key_prefix)
    /// unless they set one: then [`GroupAdmin::with_key_prefix`]).
    ///
    /// # Errors
    /// [`PartitionsError::Config`] if the name breaks the naming rules.
    pub fn new(store: B, group: &str) -> Result<Self, PartitionsError> {
        validate_name("group name", group)?;
        Ok(Self {
            store,
            keys: GroupKeys::new(DEFAULT_KEY_PREFIX, group),
        })
    }

    /// The same group under key prefix `prefix` (the replicas'
    /// [`GroupConfigBuilder::key_prefix`](crate::GroupConfigBuilder::key_prefix)).
    ///
    /// ```
    /// # use leasehold_partitions::{GroupAdmin, MemoryGroupStore};
    /// let admin = GroupAdmin::new(MemoryGroupStore::new(), "tenants")?.with_key_prefix("billing")?;
    /// # Ok::<(), leasehold_partitions::PartitionsError>(())
    /// ```
    ///
    /// # Errors
    /// [`PartitionsError::Config`] if the prefix breaks the naming rules.
    pub fn with_key_prefix(self, prefix: &str) -> Result<Self, PartitionsError> {
        validate_name("key prefix", prefix)?;
        let keys = GroupKeys::new(prefix, &self.keys.group);
        Ok(Self { keys, ..self })
    }

    /// A [`Router`](crate::Router) of this group: its owners and their addresses, kept
    /// current by the group's move notices.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn router(&self) -> crate::Router {
        crate::Router::start(self.store.clone(), self.keys.clone())
    }

    /// The group's notices from now on ([`GroupNotice`](crate::GroupNotice)): every
    /// change a replica acts on, every move with its ledger ids, load steps, warm-move
    /// messages, and [`GroupNotice::Missed`](crate::GroupNotice::Missed) when some may
    /// have been missed (the subscription was lost a while, or this reader fell behind).
    /// Pub/sub: best effort, for readers that catch up from the ledger of moves
    /// ([`moves`](Self::moves)) after a `Missed`. A notice of an unknown version or
    /// kind (a newer replica's) is skipped and counted.
    ///
    /// ```no_run
    /// use futures::StreamExt;
    /// use leasehold_partitions::{GroupAdmin, GroupNotice, RedisStore};
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let admin = GroupAdmin::new(RedisStore::connect("redis://127.0.0.1:6379/")?, "tenants")?;
    /// let mut notices = std::pin::pin!(admin.notices());
    /// while let Some(notice) = notices.next().await {
    ///     if let GroupNotice::Moved(moved) = notice {
    ///         println!("{} took {:?}", moved.replica, moved.partitions);
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn notices(&self) -> impl futures::Stream<Item = crate::GroupNotice> + Send + 'static {
        let rx = self.store.notices(&self.keys);
        let (tag, group) = (self.keys.notice.clone(), self.keys.group.clone());
        futures::stream::unfold(rx, move |mut rx| {
            let (tag, group) = (tag.clone(), group.clone());
            async move {
                loop {
                    let notice = match rx.recv().await {
                        Ok(m) => match crate::GroupNotice::decode(&tag, &m) {
                            Some(Ok(n)) => n,
                            Some(Err(_)) => {
                                metrics::counter!(crate::metrics::UNKNOWN_NOTICES, "group" => group.clone())
                                    .increment(1);
                                continue;
                            }
                            None => continue,
                        },
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            crate::GroupNotice::Missed
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                    };
                    return Some((notice, rx));
                }
            }
        })
    }

    /// Adds partitions to the group; returns how many were added. More than 250 names
    /// are sent in chunks of 250: if one is refused, the chunks before it stay added.
    ///
    /// # Errors
    /// [`PartitionsError::AlreadyPresent`] (nothing of that chunk added),
    /// [`PartitionsError::UnknownGroup`] (no replica created the group, or Redis lost
    /// it and no replica is live to restore it),
    /// [`PartitionsError::DuplicatePartition`] or [`PartitionsError::Config`] for a bad
    /// name (nothing added), or the store's error.
    ///
    /// # Cancel safety
    /// If the future is dropped, the chunk in flight may or may not be applied.
    pub async fn add(
        &self,
        partitions: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<usize, PartitionsError> {
        let names = names(partitions)?;
        let mut added = 0;
        for chunk in names.chunks(SET_CHUNK) {
            let change = Change::Strict { op: request_id() };
            let mut tries = 0;
            loop {
                match self
                    .store
                    .run(&self.keys, &ops::Add::new(&change, chunk))
                    .await?
                {
                    AddReply::Added(n) => added += n,
                    AddReply::Exists(name) => return Err(PartitionsError::AlreadyPresent(name)),
                    AddReply::NoGroup => return Err(self.no_group()),
                    AddReply::Restoring(wait) if tries < RESTORE_RETRIES => {
                        tries += 1;
                        tokio::time::sleep(wait + Duration::from_millis(10)).await;
                        continue;
                    }
                    AddReply::Restoring(_) | AddReply::Stale => return Err(never_stale()),
                }
                break;
            }
        }
        Ok(added)
    }

    fn no_group(&self) -> PartitionsError {
        PartitionsError::UnknownGroup(self.keys.group.clone())
    }

    /// Removes partitions from the group; returns how many were removed. An owned one
    /// is handed back by its owner: its callback is cancelled (with its grace), then it
    /// is released. Chunks as for [`add`](Self::add).
    ///
    /// # Errors
    /// [`PartitionsError::UnknownPartition`], [`PartitionsError::LastPartition`] (it
    /// would leave the group empty), [`PartitionsError::DuplicatePartition`] or
    /// [`PartitionsError::Config`] (nothing of that chunk removed), or the store's error.
    ///
    /// # Cancel safety
    /// As [`add`](Self::add).
    pub async fn remove(
        &self,
        partitions: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<usize, PartitionsError> {
        let names = names(partitions)?;
        let mut removed = 0;
        for chunk in names.chunks(SET_CHUNK) {
            let change = Change::Strict { op: request_id() };
            let mut tries = 0;
            loop {
                match self
                    .store
                    .run(&self.keys, &ops::Remove::new(&change, chunk))
                    .await?
                {
                    RemoveReply::Removed(n) => removed += n,
                    RemoveReply::Unknown(name) => {
                        return Err(PartitionsError::UnknownPartition(name));
                    }
                    RemoveReply::Last => return Err(PartitionsError::LastPartition),
                    RemoveReply::NoGroup => return Err(self.no_group()),
                    RemoveReply::Restoring(wait) if tries < RESTORE_RETRIES => {
                        tries += 1;
                        tokio::time::sleep(wait + Duration::from_millis(10)).await;
                        continue;
                    }
                    RemoveReply::Restoring(_) | RemoveReply::Stale => return Err(never_stale()),
                }
                break;
            }
        }
        Ok(removed)
    }

    /// Every partition of the group, in the order they were added (read in pages of a
    /// thousand: not one atomic snapshot of a large group).
    ///
    /// # Errors
    /// [`PartitionsError::UnknownGroup`], or the store's error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn list(&self) -> Result<Vec<String>, PartitionsError> {
        if self
            .store
            .run(&self.keys, &ops::ReadStatusHead)
            .await?
            .is_none()
        {
            return Err(PartitionsError::UnknownGroup(self.keys.group.clone()));
        }
        let mut all = Vec::new();
        loop {
            let page = self
                .store
                .run(&self.keys, &ops::ListPage::new(all.len(), 1_000))
                .await?;
            if page.is_empty() {
                return Ok(all);
            }
            all.extend(page);
        }
    }

    /// Drains `replica`: it hands every partition over gracefully and claims nothing
    /// until [`undrain`](Self::undrain)ed. A drain is about the replica id: it lasts
    /// across restarts and lost sessions (and a Redis restart that lost the group),
    /// until undrained. Refused if no other live replica would take part any more (see
    /// [`drain_forced`](Self::drain_forced)).
    ///
    /// # Errors
    /// [`PartitionsError::UnknownReplica`] if it has no live session,
    /// [`PartitionsError::LastActiveReplica`] if it is the last one taking part,
    /// [`PartitionsError::UnknownGroup`] if there is no such group, or the store's
    /// error.
    ///
    /// # Cancel safety
    /// If the future is dropped, the drain may or may not be applied.
    pub async fn drain(&self, replica: &str) -> Result<(), PartitionsError> {
        self.set_drain(replica, true, false).await
    }

    /// Drains `replica` even if no other replica would take part any more: every
    /// partition of the group goes unowned until a replica joins or one is undrained.
    ///
    /// # Errors
    /// As [`drain`](Self::drain), but never
    /// [`LastActiveReplica`](PartitionsError::LastActiveReplica).
    ///
    /// # Cancel safety
    /// As [`drain`](Self::drain).
    pub async fn drain_forced(&self, replica: &str) -> Result<(), PartitionsError> {
        self.set_drain(replica, true, true).await
    }

    /// Lets a drained replica take its share again.
    ///
    /// # Errors
    /// [`PartitionsError::UnknownReplica`] if it is neither drained nor live,
    /// [`PartitionsError::UnknownGroup`], or the store's error.
    ///
    /// # Cancel safety
    /// As [`drain`](Self::drain).
    pub async fn undrain(&self, replica: &str) -> Result<(), PartitionsError> {
        self.set_drain(replica, false, false).await
    }

    async fn set_drain(&self, replica: &str, on: bool, force: bool) -> Result<(), PartitionsError> {
        validate_name("replica id", replica)?;
        let drain = ops::Drain::new(Some(&request_id()), replica, on, force);
        let restoring = |r: &DrainReply| match r {
            DrainReply::Restoring(wait) => Some(*wait),
            _ => None,
        };
        match self.change(&drain, restoring).await? {
            DrainReply::Done => Ok(()),
            DrainReply::Unknown => Err(PartitionsError::UnknownReplica(replica.to_owned())),
            DrainReply::Last => Err(PartitionsError::LastActiveReplica(replica.to_owned())),
            DrainReply::NoGroup => Err(self.no_group()),
            DrainReply::Restoring(_) => Err(never_stale()),
        }
    }

    /// Runs an operator's change `op`, again while the group is being created again
    /// (after the wait `restoring` reads from its reply), [`RESTORE_RETRIES`] times at
    /// most.
    async fn change<O: Op>(
        &self,
        op: &O,
        restoring: fn(&O::Reply) -> Option<Duration>,
    ) -> Result<O::Reply, PartitionsError> {
        for _ in 0..RESTORE_RETRIES {
            let reply = self.store.run(&self.keys, op).await?;
            match restoring(&reply) {
                Some(wait) => tokio::time::sleep(wait + Duration::from_millis(10)).await,
                None => return Ok(reply),
            }
        }
        Err(never_stale())
    }

    /// `error`, or [`PartitionsError::UnknownGroup`] if the group does not exist (or a
    /// store error reading that).
    async fn unknown(&self, error: PartitionsError) -> PartitionsError {
        match self.store.run(&self.keys, &ops::ReadStatusHead).await {
            Ok(Some(_)) => error,
            Ok(None) => self.no_group(),
            Err(e) => e.into(),
        }
    }

    /// Whether the group exists (its replicas create it; an admin never does).
    ///
    /// # Errors
    /// The store's error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn exists(&self) -> Result<bool, PartitionsError> {
        Ok(self
            .store
            .run(&self.keys, &ops::ReadStatusHead)
            .await?
            .is_some())
    }

    /// Sets a partition's weight (1 ..= [`MAX_WEIGHT`]; every partition starts at 1).
    /// From the first weight set on, the group balances by weight: every replica's load
    /// (its partitions' weights, summed) stays within its capacity share of the total ±
    /// the largest weight. The owner's load changes at once; replicas rebalance at their
    /// next tick (a change publishes a notice), moving as little as the rule allows.
    /// Returns the weight it had.
    ///
    /// # Errors
    /// [`PartitionsError::InvalidWeight`], [`PartitionsError::Config`] for a bad name,
    /// [`PartitionsError::UnknownPartition`], [`PartitionsError::UnknownGroup`], or the
    /// store's error.
    ///
    /// # Cancel safety
    /// If the future is dropped, the weight may or may not be set.
    pub async fn set_weight(&self, partition: &str, weight: u64) -> Result<u64, PartitionsError> {
        validate_name("partition name", partition)?;
        if !(1..=MAX_WEIGHT).contains(&weight) {
            return Err(PartitionsError::InvalidWeight(weight));
        }
        let set = ops::SetWeight::new(Some(&request_id()), partition, weight);
        let restoring = |r: &WeightReply| match r {
            WeightReply::Restoring(wait) => Some(*wait),
            _ => None,
        };
        match self.change(&set, restoring).await? {
            WeightReply::Set(old) => Ok(old),
            WeightReply::Unknown => Err(PartitionsError::UnknownPartition(partition.to_owned())),
            WeightReply::NoGroup => Err(self.no_group()),
            WeightReply::Restoring(_) => Err(never_stale()),
        }
    }

    /// Prefers `partition` on replica `replica`: while that replica is live, takes part
    /// (not drained, leaving or away) and has room under the balancing rule, it claims
    /// the partition before any other and the others leave it to it; once it is active,
    /// whoever holds the partition hands it back to it when that keeps the group within
    /// its balance bound, or (by count) by a swap (see *Preferences* in
    /// `docs/partitions.md`). A preference never makes a
    /// partition wait for its replica for longer than about one renew interval: if the
    /// replica is gone, drained or full, the partition goes where the rule puts it.
    /// The replica need not be live (a preference lasts until removed, or until the
    /// partition is removed from the set). Replicas see it at their next tick (a change
    /// publishes a notice). Returns the replica id preferred before, if any.
    ///
    /// ```no_run
    /// # async fn f(admin: leasehold_partitions::GroupAdmin<leasehold_election::RedisStore>)
    /// # -> Result<(), leasehold_partitions::PartitionsError> {
    /// admin.prefer("tenant-7", "replica-eu-1").await?;
    /// admin.unprefer("tenant-7").await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`PartitionsError::Config`] for a bad partition name or replica id (empty, or
    /// breaking the naming rules), [`PartitionsError::UnknownPartition`],
    /// [`PartitionsError::UnknownGroup`], or the store's error.
    ///
    /// # Cancel safety
    /// If the future is dropped, the preference may or may not be set.
    pub async fn prefer(
        &self,
        partition: &str,
        replica: &str,
    ) -> Result<Option<String>, PartitionsError> {
        validate_name("replica id", replica)?;
        self.set_preference(partition, Some(replica)).await
    }

    /// Removes `partition`'s preference, if it has one (see [`prefer`](Self::prefer)):
    /// it stays where it is, and moves only as the balancing rule moves any partition.
    /// Returns the replica id preferred before, if any.
    ///
    /// # Errors
    /// [`PartitionsError::Config`] for a bad name, [`PartitionsError::UnknownPartition`],
    /// [`PartitionsError::UnknownGroup`], or the store's error.
    ///
    /// # Cancel safety
    /// If the future is dropped, the preference may or may not be removed.
    pub async fn unprefer(&self, partition: &str) -> Result<Option<String>, PartitionsError> {
        self.set_preference(partition, None).await
    }

    async fn set_preference(
        &self,
        partition: &str,
        replica: Option<&str>,
    ) -> Result<Option<String>, PartitionsError> {
        validate_name("partition name", partition)?;
        let prefer = ops::Prefer::new(Some(&request_id()), partition, replica);
        let restoring = |r: &PreferReply| match r {
            PreferReply::Restoring(wait) => Some(*wait),
            _ => None,
        };
        match self.change(&prefer, restoring).await? {
            PreferReply::Set(old) => Ok(old),
            PreferReply::Unknown => Err(PartitionsError::UnknownPartition(partition.to_owned())),
            PreferReply::NoGroup => Err(self.no_group()),
            PreferReply::Restoring(_) => Err(never_stale()),
        }
    }

    /// One partition's owner: replica, fence, time left on its session, how long it
    /// has held it.
    ///
    /// # Errors
    /// [`PartitionsError::UnknownPartition`] if it is not in the group,
    /// [`PartitionsError::UnknownGroup`] if there is no such group, or the store's
    /// error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn owner(&self, partition: &str) -> Result<PartitionOwner, PartitionsError> {
        validate_name("partition name", partition)?;
        match self
            .store
            .run(&self.keys, &ops::Owner::new(partition))
            .await?
        {
            Some(owner) => Ok(owner),
            None => Err(self
                .unknown(PartitionsError::UnknownPartition(partition.to_owned()))
                .await),
        }
    }

    /// The whole group: every partition's owner, fence and time left, every live replica
    /// with its state, count and load; `None` if no replica ever created it. A group of
    /// more than a thousand partitions is read in pages, each a short script, so it never
    /// blocks Redis for long (and is not one atomic snapshot). The one way to read a
    /// group's status, for a member and an operator alike.
    ///
    /// # Errors
    /// The store's error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn status(&self) -> Result<Option<GroupStatus>, PartitionsError> {
        Ok(read_status(&self.store, &self.keys).await?)
    }

    /// Up to `limit` entries of the group's ledger of moves, oldest first: every
    /// change of owner of a partition, from whom to whom, why the old term ended, both
    /// fences, and how long the partition had no owner. `after` is the [`Move::id`] of
    /// the last entry already read (`None`: from the oldest the ledger keeps; it keeps
    /// about [`LEDGER_LEN`](crate::LEDGER_LEN)); an empty page means nothing newer yet.
    ///
    /// Each entry is written by the claim that starts the new term, in the same
    /// script, so the ledger costs no round trip, and a claim that was not applied
    /// wrote none.
    ///
    /// # Errors
    /// The store's error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// Every move since the last one read, in pages:
    /// ```no_run
    /// # async fn f(admin: leasehold_partitions::GroupAdmin<leasehold_election::RedisStore>)
    /// # -> Result<(), leasehold_partitions::PartitionsError> {
    /// let mut last: Option<String> = None;
    /// loop {
    ///     let page = admin.moves(last.as_deref(), 1_000).await?;
    ///     let Some(newest) = page.last() else { break };
    ///     last = Some(newest.id.clone());
    ///     for m in &page {
    ///         println!("{} {:?} -> {} ({})", m.partition, m.from, m.to, m.cause);
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn moves(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Move>, PartitionsError> {
        Ok(self
            .store
            .run(&self.keys, &ops::Moves::new(after, limit))
            .await?)
    }

    /// The newest `limit` entries of the ledger of moves (or all it keeps, if fewer),
    /// oldest first: where a view of the recent past starts, without reading the whole
    /// ledger. Go on from the last one's id with [`moves`](Self::moves).
    ///
    /// # Errors
    /// The store's error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// The last 100 moves, then every move as it comes:
    /// ```no_run
    /// # async fn f(admin: leasehold_partitions::GroupAdmin<leasehold_election::RedisStore>)
    /// # -> Result<(), leasehold_partitions::PartitionsError> {
    /// let recent = admin.newest_moves(100).await?;
    /// let mut last = recent.last().map(|m| m.id.clone());
    /// loop {
    ///     let page = admin.moves(last.as_deref(), 1_000).await?;
    ///     if let Some(newest) = page.last() {
    ///         last = Some(newest.id.clone());
    ///     }
    ///     # break;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn newest_moves(&self, limit: usize) -> Result<Vec<Move>, PartitionsError> {
        Ok(self
            .store
            .run(&self.keys, &ops::NewestMoves::new(limit))
            .await?)
    }

    /// What `change` would do to the group, without doing it: the moves the balancing
    /// rule would make and each replica's count and load after. It reads the group's
    /// status and runs, over it, the same pure rule the replicas run, round after round
    /// until nothing moves (see [`PlannedChange`]: where the live group breaks a tie by
    /// chance, the planner breaks it alike every time and says so).
    ///
    /// ```no_run
    /// use leasehold_election::RedisStore;
    /// use leasehold_partitions::{GroupAdmin, WhatIf};
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let admin = GroupAdmin::new(RedisStore::connect("redis://127.0.0.1:6379/")?, "tenants")?;
    /// let plan = admin.plan(&WhatIf::new().add_replica("replica-d", 1)).await?;
    /// for m in &plan.moves {
    ///     println!("{} partitions {:?} -> {}", m.count, m.from, m.to);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`PartitionsError::UnknownGroup`], [`PartitionsError::UnknownReplica`] (to remove
    /// or drain), [`PartitionsError::UnknownPartition`] or
    /// [`PartitionsError::InvalidWeight`] (a weight), [`PartitionsError::DuplicatePartition`]
    /// (a weight given twice), [`PartitionsError::Config`] (a bad name or capacity),
    /// [`PartitionsError::LastActiveReplica`] (drains that leave nobody taking part),
    /// [`PartitionsError::InvalidWhatIf`], or the store's error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn plan(&self, change: &WhatIf) -> Result<PlannedChange, PartitionsError> {
        let status = self.status().await?.ok_or_else(|| self.no_group())?;
        simulate(&status, change)
    }
}
