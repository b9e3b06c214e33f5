//! `leasehold moves` against a real redis-server with real coordinators: the ledger as
//! lines and as JSON, one partition's moves, following new ones, and a missing group.

mod support;

use std::process::Stdio;
use std::time::Duration;

use leasehold_testkit::RedisServer;
use support::{assert_failed, leasehold, replica, run, run_json, store, wait_for_counts};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_lists_first_owners_and_hand_offs_and_follows_new_ones() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let url = redis.url();
    let a = replica(&store, "leasehold", "tenants", 2, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 2)]).await;
    let b = replica(&store, "leasehold", "tenants", 2, "replica-b");
    wait_for_counts(
        &store,
        "leasehold",
        "tenants",
        &[("replica-a", 1), ("replica-b", 1)],
    )
    .await;

    let json = run_json(&["moves", "--redis-url", &url, "--group", "tenants", "--json"]).await;
    assert_eq!(json["group"], "tenants");
    assert_eq!(json["prefix"], "leasehold");
    let moves = json["moves"].as_array().unwrap();
    assert_eq!(moves.len(), 3, "two first owners and one hand-off: {json}");
    for m in &moves[..2] {
        assert_eq!(m["cause"], "new", "{json}");
        assert_eq!(m["to"], "replica-a", "{json}");
        assert!(m["from"].is_null() && m["old_fence"].is_null(), "{json}");
        assert!(m["state_bytes"].is_null(), "{json}");
    }
    let handed = &moves[2];
    assert_eq!(handed["cause"], "handoff", "{json}");
    assert_eq!(handed["from"], "replica-a", "{json}");
    assert_eq!(handed["to"], "replica-b", "{json}");
    assert!(handed["old_fence"].as_u64().unwrap() < handed["new_fence"].as_u64().unwrap());
    assert!(handed["unowned_ms"].as_u64().unwrap() < 10_000, "{json}");
    assert_eq!(
        handed["state_bytes"].as_u64(),
        Some(support::HANDED.len() as u64),
        "{json}"
    );
    assert!(handed["started"].as_str().unwrap().ends_with('Z'), "{json}");
    let moved = handed["partition"].as_str().unwrap().to_owned();

    // Lines for people, and one partition's moves only.
    let r = run(&["moves", "--redis-url", &url, "--group", "tenants"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(r.stdout.lines().count(), 3, "{r:?}");
    let last = r.stdout.lines().last().unwrap();
    assert!(
        last.contains(&format!(
            "  {moved}  replica-a -> replica-b  handoff  fence "
        )),
        "{r:?}"
    );
    assert!(last.contains(" unowned "), "{r:?}");
    assert!(
        last.ends_with(&format!("  state {} B", support::HANDED.len())),
        "{r:?}"
    );
    let r = run(&[
        "moves",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--partition",
        &moved,
        "--json",
    ])
    .await;
    let only: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let only = only["moves"].as_array().unwrap();
    assert_eq!(only.len(), 2, "its first owner and its hand-off: {r:?}");
    assert!(only.iter().all(|m| m["partition"] == moved.as_str()));

    // Following: b leaves, and its partition's move to a comes as one JSON line.
    let mut child = leasehold()
        .args(["moves", "--redis-url", &url, "--group", "tenants"])
        .args(["--follow", "--interval", "50ms", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> serde_json::Value {
        let line = timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("moves --follow printed nothing for 20 s")
            .unwrap()
            .expect("moves --follow ended early");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    for _ in 0..3 {
        next().await;
    }
    b.shutdown().await;
    let left = next().await;
    assert_eq!(left["cause"], "leave", "{left}");
    assert_eq!(left["from"], "replica-b", "{left}");
    assert_eq!(left["to"], "replica-a", "{left}");
    assert_eq!(left["partition"], moved.as_str(), "{left}");
    child.kill().await.unwrap();
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_of_a_missing_group_is_an_error_that_names_it() {
    let redis = RedisServer::start();
    let r = run(&["moves", "--redis-url", &redis.url(), "--group", "nope"]).await;
    assert_failed(&r, 4, "no group \"nope\" under prefix \"leasehold\"");
}
