//! Watching a partition group from the outside: `GroupAdmin::status` polls on the bench's
//! clock, and what a status says (owned by the live replicas, balanced).

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupStatus};
use tokio::time::{Instant, MissedTickBehavior, interval};

use crate::clock::now_us;
use crate::group::ownership::{Balance, Loads};
use crate::store::BoxError;

/// The key prefix every bench group uses (the library default).
pub const PREFIX: &str = "leasehold";

/// Reads one group's status from Redis, directly (never through a fault proxy).
#[derive(Debug, Clone)]
pub struct GroupWatch {
    store: RedisStore,
    group: String,
    every: Duration,
}

impl GroupWatch {
    /// Watches `group` through `store`, polling every `every`.
    pub fn new(store: RedisStore, group: &str, every: Duration) -> Self {
        Self {
            store,
            group: group.to_owned(),
            every,
        }
    }

    /// The store it reads through.
    pub fn store(&self) -> &RedisStore {
        &self.store
    }

    /// The group now; `None` before any replica has joined.
    ///
    /// # Errors
    /// The store's error.
    pub async fn status(&self) -> Result<Option<GroupStatus>, BoxError> {
        Ok(GroupAdmin::new(self.store.clone(), &self.group)?
            .with_key_prefix(PREFIX)?
            .status()
            .await?)
    }

    /// Polls until `done` holds; returns that status and when its reply arrived (wall
    /// µs). Every status read is also shown to `done`, so it can track changes. Failed
    /// reads are skipped.
    ///
    /// # Errors
    /// If `done` does not hold within `limit` (the message says what was last seen).
    pub async fn poll_until(
        &self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&GroupStatus) -> bool,
    ) -> Result<(GroupStatus, u64), BoxError> {
        let deadline = Instant::now() + limit;
        let mut tick = interval(self.every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut last: Option<GroupStatus> = None;
        loop {
            tick.tick().await;
            if let Ok(Some(status)) = self.status().await {
                let at = now_us();
                if done(&status) {
                    return Ok((status, at));
                }
                last = Some(status);
            }
            if Instant::now() >= deadline {
                let seen = last.as_ref().map_or_else(|| "nothing".to_owned(), describe);
                return Err(format!("{what}: not within {limit:?}; last seen {seen}").into());
            }
        }
    }
}

/// Whether every partition is leased by one of `live`.
pub fn owned_by(status: &GroupStatus, live: &[String]) -> bool {
    status
        .partitions
        .iter()
        .all(|p| p.owner.as_ref().is_some_and(|o| live.contains(o)))
}

/// Partitions leased per replica of `live` (0 for one that holds none).
pub fn counts(status: &GroupStatus, live: &[String]) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = live.iter().map(|r| (r.clone(), 0)).collect();
    for p in &status.partitions {
        if let Some(n) = p.owner.as_ref().and_then(|o| counts.get_mut(o)) {
            *n += 1;
        }
    }
    counts
}

/// max − min of [`counts`] (0 with no replicas).
pub fn spread_of(counts: &BTreeMap<String, usize>) -> usize {
    let max = counts.values().max().copied().unwrap_or(0);
    let min = counts.values().min().copied().unwrap_or(0);
    max - min
}

/// Every partition owned by `live`, every one of `live` in the heartbeat set (and no
/// one else), and spread ≤ 1 among them.
pub fn balanced(status: &GroupStatus, live: &[String]) -> bool {
    status.replicas.len() == live.len()
        && status.replicas.iter().all(|(r, _)| live.contains(r))
        && owned_by(status, live)
        && spread_of(&counts(status, live)) <= 1
}

/// [`balanced`], or with `Balance::Load`: every partition owned by `live`, every one
/// of `live` (and no one else) heartbeating, each within its share ± the largest weight.
pub fn balanced_by(status: &GroupStatus, live: &[String], balance: &Balance) -> bool {
    match balance {
        Balance::Count => balanced(status, live),
        Balance::Load(loads) => {
            status.replicas.len() == live.len()
                && status.replicas.iter().all(|(r, _)| live.contains(r))
                && owned_by(status, live)
                && loads.within(&loads_of(status, live, loads))
        }
    }
}

/// The weights (by `loads`) each of `live` holds, summed.
pub fn loads_of(status: &GroupStatus, live: &[String], loads: &Loads) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = live.iter().map(|r| (r.clone(), 0)).collect();
    for p in &status.partitions {
        if let Some(l) = p.owner.as_ref().and_then(|o| out.get_mut(o)) {
            *l += loads.weight(&p.partition);
        }
    }
    out
}

/// A one-line summary of a status, for error messages and progress.
pub fn describe(status: &GroupStatus) -> String {
    let unowned = status
        .partitions
        .iter()
        .filter(|p| p.owner.is_none())
        .count();
    let counts: Vec<String> = status
        .owned_counts()
        .iter()
        .map(|(r, n)| format!("{r}={n}"))
        .collect();
    format!("{} unowned, heartbeating [{}]", unowned, counts.join(", "))
}
