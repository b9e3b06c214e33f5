//! `leasehold list` against a real redis-server: the groups and duties under a prefix,
//! found with SCAN, each with its owners or leader.

mod support;

use leasehold_testkit::RedisServer;
use support::{leader, replica, run, run_json, store, wait_for_counts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_a_group_and_duties_with_their_leaders() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    let (scheduler, fence) = leader(&store, "leasehold", "scheduler", "replica-a").await;
    let (reports, last) = leader(&store, "leasehold", "reports", "replica-b").await;
    reports.shutdown().await;
    // Under other prefixes: not listed.
    let (other, _) = leader(&store, "ops", "scheduler", "replica-a").await;
    redis.redis_cli(&["SET", "leaseholder:{x}:fence", "1"]);
    // Enough other keys for SCAN to take several steps: one MSET of 3000.
    let filler: Vec<String> = (1..=3000)
        .flat_map(|i| [format!("filler:{i}"), "x".to_owned()])
        .collect();
    let mut mset = vec!["MSET"];
    mset.extend(filler.iter().map(String::as_str));
    redis.redis_cli(&mset);
    wait_for_counts(
        &store,
        "leasehold",
        "tenants",
        &[("replica-a", 2), ("replica-b", 2)],
    )
    .await;
    let url = redis.url();

    let r = run(&["list", "--redis-url", &url]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "prefix leasehold: 1 group, 2 duties (1 led)",
            "",
            "GROUP    PARTITIONS  OWNED  LIVE REPLICAS  DRAINED  LIST VERSION",
            "tenants  4           4      2              0        0",
            "",
            "DUTY       LEADER     FENCE             LEASE LEFT",
        ],
        "{}",
        r.stdout
    );
    assert_eq!(
        lines[6].split_whitespace().collect::<Vec<_>>(),
        ["reports", "-", &last.to_string(), "-"],
        "{}",
        r.stdout
    );
    let cols: Vec<&str> = lines[7].split_whitespace().collect();
    assert_eq!(
        cols[..3],
        ["scheduler", "replica-a", &fence.to_string()],
        "{}",
        r.stdout
    );
    assert!(cols[3].ends_with('s'), "{}", r.stdout);
    assert_eq!(lines.len(), 8, "{}", r.stdout);

    let json = run_json(&["list", "--redis-url", &url, "--json"]).await;
    assert_eq!(json["prefix"], "leasehold");
    assert_eq!(
        json["groups"],
        serde_json::json!([{
            "group": "tenants", "partitions": 4, "owned": 4, "unowned": 0,
            "live_replicas": 2, "replicas": ["replica-a", "replica-b"], "drained": [],
            "list_version": 0,
        }])
    );
    let duties = json["duties"].as_array().unwrap();
    assert_eq!(duties.len(), 2, "{json}");
    assert_eq!(
        duties[0],
        serde_json::json!({
            "duty": "reports", "state": "nobody", "leader": null, "fence": last.get(),
            "lease_left_ms": null,
        })
    );
    assert_eq!(duties[1]["duty"], "scheduler");
    assert_eq!(duties[1]["state"], "led");
    assert_eq!(duties[1]["leader"], "replica-a");
    assert_eq!(duties[1]["fence"], fence.get());
    assert!(
        duties[1]["lease_left_ms"].as_u64().unwrap() <= 5_000,
        "{json}"
    );

    // The other prefix has its own duty, and a prefix's glob characters match only
    // themselves.
    let json = run_json(&["list", "--redis-url", &url, "--prefix", "ops", "--json"]).await;
    assert_eq!(json["groups"], serde_json::json!([]));
    assert_eq!(json["duties"][0]["duty"], "scheduler");
    let r = run(&["list", "--redis-url", &url, "--prefix", "lease*"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (Some(0), "prefix lease*: 0 groups, 0 duties (0 led)\n"),
        "{r:?}"
    );

    tokio::join!(
        a.shutdown(),
        b.shutdown(),
        scheduler.shutdown(),
        other.shutdown()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_flags_keys_that_are_not_leasehold_leases_and_lists_the_rest() {
    let redis = RedisServer::start();
    redis.redis_cli(&["SET", "leasehold:{weird}:lease", "x"]);
    redis.redis_cli(&["HSET", "leasehold:{hashed}:lease", "field", "value"]);
    // A fence that is not a number: that entry is flagged, the others still listed.
    redis.redis_cli(&["SET", "leasehold:{billing}:fence", "not-a-number"]);
    let url = redis.url();
    let r = run(&["list", "--redis-url", &url]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "prefix leasehold: 0 groups, 3 duties (0 led)\n\n\
             DUTY     LEADER                   FENCE  LEASE LEFT\n\
             billing  (not a Leasehold lease)  -      -\n\
             hashed   (not a Leasehold lease)  -      -\n\
             weird    (not a Leasehold lease)  -      -\n"
        ),
        "{r:?}"
    );
    let json = run_json(&["list", "--redis-url", &url, "--json"]).await;
    for d in json["duties"].as_array().unwrap() {
        assert_eq!(d["state"], "foreign", "{json}");
        assert_eq!(d["leader"], serde_json::Value::Null, "{json}");
    }
}
