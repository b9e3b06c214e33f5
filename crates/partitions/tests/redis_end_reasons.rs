//! A partition's callback learns why its term ended (`Ownership::end_reason`), against a
//! real redis-server: a planned move (handed off to a joiner, removed from the set,
//! drained, a graceful shutdown) says so, and a lost session says the lease was lost.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold_partitions::{GroupAdmin, MoveCause, RedisStore};
use leasehold_testkit::{FaultProxy, RedisServer};
use support::{Fleet, Term};
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

fn store(url: &str) -> RedisStore {
    RedisStore::builder(url)
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// `replica`'s terms that ended since `from`.
fn ended_since(terms: &[Term], from: Instant, replica: &str) -> Vec<Term> {
    terms
        .iter()
        .filter(|t| t.replica == replica && t.end.is_some_and(|e| e >= from))
        .cloned()
        .collect()
}

/// Waits until `n` terms of `replica` have ended since `from`; the reasons they were
/// given (a term's reason is recorded as its callback returns: just before its end).
async fn ended(
    fleet: &Fleet<RedisStore>,
    from: Instant,
    replica: &str,
    n: usize,
) -> BTreeSet<Option<&'static str>> {
    let start = Instant::now();
    loop {
        let done = ended_since(&fleet.ledger.terms(), from, replica);
        if done.len() >= n {
            return done
                .iter()
                .map(|t| t.reason.map(MoveCause::as_str))
                .collect();
        }
        assert!(
            start.elapsed() < LIMIT,
            "{} of {n} ended: {done:#?}",
            done.len()
        );
        sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_learns_whether_its_term_was_moved_or_lost() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let mut fleet = Fleet::new(store(&redis.url()), 8, LEASE);
    fleet.start("a");
    fleet.converge(LIMIT).await;
    let admin = GroupAdmin::new(store(&redis.url()), "g").unwrap();

    // A joiner: a hands half over.
    let mark = Instant::now();
    let b = fleet.config("b");
    fleet.start_on(store(&proxy.url()), b);
    fleet.converge(LIMIT).await;
    assert_eq!(ended(&fleet, mark, "a", 4).await, [Some("handoff")].into());

    // A removal.
    let mark = Instant::now();
    let gone = fleet.replicas["a"].status().owned.first().unwrap().clone();
    assert_eq!(admin.remove([gone.as_str()]).await.unwrap(), 1);
    fleet.partitions.retain(|p| *p != gone);
    assert_eq!(ended(&fleet, mark, "a", 1).await, [Some("removal")].into());
    fleet.converge(LIMIT).await;

    // A drain.
    let mark = Instant::now();
    let held = fleet.replicas["b"].status().owned.len();
    admin.drain("b").await.unwrap();
    assert_eq!(ended(&fleet, mark, "b", held).await, [Some("drain")].into());
    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;

    // A lost session: b is cut off from Redis.
    let mark = Instant::now();
    let held = fleet.replicas["b"].status().owned.len();
    assert!(held > 0);
    proxy.blackhole();
    let lost = ended(&fleet, mark, "b", held).await;
    assert!(lost.iter().all(|r| matches!(r, Some("expiry"))), "{lost:?}");
    proxy.pass();
    fleet.converge(LIMIT).await;

    // A graceful shutdown.
    let mark = Instant::now();
    let held = fleet.replicas["a"].status().owned.len();
    fleet.replicas.remove("a").unwrap().shutdown().await;
    assert_eq!(ended(&fleet, mark, "a", held).await, [Some("leave")].into());
    fleet.ledger.assert_no_double_ownership();
}
