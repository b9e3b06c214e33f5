//! `rolling` of the real binary, on a server it starts itself: a rolling restart, a
//! sticky one and a deploy that grows the list each report every documented key, end
//! balanced with nobody refused; the sticky one moves nothing, the deploy ends with
//! the grown list. The plain restart hands 4 KiB of state off at every term's end:
//! every planned move's new term gets exactly the state of the term before.

use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use tokio::sync::Mutex;
use tokio::time::timeout;

/// One benchmark at a time: they share two cores with everything else.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// 12 partitions on 3 replicas, short leases, and `extra` flags: the last stdout line,
/// after checking the exit status.
async fn rolling(extra: &[&str]) -> Value {
    let mut args = vec![
        "rolling",
        "--partitions",
        "12",
        "--replicas",
        "3",
        "--lease-ms",
        "500",
    ];
    args.extend_from_slice(extra);
    let run = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(&args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out: Output = timeout(Duration::from_secs(180), run)
        .await
        .unwrap_or_else(|_| panic!("leasehold-bench {args:?} ends within 180 s"))
        .expect("run leasehold-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{args:?}: exit status {}; stderr:\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().expect("a report line");
    let report: Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("bad line {last:?}: {e}"));
    eprintln!("{report}");
    report
}

/// The documented keys and the invariants every run keeps.
fn check(r: &Value, sticky: bool, after: u64) {
    for key in [
        "scenario",
        "sticky",
        "hand_off_bytes",
        "hand_offs",
        "partitions_before",
        "partitions_after",
        "moved",
        "max_unowned_ms",
        "sum_unowned_ms",
        "refused",
        "all_owned",
        "spread",
        "restarts",
        "rejoin_grace_ms",
        "topology",
        "lease_ms",
    ] {
        assert!(r.get(key).is_some(), "{key} missing from {r}");
    }
    assert_eq!(r["scenario"], "rolling");
    assert_eq!(r["sticky"], sticky);
    assert_eq!(r["partitions_before"], 12);
    assert_eq!(r["partitions_after"], after, "{r}");
    assert_eq!(r["refused"], 0, "{r}");
    assert_eq!(r["all_owned"], true, "{r}");
    assert!(r["spread"].as_u64().expect("spread") <= 1, "{r}");
    let max = r["max_unowned_ms"].as_f64().expect("max_unowned_ms");
    let sum = r["sum_unowned_ms"].as_f64().expect("sum_unowned_ms");
    assert!(0.0 <= max && max <= sum, "{max} ≤ {sum}");
    let restarts = r["restarts"].as_array().expect("restarts");
    assert_eq!(restarts.len(), 3, "every replica restarted once");
    let per_restart: u64 = restarts
        .iter()
        .map(|x| x["moved"].as_u64().expect("moved"))
        .sum();
    assert_eq!(per_restart, r["moved"].as_u64().expect("moved"));
    // The group's ledger of moves holds exactly the owner changes the lines showed.
    let ledger = &r["ledger"];
    assert_eq!(ledger["matches_observed"], true, "{ledger}");
    assert_eq!(ledger["entries"], ledger["observed"], "{ledger}");
    assert_eq!(
        ledger["causes"]["new"], r["partitions_after"],
        "every partition's first owner: {ledger}"
    );
    // Hand-off state: never another term's; the ledger names what each move carried.
    let h = &r["hand_offs"];
    for key in [
        "moved",
        "state_delivered",
        "state_missing",
        "stale",
        "unowned_ms",
    ] {
        assert!(h.get(key).is_some(), "{key} missing from {h}");
    }
    assert!(h["unowned_ms"].get("p50").is_some() && h["unowned_ms"].get("max").is_some());
    assert_eq!(h["stale"], 0, "{h}");
    assert_eq!(ledger["state_matches"], true, "{ledger}");
    if r["hand_off_bytes"] == 0 {
        assert_eq!(h["state_delivered"], 0, "{h}");
        assert_eq!(h["state_missing"], h["moved"], "{h}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_ends_balanced_with_nobody_refused() {
    let _one = SERIAL.lock().await;
    let r = rolling(&["--hand-off-bytes", "4096"]).await;
    check(&r, false, 12);
    assert!(r["rejoin_grace_ms"].is_null());
    assert!(
        r["moved"].as_u64().expect("moved") > 0,
        "a plain restart hands its share over: {r}"
    );
    // Every planned move (the restarts' leaves, the hand-offs that even the group
    // out) delivers the previous term's 4 KiB, and only that.
    assert_eq!(r["hand_off_bytes"], 4096);
    let h = &r["hand_offs"];
    let moved = h["moved"].as_u64().expect("hand_offs.moved");
    assert!(moved >= r["moved"].as_u64().expect("moved"), "{h}");
    assert_eq!(h["state_delivered"], moved, "{h}");
    assert_eq!(h["state_missing"], 0, "{h}");
    assert_eq!(h["wrong_size"], 0, "{h}");
    assert_eq!(h["errors"], 0, "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sticky_rolling_restart_moves_nothing() {
    let _one = SERIAL.lock().await;
    let r = rolling(&["--sticky"]).await;
    check(&r, true, 12);
    assert_eq!(r["rejoin_grace_ms"], 5000, "10 leases by default");
    assert_eq!(r["moved"], 0, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_grows_the_list() {
    let _one = SERIAL.lock().await;
    let r = rolling(&["--add-partitions", "3"]).await;
    check(&r, false, 15);
    assert_eq!(r["list_versions"], serde_json::json!([1, 2]));
    assert_eq!(r["group_list_version"], 2);
}
