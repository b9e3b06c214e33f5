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

/// Every group script by name.
#[cfg(any(test, feature = "testing"))]
fn scripts() -> [(&'static str, &'static LuaScript); 24] {
    [
        ("tick", &ops::tick::SCRIPT),
        ("heartbeat", &ops::tick::HEARTBEAT),
        ("claim", &ops::claim::SCRIPT),
        ("release", &ops::release::SCRIPT),
        ("handoff", &ops::handoff::SCRIPT),
        ("leave", &ops::leave::SCRIPT),
        ("add", &ops::change::ADD),
        ("remove", &ops::change::REMOVE),
        ("version", &ops::version::SCRIPT),
        ("held", &ops::held::SCRIPT),
        ("set_page", &ops::read::SET_PAGE),
        ("restore", &ops::restore::SCRIPT),
        ("adopt", &ops::adopt::SCRIPT),
        ("drain", &ops::drain::SCRIPT),
        ("weight", &ops::weight::SCRIPT),
        ("prefer", &ops::prefer::SCRIPT),
        ("owner", &ops::read::OWNER),
        ("moves", &ops::moves::SCRIPT),
        ("budget", &ops::budget::SCRIPT),
        ("report", &ops::report::SCRIPT),
        ("list", &ops::read::LIST),
        ("status_head", &ops::read::STATUS_HEAD),
        ("status_page", &ops::read::STATUS_PAGE),
        ("routes", &ops::routes::SCRIPT),
    ]
}

/// Every group script's own file (without the libraries), by name.
#[cfg(test)]
pub(crate) fn sources() -> Vec<(&'static str, &'static str)> {
    vec![
        ("tick", include_str!("lua/tick.lua")),
        ("heartbeat", include_str!("lua/heartbeat.lua")),
        ("claim", include_str!("lua/claim.lua")),
        ("release", include_str!("lua/release.lua")),
        ("handoff", include_str!("lua/handoff.lua")),
        ("leave", include_str!("lua/leave.lua")),
        ("add", include_str!("lua/add.lua")),
        ("remove", include_str!("lua/remove.lua")),
        ("version", include_str!("lua/version.lua")),
        ("held", include_str!("lua/held.lua")),
        ("set_page", include_str!("lua/set_page.lua")),
        ("restore", include_str!("lua/restore.lua")),
        ("adopt", include_str!("lua/adopt.lua")),
        ("drain", include_str!("lua/drain.lua")),
        ("weight", include_str!("lua/weight.lua")),
        ("prefer", include_str!("lua/prefer.lua")),
        ("owner", include_str!("lua/owner.lua")),
        ("moves", include_str!("lua/moves.lua")),
        ("budget", include_str!("lua/budget.lua")),
        ("report", include_str!("lua/report.lua")),
        ("list", include_str!("lua/list.lua")),
        ("status_head", include_str!("lua/status_head.lua")),
        ("status_page", include_str!("lua/status_page.lua")),
        ("routes", include_str!("lua/routes.lua")),
    ]
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
        .map(|(name, script)| (name, script.hash().to_owned()))
        .collect()
}
