//! The move budget against a real redis-server started for each test: a join's
//! rebalance is spread over renew intervals, at most the budget per interval for the
//! whole group, and a crashed replica's partitions are claimed at once whatever the
//! budget (availability first). Read back from the ledger of moves (server times).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, Move, MoveBudget, MoveCause};
use leasehold_testkit::RedisServer;
use support::Fleet;

const LEASE: Duration = Duration::from_millis(600);
/// The renew interval (lease / 3): the budget's window.
const WINDOW_MS: u64 = 200;
const LIMIT: Duration = Duration::from_secs(30);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

async fn ledger(admin: &GroupAdmin<RedisStore>) -> Vec<Move> {
    admin.moves(None, 10_000).await.unwrap()
}

fn start_with_budget(fleet: &mut Fleet<RedisStore>, replica: &str, budget: u32) {
    let config = fleet
        .builder(replica)
        .move_budget(MoveBudget::Moves(budget))
        .build()
        .unwrap();
    fleet.start_with(config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_moves_at_most_the_budget_per_interval_and_orphans_do_not_wait() {
    let redis = RedisServer::start();
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();
    let mut fleet = Fleet::new(store(&redis), 40, LEASE);
    for r in ["a", "b", "c", "d"] {
        start_with_budget(&mut fleet, r, 2);
    }
    fleet.converge(LIMIT).await;
    let before = ledger(&admin).await.len();

    // A join: its share of 8 comes 2 at a time.
    start_with_budget(&mut fleet, "e", 2);
    fleet.converge(LIMIT).await;
    let moves = ledger(&admin).await;
    let handed: Vec<&Move> = moves[before..]
        .iter()
        .filter(|m| m.cause == MoveCause::HandOff)
        .collect();
    assert_eq!(
        handed.len(),
        8,
        "exactly the joiner's share moved: {handed:#?}"
    );
    // Each hand-over was granted in one window and released just after: a window of
    // release times holds at most two windows' grants.
    let mut per_window: BTreeMap<u64, usize> = BTreeMap::new();
    for m in &handed {
        *per_window
            .entry(m.ended_ms.unwrap() / WINDOW_MS)
            .or_default() += 1;
    }
    assert!(
        per_window.values().all(|n| *n <= 4),
        "more than twice the budget released in one window: {per_window:?}"
    );
    // And spread out: 8 moves at 2 per window are granted in four windows at least;
    // the first grant comes at the latest at the end of the first, the last at the
    // earliest at the start of the fourth: two whole windows apart (without a budget
    // they go in one round, within milliseconds).
    let first = handed.iter().map(|m| m.ended_ms.unwrap()).min().unwrap();
    let last = handed.iter().map(|m| m.ended_ms.unwrap()).max().unwrap();
    assert!(
        last - first >= 2 * WINDOW_MS - 50,
        "8 hand-offs within {} ms: the budget did not spread them",
        last - first
    );

    // A crash: its 8 partitions are orphans, claimed at once, not 2 per window.
    let before = moves.len();
    fleet.replicas.remove("a").unwrap().abort();
    fleet.settle(LIMIT).await;
    let moves = ledger(&admin).await;
    let expired: Vec<&Move> = moves[before..]
        .iter()
        .filter(|m| m.cause == MoveCause::Expiry)
        .collect();
    assert_eq!(expired.len(), 8, "{expired:#?}");
    let first = expired.iter().map(|m| m.started_ms).min().unwrap();
    let last = expired.iter().map(|m| m.started_ms).max().unwrap();
    assert!(
        last - first < 2 * WINDOW_MS,
        "the orphans waited for the budget: claimed over {} ms",
        last - first
    );
    fleet.converge(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_by_weight_spreads_a_join_by_the_weight_moved() {
    let redis = RedisServer::start();
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();
    let mut fleet = Fleet::new(store(&redis), 24, LEASE);
    fleet.create_group().await;
    // Eight tenants of weight 3, sixteen of weight 1: 40 in all.
    let heavy: Vec<String> = fleet.partitions[..8].to_vec();
    let weight = |p: &str| -> u64 { if heavy.iter().any(|q| q == p) { 3 } else { 1 } };
    for p in &fleet.partitions {
        admin.set_weight(p, weight(p)).await.unwrap();
    }
    let start = |fleet: &mut Fleet<RedisStore>, r: &str| {
        let config = fleet
            .builder(r)
            .move_budget(MoveBudget::Weight(2))
            .build()
            .unwrap();
        fleet.start_with(config);
    };
    start(&mut fleet, "a");
    start(&mut fleet, "b");
    fleet.settle(LIMIT).await;
    // Quiet: no move for a second.
    let quiet = async |admin: &GroupAdmin<RedisStore>| {
        let begin = tokio::time::Instant::now();
        let mut seen = ledger(admin).await.len();
        let mut still = tokio::time::Instant::now();
        while still.elapsed() < Duration::from_secs(1) {
            assert!(begin.elapsed() < LIMIT, "the group never settled");
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = ledger(admin).await.len();
            if now != seen {
                seen = now;
                still = tokio::time::Instant::now();
            }
        }
    };
    quiet(&admin).await;
    let before = ledger(&admin).await.len();

    start(&mut fleet, "c");
    fleet.settle(LIMIT).await;
    quiet(&admin).await;
    let moves = ledger(&admin).await;
    let handed: Vec<&Move> = moves[before..]
        .iter()
        .filter(|m| m.cause == MoveCause::HandOff)
        .collect();
    let moved: u64 = handed.iter().map(|m| weight(&m.partition)).sum();
    assert!(moved >= 10, "the joiner got its share: {moved} of 40 moved");
    // A window's grant is at most 2 of weight, or one tenant of 3 alone; released
    // just after, so a window of release times holds at most two windows' grants.
    let mut per_window: BTreeMap<u64, u64> = BTreeMap::new();
    for m in &handed {
        *per_window
            .entry(m.ended_ms.unwrap() / WINDOW_MS)
            .or_default() += weight(&m.partition);
    }
    assert!(
        per_window.values().all(|w| *w <= 6),
        "more than two windows' weight released in one: {per_window:?}"
    );
    let first = handed.iter().map(|m| m.ended_ms.unwrap()).min().unwrap();
    let last = handed.iter().map(|m| m.ended_ms.unwrap()).max().unwrap();
    assert!(
        last - first >= 3 * WINDOW_MS,
        "{moved} of weight within {} ms: the budget did not spread them",
        last - first
    );
    fleet.ledger.assert_no_double_ownership();
}
