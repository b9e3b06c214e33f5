//! `examples/stream_consumer.rs` as a fleet of processes against a real redis-server:
//! every tenant's output is exactly its stream's entry ids, in order (no duplicate, none
//! missing), through a SIGKILL of one consumer, a join, a paused owner (SIGSTOP for two
//! leases, then SIGCONT), a graceful leave (SIGTERM), and a deposed owner's write
//! injected with an old fence after the new owner raised (refused: `Stale`).
//!
//! The example's source is compiled into this test (`#[path]`), and the test re-executes
//! its own binary as each consumer and as the producer, so the exact example code is
//! what runs. This is a `harness = false` test: `main` decides which role a process
//! plays.

#[allow(dead_code)]
#[path = "../examples/stream_consumer.rs"]
mod stream_consumer;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread::sleep;
use std::time::{Duration, Instant};

use leasehold_partitions::GroupStatus;
use leasehold_partitions::{Fence, FencedWriteError, FencedWriter, RedisStore};
use leasehold_testkit::RedisServer;

use self::support::{CHILD_ENV, ExampleProcess, free_port};

const GROUP: &str = "stream-consumers";
const TENANTS: usize = 8;
/// A short lease keeps the run short: a killed or paused owner's tenants move after it.
const LEASE: Duration = Duration::from_secs(1);
/// Entries per second for a tenant of weight 1 (2× and 3× for the others): about 80
/// entries per second in all.
const RATE: &str = "5";
/// Any wait for the fleet to reach a state (a process start, a move, a drain): generous
/// for a busy 2-core machine; the run takes well under a minute.
const LIMIT: Duration = Duration::from_secs(30);
/// Entries of every tenant processed after each change before the next one (about a
/// second at the lightest tenant's rate).
const PROGRESS: usize = 5;
/// From a signal to the exit.
const EXIT: Duration = Duration::from_secs(15);

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        support::child(stream_consumer::main);
    }
    support::run(&[(
        "every_entry_is_output_exactly_once_through_a_kill_a_join_a_pause_and_a_leave",
        every_entry_is_output_exactly_once,
    )]);
}

fn tenants() -> Vec<String> {
    (1..=TENANTS).map(|i| format!("tenant-{i:02}")).collect()
}

/// The test's own view of Redis: the group, the streams, the outputs, the cursors.
struct Probe {
    runtime: tokio::runtime::Runtime,
    store: RedisStore,
}

