//! The CLI on every topology the library runs on: a Redis Cluster (`--cluster`, the
//! URLs its seed nodes; `list` and the dashboard scan every primary) and Sentinel
//! (`--sentinel MASTER`, the URLs the Sentinels). Real servers, started per test.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_testkit::{MASTER_NAME, RedisCluster, RedisSentinelSet, RedisServer};
use support::http::get;
use support::{Dashboard, assert_failed, leader, replica, run, run_json, wait_for_counts};

fn names(list: &serde_json::Value, kind: &str, key: &str) -> BTreeSet<String> {
    list[kind]
        .as_array()
        .unwrap_or_else(|| panic!("no {kind}: {list}"))
        .iter()
        .map(|e| e[key].as_str().unwrap().to_owned())
        .collect()
}

/// Groups on every primary of a cluster, listed (by `list` and the dashboard) from one
/// command line naming the cluster's nodes; a group's status read from its own node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_status_and_the_dashboard_reach_every_primary_of_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let urls = cluster.node_urls();
    let store = RedisStore::cluster_builder(urls.clone())
        .call_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let groups: Vec<String> = (0..6).map(|i| format!("tenants-{i}")).collect();
    let primaries: BTreeSet<usize> = groups
        .iter()
        .map(|g| cluster.primary_for_key(&format!("leasehold:{{{g}}}:meta")))
        .collect();
    assert!(
        primaries.len() >= 2,
        "the groups must spread over primaries"
    );
    let fleet: Vec<_> = groups
        .iter()
        .map(|g| replica(&store, "leasehold", g, 2, "replica-a"))
        .collect();
    for g in &groups {
        wait_for_counts(&store, "leasehold", g, &[("replica-a", 2)]).await;
    }
    let (scheduler, _) = leader(&store, "leasehold", "scheduler", "replica-a").await;

    let mut args = vec!["list", "--json", "--cluster"];
    for u in &urls {
        args.extend(["--redis-url", u.as_str()]);
    }
    let list = run_json(&args).await;
    let want: BTreeSet<String> = groups.iter().cloned().collect();
    assert_eq!(names(&list, "groups", "group"), want, "{list}");
    assert_eq!(
        names(&list, "duties", "duty"),
        BTreeSet::from(["scheduler".to_owned()]),
        "{list}"
    );
    // One seed node is enough to reach the others.
    let status = run_json(&[
        "status",
        "--json",
        "--cluster",
        "--redis-url",
        &urls[2],
        "--group",
        "tenants-0",
    ])
    .await;
    assert_eq!(
        status["partitions"].as_array().unwrap().len(),
        2,
        "{status}"
    );

    let mut extra = vec!["--cluster"];
    for u in &urls[1..] {
        extra.extend(["--redis-url", u.as_str()]);
    }
    let d = Dashboard::start(&urls[0], "100ms", "5s", &extra).await;
    let r = get(&d.addr, "/api/groups").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(names(&r.json(), "groups", "group"), want, "{r:?}");
    let r = get(&d.addr, "/api/groups/tenants-5").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["partitions"].as_array().unwrap().len(), 2, "{r:?}");
    drop(d);

    scheduler.shutdown().await;
    for f in fleet {
        f.shutdown().await;
    }
}

/// `--sentinel MASTER` with the Sentinels' URLs reaches the primary they name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_status_reach_the_primary_sentinel_names() {
    let set = RedisSentinelSet::start(1);
    let sentinels = set.sentinel_urls();
    let store = RedisStore::sentinel_builder(MASTER_NAME, sentinels.clone())
        .call_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let a = replica(&store, "leasehold", "tenants", 3, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 3)]).await;
    let mut args = vec!["list", "--json", "--sentinel", MASTER_NAME];
    for u in &sentinels {
        args.extend(["--redis-url", u.as_str()]);
    }
    let list = run_json(&args).await;
    assert_eq!(
        names(&list, "groups", "group"),
        BTreeSet::from(["tenants".to_owned()]),
        "{list}"
    );
    let status = run_json(&[
        "status",
        "--json",
        "--sentinel",
        MASTER_NAME,
        "--redis-url",
        &sentinels[0],
        "--group",
        "tenants",
    ])
    .await;
    assert_eq!(
        status["partitions"].as_array().unwrap().len(),
        3,
        "{status}"
    );
    a.shutdown().await;
}

/// Several URLs say nothing of how they relate: a usage error, not a guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_urls_need_sentinel_or_cluster() {
    let redis = RedisServer::start();
    let url = redis.url();
    let r = run(&["list", "--redis-url", &url, "--redis-url", &url]).await;
    assert_failed(&r, 2, "--sentinel MASTER");
    let r = run(&["list", "--redis-url", &url, "--primary-url", &url]).await;
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("--sentinel"), "{r:?}");
}
