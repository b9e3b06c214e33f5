//! `load` and `rebalance` of the real binary, on servers they start themselves: the
//! reports carry every documented key, a list of partition counts ends with their
//! comparison, and a cold start that cannot converge in time fails with what it saw.

use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use tokio::sync::Mutex;
use tokio::time::timeout;

/// One benchmark at a time: they share two cores with everything else.
static SERIAL: Mutex<()> = Mutex::const_new(());

async fn bench(args: &[&str]) -> Output {
    let run = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    timeout(Duration::from_secs(180), run)
        .await
        .unwrap_or_else(|_| panic!("leasehold-bench {args:?} ends within 180 s"))
        .expect("run leasehold-bench")
}

/// Every stdout line as JSON, after checking the exit status.
fn reports(out: &Output, what: &str) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: exit status {}; stderr:\n{stderr}",
        out.status
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_reports_every_key_for_each_partition_count() {
    let _one = SERIAL.lock().await;
    let out = bench(&[
        "load",
        "--partitions",
        "40,120",
        "--replicas",
        "2",
        "--lease-ms",
        "500",
        "--seconds",
        "1",
    ])
    .await;
    let lines = reports(&out, "load");
    // Per count: one line for its run, one summary.
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["run"], 1);
    assert!(lines[0]["client_cpu_pct"]["replica-2"].is_number());
    let last = lines.last().expect("a last line");
    eprintln!("{last}");
    for key in [
        "scenario",
        "topology",
        "partitions",
        "replicas",
        "lease_ms",
        "seconds",
        "all_owned_ms",
        "balanced_ms",
        "requests_per_sec",
        "per_replica_per_sec",
        "background_per_sec",
        "redis_cpu_pct",
        "redis_cmd_cpu_pct",
        "client_cpu_pct_max",
        "client_rss_mib_max",
        "script_ms",
        "spread",
        "runs",
        "all_owned_ms_runs",
        "balanced_ms_runs",
        "redis_cpu_pct_runs",
        "compare",
        "redis_cpu_ratio",
    ] {
        assert!(last.get(key).is_some(), "{key} missing from {last}");
    }
    assert_eq!(last["partitions"], 120);
    assert_eq!(last["runs"], 1);
    assert!(last["spread"].as_u64().expect("spread") <= 1);
    let owned = last["all_owned_ms"].as_f64().expect("all_owned_ms");
    let balanced = last["balanced_ms"].as_f64().expect("balanced_ms");
    assert!(0.0 < owned && owned <= balanced, "{owned} then {balanced}");
    assert!(last["script_count"].as_u64().expect("script_count") > 0);
    let p50 = last["script_ms"]["p50"].as_f64().expect("script_ms.p50");
    let max = last["script_ms"]["max"].as_f64().expect("script_ms.max");
    assert!(0.0 < p50 && p50 <= max, "{p50} ≤ {max}");
    assert!(last["client_rss_mib_max"].as_f64().expect("rss") > 1.0);
    for script in ["tick", "claim", "add"] {
        assert!(
            last["script_ms_by_name"][script]["max"].as_f64().is_some(),
            "{script} missing from script_ms_by_name: {last}"
        );
    }
    let compared: Vec<u64> = last["compare"]
        .as_array()
        .expect("compare is an array")
        .iter()
        .map(|c| c["partitions"].as_u64().expect("partitions"))
        .collect();
    assert_eq!(compared, [40, 120]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_that_cannot_converge_fails_with_what_it_saw() {
    let _one = SERIAL.lock().await;
    // The replicas settle for one lease (3 s) before claiming: never within 1 s.
    let out = bench(&[
        "load",
        "--partitions",
        "20",
        "--replicas",
        "2",
        "--lease-ms",
        "3000",
        "--seconds",
        "1",
        "--limit-secs",
        "1",
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it fails; stderr:\n{stderr}");
    assert!(
        stderr.contains("cold start: all owned: not within 1.0 s")
            && stderr.contains("/20 partitions owned")
            && stderr.contains("replica-1="),
        "the error says what was last seen:\n{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_times_each_phase_from_the_replicas_lines() {
    let _one = SERIAL.lock().await;
    let out = bench(&[
        "rebalance",
        "--partitions",
        "12",
        "--replicas",
        "3",
        "--lease-ms",
        "500",
        "--hand-off-bytes",
        "4096",
    ])
    .await;
    let lines = reports(&out, "rebalance");
    let r = lines.last().expect("a report");
    eprintln!("{r}");
    assert_eq!(r["scenario"], "rebalance");
    assert_eq!(r["poll_ms"], 5.0);
    for phase in ["cold_start", "kill", "join"] {
        let balanced = r[phase]["balanced_ms"].as_f64().expect("balanced_ms");
        let confirmed = r[phase]["confirmed_ms"].as_f64().expect("confirmed_ms");
        assert!(
            0.0 < balanced && balanced <= confirmed,
            "{phase}: the replicas' lines come before Redis's confirmation"
        );
    }
    let kill = &r["kill"];
    let owned = kill["all_owned_ms"].as_f64().expect("kill.all_owned_ms");
    assert!(owned <= kill["balanced_ms"].as_f64().expect("kill.balanced_ms"));
    assert!(r["join"]["moved"].as_u64().expect("moved") >= 1);
    assert!(r["spread"].as_u64().expect("spread") <= 1);
    // The ledger: first owners, the killed replica's partitions as expired, the
    // joiner's share as hand-offs; exactly the owner changes the lines showed.
    let ledger = &r["ledger"];
    assert_eq!(ledger["matches_observed"], true, "{ledger}");
    assert_eq!(ledger["causes"]["new"], 12, "{ledger}");
    assert_eq!(ledger["causes"]["expiry"], 4, "{ledger}");
    assert_eq!(ledger["causes"]["handoff"], r["join"]["moved"], "{ledger}");
    // Hand-off state: the join's hand-offs (planned) each deliver the previous term's
    // 4 KiB; the kill's take-overs are crashes, no planned moves.
    assert_eq!(ledger["state_matches"], true, "{ledger}");
    let h = &r["hand_offs"];
    assert_eq!(h["moved"], r["join"]["moved"], "{h}");
    assert_eq!(h["state_delivered"], h["moved"], "{h}");
    assert_eq!(h["stale"], 0, "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebalance_with_a_move_budget_reports_the_most_moves_in_one_interval() {
    let _one = SERIAL.lock().await;
    let out = bench(&[
        "rebalance",
        "--partitions",
        "24",
        "--replicas",
        "3",
        "--lease-ms",
        "600",
        "--move-budget",
        "1",
    ])
    .await;
    let lines = reports(&out, "rebalance");
    let r = lines.last().expect("a report");
    eprintln!("{r}");
    assert_eq!(r["move_budget"], 1);
    let most = r["max_moves_per_interval"]
        .as_u64()
        .expect("max_moves_per_interval");
    // One window's grant, released at worst in the next window beside that one's.
    assert!((1..=2).contains(&most), "{r}");
    // Two replicas of 12 after the kill; the joiner takes its share of 8.
    assert_eq!(
        r["join"]["moved"], 8,
        "the joiner's share, one at a time: {r}"
    );
    assert_eq!(r["ledger"]["matches_observed"], true, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weighted_rebalance_reports_loads_against_shares() {
    let _one = SERIAL.lock().await;
    for extra in [&["--weights", "zipf"][..], &["--capacities", "1,2,1"][..]] {
        let mut args = vec![
            "rebalance",
            "--partitions",
            "16",
            "--replicas",
            "3",
            "--lease-ms",
            "500",
        ];
        args.extend_from_slice(extra);
        let out = bench(&args).await;
        let lines = reports(&out, "rebalance");
        let r = lines.last().expect("a report");
        eprintln!("{r}");
        let load = &r["load"];
        for key in [
            "max_over_share",
            "max_weight_over_share",
            "within_bound",
            "replicas",
        ] {
            assert!(load.get(key).is_some(), "{key} missing from {r}");
        }
        assert_eq!(load["within_bound"], true, "{r}");
        let over = load["max_over_share"].as_f64().expect("max_over_share");
        let bound = 1.0 + load["max_weight_over_share"].as_f64().expect("bound");
        assert!(over <= bound + 1e-9, "{over} > {bound}");
        let loads: u64 = load["replicas"]
            .as_object()
            .expect("replicas")
            .values()
            .map(|v| v["load"].as_u64().expect("load"))
            .sum();
        assert_eq!(loads, load["total_weight"].as_u64().expect("total"), "{r}");
        if extra[0] == "--weights" {
            assert!(r["join"]["moved_weight"].as_u64().is_some(), "{r}");
        } else {
            assert_eq!(load["replicas"]["replica-2"]["capacity"], 2, "{r}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feedback_load_run_reports_hand_offs_self_moves_and_catch_ups_in_every_mode() {
    let _one = SERIAL.lock().await;
    let out = bench(&[
        "rebalance-load",
        "--partitions",
        "12",
        "--replicas",
        "3",
        "--lease-ms",
        "500",
        "--load",
        "feedback",
        "--seconds",
        "3",
        "--settle-secs",
        "5",
        "--modes",
        "load,count-only",
    ])
    .await;
    let lines = reports(&out, "rebalance-load --load feedback");
    let r = lines.last().expect("a report");
    eprintln!("{r}");
    assert_eq!(r["load_mode"], "feedback");
    assert_eq!(r["report"], "throughput");
    assert_eq!(r["service_factor"], 4.0);
    let count_only = &r["baselines"]["count_only"];
    for mode in [r, count_only] {
        for q in ["p50", "p99", "max"] {
            assert!(
                mode["hand_offs"]["unowned_ms"][q].is_f64(),
                "hand_offs.unowned_ms.{q} missing: {mode}"
            );
        }
        assert!(mode["hand_offs"]["count"].is_u64(), "{mode}");
        assert!(mode["self_moves"].is_u64(), "{mode}");
        // The window ends 8 s after the spawn: nothing after its first minute.
        assert_eq!(mode["moves_after_first_minute"], 0, "{mode}");
        assert_eq!(mode["ledger_matches_observed"], true, "{mode}");
    }
    // Only the mode under test serves queues: every partition's first owner found
    // the arrivals since the spawn (the cold start's catch-up).
    let c = &r["catch_ups"];
    assert_eq!(c["terms"]["origin"], 12, "{c}");
    assert!(
        c["first_backlog_ms"]["max"]
            .as_f64()
            .expect("first_backlog_ms")
            > 0.0
    );
    assert!(count_only.get("catch_ups").is_none(), "{count_only}");
}
