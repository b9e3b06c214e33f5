//! Plumbing shared with Leasehold's sibling crates (the partition coordinator, the CLI,
//! the bench): the reply parser, scripts (run with `RedisStore::eval`), raw reads of
//! a duty's keys and of the key space, name and lease checks, tokens, the runner of a
//! granted term and the renew grid.
//!
//! Hidden from the docs, with **no semver promise**: anything here may change in any
//! release. An application has no need of it.

pub use crate::elector::{Grant, GrantedTerm, TermCalls, TermConfig, TermHandle};
pub use crate::grid::RenewGrid;
pub use crate::keys::release_channel;
pub use crate::store::ANY_RELEASE;
pub use crate::store::redis::{DutyKeysRead, FENCE_LUA, LIFETIME_LUA, LuaScript, Parse};
pub use crate::token::{new_token, replica_of_token, token_with};
pub use crate::validate::{validate_lease, validate_name};

use crate::error::StoreError;
use crate::keys::DutyKeys;
use crate::store::RedisStore;

/// A duty's keys as they are, in one read: whatever the lease key holds (a token or
/// someone else's data), its time left, and the last fence issued. Read-only.
///
/// # Errors
/// The [`StoreError`] of the read; [`StoreError::Protocol`] if the fence is not a
/// number; [`StoreError::WrongType`] if a key holds another type.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn read_duty(store: &RedisStore, keys: &DutyKeys) -> Result<DutyKeysRead, StoreError> {
    store.read_duty(keys).await
}

/// One step of a SCAN over the key space for keys matching `pattern` (a SCAN MATCH
/// glob): the next cursor (`"0"` once done) and the keys found; `count` is the
/// server's hint for how many keys a step looks at. Start with cursor `"0"`. On a
/// Redis Cluster the scan goes through every primary in turn (its cursor names the
/// primary: pass it back as it is).
///
/// # Errors
/// The [`StoreError`] of the call.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn scan_step(
    store: &RedisStore,
    cursor: &str,
    pattern: &str,
    count: usize,
) -> Result<(String, Vec<String>), StoreError> {
    store.scan_step(cursor, pattern, count).await
}

/// The release notifications published on `channel` (a partition group's notices
/// share their prefix's release channel), as
/// [`LeaseStore::release_events`](crate::LeaseStore::release_events) gives them.
pub fn release_events(
    store: &RedisStore,
    channel: &str,
) -> tokio::sync::broadcast::Receiver<String> {
    use crate::LeaseStore as _;
    store.release_events(&DutyKeys::of_channel(channel))
}

/// A term's [`Leadership`](crate::Leadership) with fence 7, replica `a`, duty `duty` and
/// local deadline `deadline`, not run by any elector: for Leasehold's own unit tests of
/// what wraps it.
pub fn term_for_tests(duty: &str, deadline: tokio::time::Instant) -> crate::Leadership {
    crate::Leadership::new(
        crate::Fence(7),
        "a",
        duty,
        tokio_util::sync::CancellationToken::new(),
        deadline,
    )
}

/// The error of a Leasehold component that has stopped, naming it (`"coordinator"`).
pub const fn stopped(what: &'static str) -> crate::Stopped {
    crate::Stopped::new(what)
}

/// [`RedisStore::eval`] with arguments that are bytes, not text (state a term leaves
/// for the next).
///
/// # Errors
/// The [`StoreError`] of the call.
///
/// # Cancel safety
/// If the future is dropped, the script may or may not have run.
pub async fn eval_bytes(
    store: &RedisStore,
    script: &LuaScript,
    keys: &[&str],
    args: &[&[u8]],
) -> Result<redis::Value, StoreError> {
    store.eval_bytes(script, keys, args).await
}

/// [`RedisStore::eval`] of a script that grants or extends a lease (a group's heartbeat
/// or batch claim), then, if replication waits are on
/// ([`crate::LeaseStore::with_replica_acks`], `wait_for_replicas`), `WAIT` on the same
/// connection: fewer acknowledgements than wanted are [`StoreError::Replication`].
///
/// # Errors
/// The [`StoreError`] of the call.
///
/// # Cancel safety
/// If the future is dropped, the script may or may not have run.
pub async fn eval_acked(
    store: &RedisStore,
    script: &LuaScript,
    keys: &[&str],
    args: &[&str],
) -> Result<redis::Value, StoreError> {
    store.eval_acked(script, keys, args).await
}
