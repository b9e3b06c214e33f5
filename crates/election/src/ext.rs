//! Plumbing shared with Leasehold's sibling crates (the partition coordinator, the CLI,
//! the bench): the reply parser, scripts (run with [`RedisStore::eval`]), raw reads of
//! a duty's keys and of the key space, name and lease checks, tokens, grants and the
//! renew grid.
//!
//! For Leasehold's own crates (the partition coordinator, the CLI, the bench): public
//! and documented so that they can use it, with **no semver promise**: anything here may
//! change in any release. An application has no need of it.

pub use crate::elector::Grant;
pub use crate::grid::RenewGrid;
pub use crate::keys::release_channel;
pub use crate::store::ANY_RELEASE;
pub use crate::store::redis::{DutyKeysRead, FENCE_LUA, LIFETIME_LUA, LuaScript, Parse};
pub use crate::token::{new_token, replica_of_token, token_with};
pub use crate::validate::{validate_lease, validate_name};

use crate::Elector;
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

/// `elector` leads the term of `grant` at once instead of campaigning (a lease someone
/// took on its behalf: a coordinator's batch claim), and stops once that term has
/// ended (after the release).
pub fn granted<S, F, Fut>(elector: Elector<S, F>, grant: Grant) -> Elector<S, F>
where
    S: crate::LeaseStore,
    F: Fn(crate::Leadership) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = crate::DutyResult> + Send + 'static,
{
    elector.granted(grant)
}

/// `builder` for an elector of a group of electors that renew together: its keys under
/// the group's hash tag (`<prefix>:{<group>}:<duty>:lease`), its renewals on the group's
/// renew grid
/// starting at `epoch` (never later than one renew interval after the last).
pub fn group_member(
    builder: crate::ElectorConfigBuilder,
    group: impl Into<String>,
    epoch: tokio::time::Instant,
) -> crate::ElectorConfigBuilder {
    builder.group_member(group.into(), epoch)
}

/// `config` for another duty (a group's template, for one of its duties).
pub fn with_duty(config: &crate::ElectorConfig, duty: &str) -> crate::ElectorConfig {
    let mut config = config.clone();
    config.duty = duty.to_owned();
    config
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
