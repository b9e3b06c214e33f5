//! A throwaway `redis-server` process owned by a test.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Environment variable that overrides the path of the `redis-server` binary.
pub const REDIS_SERVER_ENV: &str = "LEASEHOLD_REDIS_SERVER";

const NOT_FOUND: &str = "redis-server not found on PATH: install it with `sudo apt-get install redis-server` (Debian/Ubuntu) or `brew install redis` (macOS), or set LEASEHOLD_REDIS_SERVER to its path";

/// How long a start (or restart) may take before it is reported as failed.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Fresh ports tried by [`RedisServer::start`] when redis cannot bind the one it was given.
const PORT_ATTEMPTS: usize = 5;
/// Ports at or above this are avoided, so `port + 10000` (the cluster bus) stays valid.
const MAX_PORT: u16 = 55535;

/// A `redis-server` child process on a free loopback port, with its own temporary directory.
///
/// Persistence is off (`--save "" --appendonly no`), so every (re)start begins with an empty
/// data set. Dropping the value kills the process, waits for it and removes the directory.
/// All methods are synchronous and may be called from sync code or from a multi-thread tokio
/// runtime.
#[derive(Debug)]
pub struct RedisServer {
    /// `None` while stopped.
    child: Option<Child>,
    port: u16,
    bin: PathBuf,
    extra: Vec<String>,
    /// Tracks SIGSTOP so `Drop` can send SIGCONT; atomic because `pause` takes `&self`.
    paused: AtomicBool,
    dir: TempDir,
}

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found (with installation guidance) or does not come up
    /// within 10 s (with the tail of its log).
    pub fn start() -> Self {
        Self::start_with_args(&[])
    }

    /// Like [`start`](Self::start), passing `extra` to `redis-server` after the default
    /// arguments, e.g. `&["--maxmemory-policy", "allkeys-lru"]`.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with_args(extra: &[&str]) -> Self {
        Self::try_start_with_args(extra).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a server, returning an error instead of panicking.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] with installation guidance if `redis-server` is missing;
    /// another error (including the log tail) if it fails to come up within 10 s.
    pub fn try_start() -> io::Result<Self> {
        Self::try_start_with_args(&[])
    }

    /// Like [`start_with_args`](Self::start_with_args), returning an error instead of
    /// panicking.
    ///
    /// # Errors
    ///
    /// As [`try_start`](Self::try_start).
    pub fn try_start_with_args(extra: &[&str]) -> io::Result<Self> {
        let bin = find_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("leasehold-redis-")
            .tempdir()?;
        let mut server = Self {
            child: None,
            port: 0,
            bin,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            paused: AtomicBool::new(false),
            dir,
        };
        let mut last_err = None;
        for _ in 0..PORT_ATTEMPTS {
            server.port = free_port()?;
            match server.spawn_and_wait(Instant::now() + START_TIMEOUT) {
                Ok(()) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.expect("at least one attempt"))
    }

    /// The TCP port the server listens on; it stays the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Process id of the running server.
    ///
    /// # Panics
    ///
    /// If the server is stopped.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("redis-server is stopped").id()
    }

    /// Whether the process is up (not [`stop`](Self::stop)ped; a paused server counts as up).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// A `redis` client for [`url`](Self::url) (no connection is made yet).
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis url")
    }

    /// Path of the server's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// Kills the server (SIGKILL) and starts a fresh, empty one on the same port, waiting
    /// until it answers `PING`. Also works after [`stop`](Self::stop).
    ///
    /// # Panics
    ///
    /// If the new server does not come up within 10 s, e.g. because the port stayed busy.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + START_TIMEOUT;
        // Something may grab the port while it is free; keep trying until the deadline.
        while let Err(e) = self.spawn_and_wait(deadline) {
            if Instant::now() >= deadline {
                panic!("restarting redis-server on port {}: {e}", self.port);
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server (SIGKILL) and waits for it to exit, leaving it down. No-op if stopped.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL also ends a SIGSTOPped process, so no SIGCONT is needed here.
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is answered.
    pub fn pause(&self) {
        signal(self.pid(), "-STOP");
        self.paused.store(true, Ordering::SeqCst);
        wait_for_proc_state(self.pid(), |s| s == 'T');
    }

    /// Thaws a [`pause`](Self::pause)d server with SIGCONT.
    pub fn resume(&self) {
        signal(self.pid(), "-CONT");
        self.paused.store(false, Ordering::SeqCst);
        wait_for_proc_state(self.pid(), |s| s != 'T');
    }

    /// Runs one command on a fresh connection and returns the reply as text, roughly as
    /// `redis-cli` would print it: `OK`, `(nil)`, `(integer) 3`, `(error) ...`, one line per
    /// array element.
    ///
    /// # Panics
    ///
    /// If `args` is empty, or on a connection or I/O error (including a 5 s timeout).
    pub fn redis_cli(&self, args: &[&str]) -> String {
        let (name, rest) = args.split_first().expect("redis_cli needs a command");
        let mut conn = self
            .client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connecting to redis on port {}: {e}", self.port));
        conn.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("set read timeout");
        match redis::cmd(name).arg(rest).query::<redis::Value>(&mut conn) {
            Ok(value) => format_value(&value),
            Err(e) if e.code().is_some() => format!("(error) {e}"),
            Err(e) => panic!("redis_cli {args:?} on port {}: {e}", self.port),
        }
    }

    /// Spawns on `self.port` and waits for `PING`; on failure the child is killed.
    fn spawn_and_wait(&mut self, deadline: Instant) -> io::Result<()> {
        let stdio = File::create(self.dir.path().join("stdio.log"))?;
        let port = self.port.to_string();
        let child = Command::new(&self.bin)
            .args(["--port", &port, "--bind", "127.0.0.1", "--daemonize", "no"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(stdio.try_clone()?)
            .stderr(stdio)
            .spawn()?;
        self.child = Some(child);
        match self.wait_for_ping(deadline) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.stop();
                Err(io::Error::new(
                    e.kind(),
                    format!(
                        "redis-server on port {port} did not start: {e}\n{}",
                        self.logs()
                    ),
                ))
            }
        }
    }

    fn wait_for_ping(&mut self, deadline: Instant) -> io::Result<()> {
        let child = self.child.as_mut().expect("spawned");
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!("exited early with {status}")));
            }
            match ping(self.port) {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no PONG: {e}"),
                    ));
                }
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// The last lines of the log file and of stdout/stderr, for failure messages.
    fn logs(&self) -> String {
        let tail = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<_> = text.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        };
        format!(
            "--- {} (tail) ---\n{}\n--- stdout/stderr (tail) ---\n{}",
            self.log_path().display(),
            tail(&self.log_path()),
            tail(&self.dir.path().join("stdio.log")),
        )
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.paused.load(Ordering::SeqCst)
            && let Some(child) = &self.child
        {
            signal(child.id(), "-CONT");
        }
        self.stop();
    }
}

