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
             claims nothing until undrained (for its current session)\n",
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
async fn draining_the_only_replica_warns_that_nobody_takes_over() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 2, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 2)]).await;
    let url = redis.url();
    let r = run(&[
        "drain",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--replica",
        "replica-a",
    ])
    .await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(
        r.stderr,
        "leasehold: warning: no other replica of group tenants takes part: its partitions \
         stay unowned until one joins or it is undrained\n",
        "{r:?}"
    );
    a.shutdown().await;
}
