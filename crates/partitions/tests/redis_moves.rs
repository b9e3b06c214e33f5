//! The ledger of moves against a real redis-server started for each test: every term
//! the fleet's callbacks saw start is in the ledger, from the term before it, with the
//! cause its end had (first owner, hand-off, drain, leave, expiry), and nothing else is.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, Move, MoveCause};
use leasehold_testkit::RedisServer;
use support::{Fleet, Term};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// The whole ledger, read in pages of `page` from the oldest entry on.
async fn ledger(admin: &GroupAdmin<RedisStore>, page: usize) -> Vec<Move> {
    let mut all: Vec<Move> = Vec::new();
    loop {
        let next = admin
            .moves(all.last().map(|m| m.id.as_str()), page)
            .await
            .unwrap();
        if next.is_empty() {
            return all;
        }
        all.extend(next);
    }
}

/// The moves the ledger holds since entry `since` (its length before), by cause.
fn causes(moves: &[Move], since: usize) -> BTreeMap<MoveCause, usize> {
    let mut by = BTreeMap::new();
    for m in &moves[since..] {
        *by.entry(m.cause).or_default() += 1;
    }
    by
}

/// Every term the fleet saw start is one ledger entry (partition, receiver, fence),
/// naming the term before it of that partition (replica and fence), and the ledger has
/// no other entry.
fn assert_ledger_matches(terms: &[Term], moves: &[Move]) {
    let mut by: BTreeMap<&str, Vec<&Term>> = BTreeMap::new();
    for t in terms {
        by.entry(t.partition.as_str()).or_default().push(t);
    }
    let mut expected = Vec::new();
    for (p, mut ts) in by {
        ts.sort_by_key(|t| t.fence);
        let mut before: Option<&Term> = None;
        for t in ts {
            expected.push((
                p.to_owned(),
                before.map(|b| (b.replica.clone(), b.fence)),
                t.replica.clone(),
                t.fence,
            ));
            before = Some(t);
        }
    }
    let mut recorded: Vec<_> = moves
        .iter()
        .map(|m| {
            (
                m.partition.clone(),
                m.from.clone().zip(m.old_fence.map(|f| f.get())),
                m.to.clone(),
                m.new_fence.get(),
            )
        })
        .collect();
    expected.sort();
    recorded.sort();
    assert_eq!(
        recorded, expected,
        "the ledger does not hold exactly the terms the fleet saw"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_holds_every_change_of_owner_with_its_cause() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 12, LEASE);
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();

    // First owners.
    fleet.start("a");
    fleet
        .until("a owns all", LIMIT, |f| f.counts()["a"] == 12)
        .await;
    let moves = ledger(&admin, 5).await;
    assert_eq!(causes(&moves, 0), BTreeMap::from([(MoveCause::New, 12)]));
    assert!(
        moves
            .iter()
            .all(|m| m.from.is_none() && m.unowned.is_none())
    );

    // A join: a hands half over to b.
    fleet.start("b");
    fleet.converge(LIMIT).await;
    let before = moves.len();
    let moves = ledger(&admin, 5).await;
    assert_eq!(
        causes(&moves, before),
        BTreeMap::from([(MoveCause::HandOff, 6)])
    );
    for m in &moves[before..] {
        assert_eq!((m.from.as_deref(), m.to.as_str()), (Some("a"), "b"));
        let unowned = m.unowned.expect("a hand-off knows when the old term ended");
        assert!(unowned < LEASE * 5, "{m:?}");
        assert!(m.old_fence.unwrap() < m.new_fence);
        assert!(m.held_since_ms.unwrap() <= m.ended_ms.unwrap());
        assert!(m.ended_ms.unwrap() <= m.started_ms);
    }

    // A drain of b: b's six go back to a.
    admin.drain("b").await.unwrap();
    fleet
        .until("b drained", LIMIT, |f| f.counts()["a"] == 12)
        .await;
    let before = moves.len();
    let moves = ledger(&admin, 100).await;
    assert_eq!(
        causes(&moves, before),
        BTreeMap::from([(MoveCause::Drain, 6)])
    );
    assert!(
        moves[before..]
            .iter()
            .all(|m| m.from.as_deref() == Some("b"))
    );
    admin.undrain("b").await.unwrap();
    fleet.converge(LIMIT).await;

    // A crash of a: its partitions are freed when its session expires.
    let before = ledger(&admin, 100).await.len();
    let held_by_a = fleet.counts()["a"];
    fleet.replicas.remove("a").unwrap().abort();
    fleet
        .until("b owns all after a crashed", LIMIT, |f| {
            f.counts()["b"] == 12
        })
        .await;
    let moves = ledger(&admin, 100).await;
    assert_eq!(
        causes(&moves, before),
        BTreeMap::from([(MoveCause::Expiry, held_by_a)])
    );
    for m in &moves[before..] {
        assert_eq!((m.from.as_deref(), m.to.as_str()), (Some("a"), "b"));
    }

    // A graceful shutdown of b, with c there to take over.
    fleet.start("c");
    fleet.converge(LIMIT).await;
    let before = ledger(&admin, 100).await.len();
    let held_by_b = fleet.counts()["b"];
    fleet.replicas.remove("b").unwrap().shutdown().await;
    fleet
        .until("c owns all after b left", LIMIT, |f| f.counts()["c"] == 12)
        .await;
    let moves = ledger(&admin, 100).await;
    assert_eq!(
        causes(&moves, before),
        BTreeMap::from([(MoveCause::Leave, held_by_b)])
    );

    assert_ledger_matches(&fleet.ledger.terms(), &moves);
    fleet.ledger.assert_no_double_ownership();

    // The newest entries, oldest first, without paging through the rest.
    let newest = admin.newest_moves(5).await.unwrap();
    assert_eq!(newest, moves[moves.len() - 5..]);
    assert_eq!(admin.newest_moves(10_000).await.unwrap(), moves);
    let none = GroupAdmin::new(store(&redis), "nobody").unwrap();
    assert!(none.newest_moves(5).await.unwrap().is_empty());
}

/// A claim that changed owners says so on the prefix's channel (its move notice,
/// `<tag>\t1\tmoved\t...`), so
/// that a reader of the ledger need not poll it; a reply to a claim that changed none
/// (a renewal of a term) says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_moves_partitions_says_so_on_the_channel() {
    use futures::StreamExt;

    let redis = RedisServer::start();
    let client = leasehold_election::redis::Client::open(redis.url()).unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    pubsub.psubscribe("*").await.unwrap();
    let mut messages = pubsub.into_on_message();
    let mut fleet = Fleet::new(store(&redis), 4, LEASE);
    fleet.start("a");
    fleet
        .until("a owns all", LIMIT, |f| f.counts()["a"] == 4)
        .await;
    let moved = |m: &str| m.contains("{g}\t1\tmoved\t");
    let mut seen = Vec::new();
    let found = tokio::time::timeout(LIMIT, async {
        while let Some(m) = messages.next().await {
            let text: String = m.get_payload().unwrap();
            seen.push(text.clone());
            if moved(&text) {
                return;
            }
        }
    })
    .await;
    assert!(found.is_ok(), "no moved notice among {seen:?}");
    // Renewals only from now on: nothing more says partitions moved.
    let quiet = tokio::time::timeout(LEASE * 3, async {
        while let Some(m) = messages.next().await {
            let text: String = m.get_payload().unwrap();
            if moved(&text) {
                return text;
            }
        }
        String::new()
    })
    .await;
    assert!(quiet.is_err(), "a notice without a move: {quiet:?}");
    assert_eq!(fleet.counts()["a"], 4);
}
