//! `leasehold drain` and `undrain` against a real redis-server with real coordinators,
//! and what `status` shows of a drain.

mod support;

use leasehold_testkit::RedisServer;
use support::{replica, run, run_json, store, wait_for_counts, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_moves_a_replicas_partitions_away_until_undrained() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    let balanced = [("replica-a", 2), ("replica-b", 2)];
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let url = redis.url();
    let status = ["status", "--redis-url", &url, "--group", "tenants"];

    let r = run(&[
        "drain",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--replica",
        "replica-b",
    ])
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            Some(0),
            "replica replica-b of group tenants drained: it hands its partitions over and \
             claims nothing until undrained (across restarts and lost sessions)\n",
            ""
        ),
        "{r:?}"
    );
    wait_for_counts(
        &store,
        "leasehold",
        "tenants",
        &[("replica-a", 4), ("replica-b", 0)],
    )
    .await;
    let s = wait_until(&store, "leasehold", "tenants", "showed the drain", |s| {
        s.members
            .iter()
            .any(|m| m.replica == "replica-b" && m.drained)
    })
    .await;
    assert_eq!(s.members.len(), 2);

    let mut json_args = status.to_vec();
    json_args.push("--json");
    let json = run_json(&json_args).await;
    let replicas = json["replicas"].as_array().unwrap();
    assert_eq!(
        (
            &replicas[0]["replica"],
            &replicas[0]["state"],
            &replicas[0]["drained"]
        ),
        (&"replica-a".into(), &"active".into(), &false.into()),
        "{json}"
    );
    assert_eq!(
        (
            &replicas[1]["replica"],
            &replicas[1]["state"],
            &replicas[1]["drained"]
        ),
        (&"replica-b".into(), &"draining".into(), &true.into()),
        "{json}"
    );
    assert_eq!(replicas[1]["owned"], 0);
    assert_eq!(json["drained"], serde_json::json!(["replica-b"]), "{json}");
    let r = run(&status).await;
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("replica-b  draining  yes      0  ")),
        "{r:?}"
    );

    // Draining another, not live, replica changes nothing.
    let r = run(&[
        "drain",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--replica",
        "replica-c",
    ])
    .await;
    assert_eq!(r.code, Some(4), "{r:?}");
    assert_eq!(
        redis.redis_cli(&["HKEYS", "leasehold:{tenants}:drains"]),
        "replica-b"
    );

    let r = run(&[
        "undrain",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--replica",
        "replica-b",
    ])
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "replica replica-b of group tenants undrained: it takes its share again\n"
        ),
        "{r:?}"
    );
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let json = run_json(&json_args).await;
    for r in json["replicas"].as_array().unwrap() {
        assert_eq!(
            (&r["state"], &r["drained"]),
            (&"active".into(), &false.into()),
            "{json}"
        );
    }
    tokio::join!(a.shutdown(), b.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_replica_that_stops_stays_drained_and_status_says_so() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    wait_for_counts(
        &store,
        "leasehold",
        "tenants",
        &[("replica-a", 2), ("replica-b", 2)],
    )
    .await;
    let url = redis.url();
    let drain = [
        "drain",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--replica",
        "replica-b",
    ];
    assert_eq!(run(&drain).await.code, Some(0));
    b.shutdown().await;
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 4)]).await;
    let status = ["status", "--redis-url", &url, "--group", "tenants"];
    let r = run(&status).await;
    assert!(
        r.stdout
            .ends_with("drained, not live (drained again when they return): replica-b\n"),
        "{r:?}"
    );
    let mut json_args = status.to_vec();
    json_args.push("--json");
    let json = run_json(&json_args).await;
    assert_eq!(json["drained"], serde_json::json!(["replica-b"]), "{json}");
    // It comes back drained.
    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    let s = wait_until(&store, "leasehold", "tenants", "b back", |s| {
        s.members.iter().any(|m| m.replica == "replica-b")
    })
    .await;
    assert!(
        s.members
            .iter()
            .all(|m| m.replica != "replica-b" || (m.drained && m.held == 0)),
        "{s:?}"
    );
    tokio::join!(a.shutdown(), b.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_the_only_replica_is_refused_unless_forced() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 2, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 2)]).await;
    let url = redis.url();
    let mut drain = vec![
        "drain",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--replica",
        "replica-a",
    ];
    let r = run(&drain).await;
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            Some(2),
            "",
            "leasehold: error: replica \"replica-a\" is the last one taking part in group \
             \"tenants\": draining it would leave every partition unowned (drain --force does \
             it anyway); nothing was changed\n"
        ),
        "{r:?}"
    );
    assert_eq!(
        redis.redis_cli(&["HLEN", "leasehold:{tenants}:drains"]),
        "(integer) 0"
    );
    drain.push("--force");
    let r = run(&drain).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(
        r.stderr,
        "leasehold: warning: no other replica of group tenants takes part: its partitions \
         stay unowned until one joins or it is undrained\n",
        "{r:?}"
    );
    a.shutdown().await;
}
