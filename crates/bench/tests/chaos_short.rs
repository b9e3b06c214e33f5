//! A short chaos run of the real binary: three replica processes doing fenced ledger
//! writes through fault proxies, a seeded schedule of kills, pauses, partitions,
//! latency, resets, a coordination-server restart, graceful leaves and joins. No
//! ledger may hold a stale write or two replicas' writes under one fence, no term may
//! be offered hand-off state other than its predecessor's (every term hands off 64
//! bytes, the default), and the group must be whole and balanced once the faults are
//! healed.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_faults_never_let_a_stale_write_through() {
    let run = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(["chaos", "--replicas", "3", "--partitions", "12"])
        .args(["--lease-ms", "600", "--seconds", "20", "--seed", "7"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = timeout(Duration::from_secs(180), run)
        .await
        .expect("the chaos run ends within 3 minutes")
        .expect("run leasehold-bench chaos");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no report on stdout; stderr:\n{stderr}"));
    let report: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("bad report {last:?}: {e}; stderr:\n{stderr}"));
    eprintln!("{report}");

    assert_eq!(report["scenario"], "chaos");
    assert_eq!(
        report["violations"], 0,
        "violations: {}\nstderr:\n{stderr}",
        report["violation_details"]
    );
    assert!(out.status.success(), "exit status {}", out.status);
    let counts = report["final_counts"]
        .as_object()
        .expect("final_counts is an object");
    assert_eq!(counts.len(), 3, "three replicas at the end: {counts:?}");
    let owned: u64 = counts.values().map(|n| n.as_u64().expect("a count")).sum();
    assert_eq!(owned, 12, "every partition owned at the end: {counts:?}");
    assert!(
        report["spread"].as_u64().expect("spread") <= 1,
        "balanced at the end: {counts:?}"
    );
    assert!(
        report["writes_accepted"].as_u64().expect("writes") > 0,
        "the replicas wrote"
    );
    let faults = report["faults"].as_object().expect("faults");
    assert!(faults.len() >= 6, "most fault kinds ran: {faults:?}");
    let hand_offs = &report["hand_offs"];
    assert_eq!(report["hand_off_bytes"], 64, "hand-offs are on by default");
    assert_eq!(
        hand_offs["stale"], 0,
        "no stale hand-off state: {hand_offs}"
    );
    assert!(
        hand_offs["offered"].as_u64().expect("offered") > 0,
        "some terms were offered their predecessor's state: {hand_offs}"
    );
}
