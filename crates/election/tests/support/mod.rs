//! Shared helpers for the real-Redis tests: stores, configs, and a duty that records
//! each term's interval on this process's clock.
#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_election::DutyKeys;
use leasehold_election::{
    Acquire, Elector, ElectorConfig, ElectorHandle, Fence, Leadership, LeaseStore, RedisStore, Role,
};
use leasehold_testkit::RedisServer;
use tokio::time::Instant;

/// One leadership term as the duty saw it.
#[derive(Debug, Clone)]
pub struct Term {
    pub replica: String,
    pub fence: Fence,
    pub start: Instant,
    pub end: Option<Instant>,
    /// The term's local deadline when it ended: the last instant this replica could
    /// have believed it led.
    pub deadline: Option<Instant>,
}

/// Every term of every elector in a test.
#[derive(Debug, Clone, Default)]
pub struct Terms(Arc<Mutex<Vec<Term>>>);

struct EndOnDrop {
    terms: Terms,
    index: usize,
    lead: Leadership,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        let mut all = self.terms.0.lock().unwrap();
        all[self.index].end = Some(Instant::now());
        all[self.index].deadline = Some(self.lead.deadline());
    }
}

impl Terms {
    pub fn all(&self) -> Vec<Term> {
        self.0.lock().unwrap().clone()
    }

    /// Asserts that no two terms overlap in time and that fences grow with start time.
    pub fn assert_no_overlap(&self) {
        let mut terms = self.all();
        terms.sort_by_key(|t| t.start);
        for w in terms.windows(2) {
            let end = w[0].end.expect("an earlier term never ended");
            assert!(
                end <= w[1].start,
                "two leaders at once: {:?} and {:?}",
                w[0],
                w[1]
            );
            assert!(
                w[0].fence < w[1].fence,
                "fence did not grow: {:?} then {:?}",
                w[0],
                w[1]
            );
        }
    }

    /// Asserts that every term started after the previous term's local deadline: no
    /// replica could still believe it led (true when terms end by data loss, a cut
    /// link or a crash; a graceful hand-over starts earlier, after the release).
    pub fn assert_each_starts_after_the_previous_deadline(&self) {
        let mut terms = self.all();
        terms.sort_by_key(|t| t.start);
        for w in terms.windows(2) {
            let deadline = w[0].deadline.expect("an earlier term never ended");
            assert!(
                deadline < w[1].start,
                "a term started {:?} before the previous one's deadline: {:?} then {:?}",
                deadline - w[1].start,
                w[0],
                w[1]
            );
        }
    }

    /// Spawns an elector whose duty records its term and runs until cancelled.
    pub fn spawn(&self, store: RedisStore, config: ElectorConfig) -> ElectorHandle {
        let terms = self.clone();
        Elector::new(store, config, move |lead: Leadership| {
            let terms = terms.clone();
            async move {
                let index = {
                    let mut all = terms.0.lock().unwrap();
                    all.push(Term {
                        replica: lead.replica_id().to_owned(),
                        fence: lead.fence(),
                        start: Instant::now(),
                        end: None,
                        deadline: None,
                    });
                    all.len() - 1
                };
                let _end = EndOnDrop {
                    terms,
                    index,
                    lead: lead.clone(),
                };
                lead.cancelled().await;
                Ok(())
            }
        })
        .spawn()
    }
}

pub fn config(duty: &str, replica: &str, lease_ms: u64) -> ElectorConfig {
    ElectorConfig::builder(duty, replica)
        .lease(Duration::from_millis(lease_ms))
        .build()
        .unwrap()
}

/// A follower that re-checks only when the holder's lease runs out (its retry interval
/// is nearly a lease): with it, a quick hand-over can only come from the release
/// notification.
pub fn slow_to_recheck(duty: &str, replica: &str, lease_ms: u64) -> ElectorConfig {
    ElectorConfig::builder(duty, replica)
        .lease(Duration::from_millis(lease_ms))
        .retry_interval(Duration::from_millis(lease_ms - 1))
        .build()
        .unwrap()
}

/// Makes the followers of `duty` re-check now, with a release notification for a lease
/// that is still held: each then sleeps until the holder's lease runs out, at least
/// lease − renew interval away.
pub fn recheck_now(redis: &RedisServer, duty: &str) {
    let lease = DutyKeys::new("leasehold", duty).lease().to_owned();
    redis.redis_cli(&["PUBLISH", "leasehold:released", &lease]);
}

pub fn store(url: &str) -> RedisStore {
    RedisStore::builder(url)
        .call_timeout(Duration::from_millis(250))
        .build()
        .unwrap()
}

/// Waits for `cond` with a generous timeout.
pub async fn eventually(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits (at most `limit`) until `follower` follows `leader`: it has campaigned, lost
/// to it, and watches for its release.
pub async fn follows(follower: &ElectorHandle, leader: &str, limit: Duration) {
    eventually(
        &format!("a follower of {leader}"),
        limit,
        || matches!(follower.status().role, Role::Follower { leader: Some(ref l) } if l == leader),
    )
    .await;
}

pub fn leader_count(handles: &[&ElectorHandle]) -> usize {
    handles.iter().filter(|h| h.status().is_leader()).count()
}

/// Asks `store` for `keys`' lease with `token` every 20 ms (a fresh process: no fence
/// floor) until it is granted, within `limit`; the granting call's send time (the
/// holder's deadline is `lease` after it) and the fence.
pub async fn granted(
    store: &RedisStore,
    keys: &DutyKeys,
    token: &str,
    lease: Duration,
    limit: Duration,
) -> (Instant, Fence) {
    tokio::time::timeout(limit, async {
        loop {
            let sent = Instant::now();
            match store.acquire(keys, token, lease, Fence(0)).await {
                Ok(Acquire::Won { fence, .. }) => return (sent, fence),
                Ok(_) => {}
                Err(e) => assert!(e.is_retryable(), "{e:?}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the lease is granted")
}
