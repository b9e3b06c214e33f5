//! weight: one partition's weight (`lua/weight.lua`).

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

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("weight.lua");

/// What setting a weight did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightReply {
    /// Set; this was the weight before.
    Set(u64),
    /// The partition is not in the set.
    Unknown,
    /// The group does not exist.
    NoGroup,
    /// The group was just created again: try again after this long.
    Restoring(Duration),
}

/// The reply of `lua/weight.lua`.
pub(super) fn parse(reply: Value) -> Result<WeightReply, StoreError> {
    let mut p = Parse::new("weight", reply);
    let r = match p.next_string()?.as_str() {
        "ok" => WeightReply::Set(p.next_u64()?),
        "unknown" => WeightReply::Unknown,
        "nogroup" => WeightReply::NoGroup,
        "restoring" => WeightReply::Restoring(ms(p.next_int()?)),
        other => return Err(StoreError::Protocol(format!("weight replied {other:?}"))),
    };
    p.finish()?;
    Ok(r)
}

impl Group {
    /// The twin of `make_weighted` in `lib/meta.lua`: the group's first weight.
    pub(crate) fn make_weighted(&mut self) {
        let count = self.set.positions.len() as u64;
        let tokens: Vec<String> = self.sessions.values().cloned().collect();
        for t in tokens {
            let n = self.held.get(&t).map_or(0, |s| s.len()) as u64;
            self.loads.insert(t, n);
        }
        if let Some(m) = self.meta.as_mut() {
            m.weighted = true;
            m.total = count;
        }
    }

    /// The twin of `lua/weight.lua`; whether to publish the notice.
    pub(crate) fn set_weight(
        &mut self,
        op: Option<&str>,
        partition: &str,
        weight: u64,
        now: Now,
    ) -> (WeightReply, bool) {
        if let Some(OpReply::Weight(r)) = self.replayed(op, now) {
            return (r, false);
        }
        let answer = |g: &mut Self, r: WeightReply| {
            g.answer(op, OpReply::Weight(r), now);
            r
        };
        if self.meta.is_none() {
            return (WeightReply::NoGroup, false);
        }
        if let Some(wait) = self.change_wait(now) {
            return (WeightReply::Restoring(wait), false);
        }
        if !self.set.positions.contains_key(partition) {
            return (WeightReply::Unknown, false);
        }
        let (old, changed) = self.set_weight_of(partition, weight);
        if !changed {
            return (WeightReply::Set(old), false);
        }
        if let Some(m) = self.meta.as_mut() {
            m.wver += 1;
            m.sver += 1;
            m.rcount = 0;
        }
        (answer(self, WeightReply::Set(old)), true)
    }

    /// `set_weight` in `lib/set.lua`: sets `partition`'s weight (in the set); the old
    /// weight, and whether anything changed.
    pub(crate) fn set_weight_of(&mut self, partition: &str, weight: u64) -> (u64, bool) {
        if self.weighted() && self.weight(partition) == weight {
            return (weight, false);
        }
        if !self.weighted() {
            self.make_weighted();
        }
        let old = self.weight(partition);
        if weight == 1 {
            self.set.weights.remove(partition);
        } else {
            self.set.weights.insert(partition.to_owned(), weight);
        }
        if weight == 1 && self.set.weights.is_empty() {
            // Every weight is 1 again: unweighted.
            self.loads.clear();
            if let Some(m) = self.meta.as_mut() {
                m.weighted = false;
                m.total = 0;
            }
            return (old, true);
        }
        let delta = i128::from(weight) - i128::from(old);
        if let Some(m) = self.meta.as_mut() {
            m.total = u64::try_from((i128::from(m.total) + delta).max(0)).unwrap_or(0);
        }
        if let Some(owner) = self.owners.get(partition).cloned()
            && let Some(l) = self.loads.get_mut(&owner)
        {
            *l = u64::try_from((i128::from(*l) + delta).max(0)).unwrap_or(0);
        }
        (old, true)
    }
}

/// Sets a partition's weight (the group balances by weight from then on); the owner's
/// load follows at once. `op`: the operator's request id, for a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetWeight {
    pub(crate) op: Option<String>,
    pub(crate) partition: String,
    pub(crate) weight: u64,
}

impl SetWeight {
    /// Sets `partition`'s `weight`, for request `op`.
    pub(crate) fn new(op: Option<&str>, partition: &str, weight: u64) -> Self {
        Self {
            op: op.map(str::to_owned),
            partition: partition.to_owned(),
            weight,
        }
    }
}

impl Op for SetWeight {
    type Reply = WeightReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<WeightReply, StoreError> {
        let (op, partition, weight) = (self.op.as_deref(), self.partition.as_str(), self.weight);
        let w = weight.to_string();
        let args = [partition, w.as_str(), &keys.channel, &keys.notice];
        parse(eval_with_op(store, &SCRIPT, keys, op, &args).await?)
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> WeightReply {
        let op = self.op.as_deref();
        store.with(keys, |g, now| {
            g.set_weight(op, &self.partition, self.weight, now)
        })
    }
}
