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
use super::ops::routes::RouteRead;
use super::protocol::{
    AddReply, Adopt, AdoptReply, Change, ClaimReply, ClaimRequest, DrainReply, GivenBack, Granted,
    Move, PreferReply, Protocol, RemoveReply, RestoreStep, SetPage, StatusHead, Taken, Term,
    TickReply, TickRequest, VersionStep, WeightReply,
};
use super::status::PartitionOwner;
use crate::keys::GroupKeys;
use crate::store::protocol::Reported;

impl Protocol for RedisStore {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        ops::tick::redis(self, keys, req).await
    }

    async fn claim(&self, keys: &GroupKeys, req: &ClaimRequest) -> Result<ClaimReply, StoreError> {
        ops::claim::redis(self, keys, req).await
    }

    async fn release(
        &self,
        keys: &GroupKeys,
        session: &str,
        terms: &[GivenBack],
        state_ttl: std::time::Duration,
        hold: std::time::Duration,
    ) -> Result<Vec<bool>, StoreError> {
        ops::release::redis(self, keys, session, terms, state_ttl, hold).await
    }

    async fn take_hand_offs(
        &self,
        keys: &GroupKeys,
        terms: &[Term],
    ) -> Result<Vec<Taken>, StoreError> {
        ops::handoff::redis(self, keys, terms).await
    }

    async fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        process: &str,
        session: &str,
    ) -> Result<(), StoreError> {
        ops::leave::redis(self, keys, replica, process, session).await
    }

    async fn add(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> Result<AddReply, StoreError> {
        ops::change::add(self, keys, mode, names).await
    }

    async fn remove(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> Result<RemoveReply, StoreError> {
        ops::change::remove(self, keys, mode, names).await
    }

    async fn list_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        ops::read::list(self, keys, offset, limit).await
    }

    async fn set_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Option<SetPage>, StoreError> {
        ops::read::set_page(self, keys, offset, limit).await
    }

    async fn set_version(
        &self,
        keys: &GroupKeys,
        version: u64,
        step: VersionStep<'_>,
    ) -> Result<bool, StoreError> {
        ops::version::redis(self, keys, version, step).await
    }

    async fn restore(&self, keys: &GroupKeys, step: &RestoreStep) -> Result<bool, StoreError> {
        ops::restore::redis(self, keys, step).await
    }

    async fn adopt(&self, keys: &GroupKeys, adopt: &Adopt) -> Result<AdoptReply, StoreError> {
        ops::adopt::redis(self, keys, adopt).await
    }

    async fn drain(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        replica: &str,
        on: bool,
        force: bool,
    ) -> Result<DrainReply, StoreError> {
        ops::drain::redis(self, keys, op, replica, on, force).await
    }

    async fn held(&self, keys: &GroupKeys, session: &str) -> Result<Vec<Granted>, StoreError> {
        ops::held::redis(self, keys, session).await
    }

    async fn report(
        &self,
        keys: &GroupKeys,
        session: &str,
        weights: &[Reported],
    ) -> Result<Vec<bool>, StoreError> {
        ops::report::redis(self, keys, session, weights).await
    }

    async fn set_weight(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        weight: u64,
    ) -> Result<WeightReply, StoreError> {
        ops::weight::redis(self, keys, op, partition, weight).await
    }

    async fn prefer(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        replica: Option<&str>,
    ) -> Result<PreferReply, StoreError> {
        ops::prefer::redis(self, keys, op, partition, replica).await
    }

    async fn owner(
        &self,
        keys: &GroupKeys,
        partition: &str,
    ) -> Result<Option<PartitionOwner>, StoreError> {
        ops::read::owner(self, keys, partition).await
    }

    async fn moves(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Move>, StoreError> {
        ops::moves::redis(self, keys, ops::moves::Page::After(after), limit).await
    }

    async fn newest_moves(&self, keys: &GroupKeys, limit: usize) -> Result<Vec<Move>, StoreError> {
        ops::moves::redis(self, keys, ops::moves::Page::Newest, limit).await
    }

    async fn routes(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Option<RouteRead>, StoreError> {
        ops::routes::redis(self, keys, after, limit).await
    }

    async fn take_budget(
        &self,
        keys: &GroupKeys,
        want: usize,
        budget: u32,
        window: std::time::Duration,
    ) -> Result<usize, StoreError> {
        ops::budget::redis(self, keys, want, budget, window).await
    }

    async fn status_head(&self, keys: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
        ops::read::status_head(self, keys).await
    }

    async fn status_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PartitionOwner>, StoreError> {
        ops::read::status_page(self, keys, offset, limit).await
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
