//! `leasehold drain` and `undrain` against a real redis-server with real coordinators,
//! and what `status` shows of a drain.

mod support;

use leasehold_testkit::{FaultProxy, RedisServer};
use support::{assert_failed, replica, run, run_json, store, wait_for_counts, wait_until};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_changes_nothing_says_so() {
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
    let run_as =
        async |command: &str| run(&[command, "-u", &url, "-g", "tenants", "-r", "replica-b"]).await;
    let r = run_as("undrain").await;
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            Some(0),
            "replica replica-b of group tenants is not drained: nothing changed\n",
            ""
        ),
        "{r:?}"
    );
    let r = run_as("drain").await;
    assert!(
        r.stdout.contains("replica-b of group tenants drained: "),
        "{r:?}"
    );
    let r = run_as("drain").await;
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            Some(0),
            "replica replica-b of group tenants is already drained: nothing changed (it \
             claims nothing until undrained)\n",
            ""
        ),
        "{r:?}"
    );
    assert_eq!(
        redis.redis_cli(&["HKEYS", "leasehold:{tenants}:drains"]),
        "replica-b"
    );
    let r = run_as("undrain").await;
    assert!(
        r.stdout.ends_with("undrained: it takes its share again\n"),
        "{r:?}"
    );
    let r = run_as("undrain").await;
    assert!(
        r.stdout.ends_with("is not drained: nothing changed\n"),
        "{r:?}"
    );
    tokio::join!(a.shutdown(), b.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_whose_answer_is_lost_may_have_been_applied_and_runs_again_safely() {
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
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let url = proxy.url();
    let drain = ["drain", "-u", &url, "-g", "tenants", "-r", "replica-b"];
    // The drain script's answer, {'ok'}, is cut (and so is the answer to its replay):
    // the drain ran, the command cannot know.
    proxy.cut_replies_containing(2, b"*1\r\n$2\r\nok\r\n");
    let r = run(&drain).await;
    assert_failed(
        &r,
        3,
        "; the change may or may not have been applied (look with `partitions list` or \
         `status`): running it again is safe (a drained replica stays drained)",
    );
    assert_eq!(
        redis.redis_cli(&["HKEYS", "leasehold:{tenants}:drains"]),
        "replica-b",
        "it was applied"
    );
    proxy.cut_replies(0);
    let r = run(&drain).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(
        r.stdout.contains("is already drained: nothing changed"),
        "{r:?}"
    );
    tokio::join!(a.shutdown(), b.shutdown());
}
