//! Shared by the `harness = false` test targets that run the examples' own code as
//! child processes: a small test runner, the child side, and a child process whose
//! output the test reads as it comes.

#![allow(dead_code)] // each test target uses a part of it

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::panic::AssertUnwindSafe;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Set in a child process to the example it runs.
pub const CHILD_ENV: &str = "LEASEHOLD_EXAMPLE_CHILD";

/// A test: its name and its body (it passes unless it panics).
pub type Test = (&'static str, fn());

/// Runs `tests` (each on its own thread, all at once), honouring `--list` and a name
/// filter well enough for `cargo test -- <filter>`, and prints libtest's summary lines.
/// Exits with status 101 if any test failed.
pub fn run(tests: &[Test]) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return;
    }
    let exact = args.iter().any(|a| a == "--exact");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&Test> = tests
        .iter()
        .filter(|(name, _)| {
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        name == f
                    } else {
                        name.contains(f.as_str())
                    }
                })
        })
        .collect();
    println!("\nrunning {} tests", selected.len());
    let started = Instant::now();
    let results: Vec<(&str, bool)> = std::thread::scope(|scope| {
        let handles: Vec<_> = selected
            .iter()
            .map(|(name, body)| {
                let handle = scope.spawn(move || std::panic::catch_unwind(AssertUnwindSafe(body)));
                (*name, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(name, handle)| {
                let ok = matches!(handle.join(), Ok(Ok(())));
                println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
                (name, ok)
            })
            .collect()
    });
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(n, _)| *n)
        .collect();
    if !failed.is_empty() {
        println!("\nfailures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        results.len() - failed.len(),
        failed.len(),
        tests.len() - selected.len(),
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        std::process::exit(101);
    }
}

/// The child side: runs an example's `main` with the arguments this process was given,
/// and exits with its result. It also exits (with status 3, never mistaken for a clean
/// shutdown) when its stdin closes, so a child never outlives a test that died.
pub fn child(main: fn() -> Result<(), Box<dyn std::error::Error>>) -> ! {
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(3);
    });
    match main() {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("example failed: {e}");
            std::process::exit(1);
        }
    }
}

/// A loopback port that was free a moment ago. Racy, like every test that needs a fixed
/// port: a clash shows up as a child that never answers.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Lines a child printed, with a condition variable to wait for more.
#[derive(Default)]
struct Output {
    lines: Mutex<(Vec<String>, usize)>, // the lines, and how many streams are still open
    more: Condvar,
}

/// An example running as a child process of this test binary (re-executed with
/// [`CHILD_ENV`] set): killed when dropped, also when the test panics.
pub struct ExampleProcess {
    name: String,
    child: Child,
    /// Held open: the child exits when it closes.
    _stdin: ChildStdin,
    output: Arc<Output>,
}

impl ExampleProcess {
    /// Starts `example` with `args` and extra environment `env` (`REDIS_URL` and friends
    /// are removed first, so only what the test passes counts).
    pub fn start(example: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut command = Command::new(exe);
        command
            .env(CHILD_ENV, example)
            .env_remove("REDIS_URL")
            .env_remove("METRICS_PORT")
            .env_remove("REPLICA_ID")
            .env_remove("RUST_LOG")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("the test binary re-executes itself");
        let output = Arc::new(Output::default());
        output.lines.lock().unwrap().1 = 2;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        for (stream, tag) in [
            (Box::new(stdout) as Box<dyn Read + Send>, ""),
            (Box::new(stderr), "stderr: "),
        ] {
            let output = Arc::clone(&output);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    output.lines.lock().unwrap().0.push(format!("{tag}{line}"));
                    output.more.notify_all();
                }
                output.lines.lock().unwrap().1 -= 1;
                output.more.notify_all();
            });
        }
        let stdin = child.stdin.take().expect("piped stdin");
        Self {
            name: format!("{example} {}", args.join(" ")),
            child,
            _stdin: stdin,
            output,
        }
    }

    /// Everything the child printed so far (stderr lines start with `stderr: `).
    pub fn lines(&self) -> Vec<String> {
        self.output.lines.lock().unwrap().0.clone()
    }

    /// Waits until the child printed a line on stdout that contains `needle`, and
    /// returns it. Panics, with everything it printed, after `limit` or if its output
    /// ends first.
    pub fn wait_for_line(&self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        let mut guard = self.output.lines.lock().unwrap();
        loop {
            if let Some(line) = guard.0.iter().find(|l| l.contains(needle)) {
                return line.clone();
            }
            let now = Instant::now();
            if now >= deadline || guard.1 == 0 {
                let printed = guard.0.join("\n");
                panic!(
                    "{}: no line with {needle:?} within {limit:?}; it printed:\n{printed}",
                    self.name
                );
            }
            guard = self
                .output
                .more
                .wait_timeout(guard, deadline - now)
                .unwrap()
                .0;
        }
    }

    /// Sends `signal` (`INT`, `TERM`, ...) with the `kill` command (the workspace
    /// forbids `unsafe`, so no `libc::kill`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(
            status.success(),
            "kill -{signal} {}: {status}",
            self.child.id()
        );
    }

    /// Waits for the child to exit, at most `limit`; panics (with its output) if it
    /// does not.
    pub fn wait_for_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the child") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{}: still running {limit:?} after the signal; it printed:\n{}",
                self.name,
                self.lines().join("\n")
            );
            sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ExampleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
