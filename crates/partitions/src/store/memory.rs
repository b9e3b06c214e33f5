//! The group protocol in process memory, on tokio's clock: the same rules as the Redis
//! scripts, step for step (each operation's twin lives beside its script's arguments
//! and parser, in [`super::ops`]; the shared parts of the scripts' libraries are the
//! methods here), for simulations under paused time and the embedded demo. It has none
//! of Redis's costs, so it proves logic, never scale.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use leasehold_election::{BackendWarning, StoreError};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::ops::moves::Move;
use super::ops::routes::RouteRead;
use super::protocol::{
    AddReply, Adopt, AdoptReply, Change, ClaimReply, ClaimRequest, DrainReply, GivenBack, Granted,
    PreferReply, Protocol, RemoveReply, RestoreStep, SetPage, StatusHead, Taken, Term, TickReply,
    TickRequest, VersionStep, WeightReply,
};
use super::status::PartitionOwner;
use crate::keys::GroupKeys;
use crate::notice::GroupNotice;
use crate::store::protocol::Reported;

mod group;

pub(crate) use self::group::{Group, Heir, Meta, Now, distinct};

/// An in-process store for partition groups with the Redis scripts' semantics, on
/// tokio's clock (so it works under `tokio::time::pause()`). Cheap to clone; clones
/// share state.
///
/// For unit tests, simulations and the embedded demo; integration tests use a real
/// redis-server. Fences are floored at the microseconds since the store was created
/// (as Redis floors them at its clock), so [`MemoryGroupStore::wipe`] models a Redis
/// restart that lost every key.
#[derive(Debug, Clone)]
pub struct MemoryGroupStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    epoch: Instant,
    // A std mutex: never held across an await; every critical section is map work.
    groups: Mutex<BTreeMap<String, Group>>,
    notices: broadcast::Sender<String>,
    /// The server lifetime (`lifetime.lua`): 1 at first, one more at every
    /// [`MemoryGroupStore::wipe`] and [`MemoryGroupStore::fail_over_to`]; and when it
    /// began, as `lifetime.lua` tells it.
    lifetime: Mutex<(u64, Began)>,
}

/// When the server lifetime began, as far as the scripts can tell (`lifetime.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Began {
    /// The store's first lifetime: no server came before it, so none can have granted a
    /// lease it forgot (as if it had begun before any lease).
    First,
    /// A restart without data (a wipe), at this many ms.
    At(u64),
    /// A promotion (a failover): when is not known.
    Unknown,
}

/// Every group as it stood at one moment: what a replica would have received of the
/// store's writes up to then ([`MemoryGroupStore::snapshot`]).
#[derive(Debug, Clone)]
pub struct MemorySnapshot(BTreeMap<String, Group>);

impl Default for MemoryGroupStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryGroupStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                epoch: Instant::now(),
                groups: Mutex::new(BTreeMap::new()),
                notices: broadcast::channel(4096).0,
                lifetime: Mutex::new((1, Began::First)),
            }),
        }
    }

    /// Forgets every group, as a Redis restart without persistence does: a new server
    /// lifetime begins now (a new group waits out a lease before it grants).
    pub fn wipe(&self) {
        let now = self.now().ms;
        let mut groups = self.lock();
        groups.clear();
        let mut life = self.life();
        *life = (life.0 + 1, Began::At(now));
    }

    /// Every group as it stands now: what a replica has received of the store's
    /// writes, if its link is cut from now on.
    pub fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot(self.lock().clone())
    }

    /// A failover to a replica that received the writes up to `snapshot` and none
    /// since: the groups go back to it, under a new server lifetime.
    pub fn fail_over_to(&self, snapshot: MemorySnapshot) {
        let mut groups = self.lock();
        *groups = snapshot.0;
        let mut life = self.life();
        *life = (life.0 + 1, Began::Unknown);
    }

    fn life(&self) -> MutexGuard<'_, (u64, Began)> {
        self.inner
            .lifetime
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Group>> {
        self.inner
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> Now {
        let (lifetime, began) = *self.life();
        let d = Instant::now().duration_since(self.inner.epoch);
        Now {
            ms: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            us: u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            lifetime,
            began,
        }
    }

    /// Runs `f` on the group of `keys` (created empty if missing) at the store's clock;
    /// publishes the group's notice if `f` says so.
    fn with<T>(&self, keys: &GroupKeys, f: impl FnOnce(&mut Group, Now) -> (T, bool)) -> T {
        let now = self.now();
        let (out, notify) = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            f(g, now)
        };
        if notify {
            let _ = self.inner.notices.send(keys.notice.clone());
        }
        out
    }

    /// As [`with`](Self::with) for a read.
    fn read<T>(&self, keys: &GroupKeys, f: impl FnOnce(&Group, Now) -> T) -> Option<T> {
        let now = self.now();
        let groups = self.lock();
        groups.get(&keys.notice).map(|g| f(g, now))
    }
}

