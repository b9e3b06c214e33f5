//! A partition group run by an ACL user limited to the Leasehold prefix and channel,
//! with the minimal rule from `docs/topologies.md`.

mod support;

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::GroupAdmin;
use leasehold_testkit::{RedisServer, minimal_acl_user_args};
use support::Fleet;

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_acl_user_balances_a_group() {
    let args = minimal_acl_user_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let redis = RedisServer::start_with_args(&args);
    let store = RedisStore::builder(format!(
        "redis://leasehold:secret@127.0.0.1:{}/",
        redis.port()
    ))
    .call_timeout(Duration::from_millis(300))
    .build()
    .unwrap();
    let mut fleet = Fleet::new(store, 12, LEASE);
    fleet.start_all(&["a", "b", "c"]);
    fleet.converge(LIMIT).await;
    assert!(
        fleet.counts().values().all(|c| *c == 4),
        "{:?}",
        fleet.counts()
    );
    // The operator view (its own scripts) works with the same rights.
    let status = leasehold_partitions::GroupAdmin::new(fleet.store.clone(), "g")
        .unwrap()
        .status()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.spread(), 0);
    // A graceful leave hands over (release scripts publish on the channel).
    fleet.replicas.remove("c").unwrap().shutdown().await;
    fleet.converge(LIMIT).await;
    // The admin's scripts too: the set, drains, one owner, weights.
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    assert_eq!(admin.add(["extra"]).await.unwrap(), 1);
    assert_eq!(admin.remove(["extra"]).await.unwrap(), 1);
    admin.drain("a").await.unwrap();
    admin.undrain("a").await.unwrap();
    assert!(admin.owner("p00001").await.unwrap().fence.get() > 0);
    assert_eq!(admin.set_weight("p00000", 3).await.unwrap(), 1);
    let start = tokio::time::Instant::now();
    while !fleet.all_owned_once() || admin.status().await.unwrap().unwrap().total_weight != 14 {
        assert!(start.elapsed() < LIMIT, "{:?}", fleet.counts());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fleet.ledger.assert_no_double_ownership();
    let log = redis.redis_cli(&["ACL", "LOG"]);
    let refused: Vec<&str> = log
        .lines()
        .zip(log.lines().skip(1))
        .filter(|(k, _)| *k == "object")
        .map(|(_, v)| v)
        .collect();
    assert!(
        refused.iter().all(|o| *o == "config|get"),
        "refused: {refused:?}"
    );
}
