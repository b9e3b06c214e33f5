//! `leasehold owner` against a real redis-server with real coordinators.

mod support;

use std::time::Duration;

use leasehold_testkit::RedisServer;
use support::{replica, replica_at, run, run_json, store, this_instance, wait_for_counts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_names_the_replica_its_instance_fence_and_how_long_it_has_held() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 2, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 2)]).await;
    let url = redis.url();

    let r = run(&["owner", "--redis-url", &url, "--group", "tenants", "p1"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    let expected = format!(
        "p1: owned by replica-a (instance {}), fence ",
        this_instance()
    );
    assert!(r.stdout.starts_with(&expected), "{r:?}");
    assert!(r.stdout.contains(", lease left "), "{r:?}");
    assert!(r.stdout.contains(", held for "), "{r:?}");
    assert!(
        r.stdout.ends_with("Z)\n") && r.stdout.lines().count() == 1,
        "{r:?}"
    );

    let args = [
        "owner",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "p1",
        "--json",
    ];
    let json = run_json(&args).await;
    assert_eq!(json["group"], "tenants");
    assert_eq!(json["prefix"], "leasehold");
    assert_eq!(json["partition"], "p1");
    assert_eq!(json["owner"], "replica-a");
    assert_eq!(json["instance"], this_instance());
    assert_eq!(
        json["address"],
        serde_json::Value::Null,
        "it advertises nothing"
    );
    assert!(json["fence"].as_u64().unwrap() > 0, "{json}");
    let left = json["lease_left_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 2_000, "{json}");
    let held = json["held_for_ms"].as_u64().unwrap();
    let since = json["held_since"].as_str().unwrap();
    assert!(since.len() == 24 && since.ends_with('Z'), "{json}");

    // Later, held for longer, by the same term.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = run_json(&args).await;
    assert_eq!(again["fence"], json["fence"]);
    assert!(
        again["held_for_ms"].as_u64().unwrap() >= held + 250,
        "{again}"
    );

    // Nobody owns it once its owner has left.
    a.shutdown().await;
    let r = run(&["owner", "--redis-url", &url, "--group", "tenants", "p1"]).await;
    let expected = format!("p1: nobody owns it now (last fence {})\n", json["fence"]);
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), &*expected), "{r:?}");
    let json = run_json(&args).await;
    assert_eq!(json["owner"], serde_json::Value::Null);
    assert_eq!(json["instance"], serde_json::Value::Null);
    assert_eq!(json["address"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_shows_the_address_its_owner_advertises() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica_at(
        &store,
        "leasehold",
        "tenants",
        2,
        "replica-a",
        Some("http://10.0.0.7:8080/x"),
    );
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 2)]).await;
    let url = redis.url();
    let r = run(&["owner", "--redis-url", &url, "--group", "tenants", "p0"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    let expected = format!(
        "p0: owned by replica-a (instance {}, address http://10.0.0.7:8080/x), fence ",
        this_instance()
    );
    assert!(r.stdout.starts_with(&expected), "{r:?}");
    let json = run_json(&[
        "owner",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "p0",
        "--json",
    ])
    .await;
    assert_eq!(json["owner"], "replica-a");
    assert_eq!(json["instance"], this_instance());
    assert_eq!(json["address"], "http://10.0.0.7:8080/x");
    a.shutdown().await;
}