impl Protocol for MemoryGroupStore {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        Ok(self.with(keys, |g, now| g.tick(req, now)))
    }

    async fn claim(&self, keys: &GroupKeys, req: &ClaimRequest) -> Result<ClaimReply, StoreError> {
        let (reply, moved) = self.with(keys, |g, now| {
            let before = g.moves.back().map(|m| m.id.clone());
            let reply = g.claim(req, now);
            let moved = matches!(&reply, ClaimReply::Claimed { moves, .. } if !moves.is_empty())
                .then(|| g.moved_notice(before))
                .flatten();
            ((reply, moved), false)
        });
        if let Some(message) = moved.and_then(|m| GroupNotice::Moved(m).encode(&keys.notice)) {
            let _ = self.inner.notices.send(message);
        }
        Ok(reply)
    }

    async fn release(
        &self,
        keys: &GroupKeys,
        session: &str,
        terms: &[GivenBack],
        state_ttl: Duration,
        hold: Duration,
    ) -> Result<Vec<bool>, StoreError> {
        Ok(self.with(keys, |g, now| {
            g.release(session, terms, state_ttl, hold, now)
        }))
    }

    async fn take_hand_offs(
        &self,
        keys: &GroupKeys,
        terms: &[Term],
    ) -> Result<Vec<Taken>, StoreError> {
        Ok(self.with(keys, |g, now| (g.take_hand_offs(terms, now), false)))
    }

    async fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        process: &str,
        session: &str,
    ) -> Result<(), StoreError> {
        self.with(keys, |g, now| ((), g.leave(replica, process, session, now)));
        Ok(())
    }

    async fn add(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> Result<AddReply, StoreError> {
        Ok(self.with(keys, |g, now| g.add(mode, names, now)))
    }

    async fn remove(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> Result<RemoveReply, StoreError> {
        Ok(self.with(keys, |g, now| g.remove(mode, names, now)))
    }

    async fn list_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(self
            .read(keys, |g, _| g.list_page(offset, limit))
            .unwrap_or_default())
    }

    async fn set_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Option<SetPage>, StoreError> {
        Ok(self.read(keys, |g, _| g.set_page(offset, limit)).flatten())
    }

    async fn set_version(
        &self,
        keys: &GroupKeys,
        version: u64,
        step: VersionStep<'_>,
    ) -> Result<bool, StoreError> {
        Ok(self.with(keys, |g, _| (g.set_version(version, step), false)))
    }

    async fn restore(&self, keys: &GroupKeys, step: &RestoreStep) -> Result<bool, StoreError> {
        Ok(self.with(keys, |g, now| (g.restore(step, now), false)))
    }

    async fn adopt(&self, keys: &GroupKeys, adopt: &Adopt) -> Result<AdoptReply, StoreError> {
        Ok(self.with(keys, |g, now| g.adopt(adopt, now)))
    }

    async fn drain(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        replica: &str,
        on: bool,
        force: bool,
    ) -> Result<DrainReply, StoreError> {
        Ok(self.with(keys, |g, now| g.drain(op, replica, on, force, now)))
    }

    async fn held(&self, keys: &GroupKeys, session: &str) -> Result<Vec<Granted>, StoreError> {
        Ok(self
            .read(keys, |g, _| g.held_by(session))
            .unwrap_or_default())
    }

    async fn report(
        &self,
        keys: &GroupKeys,
        session: &str,
        weights: &[Reported],
    ) -> Result<Vec<bool>, StoreError> {
        Ok(self.with(keys, |g, now| g.report(session, weights, now)))
    }

    async fn set_weight(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        weight: u64,
    ) -> Result<WeightReply, StoreError> {
        Ok(self.with(keys, |g, now| g.set_weight(op, partition, weight, now)))
    }

    async fn prefer(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        replica: Option<&str>,
    ) -> Result<PreferReply, StoreError> {
        Ok(self.with(keys, |g, now| g.prefer(op, partition, replica, now)))
    }

    async fn owner(
        &self,
        keys: &GroupKeys,
        partition: &str,
    ) -> Result<Option<PartitionOwner>, StoreError> {
        Ok(self.read(keys, |g, now| g.owner(partition, now)).flatten())
    }

    async fn moves(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Move>, StoreError> {
        Ok(self
            .read(keys, |g, _| g.moves_after(after, limit))
            .unwrap_or_default())
    }

    async fn newest_moves(&self, keys: &GroupKeys, limit: usize) -> Result<Vec<Move>, StoreError> {
        Ok(self
            .read(keys, |g, _| g.moves_newest(limit))
            .unwrap_or_default())
    }

    async fn routes(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Option<RouteRead>, StoreError> {
        Ok(self
            .read(keys, |g, now| g.routes(after, limit, now))
            .flatten())
    }

    async fn take_budget(
        &self,
        keys: &GroupKeys,
        want: usize,
        budget: u32,
        window: Duration,
    ) -> Result<usize, StoreError> {
        Ok(self.with(keys, |g, now| {
            (g.take_budget(want, budget, window, now), false)
        }))
    }

    async fn status_head(&self, keys: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
        Ok(self.read(keys, |g, now| g.status_head(now)).flatten())
    }

    async fn status_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PartitionOwner>, StoreError> {
        Ok(self
            .read(keys, |g, now| g.status_page(offset, limit, now))
            .unwrap_or_default())
    }

    async fn publish(&self, _keys: &GroupKeys, message: &str) -> Result<(), StoreError> {
        let _ = self.inner.notices.send(message.to_owned());
        Ok(())
    }

    fn notices(&self, _keys: &GroupKeys) -> broadcast::Receiver<String> {
        self.inner.notices.subscribe()
    }

    async fn warnings(&self) -> Result<Vec<BackendWarning>, StoreError> {
        Ok(Vec::new())
    }
}
