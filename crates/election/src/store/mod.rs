//! The lease store: the few atomic operations an elector needs, behind one trait.
//!
//! [`RedisStore`] is the real thing. [`MemoryStore`] keeps the same semantics in
//! process memory, on tokio's clock, for unit tests, simulations under paused time and
//! the embedded demo; it is never a stand-in for Redis in integration tests.

mod memory;
mod notify;
pub(crate) mod redis;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, broadcast};

pub use self::memory::MemoryStore;
pub use self::redis::{RedisStore, RedisStoreBuilder};
use crate::error::StoreError;
use crate::fence::Fence;
use crate::keys::DutyKeys;

/// The release event meaning "notifications may have been missed".
pub const ANY_RELEASE: &str = "*";

/// What an acquire attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Acquire {
    /// The caller holds the lease now.
    Won {
        /// The fencing token of this term.
        fence: Fence,
        /// The store's counter was behind the floor the caller passed: the store lost
        /// data (a restart without persistence) and the fence was raised to the floor.
        regressed: bool,
    },
    /// `token` already held the lease: an earlier call with it took the lease, and its
    /// reply was lost (a store may retry a call on a fresh connection). The lease was
    /// **not** extended: the caller may lead only for `remaining`, counted from the send
    /// time of this call, which is all it can prove.
    Confirmed {
        /// The fencing token of the term the earlier call started.
        fence: Fence,
        /// Time left on the lease when the store answered.
        remaining: Duration,
    },
    /// The lease is free, but the store lost its data (or another server took over its
    /// keys) less than one lease ago: a lease it granted before may still be believed
    /// valid by its holder, so nothing is granted until `wait` has passed (Redlock's
    /// "delayed restart", done automatically). See `docs/guarantees.md`.
    Recovering {
        /// How long to wait before asking again.
        wait: Duration,
    },
    /// Someone else holds the lease.
    Lost {
        /// The holder's replica id.
        holder: String,
        /// Time left on the holder's lease; `None` when the key has no expiry (which
        /// Leasehold never writes).
        remaining: Option<Duration>,
        /// The store's fence counter: the holder's fence.
        fence: Fence,
    },
}

/// The holder of a lease, as the store sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The holder's replica id.
    pub replica_id: String,
    /// The holder's fencing token.
    pub fence: Fence,
    /// Time left on its lease (`None`: no expiry).
    pub remaining: Option<Duration>,
}

impl LeaderInfo {
    /// The holder `replica_id` with `fence` and `remaining` lease left (for stores
    /// outside this crate, and tests).
    pub fn new(replica_id: impl Into<String>, fence: Fence, remaining: Option<Duration>) -> Self {
        Self {
            replica_id: replica_id.into(),
            fence,
            remaining,
        }
    }
}

/// A warning from [`LeaseStore::self_check`] about settings that weaken the guarantees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendWarning {
    /// `maxmemory-policy` may evict lease or fence keys.
    EvictionPolicy(String),
    /// Neither AOF nor RDB persistence is on: a restart loses every lease (and then
    /// grants nothing for one lease).
    NoPersistence,
}

impl std::fmt::Display for BackendWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EvictionPolicy(p) => write!(
                f,
                "maxmemory-policy is {p}: Redis may evict lease keys; set it to noeviction"
            ),
            Self::NoPersistence => f.write_str(
                "persistence is off: a Redis restart loses every lease and partition; \
                 nothing is granted for one lease after it, so no old holder overlaps a new \
                 one, and fences keep growing",
            ),
        }
    }
}