impl Probe {
    fn new(redis: &RedisServer) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let store = RedisStore::connect(&redis.url()).expect("a store");
        Self { runtime, store }
    }

    fn status(&self) -> GroupStatus {
        self.runtime.block_on(async {
            leasehold_partitions::GroupAdmin::new(self.store.clone(), GROUP)
                .unwrap()
                .status()
                .await
                .expect("read the group")
                .expect("the group exists")
        })
    }

    fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        self.runtime.block_on(async {
            let reply = self.store.query(cmd).await.expect("a query");
            redis::from_redis_value(reply).expect("a reply of the expected type")
        })
    }

    /// The stream's entry ids, in order.
    fn stream_ids(&self, tenant: &str) -> Vec<String> {
        let entries: Vec<(String, redis::Value)> = self.query(
            redis::cmd("XRANGE")
                .arg(format!("stream:{{{tenant}}}"))
                .arg("-")
                .arg("+"),
        );
        entries.into_iter().map(|(id, _)| id).collect()
    }

    /// The output list.
    fn output(&self, tenant: &str) -> Vec<String> {
        self.query(
            redis::cmd("LRANGE")
                .arg(format!("out:{{{tenant}}}"))
                .arg(0)
                .arg(-1),
        )
    }

    fn cursor(&self, tenant: &str) -> Option<String> {
        self.query(redis::cmd("GET").arg(format!("cursor:{{{tenant}}}")))
    }

    /// The stream's first entry after `cursor`, if one has arrived.
    fn entry_after(&self, tenant: &str, cursor: &str) -> Option<String> {
        let next: Vec<(String, redis::Value)> = self.query(
            redis::cmd("XRANGE")
                .arg(format!("stream:{{{tenant}}}"))
                .arg(format!("({cursor}"))
                .arg("+")
                .arg("COUNT")
                .arg(1),
        );
        next.into_iter().next().map(|(id, _)| id)
    }

    /// One step as the example commits it: the output of entry `id` and the cursor
    /// moved to it, in one batch fenced with `fence`.
    fn step(&self, tenant: &str, id: &str, fence: Fence) -> Result<(), FencedWriteError> {
        self.runtime.block_on(
            FencedWriter::new(self.store.clone())
                .batch()
                .rpush(format!("out:{{{tenant}}}"), id)
                .set(format!("cursor:{{{tenant}}}"), id)
                .commit(fence),
        )
    }

    /// Waits until the current owners have processed [`PROGRESS`] more entries of every
    /// tenant than its stream holds now: they resumed where the previous ones stopped,
    /// and go on.
    fn wait_progress(&self, after: &str) {
        let deadline = Instant::now() + LIMIT;
        let targets: Vec<(String, usize)> = tenants()
            .into_iter()
            .map(|t| {
                let target = self.stream_ids(&t).len() + PROGRESS;
                (t, target)
            })
            .collect();
        for (tenant, target) in targets {
            loop {
                let ids = self.stream_ids(&tenant);
                let cursor = self.cursor(&tenant);
                if ids.len() >= target
                    && cursor
                        .as_deref()
                        .is_some_and(|c| entry_id(c) >= entry_id(&ids[target - 1]))
                {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{tenant}: no progress after {after}: cursor {cursor:?}, {} entries, waiting for {target}",
                    ids.len()
                );
                sleep(Duration::from_millis(50));
            }
        }
    }

    /// Polls `status` until `done` holds, for at most [`LIMIT`].
    fn wait_for(&self, what: &str, done: impl Fn(&GroupStatus) -> bool) -> GroupStatus {
        let deadline = Instant::now() + LIMIT;
        loop {
            let status = self.status();
            if done(&status) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "not {what} within {LIMIT:?}: {status:#?}"
            );
            sleep(Duration::from_millis(100));
        }
    }
}

/// A stream entry id (`<ms>-<seq>`) as numbers, ordered as Redis orders them.
fn entry_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().expect("an id"), seq.parse().expect("an id"))
}

/// Tenant → (owner, fence), for the owned ones.
fn owners(status: &GroupStatus) -> BTreeMap<String, (String, Fence)> {
    status
        .partitions
        .iter()
        .filter_map(|p| Some((p.partition.clone(), (p.owner.clone()?, p.fence))))
        .collect()
}

/// Every tenant owned, only by the replicas of `fleet`.
fn all_owned_by(status: &GroupStatus, fleet: &Fleet) -> bool {
    status
        .partitions
        .iter()
        .all(|p| p.owner.as_deref().is_some_and(|o| fleet.contains_key(o)))
}

/// The tenants `replica` owns, with their fences.
fn held_by(status: &GroupStatus, replica: &str) -> BTreeMap<String, Fence> {
    owners(status)
        .into_iter()
        .filter(|(_, (o, _))| o == replica)
        .map(|(t, (_, f))| (t, f))
        .collect()
}

/// Of `among`, the replica holding the most tenants.
fn busiest<'a>(status: &GroupStatus, among: &[&'a str]) -> &'a str {
    among
        .iter()
        .copied()
        .max_by_key(|r| held_by(status, r).len())
        .expect("a replica")
}

/// The running consumers by replica id.
type Fleet = BTreeMap<&'static str, Consumer>;

/// How long each step of the run took, for its summary line.
struct Phases {
    last: Instant,
    took: Vec<(&'static str, Duration)>,
}

impl Phases {
    fn start() -> Self {
        Self {
            last: Instant::now(),
            took: Vec::new(),
        }
    }

