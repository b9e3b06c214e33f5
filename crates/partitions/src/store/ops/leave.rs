//! leave: ends a session gracefully (`lua/leave.lua`).

use std::sync::LazyLock;

use leasehold_election::ext::LuaScript;
use leasehold_election::{RedisStore, StoreError};

use super::group_script;
use super::moves::MoveCause;
use crate::keys::GroupKeys;
use crate::store::REAP_BUDGET;
use crate::store::memory::{Group, Now};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("leave.lua");

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    replica: &str,
    process: &str,
    session: &str,
) -> Result<(), StoreError> {
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

impl Group {
    /// The twin of `lua/leave.lua`; whether the session ended (and the notice goes out).
    pub(crate) fn leave(&mut self, replica: &str, process: &str, session: &str, now: Now) -> bool {
        let holder = self
            .holders
            .get(replica)
            .cloned()
            .unwrap_or_else(|| session.to_owned());
        if self.sessions.get(replica).map(String::as_str) != Some(session) || holder != process {
            return false;
        }
        self.teardown(replica, Some(session), now.ms);
        self.ended_sessions
            .insert(session.to_owned(), MoveCause::Leave);
        self.free_ended(REAP_BUDGET);
        true
    }
}
