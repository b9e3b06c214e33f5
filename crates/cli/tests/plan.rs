//! `leasehold plan` against a real redis-server with real coordinators: what a join,
//! a drain and a weight would do, as text and as JSON, and the errors of a bad change.
//! Nothing it plans is applied.

mod support;

use leasehold_testkit::RedisServer;
use support::{assert_failed, replica, run, run_json, store, wait_for_counts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_prints_the_moves_and_loads_and_changes_nothing() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let _a = replica(&store, "leasehold", "tenants", 12, "replica-a");
    let _b = replica(&store, "leasehold", "tenants", 12, "replica-b");
    let _c = replica(&store, "leasehold", "tenants", 12, "replica-c");
    let balanced = [("replica-a", 4), ("replica-b", 4), ("replica-c", 4)];
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let url = redis.url();
    let base = ["plan", "--redis-url", url.as_str(), "--group", "tenants"];
    let with = |extra: &[&'static str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(extra);
        args
    };

    let r = run(&with(&["--add-replica", "replica-d"])).await;
    println!("{}", r.stdout);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""), "{r:?}");
    assert!(
        r.stdout.starts_with(
            "plan for group tenants (prefix leasehold): add replica replica-d (capacity 1); \
             nothing was changed\nbalanced by count: 3 moves in 1 round of hand-overs\n"
        ),
        "{}",
        r.stdout
    );
    for line in [
        "1      replica-a  replica-d  handoff  1       -",
        "replica-d  added   1         0 -> 3      0 -> 3  -",
    ] {
        assert!(r.stdout.contains(line), "{line:?} in\n{}", r.stdout);
    }

    let json = run_json(&with(&[
        "--drain",
        "replica-a",
        "--weight",
        "p0=5",
        "--json",
    ]))
    .await;
    println!("{json:#}");
    assert_eq!(json["group"], "tenants");
    assert_eq!(json["weighted"], true);
    assert_eq!(json["settled"], true);
    assert_eq!(json["change"]["drain"][0], "replica-a");
    assert_eq!(json["change"]["weight"][0]["weight"], 5);
    let replicas = json["replicas"].as_array().unwrap();
    let a = replicas
        .iter()
        .find(|r| r["replica"] == "replica-a")
        .unwrap();
    assert_eq!(
        (a["role"].as_str(), a["count"].as_u64()),
        (Some("drained"), Some(0))
    );
    let total: u64 = replicas.iter().map(|r| r["load"].as_u64().unwrap()).sum();
    assert_eq!(
        total, 16,
        "11 partitions of weight 1 and one of 5: {json:#}"
    );
    let moved: u64 = json["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["count"].as_u64().unwrap())
        .sum();
    assert_eq!(json["moved"].as_u64(), Some(moved));

    // Nothing was applied.
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let status = run_json(&[
        "status",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--json",
    ])
    .await;
    assert!(
        status["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["drained"] == false)
    );

    // Bad changes: not found (4), usage (2).
    let r = run(&with(&["--remove-replica", "replica-z"])).await;
    assert_failed(
        &r,
        4,
        "replica \"replica-z\" is not live in group \"tenants\"",
    );
    let r = run(&with(&["--weight", "nope=2"])).await;
    assert_failed(&r, 4, "no partition \"nope\" in group \"tenants\"");
    let r = run(&with(&["--weight", "p0=0"])).await;
    assert_failed(&r, 2, "invalid WEIGHT 0");
    let r = run(&with(&["--weight", "p0"])).await;
    assert_failed(&r, 2, "invalid --weight \"p0\": expected PARTITION=WEIGHT");
    let r = run(&with(&["--add-replica", "replica-a"])).await;
    assert_failed(
        &r,
        2,
        "invalid what-if: replica \"replica-a\" is live already",
    );
    let r = run(&with(&["--add-replica", "replica-e:0"])).await;
    assert_failed(&r, 2, "capacity must be between 1 and 1000, got 0");
    let r = run(&[
        "plan",
        "--redis-url",
        &url,
        "--group",
        "nope",
        "--drain",
        "x",
    ])
    .await;
    assert_failed(&r, 4, "group");
}
