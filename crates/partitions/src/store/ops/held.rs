//! held: the terms a session holds (`lua/held.lua`). Read-only.

use std::sync::LazyLock;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::{group_script, triples};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::Group;
use crate::store::protocol::Granted;

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("held.lua");

impl Group {
    /// The twin of `lua/held.lua`.
    pub(crate) fn held_by(&self, session: &str) -> Vec<Granted> {
        self.held.get(session).map_or_else(Vec::new, |set| {
            set.iter()
                .filter(|n| self.owners.get(*n).map(String::as_str) == Some(session))
                .map(|n| {
                    (
                        n.clone(),
                        Fence(self.fences.get(n).copied().unwrap_or(0)),
                        self.weight(n),
                    )
                })
                .collect()
        })
    }
}

/// The terms a session holds, with their weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held(pub(crate) String);

impl Held {
    /// The terms `session` holds.
    pub(crate) fn new(session: &str) -> Self {
        Self(session.to_owned())
    }
}

impl Op for Held {
    type Reply = Vec<Granted>;

    async fn redis(
        &self,
        store: &RedisStore,
        keys: &GroupKeys,
    ) -> Result<Vec<Granted>, StoreError> {
        let session = self.0.as_str();
        let reply = store.eval(&SCRIPT, &keys.all(), &[session]).await?;
        triples(&mut Parse::new("held", Value::Array(vec![reply])))
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<Granted> {
        store
            .read(keys, |g, _| g.held_by(&self.0))
            .unwrap_or_default()
    }
}
