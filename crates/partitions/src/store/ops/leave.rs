//! leave: ends a session gracefully (`lua/leave.lua`).

use std::sync::LazyLock;

use leasehold_election::ext::LuaScript;
use leasehold_election::{RedisStore, StoreError};

use super::Op;
use super::group_script;
use super::moves::MoveCause;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::REAP_BUDGET;
use crate::store::memory::{Group, Now};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("leave.lua");

impl Group {
    /// The twin of `lua/leave.lua`; whether the session ended (and the notice goes out).
    pub(crate) fn leave(&mut self, replica: &str, process: &str, session: &str, now: Now) -> bool {
        let holder = self
            .replicas
            .holders
            .get(replica)
            .cloned()
            .unwrap_or_else(|| session.to_owned());
        if self.sessions.get(replica).map(String::as_str) != Some(session) || holder != process {
            return false;
        }
        self.teardown(replica, Some(session), now.ms);
        self.ends
            .ended_sessions
            .insert(session.to_owned(), MoveCause::Leave);
        self.free_ended(REAP_BUDGET);
        true
    }
}

/// Ends `replica`'s session `session` (if it is the current one and `process` holds
/// it) and frees what it still holds. Safe to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leave {
    pub(crate) replica: String,
    pub(crate) process: String,
    pub(crate) session: String,
}

impl Leave {
    /// Ends `replica`'s `session`, held by `process`.
    pub(crate) fn new(replica: &str, process: &str, session: &str) -> Self {
        Self {
            replica: replica.to_owned(),
            process: process.to_owned(),
            session: session.to_owned(),
        }
    }
}

impl Op for Leave {
    type Reply = ();

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<(), StoreError> {
        let (replica, process, session) = (
            self.replica.as_str(),
            self.process.as_str(),
            self.session.as_str(),
        );
        let budget = REAP_BUDGET.to_string();
        let args = [
            replica,
            process,
            session,
            &keys.channel,
            &keys.notice,
            &budget,
        ];
        store.eval(&SCRIPT, &keys.all(), &args).await.map(drop)
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) {
        store.with(keys, |g, now| {
            (
                (),
                g.leave(&self.replica, &self.process, &self.session, now),
            )
        });
    }
}
