#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod backoff;
pub mod config;
mod elector;
mod error;
#[doc(hidden)]
pub mod ext;
mod fence;
mod fenced;
mod grid;
pub mod keys;
mod leadership;
pub mod metrics;
mod status;
pub mod store;

pub use self::config::{ConfigError, ElectorConfig, ElectorConfigBuilder};
pub use self::elector::{DutyError, DutyResult, Elector, ElectorHandle, ElectorStopped, Grant};
pub use self::error::{BuildError, StoreError};
pub use self::fence::Fence;
pub use self::fenced::{FencedWriteError, FencedWriter};
pub use self::grid::RenewGrid;
pub use self::leadership::{Leadership, TermOver};
pub use self::status::{Role, Status, TermEnd, TermEndReason};
pub use self::store::{
    Acquire, BackendWarning, LeaderInfo, LeaseStore, LuaScript, MemoryStore, RedisStore,
};

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
