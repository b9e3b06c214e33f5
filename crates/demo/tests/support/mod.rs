//! Runs the demo binary with a deadline and reads its summary.
#![allow(dead_code)] // each test binary uses only part of it

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Every run must finish well within this.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// What a finished run printed.
#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
    pub took: Duration,
}

/// Runs `leasehold-demo args...` with `REDIS_URL` unset and `env` set, killing it at
/// [`DEADLINE`].
pub fn run_demo(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasehold-demo"));
    cmd.args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.envs(env.iter().copied());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn leasehold-demo");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for leasehold-demo") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "leasehold-demo {args:?} still running after {DEADLINE:?}:\n{}",
                out.join().unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(50));
    };
    let run = Run {
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        success: status.success(),
        took: started.elapsed(),
    };
    assert!(
        run.success,
        "leasehold-demo {args:?} failed ({status}):\n{}\n{}",
        run.stdout, run.stderr
    );
    run
}

impl Run {
    /// Checks the summary: four events, each re-owned, and the final line's balance.
    pub fn assert_converged(&self, partitions: usize) {
        let rows: Vec<&str> = self
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("event "))
            .skip(1)
            .take_while(|l| !l.starts_with("final:"))
            .collect();
        assert_eq!(rows.len(), 4, "summary rows:\n{}", self.stdout);
        for (row, event) in rows.iter().zip([
            "start 4 replicas",
            "kill replica-2",
            "add replica-5",
            "stop replica-1",
        ]) {
            assert!(row.starts_with(event), "{row}");
            assert!(!row.contains("timed out"), "{row}");
        }
        let last = self
            .stdout
            .lines()
            .find(|l| l.starts_with("final: "))
            .unwrap_or_else(|| panic!("no final line in\n{}", self.stdout));
        // final: 32/32 partitions owned by 3 running replicas (3 in the heartbeat set), spread 1
        let (owned, rest) = last["final: ".len()..]
            .split_once(" partitions")
            .expect("owned/total");
        assert_eq!(owned, format!("{partitions}/{partitions}"), "{last}");
        let spread: usize = rest
            .rsplit_once("spread ")
            .and_then(|(_, s)| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("no spread in {last}"));
        assert!(spread <= 1, "{last}");
    }
}
