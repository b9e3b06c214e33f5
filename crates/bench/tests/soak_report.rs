//! `leasehold-bench soak` and `failover --dedicated` against a real Redis: the report
//! carries the keys the docs promise, and a soak where nothing goes wrong counts one
//! term and no spurious failover.

use std::process::Command;

use leasehold_testkit::RedisServer;
use serde_json::Value;

/// Runs the bench with `args` and returns its last stdout line as JSON.
fn bench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(args)
        .output()
        .expect("run leasehold-bench");
    assert!(
        out.status.success(),
        "leasehold-bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let last = stdout.lines().last().expect("a report line");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("bad report {last:?}: {e}"))
}

fn assert_p50_p99_max(v: &Value, what: &str) {
    for k in ["p50", "p99", "max"] {
        assert!(v[k].is_f64(), "{what}.{k} missing: {v}");
    }
    assert!(v["p50"].as_f64() <= v["p99"].as_f64(), "{what}: {v}");
    assert!(v["p99"].as_f64() <= v["max"].as_f64(), "{what}: {v}");
}

#[test]
fn a_quiet_soak_has_one_term_and_no_spurious_failover() {
    let redis = RedisServer::start();
    let url = redis.url();
    for extra in [&[][..], &["--dedicated", "--saturate"][..]] {
        let mut args = vec![
            "soak",
            "--lease-ms",
            "250",
            "--seconds",
            "3",
            "--replicas",
            "2",
            "--redis-url",
            &url,
        ];
        args.extend_from_slice(extra);
        let r = bench(&args);
        assert_eq!(r["scenario"], "soak");
        assert_eq!(r["dedicated"], extra.contains(&"--dedicated"), "{r}");
        assert_eq!(r["saturate"], extra.contains(&"--saturate"), "{r}");
        assert_eq!(r["terms"], 1, "{r}");
        assert_eq!(r["spurious_failovers"], 0, "{r}");
        assert_eq!(r["leaderless_ms_total"], 0.0, "{r}");
        // 3 s with a renewal every 83 ms: some 30, whatever the machine does.
        assert!(r["renewals"].as_u64().unwrap() >= 10, "{r}");
        assert_p50_p99_max(&r["renew_latency_ms"], "renew_latency_ms");
    }
}

#[test]
fn a_dedicated_failover_reports_percentiles() {
    let redis = RedisServer::start();
    let r = bench(&[
        "failover",
        "--lease-ms",
        "250",
        "--runs",
        "2",
        "--dedicated",
        "--redis-url",
        &redis.url(),
    ]);
    assert_eq!(r["dedicated"], true, "{r}");
    assert_eq!(r["runs"].as_array().map(Vec::len), Some(2), "{r}");
    assert_p50_p99_max(&r["failover_ms"], "failover_ms");
    // The next leader runs after the lease left at the kill, never before it expires.
    for run in r["runs"].as_array().unwrap() {
        assert!(run["overshoot_ms"].as_f64().unwrap() >= 0.0, "{run}");
    }
}