/// The atomic operations behind an elector.
///
/// Implementations must make `acquire`, `renew` and `release` atomic with respect to one
/// another for the same keys, and must issue fences that strictly increase for a duty.
pub trait LeaseStore: Clone + Send + Sync + 'static {
    /// Takes the lease if it is free, issuing a fence that is greater than every fence
    /// issued before and at least `floor`, unless the store lost its data less than one
    /// `lease` ago ([`Acquire::Recovering`]). If `token` already holds it, answers
    /// [`Acquire::Confirmed`] **without** extending it: a caller that never hears back
    /// must not be able to keep a lease alive by retrying.
    ///
    /// # Errors
    /// The store's [`StoreError`]; [`StoreError::is_retryable`] tells whether to retry.
    /// After a retryable error the outcome is unknown: the lease may have been taken
    /// with `token`. Resolve it with [`abandon`](Self::abandon) (and use a new token).
    ///
    /// # Cancel safety
    /// If the future is dropped, the outcome is unknown, as after a retryable error.
    fn acquire(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
        floor: Fence,
    ) -> impl Future<Output = Result<Acquire, StoreError>> + Send;

    /// Extends the lease to `lease` from now if `token` still holds it; `false` if not.
    ///
    /// # Errors
    /// The store's [`StoreError`].
    ///
    /// # Cancel safety
    /// If the future is dropped, the lease may or may not have been extended (it never
    /// becomes someone else's by this call).
    fn renew(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Deletes the lease if `token` holds it and notifies waiting followers.
    ///
    /// # Errors
    /// The store's [`StoreError`].
    ///
    /// # Cancel safety
    /// If the future is dropped, the lease may or may not have been released.
    fn release(
        &self,
        keys: &DutyKeys,
        token: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Resolves an acquire with `token` whose outcome is unknown (it failed with a
    /// retryable error, or its future was dropped, after it may have reached the store):
    /// once this returns `Ok`, `token` holds no lease. The default is
    /// [`release`](Self::release); a store that can tell that nothing was sent may
    /// return at once, and one with ordered connections should send the release on the
    /// acquire's own connection, so that it runs after the acquire whatever the latency.
    ///
    /// # Errors
    /// The store's [`StoreError`]: the lease may still be held with `token` (it expires
    /// on its own within one lease).
    ///
    /// # Cancel safety
    /// If the future is dropped, the release may or may not have been sent.
    fn abandon(
        &self,
        keys: &DutyKeys,
        token: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.release(keys, token).await.map(drop) }
    }

    /// Who holds the lease now, if anyone.
    ///
    /// # Errors
    /// The store's [`StoreError`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    fn leader(
        &self,
        keys: &DutyKeys,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, StoreError>> + Send;

    /// The notifier woken when the lease of `keys` is released (or when notifications
    /// may have been missed). One per duty per store; share the store across electors.
    fn release_notifier(&self, keys: &DutyKeys) -> Arc<Notify>;

    /// A stream of released lease keys on `keys`' channel (every duty under one
    /// prefix). The item [`ANY_RELEASE`] means notifications may have been missed
    /// (a reconnect): re-check everything. A lagged receiver should do the same.
    fn release_events(&self, keys: &DutyKeys) -> broadcast::Receiver<String>;

    /// A copy of this store whose grants and renewals count only once `replicas`
    /// replicas have acknowledged them (`ElectorConfigBuilder::min_replicas_acked`),
    /// waiting at most `timeout` for them; fewer acknowledgements are
    /// [`StoreError::Replication`], retryable, and the write does not count. A store
    /// without replicas has nothing to wait for, and the default (a clone) waits for
    /// nothing.
    fn with_replica_acks(&self, replicas: usize, timeout: Duration) -> Self {
        let _ = (replicas, timeout);
        self.clone()
    }

    /// A copy of this store for an elector that runs on a runtime of its own
    /// (`Elector::spawn_dedicated`): same server and settings, but every connection and
    /// background task it needs is made on the runtime that uses the copy, so a stall of
    /// the application's runtime cannot hold up its calls. Called on that runtime. The
    /// default is a clone (right for stores without connections or background tasks).
    fn detached(&self) -> Self {
        self.clone()
    }

    /// Reads server settings that weaken the guarantees. Best effort: a store that
    /// cannot tell returns an empty list (the default).
    ///
    /// # Errors
    /// The store's [`StoreError`] (a store without permission to read its settings
    /// returns an empty list instead).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    fn self_check(&self) -> impl Future<Output = Result<Vec<BackendWarning>, StoreError>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
}
