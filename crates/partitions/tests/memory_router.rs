//! The router on the in-memory store (the twin of the scripts): it follows a fleet's
//! moves through a kill and a join to what the group's status says.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use leasehold_partitions::{GroupAdmin, MemoryGroupStore};
use support::Fleet;

const LEASE: Duration = Duration::from_millis(300);
const LIMIT: Duration = Duration::from_secs(20);

async fn owners(admin: &GroupAdmin<MemoryGroupStore>) -> BTreeMap<String, (String, u64)> {
    let status = admin.status().await.unwrap().expect("the group exists");
    status
        .partitions
        .into_iter()
        .filter_map(|p| Some((p.partition, (p.owner?, p.fence.get()))))
        .collect()
}

async fn until_routed(
    router: &leasehold_partitions::Router,
    admin: &GroupAdmin<MemoryGroupStore>,
    without: Option<&str>,
) {
    let start = Instant::now();
    loop {
        let want = owners(admin).await;
        let table: BTreeMap<String, (String, u64)> = router
            .routes()
            .into_iter()
            .map(|(p, r)| (p, (r.replica().to_owned(), r.fence().get())))
            .collect();
        let gone = without.is_none_or(|w| want.values().all(|(r, _)| r != w));
        if want.len() == 8 && gone && table == want {
            return;
        }
        assert!(
            start.elapsed() < LIMIT,
            "router {table:?} != owners {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_on_the_memory_store_follows_a_kill_and_a_join() {
    let mut fleet = Fleet::new(MemoryGroupStore::new(), 8, LEASE);
    let admin = GroupAdmin::new(fleet.store.clone(), "g").unwrap();
    let router = admin.router();
    fleet.start_all(&["a", "b"]);
    fleet.converge(LIMIT).await;
    until_routed(&router, &admin, None).await;
    fleet.replicas["a"].abort();
    fleet.replicas.remove("a");
    until_routed(&router, &admin, Some("a")).await;
    fleet.start("c");
    fleet.converge(LIMIT).await;
    until_routed(&router, &admin, Some("a")).await;
    assert!(router.status().ready);
    fleet.ledger.assert_no_double_ownership();
}