pub(crate) fn find_binary() -> io::Result<PathBuf> {
    find_binary_in(std::env::var_os(REDIS_SERVER_ENV), std::env::var_os("PATH"))
}

fn find_binary_in(override_path: Option<OsString>, path: Option<OsString>) -> io::Result<PathBuf> {
    let not_found = || io::Error::new(io::ErrorKind::NotFound, NOT_FOUND);
    if let Some(bin) = override_path {
        let bin = PathBuf::from(bin);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(not_found())
        };
    }
    std::env::split_paths(&path.ok_or_else(not_found)?)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(not_found)
}

/// A port the kernel just handed out (and we released), below [`MAX_PORT`].
pub(crate) fn free_port() -> io::Result<u16> {
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        if port < MAX_PORT {
            return Ok(port);
        }
    }
}

/// One raw RESP `PING`, expecting `+PONG`.
pub(crate) fn ping(port: u16) -> io::Result<()> {
    let timeout = Duration::from_millis(500);
    let mut stream =
        TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)), timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply)?;
    if &reply == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "unexpected reply {:?}",
            String::from_utf8_lossy(&reply)
        )))
    }
}

/// Sends a signal with the `kill` command (the crate forbids `unsafe`, so no `libc::kill`).
fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("running `kill`");
    assert!(status.success(), "`kill {sig} {pid}` failed: {status}");
}

/// Polls `/proc/PID/stat` until the process state satisfies `ok` (up to 2 s), so that
/// `pause`/`resume` have taken effect when they return. Does nothing without procfs.
fn wait_for_proc_state(pid: u32, ok: impl Fn(char) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return;
        };
        // The state follows the parenthesised command name, which may contain spaces.
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if state.is_none_or(&ok) {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn format_value(value: &redis::Value) -> String {
    use redis::Value;
    match value {
        Value::Nil => "(nil)".into(),
        Value::Int(n) => format!("(integer) {n}"),
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Array(items) | Value::Set(items) => items
            .iter()
            .map(format_value)
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| format!("{}\n{}", format_value(k), format_value(v)))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::ServerError(e) => format!("(error) {e}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_is_not_found_with_guidance() {
        for (override_path, path) in [
            (Some("/nonexistent/redis-server".into()), None),
            (None, Some("/nonexistent:/also/missing".into())),
            (None, None),
        ] {
            let err = find_binary_in(override_path, path).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotFound);
            assert_eq!(err.to_string(), NOT_FOUND);
        }
    }

    #[test]
    fn override_wins_over_path() {
        let bin = tempfile::NamedTempFile::new().unwrap();
        let found = find_binary_in(Some(bin.path().into()), Some("/usr/bin".into())).unwrap();
        assert_eq!(found, bin.path());
    }
}
