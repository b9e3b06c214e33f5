//! drain: an operator's drain of a replica id (`lua/drain.lua`).

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
use crate::store::protocol::ReplicaState;

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("drain.lua");

/// What a drain (or an undrain) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainReply {
    /// Done (or it was so already).
    Done,
    /// The replica is not live (and, for an undrain, not drained).
    Unknown,
    /// No other live replica would take part: refused (unless forced).
    Last,
    /// The group does not exist.
    NoGroup,
    /// The group was just created again: try again after this long.
    Restoring(Duration),
}

/// The reply of `lua/drain.lua`.
pub(super) fn parse(reply: Value) -> Result<DrainReply, StoreError> {
    let mut p = Parse::new("drain", reply);
    let r = match p.next_string()?.as_str() {
        "ok" => DrainReply::Done,
        "unknown" => DrainReply::Unknown,
        "last" => DrainReply::Last,
        "nogroup" => DrainReply::NoGroup,
        "restoring" => DrainReply::Restoring(ms(p.next_int()?)),
        other => return Err(StoreError::Protocol(format!("drain replied {other:?}"))),
    };
    p.finish()?;
    Ok(r)
}

impl Group {
    /// The twin of `lua/drain.lua`; whether to publish the notice.
    pub(crate) fn drain(
        &mut self,
        op: Option<&str>,
        replica: &str,
        on: bool,
        force: bool,
        now: Now,
    ) -> (DrainReply, bool) {
        if let Some(OpReply::Drain(r)) = self.replayed(op, now) {
            return (r, false);
        }
        if self.meta.is_none() {
            return (DrainReply::NoGroup, false);
        }
        if let Some(wait) = self.change_wait(now) {
            return (DrainReply::Restoring(wait), false);
        }
        let is_live = self.members.get(replica).is_some_and(|exp| *exp > now.ms);
        if !on {
            let was = self.drains.remove(replica);
            if !was && !is_live {
                return (DrainReply::Unknown, false);
            }
            if was {
                self.bump_set();
            }
            self.answer(op, OpReply::Drain(DrainReply::Done), now);
            return (DrainReply::Done, was);
        }
        if !is_live {
            return (DrainReply::Unknown, false);
        }
        if !force && !self.drains.contains(replica) {
            let others = self
                .members
                .iter()
                .filter(|(r, exp)| **exp > now.ms && r.as_str() != replica)
                .filter(|(r, _)| {
                    !matches!(
                        self.replicas.states.get(*r),
                        Some(ReplicaState::Leaving | ReplicaState::Draining)
                    ) && !self.drains.contains(*r)
                })
                .count();
            if others == 0 {
                return (DrainReply::Last, false);
            }
        }
        if self.drains.insert(replica.to_owned()) {
            self.bump_set();
        }
        self.answer(op, OpReply::Drain(DrainReply::Done), now);
        (DrainReply::Done, true)
    }
}

/// Drains (or undrains) `replica`; `op` names an operator's request, whose reply is
/// kept for a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Drain {
    pub(crate) op: Option<String>,
    pub(crate) replica: String,
    pub(crate) on: bool,
    pub(crate) force: bool,
}

impl Drain {
    /// Drains (`on`) or undrains `replica`, for request `op`.
    pub(crate) fn new(op: Option<&str>, replica: &str, on: bool, force: bool) -> Self {
        Self {
            op: op.map(str::to_owned),
            replica: replica.to_owned(),
            on,
            force,
        }
    }
}

impl Op for Drain {
    type Reply = DrainReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<DrainReply, StoreError> {
        let (op, replica, on, force) = (
            self.op.as_deref(),
            self.replica.as_str(),
            self.on,
            self.force,
        );
        let args = [
            replica,
            if on { "1" } else { "0" },
            if force { "1" } else { "0" },
            &keys.channel,
            &keys.notice,
        ];
        parse(eval_with_op(store, &SCRIPT, keys, op, &args).await?)
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> DrainReply {
        let op = self.op.as_deref();
        store.with(keys, |g, now| {
            g.drain(op, &self.replica, self.on, self.force, now)
        })
    }
}
