//! `add` of the real binary, on a server it starts itself: every addition is owned by
//! one replica, the report has every documented key, and the group ends balanced over
//! the grown set.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn additions_to_a_running_group_are_owned_and_the_group_ends_balanced() {
    let args = [
        "add",
        "--partitions",
        "8",
        "--replicas",
        "2",
        "--lease-ms",
        "600",
        "--adds",
        "3",
        "--gap-ms",
        "50",
    ];
    let run = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = timeout(Duration::from_secs(120), run)
        .await
        .expect("leasehold-bench add ends within 120 s")
        .expect("run leasehold-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {}; stderr:\n{stderr}",
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: Value = serde_json::from_str(stdout.lines().last().expect("a report line"))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    for key in [
        "scenario",
        "partitions",
        "replicas",
        "lease_ms",
        "renew_interval_ms",
        "adds",
        "owned_ms",
        "add_call_ms",
        "within_target",
        "balanced",
        "final_counts",
    ] {
        assert!(last.get(key).is_some(), "{key} missing from {last}");
    }
    assert_eq!(last["scenario"], "add");
    assert_eq!(last["adds"], 3);
    assert_eq!(last["balanced"], true, "{last}");
    let counts: Vec<u64> = last["final_counts"]
        .as_object()
        .expect("counts")
        .values()
        .map(|v| v.as_u64().expect("a count"))
        .collect();
    assert_eq!(
        counts.iter().sum::<u64>(),
        11,
        "every partition owned once: {last}"
    );
    let max = last["owned_ms"]["max"].as_f64().expect("owned_ms.max");
    // Generous: a lease (the scenario fails past one); the figure is the benchmark's.
    assert!(max > 0.0 && max < 600.0, "{last}");
}
