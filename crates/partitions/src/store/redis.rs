//! The group protocol on Redis: one Lua script per operation (`lua/*.lua`, run through
//! [`ops`]), every key of the group in `KEYS` (they share the group's hash tag, so this
//! runs unchanged on a cluster). Every group script is safe to run twice, so the
//! store's retry on a broken connection never applies one twice.
//!
//! Cost per call, with N members, P partitions and k partitions moved: a tick is
//! O(N log P) (N session counts), a claim or a release of k is O(k log P), ending a
//! session of k partitions is O(k log P) spread over ticks in chunks of
//! [`super::REAP_BUDGET`], adding or removing k partitions is O(k log P). Nothing in a
//! steady tick reads or writes per-partition state.

#[cfg(any(test, feature = "testing"))]
use leasehold_election::ext::LuaScript;
use leasehold_election::{BackendWarning, LeaseStore, RedisStore, StoreError};
use tokio::sync::broadcast;

use super::ops;
use super::ops::Op;
use super::protocol::Protocol;
use crate::keys::GroupKeys;

impl Protocol for RedisStore {
    async fn run<O: Op>(&self, keys: &GroupKeys, op: &O) -> Result<O::Reply, StoreError> {
        op.redis(self, keys).await
    }

    async fn publish(&self, keys: &GroupKeys, message: &str) -> Result<(), StoreError> {
        self.query(redis::cmd("PUBLISH").arg(&keys.channel).arg(message))
            .await
            .map(drop)
    }

    fn notices(&self, keys: &GroupKeys) -> broadcast::Receiver<String> {
        // The release channel of the prefix.
        leasehold_election::ext::release_events(self, &keys.channel)
    }

    async fn warnings(&self) -> Result<Vec<BackendWarning>, StoreError> {
        self.self_check().await
    }
}

/// Every group script: its name, the script, and its own file (`lua/<name>.lua`,
/// without the libraries). The one list an operation's script is added to.
#[cfg(any(test, feature = "testing"))]
fn scripts() -> [(&'static str, &'static LuaScript, &'static str); 24] {
    macro_rules! scripts {
        ($($name:ident => $script:path,)*) => {
            [$((
                stringify!($name),
                &$script,
                include_str!(concat!("lua/", stringify!($name), ".lua")),
            )),*]
        };
    }
    scripts! {
        tick => ops::tick::SCRIPT,
        heartbeat => ops::tick::HEARTBEAT,
        claim => ops::claim::SCRIPT,
        release => ops::release::SCRIPT,
        handoff => ops::handoff::SCRIPT,
        leave => ops::leave::SCRIPT,
        add => ops::change::ADD,
        remove => ops::change::REMOVE,
        version => ops::version::SCRIPT,
        held => ops::held::SCRIPT,
        set_page => ops::read::SET_PAGE,
        restore => ops::restore::SCRIPT,
        adopt => ops::adopt::SCRIPT,
        drain => ops::drain::SCRIPT,
        weight => ops::weight::SCRIPT,
        prefer => ops::prefer::SCRIPT,
        owner => ops::read::OWNER,
        moves => ops::moves::SCRIPT,
        budget => ops::budget::SCRIPT,
        report => ops::report::SCRIPT,
        list => ops::read::LIST,
        status_head => ops::read::STATUS_HEAD,
        status_page => ops::read::STATUS_PAGE,
        routes => ops::routes::SCRIPT,
    }
}

/// Every group script's own file (without the libraries), by name.
#[cfg(test)]
pub(crate) fn sources() -> Vec<(&'static str, &'static str)> {
    scripts()
        .into_iter()
        .map(|(name, _, source)| (name, source))
        .collect()
}

/// Every group script by name with the SHA1 digest `EVALSHA` names it by, so a
/// benchmark can tell the scripts apart in `SLOWLOG` (`tick`, `heartbeat`, `claim`, `release`,
/// `handoff`, `leave`, `add`, `remove`, `version`, `held`, `set_page`, `restore`, `adopt`, `budget`, `report` are the
/// coordination traffic; `drain`, `weight`, `owner`, `moves`, `list`, `status_head`,
/// `status_page` are an operator's; `routes` a router's). With the `testing` feature.
#[cfg(any(test, feature = "testing"))]
pub fn script_hashes() -> Vec<(&'static str, String)> {
    scripts()
        .into_iter()
        .map(|(name, script, _)| (name, script.hash().to_owned()))
        .collect()
}
