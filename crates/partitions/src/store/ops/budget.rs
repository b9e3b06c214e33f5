//! budget: moves taken out of the group's move budget for the current window
//! (`lua/budget.lua`), before a replica hands partitions over to even out the group.

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::LuaScript;
use leasehold_election::{RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("budget.lua");

impl Group {
    /// The twin of `lua/budget.lua`.
    pub(crate) fn take_budget(
        &mut self,
        want: usize,
        budget: u32,
        window: Duration,
        now: Now,
    ) -> usize {
        let Some(meta) = self.meta.as_mut() else {
            return 0;
        };
        let window = u64::try_from(window.as_millis().max(1)).unwrap_or(u64::MAX);
        let win = now.ms / window;
        let used = if meta.budget.window == Some(win) {
            meta.budget.used
        } else {
            0
        };
        let grant = want.min(
            usize::try_from(budget)
                .unwrap_or(usize::MAX)
                .saturating_sub(used),
        );
        if grant > 0 {
            meta.budget.window = Some(win);
            meta.budget.used = used + grant;
        }
        grant
    }
}

/// Takes up to `want` moves out of the group's move budget (`budget` moves per
/// `window`, on the server's clock); replies how many may be made now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TakeBudget {
    pub(crate) want: usize,
    pub(crate) budget: u32,
    pub(crate) window: Duration,
}

impl TakeBudget {
    /// `want` moves out of `budget` per `window`.
    pub(crate) fn new(want: usize, budget: u32, window: Duration) -> Self {
        Self {
            want,
            budget,
            window,
        }
    }
}

impl Op for TakeBudget {
    type Reply = usize;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<usize, StoreError> {
        let window = super::millis(self.window);
        let (budget, want) = (self.budget.to_string(), self.want.to_string());
        match store
            .eval(&SCRIPT, &keys.all(), &[&window, &budget, &want])
            .await?
        {
            Value::Int(n) => Ok(usize::try_from(n).unwrap_or(0)),
            other => Err(StoreError::Protocol(format!(
                "budget replied {other:?}, not a count"
            ))),
        }
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> usize {
        store.with(keys, |g, now| {
            (
                g.take_budget(self.want, self.budget, self.window, now),
                false,
            )
        })
    }
}
