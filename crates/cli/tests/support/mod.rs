//! Runs the `leasehold` binary, and starts real electors and coordinators to give it
//! something to read.
#![allow(dead_code, unreachable_pub)]

pub mod http;
pub mod webdriver;

use std::process::Stdio;
use std::time::Duration;

use leasehold_election::{
    DutyResult, Elector, ElectorConfig, ElectorHandle, Fence, Leadership, RedisStore,
};
use leasehold_partitions::{Coordinator, CoordinatorHandle, GroupAdmin, GroupConfig, GroupStatus};
use leasehold_testkit::RedisServer;
use tokio::process::Command;
use tokio::time::{Instant, sleep, timeout};

/// Longest any single run of the binary may take before the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(20);
/// Longest a fleet may take to settle.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(20);
/// Lease of the test fleets.
pub const LEASE: Duration = Duration::from_secs(2);

/// What a run of the binary left behind.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

/// The binary with `REDIS_URL` cleared, so only the arguments count.
pub fn leasehold() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasehold"));
    cmd.env_remove("REDIS_URL").kill_on_drop(true);
    cmd
}

/// Runs the binary to completion.
pub async fn run(args: &[&str]) -> Run {
    let start = Instant::now();
    let out = timeout(
        RUN_LIMIT,
        leasehold().args(args).stdin(Stdio::null()).output(),
    )
    .await
    .unwrap_or_else(|_| panic!("leasehold {args:?} hung for {RUN_LIMIT:?}"))
    .expect("the leasehold binary runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
        took: start.elapsed(),
    }
}

/// Runs the binary and parses its stdout as JSON; it must succeed.
pub async fn run_json(args: &[&str]) -> serde_json::Value {
    let r = run(args).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {r:?}"))
}

/// A failed run: the exit code and exactly one line on stderr, nothing on stdout.
pub fn assert_failed(r: &Run, code: i32, contains: &str) {
    assert_eq!(r.code, Some(code), "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "one line on stderr: {r:?}");
    assert!(r.stderr.starts_with("leasehold: error: "), "{r:?}");
    assert!(r.stderr.contains(contains), "expected {contains:?}: {r:?}");
}

/// A server that answers `DEBUG DIGEST`, to check that a refused command changed
/// nothing.
pub fn redis_with_digest() -> RedisServer {
    RedisServer::start_with_args(&["--enable-debug-command", "yes"])
}

/// A digest of every key and value on the server (`DEBUG DIGEST`).
pub fn digest(redis: &RedisServer) -> String {
    let d = redis.redis_cli(&["DEBUG", "DIGEST"]);
    assert!(!d.starts_with("(error)"), "DEBUG DIGEST: {d}");
    d
}

/// This process as a coordinator describes itself to its group: `host pid`.
pub fn this_instance() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host} {}", std::process::id())
}

/// Starts an elector of `duty` under `prefix` and waits until it leads.
pub async fn leader(
    store: &RedisStore,
    prefix: &str,
    duty: &str,
    replica: &str,
) -> (ElectorHandle, Fence) {
    let config = ElectorConfig::builder(duty, replica)
        .lease(Duration::from_secs(5))
        .key_prefix(prefix)
        .build()
        .unwrap();
    let elector = Elector::new(store.clone(), config, |lead: Leadership| async move {
        lead.cancelled().await;
        Ok(())
    })
    .spawn();
    let fence = timeout(SETTLE_LIMIT, elector.wait_until_leader())
        .await
        .unwrap_or_else(|_| panic!("{replica} never led {duty}"))
        .unwrap();
    (elector, fence)
}

pub fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

async fn hold(_partition: String, lead: leasehold_partitions::Ownership) -> DutyResult {
    lead.cancelled().await;
    // A little state for the next owner: `moves` shows its size.
    lead.hand_off(HANDED.to_vec())?;
    Ok(())
}

/// The state every test replica hands off as its term ends.
pub const HANDED: &[u8] = b"cursor=1";

/// Starts replica `replica` of `group` (partitions `p0..p{n-1}`) under `prefix`.
pub fn replica(
    store: &RedisStore,
    prefix: &str,
    group: &str,
    partitions: usize,
    replica: &str,
) -> CoordinatorHandle<RedisStore> {
    replica_at(store, prefix, group, partitions, replica, None)
}

