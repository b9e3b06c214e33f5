//! Reads the libraries do not offer, each one short read-only Lua script under the
//! call timeout: whether a group exists.

use std::sync::LazyLock;

use leasehold_election::ext::{LuaScript, Parse, eval};
use leasehold_election::{RedisStore, StoreError};
use leasehold_partitions::keys::GroupKeys;

/// KEYS: the group's metadata. Reply 1 if the group exists, else 0 (the test the group
/// scripts make). Read-only.
static GROUP_EXISTS: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new("return redis.call('HEXISTS', KEYS[1], 'count')"));

/// Whether `group` exists under `prefix`.
///
/// # Errors
/// The store's error.
pub async fn group_exists(
    store: &RedisStore,
    prefix: &str,
    group: &str,
) -> Result<bool, StoreError> {
    let keys = GroupKeys::new(prefix, group);
    let reply = eval(store, &GROUP_EXISTS, &[&keys.meta], &[]).await?;
    Ok(Parse::new("group exists", reply).next_int()? == 1)
}
