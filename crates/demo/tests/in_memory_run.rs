//! The demo on the embedded store runs end to end, converges after every event and
//! writes its plot.

mod support;

use support::{DEADLINE, run_demo};

#[test]
fn memory_run_converges_after_every_event_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("fleet.svg");
    let run = run_demo(
        &[
            "--memory",
            "--no-tui",
            "--lease-ms",
            "500",
            "--script-delay-ms",
            "300",
            "--plot",
            svg.to_str().unwrap(),
        ],
        // Unreachable, and ignored: --memory wins over REDIS_URL.
        &[("REDIS_URL", "redis://127.0.0.1:1/")],
    );
    assert!(run.took < DEADLINE);
    assert!(
        run.stdout.contains("in-memory store (--memory)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("waiting") || run.stdout.contains("re-owned in"));
    run.assert_converged(32);
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg"));
    assert!(plot.contains("kill replica-2 (abort: no release): re-owned in"));
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn other_sizes_work_too() {
    let run = run_demo(
        &[
            "--memory",
            "--no-tui",
            "--replicas",
            "4",
            "--partitions",
            "9",
            "--lease-ms",
            "300",
            "--script-delay-ms",
            "100",
        ],
        &[],
    );
    run.assert_converged(9);
}

#[test]
fn without_redis_server_it_falls_back_to_memory_and_says_so() {
    let run = run_demo(
        &["--no-tui", "--lease-ms", "300", "--script-delay-ms", "100"],
        &[("LEASEHOLD_REDIS_SERVER", "/nonexistent/redis-server")],
    );
    let fallback: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| {
            l.starts_with("redis-server not found: running on the embedded in-memory store")
        })
        .collect();
    assert_eq!(fallback.len(), 1, "{}", run.stdout);
    run.assert_converged(32);
}
