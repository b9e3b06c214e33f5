#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod backoff;
mod config;
mod elector;
mod error;
// Plumbing for Leasehold's own crates (the partition coordinator, the CLI, the bench),
// hidden from the docs and outside the semver promise.
#[doc(hidden)]
pub mod ext;
mod fence;
mod grid;
mod keys;
mod leadership;
pub mod metrics;
mod status;
mod store;
mod token;
mod validate;

pub use self::config::{
    ConfigError, DEFAULT_KEY_PREFIX, ElectorConfig, ElectorConfigBuilder, MAX_LEASE, MAX_NAME_LEN,
    MIN_LEASE,
};
pub use self::elector::{DutyError, DutyResult, Elector, ElectorHandle};
pub use self::error::{BuildError, ErrorChain, Stopped, StoreError};
pub use self::fence::{Fence, FencedBatch, FencedWriteError, FencedWriter};
pub use self::keys::DutyKeys;
pub use self::leadership::{Leadership, TermOver};
pub use self::status::{Role, Status, TermEnd, TermEndReason};
pub use self::store::{
    Acquire, BackendWarning, LeaderInfo, LeaseStore, MemoryStore, RedisStore, RedisStoreBuilder,
};

/// The `redis` crate this one is built on: its types appear in [`RedisStore`]'s API
/// ([`RedisStore::query`] takes a `redis::Cmd`), so use this one to name them.
pub use redis;

/// A result whose error is a [`StoreError`] unless another is named.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Asks the store who leads `duty` (under key prefix `prefix`) right now.
///
/// # Errors
/// The [`StoreError`] of the read.
///
/// # Panics
/// Never (a store call outside a tokio runtime fails instead, for the Redis store).
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn current_leader<S: LeaseStore>(
    store: &S,
    prefix: &str,
    duty: &str,
) -> Result<Option<LeaderInfo>, StoreError> {
    store.leader(&keys::DutyKeys::new(prefix, duty)).await
}
