//! `leasehold status` and `leasehold watch` against a real redis-server, with real
//! coordinators holding the partitions.

mod support;

use std::process::Stdio;
use std::time::Duration;

use leasehold_testkit::RedisServer;
use support::{leasehold, replica, run, run_json, store, wait_for_counts};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::timeout;

/// `status --json` with the two fields that vary from run to run (fences are floored at
/// the server's time; lease left ticks down) replaced by placeholders, line by line, so
/// the rest is compared byte for byte with the golden file.
fn with_placeholders(json: &str) -> String {
    let mut out = String::new();
    for line in json.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let replaced = [
            ("\"fence\": ", "\"<fence>\""),
            ("\"lease_left_ms\": ", "\"<ms>\""),
        ]
        .into_iter()
        .find_map(|(key, placeholder)| {
            let rest = trimmed.strip_prefix(key)?;
            let number = rest.trim_end_matches(',');
            number.parse::<u64>().ok()?;
            Some(format!(
                "{indent}{key}{placeholder}{}",
                &rest[number.len()..]
            ))
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
    // The placeholders stood for real numbers.
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    for p in json["partitions"].as_array().unwrap() {
        assert!(p["fence"].as_u64().unwrap() > 0, "{p}");
        let left = p["lease_left_ms"].as_u64().unwrap();
        assert!(left > 0 && left <= 2_000, "{p}");
    }
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_two_balanced_replicas_shows_two_each_and_no_spread() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "ops", "tenants", 4, "replica-a");
    let b = replica(&store, "ops", "tenants", 4, "replica-b");
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
            "PARTITION  OWNER      FENCE             LEASE LEFT",
        ],
        "{}",
        r.stdout
    );
    for (i, line) in lines[3..7].iter().enumerate() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.len(), 4, "{line}");
        assert_eq!(cols[0], format!("p{i}"));
        assert!(["replica-a", "replica-b"].contains(&cols[1]), "{line}");
        assert!(cols[2].parse::<u64>().unwrap() > 0, "{line}");
        assert!(cols[3].ends_with('s'), "{line}");
    }
    assert_eq!(
        lines[7..],
        [
            "",
            "REPLICA    OWNED",
            "replica-a  2",
            "replica-b  2",
            "",
            "live replicas: 2, unowned partitions: 0, spread: 0",
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
    assert_eq!(
        json["replicas"],
        serde_json::json!([
            {"replica": "replica-a", "owned": 2, "settling": false},
            {"replica": "replica-b", "owned": 2, "settling": false},
        ])
    );
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
        .starts_with("watching for changes every 50 ms")
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
