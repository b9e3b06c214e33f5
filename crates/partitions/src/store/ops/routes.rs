//! routes: what a [`crate::Router`] reads (`lua/routes.lua`): the whole table of
//! owners, or the ledger entries after the last one it applied. Read-only.

use std::sync::LazyLock;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("routes.lua");

/// What a router read of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRead {
    /// The group's incarnation.
    pub life: String,
    /// The ledger's newest entry id (`None`: the ledger is empty).
    pub last: Option<String>,
    /// Every replica's advertised address (`None`: it advertises none).
    pub addresses: Vec<(String, Option<String>)>,
    /// The owners, or the moves.
    pub body: RouteBody,
}

/// The owners ([`RouteBody::Table`]), or the moves after an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteBody {
    /// Every partition with a live owner: (partition, replica, fence).
    Table(Vec<(String, String, Fence)>),
    /// The ledger entries after the one named: (partition, replica, fence, id), oldest
    /// first.
    After(Vec<(String, String, Fence, String)>),
    /// The ledger no longer holds the entry named (trimmed, or lost with Redis's data),
    /// or holds more after it than asked for: read the whole table.
    Gap,
}

/// The address in a replica's INFO value (`host pid \t address`).
pub(crate) fn address_of(info: &str) -> Option<String> {
    info.split_once('\t')
        .map(|(_, a)| a.to_owned())
        .filter(|a| !a.is_empty())
}

impl Group {
    /// The twin of `lua/routes.lua`.
    pub(crate) fn routes(&self, after: Option<&str>, limit: usize, now: Now) -> Option<RouteRead> {
        let meta = self.meta.as_ref()?;
        let addresses = self
            .replicas
            .info
            .iter()
            .map(|(r, i)| (r.clone(), address_of(i)))
            .collect();
        let body = match after {
            None => RouteBody::Table(
                self.owners
                    .iter()
                    .filter(|(n, _)| !self.free_since.contains_key(*n))
                    .filter(|(_, t)| self.live(t, now).is_some())
                    .filter_map(|(n, t)| {
                        let f = *self.fences.get(n)?;
                        let r = leasehold_election::ext::replica_of_token(t).to_owned();
                        Some((n.clone(), r, Fence(f)))
                    })
                    .collect(),
            ),
            Some(id) => match self.log.moves.iter().position(|m| m.id == id) {
                Some(i) if self.log.moves.len() - i - 1 <= limit.max(1) => RouteBody::After(
                    self.log
                        .moves
                        .iter()
                        .skip(i + 1)
                        .map(|m| (m.partition.clone(), m.to.clone(), m.new_fence, m.id.clone()))
                        .collect(),
                ),
                _ => RouteBody::Gap,
            },
        };
        Some(RouteRead {
            life: meta.life.clone(),
            last: self.log.moves.back().map(|m| m.id.clone()),
            addresses,
            body,
        })
    }
}

/// What a router reads: every partition's live owner (`after` = `None`), or the moves
/// after the ledger entry `after` (at most `limit`); `None` if the group does not
/// exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Routes {
    pub(crate) after: Option<String>,
    pub(crate) limit: usize,
}

impl Routes {
    /// Owners, or up to `limit` moves after `after`.
    pub(crate) fn new(after: Option<&str>, limit: usize) -> Self {
        Self {
            after: after.map(str::to_owned),
            limit,
        }
    }
}

impl Op for Routes {
    type Reply = Option<RouteRead>;

    async fn redis(
        &self,
        store: &RedisStore,
        keys: &GroupKeys,
    ) -> Result<Option<RouteRead>, StoreError> {
        let (after, limit) = (self.after.as_deref(), self.limit);
        let limit = limit.max(1).to_string();
        let reply = store
            .eval(&SCRIPT, &keys.all(), &[after.unwrap_or(""), &limit])
            .await?;
        if matches!(reply, Value::Nil | Value::Boolean(false)) {
            return Ok(None);
        }
        let mut p = Parse::new("routes", reply);
        let life = p.next_string()?;
        let last = p.next_opt_string()?.filter(|s| !s.is_empty());
        let mut info = p.next_array()?;
        let mut addresses = Vec::with_capacity(info.remaining() / 2);
        while info.remaining() > 1 {
            let replica = info.next_string()?;
            addresses.push((replica, address_of(&info.next_string()?)));
        }
        let body = match p.next_value()? {
            Value::BulkString(b) if b == b"gap" => RouteBody::Gap,
            Value::SimpleString(s) if s == "gap" => RouteBody::Gap,
            rows => {
                let mut rows = Parse::new("routes", Value::Array(vec![rows])).next_array()?;
                if after.is_none() {
                    let mut out = Vec::with_capacity(rows.remaining() / 3);
                    while rows.remaining() > 2 {
                        let (p, r) = (rows.next_string()?, rows.next_string()?);
                        out.push((p, r, Fence(rows.next_u64()?)));
                    }
                    RouteBody::Table(out)
                } else {
                    let mut out = Vec::with_capacity(rows.remaining() / 4);
                    while rows.remaining() > 3 {
                        let (p, r) = (rows.next_string()?, rows.next_string()?);
                        let f = Fence(rows.next_u64()?);
                        out.push((p, r, f, rows.next_string()?));
                    }
                    RouteBody::After(out)
                }
            }
        };
        p.finish()?;
        Ok(Some(RouteRead {
            life,
            last,
            addresses,
            body,
        }))
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Option<RouteRead> {
        store
            .read(keys, |g, now| {
                g.routes(self.after.as_deref(), self.limit, now)
            })
            .flatten()
    }
}
