//! `--topology`: one hand-over of the real binary on a Redis Cluster and over mutual
//! TLS, each on servers the bench starts itself. The report names the topology and
//! the hand-over is quick (the release notification works there too).

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use tokio::time::timeout;

const LEASE_MS: f64 = 500.0;

/// Runs `handover --runs 1 --lease-ms 500 --topology <topology>`; returns its report.
async fn handover(topology: &str) -> Value {
    let run = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(["handover", "--runs", "1", "--lease-ms", "500"])
        .args(["--topology", topology])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = timeout(Duration::from_secs(90), run)
        .await
        .unwrap_or_else(|_| panic!("handover on {topology} ends within 90 s"))
        .expect("run leasehold-bench handover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "handover on {topology}: exit status {}; stderr:\n{stderr}",
        out.status
    );
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no report on stdout; stderr:\n{stderr}"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("bad report {last:?}: {e}"))
}

fn check(report: &Value, topology: &str) {
    eprintln!("{report}");
    assert_eq!(report["scenario"], "handover");
    assert_eq!(report["topology"], topology);
    assert_eq!(report["lease_ms"], 500);
    let handover = report["handover_ms"]["max"]
        .as_f64()
        .expect("handover_ms.max is a number");
    assert!(
        handover < LEASE_MS / 2.0,
        "a hand-over on {topology} takes well under half a lease, not {handover} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handover_on_a_cluster() {
    check(&handover("cluster").await, "cluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handover_over_tls() {
    check(&handover("tls").await, "tls");
}
