//! `failover-lossy` on a Sentinel set the bench starts itself: one run in which
//! the primary is cut off from its replica before the child leader acquires, then
//! killed. The report has the keys `docs/benchmarks.md` describes; their values are
//! not checked (they depend on whether the scripts hold grants back after a
//! failover), except that the grant really lived on the primary only.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use tokio::time::timeout;

/// Short, but longer than the Sentinel failover takes (about 2-4 s), so that the old
/// leader is still entitled when the replica is promoted.
const LEASE_MS: u64 = 3000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lossy_sentinel_failover_reports_overlaps_fences_and_times() {
    let run = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(["failover-lossy", "--topology", "sentinel"])
        .args(["--runs", "1", "--lease-ms", &LEASE_MS.to_string()])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = timeout(Duration::from_secs(120), run)
        .await
        .expect("a lossy failover ends within 120 s")
        .expect("run leasehold-bench failover-lossy");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit status {}; stderr:\n{stderr}",
        out.status
    );
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no report on stdout; stderr:\n{stderr}"));
    let report: Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("bad report {last:?}: {e}"));
    eprintln!("{report}");

    assert_eq!(report["scenario"], "failover");
    assert_eq!(report["topology"], "sentinel");
    assert_eq!(report["lose_writes"], true);
    assert_eq!(report["lease_ms"], LEASE_MS);
    for key in ["overlaps", "fence_repeats", "grants_replicated"] {
        assert!(report[key].is_u64(), "{key} is a count: {report}");
    }
    for key in [
        "leaderless_ms",
        "detection_ms",
        "overlap_ms",
        "old_deadline_ms",
    ] {
        for stat in ["min", "median", "max"] {
            assert!(
                report[key][stat].is_f64(),
                "{key}.{stat} is a number: {report}"
            );
        }
    }
    let runs = report["runs"].as_array().expect("runs is a list");
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    for key in [
        "detection_ms",
        "leaderless_ms",
        "old_deadline_ms",
        "overlap_ms",
        "since_renew_ms",
        "topology_age_ms",
    ] {
        assert!(r[key].is_f64(), "runs[0].{key} is a number: {r}");
    }
    for key in ["old_fence", "new_fence", "primary_node", "new_primary_node"] {
        assert!(r[key].is_u64(), "runs[0].{key} is a number: {r}");
    }
    assert!(r["overlap"].is_boolean() && r["fence_repeat"].is_boolean());
    assert_ne!(
        r["primary_node"], r["new_primary_node"],
        "a replica was promoted"
    );
    assert_eq!(r["grant_on_primary"], true, "{r}");
    assert_eq!(
        r["grant_on_replica"], false,
        "the grant reached the replica: the replication cut did not hold: {r}"
    );
}
