//! Calls retried after a reply was lost, against a real redis-server started for each
//! test with a fault proxy between the admin and the server: the connection breaks
//! right after the server ran a change, the store sends it again on a fresh connection,
//! and the caller still gets the answer of the change it made.

mod support;

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::GroupAdmin;
use leasehold_testkit::{FaultProxy, RedisServer};
use support::Fleet;
use tokio::time::sleep;

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

fn store(url: &str) -> RedisStore {
    RedisStore::builder(url)
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_whose_reply_is_cut_report_what_they_did() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let mut fleet = Fleet::new(store(&redis.url()), 6, LEASE);
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    let admin = GroupAdmin::new(store(&proxy.url()), "g").unwrap();
    assert!(admin.exists().await.unwrap(), "the connection is open");

    proxy.cut_replies(1);
    assert_eq!(admin.add(["late-1"]).await.unwrap(), 1, "added once");
    assert_eq!(proxy.cuts_left(), 0, "the reply was cut");
    proxy.cut_replies(1);
    assert_eq!(admin.remove(["p00002"]).await.unwrap(), 1, "removed once");
    assert_eq!(proxy.cuts_left(), 0);
    proxy.cut_replies(1);
    assert_eq!(
        admin.set_weight("p00001", 4).await.unwrap(),
        1,
        "it weighed 1"
    );
    assert_eq!(proxy.cuts_left(), 0);

    let mut listed = admin.list().await.unwrap();
    listed.sort();
    assert_eq!(
        listed,
        ["late-1", "p00000", "p00001", "p00003", "p00004", "p00005"]
    );
    fleet.partitions.retain(|p| p != "p00002");
    fleet.partitions.push("late-1".into());
    // Weighted now: loads balance, not counts.
    fleet.settle(LIMIT).await;
    fleet.ledger.assert_no_double_ownership();
}

/// Finding 4 of issue 17, for claims: the connection breaks right after the claim that
/// granted the replica its first partitions ran, the store sends it again, and the
/// retry gets the first answer (the reply is kept per process and request): no second
/// batch held with no elector, no term the replica does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_reply_is_cut_gets_the_same_answer_again() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    // One replica, on a new group, through the proxy: the first reply with a 16-digit
    // fence in it (a bulk string of 16 bytes) is the claim that granted the first ones.
    let mut fleet = Fleet::new(store(&proxy.url()), 24, LEASE);
    proxy.cut_replies_containing(1, b"\r\n$16\r\n");
    fleet.start("b");
    fleet.converge(LIMIT).await;
    assert_eq!(proxy.cuts_left(), 0, "a claim's reply was cut");
    sleep(LEASE).await;
    fleet.converge(LIMIT).await;
    let terms = fleet.ledger.terms();
    assert_eq!(terms.len(), 24, "one term per partition: {terms:#?}");
    let admin = GroupAdmin::new(store(&redis.url()), "g").unwrap();
    let status = admin.status().await.unwrap().unwrap();
    let held = status
        .members
        .iter()
        .find(|m| m.replica == "b")
        .unwrap()
        .held;
    assert_eq!(held, 24, "Redis's count of b's session is what b runs");
    for p in &status.partitions {
        let running: Vec<_> = terms
            .iter()
            .filter(|t| t.partition == p.partition)
            .collect();
        assert_eq!(
            (running.len(), running[0].fence),
            (1, p.fence.get()),
            "{}: the term in Redis is the one its owner runs",
            p.partition
        );
    }
    fleet.ledger.assert_no_double_ownership();
}