/// [`replica`], advertising `address` if it is given.
pub fn replica_at(
    store: &RedisStore,
    prefix: &str,
    group: &str,
    partitions: usize,
    replica: &str,
    address: Option<&str>,
) -> CoordinatorHandle<RedisStore> {
    let mut builder =
        GroupConfig::builder(group, (0..partitions).map(|i| format!("p{i}")), replica)
            .lease(LEASE)
            .key_prefix(prefix);
    if let Some(address) = address {
        builder = builder.advertise(address);
    }
    Coordinator::new(store.clone(), builder.build().unwrap(), hold).spawn()
}

/// Creates `group` (partitions `p0..p{n-1}`) under `prefix` the way a fleet does, by
/// its first replica (`partitions add` never creates a group): a replica that seeds the
/// set and leaves at once, before anything could be granted to it. The group then has
/// no live replica.
pub async fn create_group(store: &RedisStore, prefix: &str, group: &str, partitions: usize) {
    let creator = replica(store, prefix, group, partitions, "group-creator");
    let deadline = Instant::now() + SETTLE_LIMIT;
    while !matches!(status_of(store, prefix, group).await, Ok(Some(_))) {
        assert!(Instant::now() < deadline, "group {group} was not created");
        sleep(Duration::from_millis(5)).await;
    }
    creator.shutdown().await;
}

/// Waits until the store shows every partition owned and every live replica with
/// `counts[replica]` partitions, as counted from the leases and as published.
pub async fn wait_for_counts(
    store: &RedisStore,
    prefix: &str,
    group: &str,
    counts: &[(&str, usize)],
) {
    let deadline = Instant::now() + SETTLE_LIMIT;
    let want: Vec<(String, Option<usize>)> = counts
        .iter()
        .map(|(r, n)| ((*r).to_owned(), Some(*n)))
        .collect();
    loop {
        let status = status_of(store, prefix, group).await;
        if let Ok(Some(s)) = &status {
            let mut published = s.replicas.clone();
            published.sort();
            let mut owned: Vec<(String, Option<usize>)> = s
                .owned_counts()
                .into_iter()
                .map(|(r, n)| (r, Some(n)))
                .collect();
            owned.sort();
            if published == want && owned == want && s.partitions.iter().all(|p| p.owner.is_some())
            {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "group {group} did not settle on {counts:?}: {status:?}"
        );
        sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the group's status satisfies `done` (`what` names it for the failure).
pub async fn wait_until(
    store: &RedisStore,
    prefix: &str,
    group: &str,
    what: &str,
    done: impl Fn(&GroupStatus) -> bool,
) -> GroupStatus {
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        let status = status_of(store, prefix, group).await;
        if let Ok(Some(s)) = &status
            && done(s)
        {
            return s.clone();
        }
        assert!(
            Instant::now() < deadline,
            "group {group}: never {what}: {status:?}"
        );
        sleep(Duration::from_millis(50)).await;
    }
}

/// The group's status, as an operator reads it.
async fn status_of(
    store: &RedisStore,
    prefix: &str,
    group: &str,
) -> Result<Option<GroupStatus>, leasehold_partitions::PartitionsError> {
    GroupAdmin::new(store.clone(), group)?
        .with_key_prefix(prefix)?
        .status()
        .await
}

/// A running `leasehold dashboard` (killed when dropped) and its address.
pub struct Dashboard {
    child: tokio::process::Child,
    pub addr: String,
}

impl Dashboard {
    /// Starts `leasehold dashboard` on a free loopback port, reading every `interval`
    /// at most and every `refresh` without a notice, and waits until it listens.
    pub async fn start(url: &str, interval: &str, refresh: &str, extra: &[&str]) -> Self {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let mut child = leasehold()
            .args(["dashboard", "--redis-url", url, "--listen", "127.0.0.1:0"])
            .args(["--interval", interval, "--refresh", refresh])
            .args(extra)
            .env_remove("LEASEHOLD_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the dashboard said nothing for 20 s")
            .unwrap()
            .expect("the dashboard ended");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        Self { child, addr }
    }

    /// The CPU time the dashboard's process has used (user and system), from
    /// `/proc/<pid>/stat`, in clock ticks of 10 ms.
    pub fn cpu_time(&self) -> Duration {
        let pid = self.child.id().expect("the dashboard runs");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // The fields after the command name (which is in parentheses): utime is the
        // 12th of them, stime the 13th.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }
}
