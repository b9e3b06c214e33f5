//! Leadership across OS processes: the leader is a `leasehold-bench child` process, the
//! follower an elector in the test. A SIGKILLed leader is replaced once its lease
//! expires (never before); a SIGTERMed leader hands over at once and exits 0.

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_election::{Elector, ElectorConfig, ElectorHandle, RedisStore, Role};
use leasehold_testkit::RedisServer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::{Instant, timeout};

const LEASE: Duration = Duration::from_millis(500);
/// Slack for a busy 2-core machine.
const SLACK: Duration = Duration::from_millis(400);
/// Process start, runtime, connection and first acquire.
const START: Duration = Duration::from_secs(15);

/// A `leasehold-bench child` process and its JSON lines.
struct ChildLeader {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl ChildLeader {
    fn spawn(url: &str, duty: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
            .args([
                "child",
                "--redis-url",
                url,
                "--duty",
                duty,
                "--replica",
                "child",
            ])
            .args(["--lease-ms", &LEASE.as_millis().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the child leader");
        let stdout = child.stdout.take().expect("piped stdout");
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next event; `None` at the end of its output.
    async fn next(&mut self) -> Option<Value> {
        let line = self
            .lines
            .next_line()
            .await
            .expect("read the child's stdout")?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")))
    }

    /// Reads events until one named `name`.
    async fn expect_event(&mut self, name: &str) -> Value {
        while let Some(event) = self.next().await {
            if event["event"] == name {
                return event;
            }
        }
        panic!("the child exited without reporting {name}");
    }

    /// Reads the rest of its output: every event after the last one read.
    async fn drain(&mut self) -> Vec<Value> {
        let mut rest = Vec::new();
        while let Some(event) = self.next().await {
            rest.push(event);
        }
        rest
    }

    async fn wait(&mut self) -> ExitStatus {
        timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("the child exits")
            .expect("wait for the child")
    }
}

fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    u64::try_from(since.as_micros()).expect("µs fit in u64")
}

fn field(event: &Value, name: &str) -> u64 {
    event[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{event} has no {name}"))
}

/// A follower elector on `duty`, with the child's lease and library defaults.
fn follower(url: &str, duty: &str) -> (ElectorHandle, ElectorConfig) {
    let store = RedisStore::builder(url)
        .call_timeout(LEASE / 3)
        .build()
        .expect("store");
    let config = ElectorConfig::builder(duty, "follower")
        .lease(LEASE)
        .build()
        .expect("config");
    let handle = Elector::new(store, config.clone(), |lead| async move {
        lead.cancelled().await;
        Ok(())
    })
    .spawn();
    (handle, config)
}

/// Waits until `handle` has seen `child` hold the lease.
async fn wait_following(handle: &ElectorHandle) {
    let mut status = handle.subscribe();
    timeout(
        START,
        status.wait_for(|s| matches!(&s.role, Role::Follower { leader: Some(l) } if l == "child")),
    )
    .await
    .expect("the follower sees the child lead")
    .expect("the follower runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_leader_is_replaced_once_its_lease_expires() {
    let redis = RedisServer::start();
    let mut leader = ChildLeader::spawn(&redis.url(), "crash");
    let leading = timeout(START, leader.expect_event("leading"))
        .await
        .expect("the child leads");
    let (follower, config) = follower(&redis.url(), "crash");
    wait_following(&follower).await;
    assert!(!follower.status().is_leader());

    let killed = Instant::now();
    leader.child.start_kill().expect("SIGKILL the child");
    let limit = LEASE + config.retry_interval() + SLACK;
    let fence = timeout(limit, follower.wait_until_leader())
        .await
        .expect("the follower leads within lease + retry interval (+ slack) of the kill")
        .expect("the follower runs");
    let led_us = now_us();
    let took = killed.elapsed();

    assert!(!leader.wait().await.success(), "the child was killed");
    // Every renewal the child reported; it sent none after the kill.
    let renewed_us = std::iter::once(field(&leading, "sent_at_us"))
        .chain(
            leader
                .drain()
                .await
                .iter()
                .filter(|e| e["event"] == "renewed")
                .map(|e| field(e, "sent_at_us")),
        )
        .max()
        .expect("at least the acquire");
    // The lease ran until at least `renewal sent + lease` (Redis counts in whole ms).
    assert!(
        led_us + 1_000 >= renewed_us + u64::try_from(LEASE.as_micros()).expect("small"),
        "the follower led {} µs after the last renewal, before the {LEASE:?} lease expired",
        led_us - renewed_us
    );
    assert!(
        fence.get() > field(&leading, "fence"),
        "fence {fence} must exceed the child's {}",
        leading["fence"]
    );
    eprintln!("failover took {took:?}");
    follower.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigtermed_leader_hands_over_at_once_and_exits_cleanly() {
    let redis = RedisServer::start();
    let mut leader = ChildLeader::spawn(&redis.url(), "handover");
    let leading = timeout(START, leader.expect_event("leading"))
        .await
        .expect("the child leads");
    let pid = leader.child.id().expect("the child runs");
    let (follower, _) = follower(&redis.url(), "handover");
    wait_following(&follower).await;

    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .expect("run kill");
    assert!(kill.success(), "kill -TERM {pid}: {kill}");
    let fence = timeout(LEASE / 2, follower.wait_until_leader())
        .await
        .expect("the follower leads well within the lease: the release wakes it")
        .expect("the follower runs");
    let took = sent.elapsed();

    let stopped = timeout(Duration::from_secs(10), leader.expect_event("stopped"))
        .await
        .expect("the child reports its shutdown");
    assert!(stopped["at_us"].is_u64());
    let status = leader.wait().await;
    assert!(
        status.success(),
        "the child exits 0 after SIGTERM, got {status}"
    );
    assert!(
        fence.get() > field(&leading, "fence"),
        "fence {fence} must exceed the child's {}",
        leading["fence"]
    );
    eprintln!("hand-over took {took:?}");
    follower.shutdown().await;
}
