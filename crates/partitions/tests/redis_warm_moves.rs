//! Warm moves (`GroupConfigBuilder::prepare_moves`, `Coordinator::on_prepare`) against
//! a real redis-server: a hand-over to a named receiver lets go of the partition only
//! once the receiver has prepared, and a receiver that does not prepare in time costs
//! the move its wait, then the move goes on as a plain one. Never two owners.

mod support;

use std::time::Duration;

use leasehold_partitions::{MoveCause, RedisStore};
use leasehold_testkit::RedisServer;
use support::{Fleet, Term};
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(900);
const LIMIT: Duration = Duration::from_secs(20);

fn store(url: &str) -> RedisStore {
    RedisStore::builder(url)
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// Starts `replicas` with warm moves that wait up to `within`.
fn start_warm(fleet: &mut Fleet<RedisStore>, replicas: &[&str], within: Duration) {
    for r in replicas {
        let config = fleet.builder(r).prepare_moves(within).build().unwrap();
        fleet.start_with(config);
    }
}

/// The terms handed off since `from`, once `n` have ended.
async fn handed_off(fleet: &Fleet<RedisStore>, from: Instant, n: usize) -> Vec<Term> {
    let start = Instant::now();
    loop {
        let done: Vec<Term> = fleet
            .ledger
            .terms()
            .into_iter()
            .filter(|t| t.end.is_some_and(|e| e >= from))
            .filter(|t| t.reason == Some(MoveCause::HandOff))
            .collect();
        if done.len() >= n {
            return done;
        }
        assert!(start.elapsed() < LIMIT, "{} of {n} handed off", done.len());
        sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_move_lets_go_only_once_the_receiver_has_prepared() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    fleet.prepare = Some(Duration::from_millis(150));
    start_warm(&mut fleet, &["a", "b"], Duration::from_millis(800));
    fleet.converge(LIMIT).await;
    let mark = Instant::now();
    start_warm(&mut fleet, &["c"], Duration::from_millis(800));
    fleet.converge(LIMIT).await;
    let handed = handed_off(&fleet, mark, 4).await;
    let terms = fleet.ledger.terms();
    let prepared = fleet.prepared.lock().unwrap().clone();
    for t in &handed {
        assert_eq!(t.successor.as_deref(), Some("c"), "{t:#?}");
        let p = prepared
            .iter()
            .find(|p| p.partition == t.partition && p.replica == "c" && p.start >= mark)
            .unwrap_or_else(|| panic!("c never prepared {}: {prepared:#?}", t.partition));
        assert_eq!(p.from, t.replica);
        let done = p.end.expect("the preparation finished");
        let ended = t.end.unwrap();
        assert!(
            done <= ended,
            "{}: the old term ended {:?} before c was ready",
            t.partition,
            done - ended
        );
        let next = terms
            .iter()
            .filter(|n| n.partition == t.partition && n.fence > t.fence)
            .min_by_key(|n| n.fence)
            .expect("a next term");
        assert_eq!(next.replica, "c");
    }
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_does_not_prepare_in_time_costs_the_wait_and_the_move_goes_on() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis.url()), 12, LEASE);
    let within = Duration::from_millis(300);
    start_warm(&mut fleet, &["a", "b"], within);
    fleet.converge(LIMIT).await;
    // c prepares far longer than a and b wait.
    fleet.prepare = Some(Duration::from_secs(30));
    let mark = Instant::now();
    start_warm(&mut fleet, &["c"], within);
    fleet.converge(LIMIT).await;
    let handed = handed_off(&fleet, mark, 4).await;
    let prepared = fleet.prepared.lock().unwrap().clone();
    for t in &handed {
        assert_eq!(t.successor, None, "a plain move names nobody: {t:#?}");
        let p = prepared
            .iter()
            .find(|p| p.partition == t.partition && p.replica == "c")
            .unwrap_or_else(|| panic!("c was never asked to prepare {}", t.partition));
        assert!(p.end.is_none(), "dropped at the end of the wait");
        let waited = t.end.unwrap() - p.start;
        assert!(
            waited >= within - Duration::from_millis(50),
            "{}: let go after {waited:?}, before the wait of {within:?} was over",
            t.partition
        );
    }
    fleet.ledger.assert_no_double_ownership();
}
