//! prefer: one partition's preferred replica, set or removed (`lua/prefer.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::{OpReply, eval_with_op, group_script, ms};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("prefer.lua");

/// What setting or removing a preference did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreferReply {
    /// Done; the replica id preferred before (`None`: none).
    Set(Option<String>),
    /// The partition is not in the set.
    Unknown,
    /// The group does not exist.
    NoGroup,
    /// The group was just created again: try again after this long.
    Restoring(Duration),
}

/// The reply of `lua/prefer.lua`.
pub(super) fn parse(reply: Value) -> Result<PreferReply, StoreError> {
    let mut p = Parse::new("prefer", reply);
    let r = match p.next_string()?.as_str() {
        "ok" => PreferReply::Set(Some(p.next_string()?).filter(|s| !s.is_empty())),
        "unknown" => PreferReply::Unknown,
        "nogroup" => PreferReply::NoGroup,
        "restoring" => PreferReply::Restoring(ms(p.next_int()?)),
        other => return Err(StoreError::Protocol(format!("prefer replied {other:?}"))),
    };
    p.finish()?;
    Ok(r)
}

impl Group {
    /// The twin of `lua/prefer.lua`; whether to publish the notice.
    pub(crate) fn prefer(
        &mut self,
        op: Option<&str>,
        partition: &str,
        replica: Option<&str>,
        now: Now,
    ) -> (PreferReply, bool) {
        if let Some(OpReply::Prefer(r)) = self.replayed(op, now) {
            return (r, false);
        }
        if self.meta.is_none() {
            return (PreferReply::NoGroup, false);
        }
        if let Some(wait) = self.change_wait(now) {
            return (PreferReply::Restoring(wait), false);
        }
        if !self.set.positions.contains_key(partition) {
            return (PreferReply::Unknown, false);
        }
        let old = self.set.prefs.get(partition).cloned();
        let changed = old.as_deref() != replica;
        if changed {
            match replica {
                Some(r) => self.set.prefs.insert(partition.to_owned(), r.to_owned()),
                None => self.set.prefs.remove(partition),
            };
            self.bump_set();
        }
        let r = PreferReply::Set(old);
        self.answer(op, OpReply::Prefer(r.clone()), now);
        (r, changed)
    }
}

/// Prefers `partition` on `replica` (`None`: removes its preference); replicas read it
/// with the set. `op`: the operator's request id, for a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prefer {
    pub(crate) op: Option<String>,
    pub(crate) partition: String,
    pub(crate) replica: Option<String>,
}

impl Prefer {
    /// Prefers `partition` on `replica`, for request `op`.
    pub(crate) fn new(op: Option<&str>, partition: &str, replica: Option<&str>) -> Self {
        Self {
            op: op.map(str::to_owned),
            partition: partition.to_owned(),
            replica: replica.map(str::to_owned),
        }
    }
}

impl Op for Prefer {
    type Reply = PreferReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<PreferReply, StoreError> {
        let (op, partition, replica) = (
            self.op.as_deref(),
            self.partition.as_str(),
            self.replica.as_deref(),
        );
        let args = [
            partition,
            replica.unwrap_or(""),
            &keys.channel,
            &keys.notice,
        ];
        parse(eval_with_op(store, &SCRIPT, keys, op, &args).await?)
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> PreferReply {
        let (op, replica) = (self.op.as_deref(), self.replica.as_deref());
        store.with(keys, |g, now| g.prefer(op, &self.partition, replica, now))
    }
}
