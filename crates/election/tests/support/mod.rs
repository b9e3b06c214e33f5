//! Shared helpers for the real-Redis tests: stores, configs, and a duty that records
//! each term's interval on this process's clock.
#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_election::{Elector, ElectorConfig, ElectorHandle, Fence, Leadership, RedisStore};
use tokio::time::Instant;

/// One leadership term as the duty saw it.
#[derive(Debug, Clone)]
pub struct Term {
    pub replica: String,
    pub fence: Fence,
    pub start: Instant,
    pub end: Option<Instant>,
}

/// Every term of every elector in a test.
#[derive(Debug, Clone, Default)]
pub struct Terms(Arc<Mutex<Vec<Term>>>);

struct EndOnDrop {
    terms: Terms,
    index: usize,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.terms.0.lock().unwrap()[self.index].end = Some(Instant::now());
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
                    });
                    all.len() - 1
                };
                let _end = EndOnDrop { terms, index };
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

pub fn leader_count(handles: &[&ElectorHandle]) -> usize {
    handles.iter().filter(|h| h.status().is_leader()).count()
}