    fn mark(&mut self, phase: &'static str) {
        let now = Instant::now();
        self.took.push((phase, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let steps: Vec<String> = self
            .took
            .iter()
            .map(|(phase, took)| format!("{phase} {:.1} s", took.as_secs_f64()))
            .collect();
        write!(f, "{}", steps.join(", "))
    }
}

/// A consumer process with its HTTP port.
struct Consumer {
    name: &'static str,
    port: u16,
    process: ExampleProcess,
}

impl Consumer {
    fn start(name: &'static str, redis: &RedisServer) -> Self {
        let port = free_port();
        let lease_ms = LEASE.as_millis().to_string();
        let process = ExampleProcess::start(
            "stream_consumer",
            &[
                "consume",
                "--replica",
                name,
                "--port",
                &port.to_string(),
                "--lease-ms",
                &lease_ms,
                "--tenants",
                &TENANTS.to_string(),
            ],
            &[("REDIS_URL", &redis.url())],
        );
        process.wait_for_line(&format!("{name}: consuming group"), LIMIT);
        Self {
            name,
            port,
            process,
        }
    }

    /// SIGTERM: the example leaves gracefully and exits 0.
    fn stop(mut self) -> Vec<String> {
        self.process.signal("TERM");
        let status = self.process.wait_for_exit(EXIT);
        let lines = self.process.lines();
        assert!(
            status.success(),
            "{}: exit {status} after SIGTERM:\n{}",
            self.name,
            lines.join("\n")
        );
        assert!(
            lines.iter().any(|l| l.contains("SIGTERM: leaving")),
            "{}",
            lines.join("\n")
        );
        lines
    }
}

/// `GET path` over HTTP/1.0 (so the reply is neither chunked nor kept alive): the
/// status code and the body.
fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the example");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("send a request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status code in {head:?}"));
    (code, body.to_owned())
}

fn every_entry_is_output_exactly_once() {
    let mut phases = Phases::start();
    let redis = RedisServer::start();
    let probe = Probe::new(&redis);
    let mut producer = ExampleProcess::start(
        "stream_consumer",
        &["produce", "--rate", RATE, "--tenants", &TENANTS.to_string()],
        &[("REDIS_URL", &redis.url())],
    );
    producer.wait_for_line("producer: appending to 8 streams", LIMIT);

    // Three consumers share the eight tenants.
    let mut fleet: Fleet = ["a", "b", "c"]
        .map(|name| (name, Consumer::start(name, &redis)))
        .into();
    probe.wait_for("owned by a, b and c, each holding some", |s| {
        all_owned_by(s, &fleet) && fleet.keys().all(|r| !held_by(s, r).is_empty())
    });
    probe.wait_progress("the start");
    phases.mark("start");

    // The HTTP side, once: alive, ready, its owned tenants (as the group says, once the two
    // reads agree: weights from the reported loads may still move a tenant), and the
    // library's metrics through the example's exporter (on the same `metrics` facade).
    let port = fleet["a"].port;
    for path in ["/livez", "/healthz"] {
        let (code, body) = http_get(port, path);
        assert_eq!((code, body.trim()), (200, "ok"), "{path}");
    }
    // Ready once it holds its share (the group balanced), as the readiness probe of
    // examples/kubernetes/ asks.
    let deadline = Instant::now() + LIMIT;
    loop {
        let (code, body) = http_get(port, "/readyz");
        if code == 200 {
            assert_eq!(body.trim(), "ready");
            break;
        }
        assert_eq!(code, 503, "{body}");
        assert!(Instant::now() < deadline, "/readyz still says {body}");
        sleep(Duration::from_millis(200));
    }
    let deadline = Instant::now() + LIMIT;
    loop {
        let (code, body) = http_get(port, "/owned");
        assert_eq!(code, 200, "{body}");
        let listed: BTreeSet<String> = serde_json::from_str(&body).expect("a JSON list");
        let owned: BTreeSet<String> = held_by(&probe.status(), "a").into_keys().collect();
        if listed == owned && !listed.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/owned says {listed:?}, the group {owned:?}"
        );
        sleep(Duration::from_millis(200));
    }
    let (code, body) = http_get(port, "/metrics");
    assert_eq!(code, 200);
    assert!(
        body.contains(r#"leasehold_owned_partitions{group="stream-consumers",replica="a"}"#),
        "no leasehold_* metric: {body}"
    );
    assert!(body.contains("stream_consumer_entries_total{"), "{body}");
    phases.mark("http");

    // A kill (SIGKILL: nothing released, nothing handed off): the busiest consumer's
    // tenants move once its session expires, to new terms that read the committed
    // cursors.
    let victim = busiest(&probe.status(), &["a", "b", "c"]);
    let held = held_by(&probe.status(), victim);
    let (tenant, old) = held.iter().next().expect("a tenant the victim held");
    let mut killed = fleet.remove(victim).expect("the victim");
    let resumed = format!(": {tenant}: fence ");
    let resumes = |c: &Consumer| {
        let lines = c.process.lines();
        lines.iter().filter(|l| l.contains(&resumed)).count()
    };
    let before: BTreeMap<&str, usize> = fleet.iter().map(|(r, c)| (*r, resumes(c))).collect();
    killed.process.signal("KILL");
    let _ = killed.process.wait_for_exit(EXIT);

    // Deposed owners' writes in flight. The killed consumer, as if it still ran (a
    // pause, a slow link): it goes on with one of its tenants under its old fence, as
    // the example does, while the group moves the tenant. What it gets in before the
    // new owner's raise is committed like any step (the new owner reads the cursor
    // after its raise and resumes after it: no duplicate, checked at the end); from
    // the raise on, it is refused.
    let mut cursor = probe.cursor(tenant).unwrap_or_else(|| "0-0".to_owned());
    let mut deposed_steps = 0;
    let mut refused = false;
    let deadline = Instant::now() + LIMIT;
    let new_owner = loop {
        let started = fleet.iter().find(|(r, c)| resumes(c) > before[*r]);
        if let Some((r, _)) = started {
            break *r;
        }
        assert!(Instant::now() < deadline, "{tenant}: no new term");
        if !refused && let Some(id) = probe.entry_after(tenant, &cursor) {
            match probe.step(tenant, &id, *old) {
                Ok(()) => {
                    deposed_steps += 1;
                    cursor = id;
                }
                Err(FencedWriteError::Stale { .. }) => refused = true,
                Err(e) => panic!("{tenant}: a deposed step failed: {e}"),
            }
            continue;
        }
        sleep(Duration::from_millis(5));
    };
    // The new owner has raised and read the cursor (it prints that before its first
    // write): stopped there, it sees the deposed owner's next step land, in flight
    // until now. Refused: without the raise it would land, and the new owner would
    // output that entry again.
    fleet[new_owner].process.signal("STOP");
    let deadline = Instant::now() + LIMIT;
    let id = loop {
        if let Some(id) = probe.entry_after(tenant, &cursor) {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "{tenant}: no entry after {cursor}"
        );
        sleep(Duration::from_millis(5));
    };
    let in_flight = probe.step(tenant, &id, *old);
    fleet[new_owner].process.signal("CONT");
    match in_flight {
        Err(FencedWriteError::Stale { fence, highest }) => {
            assert_eq!(fence, *old);
            assert!(highest > *old, "{highest} <= {old}");
        }
        other => panic!(
            "{tenant}: a deposed owner's step, landing after {new_owner} read the cursor, was \
             {other:?}: {new_owner} will output {id} again"
        ),
    }
    probe.wait_for("the killed consumer's tenants owned again", |s| {
        let now = owners(s);
        all_owned_by(s, &fleet) && held.iter().all(|(t, f)| now[t].1 > *f)
    });
    probe.wait_progress("the kill");
    phases.mark("kill");

    // A join: d takes its share, handed over with the cursors.
    fleet.insert("d", Consumer::start("d", &redis));
    probe.wait_for("d's share taken", |s| {
        all_owned_by(s, &fleet) && !held_by(s, "d").is_empty()
    });
    probe.wait_progress("the join");
    phases.mark("join");

    // A paused owner: the busiest stops for two leases (its session expires, its
    // tenants go to new terms, on other replicas or back on it), then runs on: what it
    // had under way is refused, and its terms see their deadline passed.
    let live: Vec<&str> = fleet.keys().copied().collect();
    let paused = busiest(&probe.status(), &live);
    let held = held_by(&probe.status(), paused);
    fleet[paused].process.signal("STOP");
    sleep(LEASE * 2);
    fleet[paused].process.signal("CONT");
    probe.wait_for(
        "the paused consumer's tenants owned again in new terms",
        |s| {
            let now = owners(s);
            all_owned_by(s, &fleet)
                && held
                    .iter()
                    .all(|(t, f)| now.get(t).is_some_and(|(_, n)| n > f))
        },
    );
    probe.wait_progress("the pause");
    phases.mark("pause");

    // A graceful leave (SIGTERM): the busiest of the others hands each cursor to the
    // next owner, which resumes from it.
    let others: Vec<&str> = live.iter().copied().filter(|r| *r != paused).collect();
    let leaver = busiest(&probe.status(), &others);
    let left = fleet.remove(leaver).expect("the leaver");
    let left_lines = left.stop();
    probe.wait_for("the leaver's tenants owned by the others", |s| {
        all_owned_by(s, &fleet)
    });
    let prefix = format!("{leaver}: ");
    let handed: Vec<(String, String)> = left_lines
        .iter()
        .filter(|l| l.contains("(leave)"))
        .filter_map(|l| {
            let (tenant, rest) = l.strip_prefix(&prefix)?.split_once(": handed off at ")?;
            Some((
                tenant.to_owned(),
                rest.split_whitespace().next()?.to_owned(),
            ))
        })
        .collect();
    assert!(
        !handed.is_empty(),
        "{leaver} handed nothing off:\n{}",
        left_lines.join("\n")
    );
    // Each next term resumed exactly there: from the hand-off, or (if the take failed
    // on a busy machine: `NoHandOff::Unavailable`) from the committed cursor, which is
    // the same. At least one came with the hand-off.
    let mut delivered = 0;
    for (tenant, cursor) in &handed {
        let resumed = format!(": {tenant}: fence ");
        let at = format!(": resuming after {cursor} (");
        let deadline = Instant::now() + LIMIT;
        let line = loop {
            let found = fleet.values().find_map(|c| {
                c.process
                    .lines()
                    .into_iter()
                    .find(|l| l.contains(&resumed) && l.contains(&at))
            });
            if let Some(line) = found {
                break line;
            }
            assert!(
                Instant::now() < deadline,
                "{tenant}: nobody resumed from the cursor {leaver} handed off ({cursor})"
            );
            sleep(Duration::from_millis(100));
        };
        if line.ends_with("(handed over)") {
            delivered += 1;
        }
    }
    assert!(
        delivered > 0,
        "no cursor arrived with its hand-off: {handed:?}"
    );
    probe.wait_progress("the leave");
    phases.mark("leave");

    // The producer stops; the consumers drain every stream.
    producer.signal("TERM");
    let exit = producer.wait_for_exit(EXIT);
    assert!(exit.success(), "{}", producer.lines().join("\n"));
    let deadline = Instant::now() + LIMIT;
    for tenant in tenants() {
        loop {
            let ids = probe.stream_ids(&tenant);
            assert!(!ids.is_empty(), "{tenant}: the producer appended nothing");
            if probe.cursor(&tenant).as_ref() == ids.last() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{tenant}: not drained: cursor {:?}, last entry {:?}",
                probe.cursor(&tenant),
                ids.last()
            );
            sleep(Duration::from_millis(100));
        }
    }

    phases.mark("drain");

    // Exactly once: every tenant's output is its stream's ids, in order.
    let mut entries = 0;
    for tenant in tenants() {
        let ids = probe.stream_ids(&tenant);
        let output = probe.output(&tenant);
        let unique: BTreeSet<&String> = output.iter().collect();
        let duplicates = output.len() - unique.len();
        let missing = ids.iter().filter(|id| !unique.contains(id)).count();
        assert!(
            duplicates == 0 && missing == 0 && output == ids,
            "{tenant}: {duplicates} duplicates, {missing} missing, {} entries, {} outputs",
            ids.len(),
            output.len()
        );
        entries += ids.len();
    }

    let mut lines = left_lines;
    for (_, consumer) in std::mem::take(&mut fleet) {
        lines.extend(consumer.stop());
    }
    let status = probe.status();
    assert!(status.replicas.is_empty(), "{status:#?}");
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    println!(
        "{entries} entries over {TENANTS} tenants, each output once; the killed consumer was {victim}, \
         the paused one {paused}, the leaver {leaver}; its deposed writer got {deposed_steps} \
         steps in before the raise; {} terms resumed from a hand-off, {} found \
         themselves deposed; {phases}",
        count("(handed over)"),
        count(": deposed: ")
    );
}
