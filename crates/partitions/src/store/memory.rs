//! The group protocol in process memory, on tokio's clock: the same rules as the Redis
//! scripts, step for step (each operation's twin lives beside its script's arguments
//! and parser, in [`super::ops`]; the shared parts of the scripts' libraries are the
//! methods here), for simulations under paused time and the embedded demo. It has none
//! of Redis's costs, so it proves logic, never scale.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use leasehold_election::{BackendWarning, StoreError};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::ops::Op;
use super::protocol::Protocol;
use crate::keys::GroupKeys;

mod group;

pub(crate) use self::group::{Budget, Follow, Group, Heir, Meta, Now, distinct};

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
    /// publishes the group's notice if `f` says so. What an operation's twin runs in.
    pub(crate) fn with<T>(
        &self,
        keys: &GroupKeys,
        f: impl FnOnce(&mut Group, Now) -> (T, bool),
    ) -> T {
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

    /// As [`with`](Self::with) for a read: `None` if the group does not exist.
    pub(crate) fn read<T>(&self, keys: &GroupKeys, f: impl FnOnce(&Group, Now) -> T) -> Option<T> {
        let now = self.now();
        let groups = self.lock();
        groups.get(&keys.notice).map(|g| f(g, now))
    }

    /// Sends `message` to every listener of the store's notices.
    pub(crate) fn notify(&self, message: String) {
        let _ = self.inner.notices.send(message);
    }
}

impl Protocol for MemoryGroupStore {
    async fn run<O: Op>(&self, keys: &GroupKeys, op: &O) -> Result<O::Reply, StoreError> {
        Ok(op.memory(self, keys))
    }

    async fn publish(&self, _keys: &GroupKeys, message: &str) -> Result<(), StoreError> {
        self.notify(message.to_owned());
        Ok(())
    }

    fn notices(&self, _keys: &GroupKeys) -> broadcast::Receiver<String> {
        self.inner.notices.subscribe()
    }

    async fn warnings(&self) -> Result<Vec<BackendWarning>, StoreError> {
        Ok(Vec::new())
    }
}
