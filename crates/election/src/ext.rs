//! Plumbing shared with Leasehold's sibling crates (the partition coordinator, the CLI,
//! the bench): the reply parser, the script runner, name and lease checks, tokens,
//! grants and the renew grid.
//!
//! For Leasehold's own crates; no semver promise. The items also stay at their older
//! paths (`leasehold_election::LuaScript`, `config::validate_name`, ...).

use redis::Value;

pub use crate::config::{validate_lease, validate_name};
pub use crate::elector::Grant;
pub use crate::grid::RenewGrid;
pub use crate::keys::{new_token, replica_of_token};
pub use crate::store::redis::{FENCE_LUA, LuaScript, Parse};

use crate::error::StoreError;
use crate::store::RedisStore;

/// Runs `script` on `store`: [`RedisStore::eval`].
///
/// # Errors
/// The [`StoreError`] of the call.
///
/// # Panics
/// Never.
///
/// # Cancel safety
/// As [`RedisStore::eval`]: if the future is dropped, the script may or may not have run.
pub async fn eval(
    store: &RedisStore,
    script: &LuaScript,
    keys: &[&str],
    args: &[&str],
) -> Result<Value, StoreError> {
    store.eval(script, keys, args).await
}
