//! `leasehold status` and `leasehold watch` against a real redis-server, with real
//! coordinators holding the partitions.

mod support;

use std::process::Stdio;
use std::time::Duration;

use leasehold_testkit::RedisServer;
use support::{
    leasehold, replica, replica_at, run, run_json, store, this_instance, wait_for_counts,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::timeout;

/// `status --json` with the fields that vary from run to run (fences are floored at
/// the server's time; times tick; the instance is this process) replaced by
/// placeholders, line by line, so the rest is compared byte for byte with the golden
/// file.
fn with_placeholders(json: &str) -> String {
    let mut out = String::new();
    for line in json.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let replaced = [
            ("\"fence\": ", "\"<fence>\""),
            ("\"lease_left_ms\": ", "\"<ms>\""),
            ("\"held_for_ms\": ", "\"<ms>\""),
            ("\"session_left_ms\": ", "\"<ms>\""),
            ("\"instance\": ", "\"<instance>\""),
        ]
        .into_iter()
        .find_map(|(key, placeholder)| {
            let rest = trimmed.strip_prefix(key)?;
            let value = rest.trim_end_matches(',');
            let is_number = value.parse::<u64>().is_ok();
            let is_string = value.len() > 2 && value.starts_with('"') && value.ends_with('"');
            (is_number || is_string)
                .then(|| format!("{indent}{key}{placeholder}{}", &rest[value.len()..]))
        });
        out.push_str(&replaced.unwrap_or_else(|| line.to_owned()));
        out.push('\n');
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_of_one_replica_matches_the_golden_file() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 4)]).await;

    let args = [
        "status",
        "--redis-url",
        &redis.url(),
        "--group",
        "tenants",
        "--json",
    ];
    let r = run(&args).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.is_empty(), "{r:?}");
    assert_eq!(
        with_placeholders(&r.stdout),
        include_str!("golden/status_one_replica.json"),
        "raw output:\n{}",
        r.stdout
    );
    // The placeholders stood for real values.
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    for p in json["partitions"].as_array().unwrap() {
        assert!(p["fence"].as_u64().unwrap() > 0, "{p}");
        let left = p["lease_left_ms"].as_u64().unwrap();
        assert!(left > 0 && left <= 2_000, "{p}");
        assert!(p["held_for_ms"].as_u64().is_some(), "{p}");
    }
    let r0 = &json["replicas"][0];
    let left = r0["session_left_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 2_000, "{r0}");
    assert_eq!(r0["instance"], this_instance());
    assert_eq!(r0["address"], serde_json::Value::Null);
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_two_balanced_replicas_shows_two_each_and_no_spread() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "ops", "tenants", 4, "replica-a");
    // b advertises an address (ADDRESS, `address`); a does not (`-`, null).
    let b = replica_at(
        &store,
        "ops",
        "tenants",
        4,
        "replica-b",
        Some("10.0.0.7:8080"),
    );
    let addresses = ["-", "10.0.0.7:8080"];
    let balanced = [("replica-a", 2), ("replica-b", 2)];
    wait_for_counts(&store, "ops", "tenants", &balanced).await;
    let url = redis.url();
    let base = [
        "status",
        "--redis-url",
        &url,
        "--prefix",
        "ops",
        "--group",
        "tenants",
    ];

    let r = run(&base).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "group tenants (prefix ops): 4 partitions, 2 live replicas",
            "",
            "PARTITION  OWNER      FENCE             LEASE LEFT  HELD FOR",
        ],
        "{}",
        r.stdout
    );
    for (i, line) in lines[3..7].iter().enumerate() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.len(), 5, "{line}");
        assert_eq!(cols[0], format!("p{i}"));
        assert!(["replica-a", "replica-b"].contains(&cols[1]), "{line}");
        assert!(cols[2].parse::<u64>().unwrap() > 0, "{line}");
        assert!(cols[3].ends_with('s') && cols[4].ends_with('s'), "{line}");
    }
    let instance = this_instance();
    assert_eq!(
        lines[7..9],
        [
            "",
            &format!(
                "REPLICA    STATE   DRAINED  OWNED  SESSION LEFT  {:<w$}  ADDRESS",
                "INSTANCE",
                w = instance.len().max("INSTANCE".len())
            ),
        ],
        "{}",
        r.stdout
    );
    let rows = lines[9..11].iter().zip(["replica-a", "replica-b"]);
    for ((line, replica), address) in rows.zip(addresses) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[..4], [replica, "active", "no", "2"], "{line}");
        assert!(cols[4].ends_with('s'), "{line}");
        let (last, process) = cols[5..].split_last().unwrap();
        assert_eq!(process.join(" "), instance, "{line}");
        assert_eq!(*last, address, "{line}");
    }
    assert_eq!(
        lines[11..],
        [
            "",
            "live replicas: 2, unowned partitions: 0, spread: 0, list version: 0",
        ],
        "{}",
        r.stdout
    );

    let mut args = base.to_vec();
    args.push("--json");
    let json = run_json(&args).await;
    assert_eq!(json["prefix"], "ops");
    assert_eq!(json["live_replicas"], 2);
    assert_eq!(json["unowned"], 0);
    assert_eq!(json["spread"], 0);
    assert_eq!(json["list_version"], 0);
    let replicas = json["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2, "{json}");
    let addresses = [serde_json::Value::Null, "10.0.0.7:8080".into()];
    for ((r, id), address) in replicas
        .iter()
        .zip(["replica-a", "replica-b"])
        .zip(addresses)
    {
        assert_eq!(r["replica"], id);
        assert_eq!(r["address"], address);
        assert_eq!(r["owned"], 2);
        assert_eq!(r["settling"], false);
        assert_eq!(r["state"], "active");
        assert_eq!(r["drained"], false);
        assert_eq!(r["instance"], this_instance());
        assert!(r["session_left_ms"].as_u64().unwrap() <= 2_000, "{r}");
    }
    tokio::join!(a.shutdown(), b.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_each_change_of_owner_and_stops_on_ctrl_c() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 4)]).await;

    let mut child = leasehold()
        .args(["watch", "--redis-url", &redis.url(), "--group", "tenants"])
        .args(["--interval-ms", "50"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_line = async || {
        timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("watch printed nothing for 20 s")
            .unwrap()
            .expect("watch ended early")
    };
    let first = next_line().await;
    assert_eq!(
        first,
        "group tenants (prefix leasehold): 4 partitions, 1 live replica"
    );
    while !next_line()
        .await
        .starts_with("watching for changes every 50ms; Ctrl-C to stop")
    {}

    // A second replica joins: two partitions are handed over to it.
    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    let mut joined = false;
    let mut moved = Vec::new();
    while !(joined && moved.len() == 2) {
        let line = next_line().await;
        let (at, change) = line.split_once("  ").unwrap();
        assert!(
            at.len() == 24 && at.ends_with('Z'),
            "an RFC 3339 UTC time: {line}"
        );
        if change == "replica replica-b joined" {
            joined = true;
            continue;
        }
        // Its state as it settles: "replica replica-b settling → active".
        if change.starts_with("replica replica-b ") {
            assert_eq!(change, "replica replica-b settling → active", "{line}");
            continue;
        }
        // "p1  replica-a → (none)  fence 1764...", "p1  (none) → replica-b  fence ..."
        let cols: Vec<&str> = change.split_whitespace().collect();
        assert_eq!(cols.len(), 6, "{line}");
        assert_eq!((cols[2], cols[4]), ("→", "fence"), "{line}");
        assert!(cols[5].parse::<u64>().unwrap() > 0, "{line}");
        if cols[3] == "replica-b" {
            assert!(!moved.contains(&cols[0].to_owned()), "{line}");
            moved.push(cols[0].to_owned());
        } else {
            assert_eq!(
                cols[1], "replica-a",
                "only replica-a's partitions move: {line}"
            );
        }
    }
    wait_for_counts(
        &store,
        "leasehold",
        "tenants",
        &[("replica-a", 2), ("replica-b", 2)],
    )
    .await;

    // Ctrl-C ends it cleanly.
    let pid = child.id().unwrap().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("watch did not stop on SIGINT")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    tokio::join!(a.shutdown(), b.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_drains_state_changes_and_partitions_added_and_removed() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    let balanced = [("replica-a", 2), ("replica-b", 2)];
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let url = redis.url();

    let mut child = leasehold()
        .args(["watch", "--redis-url", &url, "--group", "tenants"])
        .args(["--interval", "50ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_line = async || {
        timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("watch printed nothing for 20 s")
            .unwrap()
            .expect("watch ended early")
    };
    while !next_line().await.starts_with("watching for changes") {}
    // Owner changes come and go in between; these come in this order.
    let mut wait_for = async |want: &str| {
        loop {
            let line = next_line().await;
            let (_, change) = line.split_once("  ").unwrap();
            if change == want {
                return;
            }
            assert!(
                change.starts_with('p') && change.contains(" → "),
                "only owner changes in between; waiting for {want:?}, got {line:?}"
            );
        }
    };

    let drain = [
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "--replica",
        "replica-b",
    ];
    let mut args = vec!["drain"];
    args.extend(drain);
    assert_eq!(run(&args).await.code, Some(0));
    wait_for("replica replica-b drained").await;
    wait_for("replica replica-b active → draining").await;
    args[0] = "undrain";
    assert_eq!(run(&args).await.code, Some(0));
    wait_for("replica replica-b undrained").await;
    wait_for("replica replica-b draining → active").await;

    let set = ["--redis-url", &url, "--group", "tenants"];
    let mut args = vec!["partitions", "add"];
    args.extend(set);
    args.push("p9");
    assert_eq!(run(&args).await.code, Some(0));
    wait_for("partition p9 added").await;
    args[1] = "remove";
    assert_eq!(run(&args).await.code, Some(0));
    wait_for("partition p9 removed").await;

    let mut args = vec!["partitions", "weight"];
    args.extend(set);
    args.extend(["p1", "5"]);
    assert_eq!(run(&args).await.code, Some(0));
    wait_for("partition p1 weight 1 → 5").await;
    wait_for("the group balances by weight now").await;

    child.start_kill().unwrap();
    let _ = child.wait().await;
    tokio::join!(a.shutdown(), b.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_summary_is_one_line_of_counts_and_one_per_replica() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let b = replica(&store, "leasehold", "tenants", 6, "replica-b");
    let a = replica(&store, "leasehold", "tenants", 6, "replica-a");
    let balanced = [("replica-a", 3), ("replica-b", 3)];
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let url = redis.url();
    let r = run(&["status", "-u", &url, "-g", "tenants", "--summary"]).await;
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""), "{r:?}");
    assert_eq!(
        r.stdout,
        "group tenants (prefix leasehold): 6 partitions, 6 owned, 0 unowned; 2 live replicas
REPLICA    STATE   DRAINED  OWNED  LOAD
replica-a  active  no       3      3
replica-b  active  no       3      3
",
        "{r:?}"
    );
    for args in [&["-s", "-o", "json"][..], &["--summary", "--json"]] {
        let mut all = vec!["status", "-u", &url, "-g", "tenants"];
        all.extend(args);
        let json = run_json(&all).await;
        assert_eq!(json["partition_count"], 6, "{json}");
        assert_eq!((&json["owned"], &json["unowned"]), (&6.into(), &0.into()));
        let ids: Vec<&str> = json["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["replica"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["replica-a", "replica-b"], "sorted: {json}");
        assert!(json.get("partitions").is_none(), "{json}");
    }
    // `-o json` is `--json`: the same object.
    let long = run_json(&["status", "-u", &url, "-g", "tenants", "--json"]).await;
    let short = run_json(&["status", "-u", &url, "-g", "tenants", "-o", "json"]).await;
    assert_eq!(long["partitions"].as_array().unwrap().len(), 6);
    assert_eq!(short["replicas"].as_array().unwrap().len(), 2);
    tokio::join!(a.shutdown(), b.shutdown());
}
