//! The examples as real processes against a real redis-server: each of them shuts down
//! on the *first* SIGINT (Ctrl-C) or SIGTERM, exits 0 promptly and leaves nothing
//! behind in Redis (the lease released, the group left); and each says "waiting for
//! Redis (...)" when nothing listens at its Redis URL, and still stops on one signal.
//!
//! The examples' sources are compiled into this test (`#[path]`) and the test
//! re-executes its own binary as each example, so the exact example code is what runs,
//! without `cargo run`. This is a `harness = false` test: `main` decides which role a
//! process plays.

#[allow(dead_code)]
#[path = "../examples/hand_off.rs"]
mod hand_off;
#[allow(dead_code)]
#[path = "../examples/prometheus.rs"]
mod prometheus;
#[allow(dead_code)]
#[path = "../examples/scheduler.rs"]
mod scheduler;
#[allow(dead_code)]
#[path = "../examples/stream_consumer.rs"]
mod stream_consumer;
mod support;
#[allow(dead_code)]
#[path = "../examples/tenants.rs"]
mod tenants;

use std::time::Duration;

use leasehold_election::DutyKeys;
use leasehold_election::RedisStore;
use leasehold_testkit::RedisServer;

use self::support::{ExampleProcess, free_port};

/// Process start, connection, first acquire (32 claims for `tenants`), on a busy
/// 2-core machine.
const RUNNING: Duration = Duration::from_secs(30);
/// From the signal to the exit: a release round trip, bounded by one lease (3 s) in the
/// worst case; generous for a busy machine.
const EXIT: Duration = Duration::from_secs(10);
/// From the start to the first "waiting for Redis" line.
const REPORTED: Duration = Duration::from_secs(10);

fn main() {
    if let Ok(example) = std::env::var(support::CHILD_ENV) {
        support::child(match example.as_str() {
            "scheduler" => scheduler::main,
            "tenants" => tenants::main,
            "prometheus" => prometheus::main,
            "hand_off" => hand_off::main,
            "stream_consumer" => stream_consumer::main,
            other => panic!("no example {other:?}"),
        });
    }
    support::run(&[
        ("scheduler_releases_and_exits_on_the_first_sigint", || {
            scheduler_stops_on("INT")
        }),
        ("scheduler_releases_and_exits_on_the_first_sigterm", || {
            scheduler_stops_on("TERM")
        }),
        (
            "tenants_leaves_the_group_and_exits_on_the_first_sigint_while_claiming",
            || tenants_stops_on("INT", When::MidClaims),
        ),
        (
            "tenants_leaves_the_group_and_exits_on_the_first_sigterm",
            || tenants_stops_on("TERM", When::Settled),
        ),
        ("prometheus_releases_and_exits_on_the_first_sigint", || {
            prometheus_stops_on("INT")
        }),
        ("prometheus_releases_and_exits_on_the_first_sigterm", || {
            prometheus_stops_on("TERM")
        }),
        (
            "scheduler_says_it_waits_for_redis_when_redis_is_down",
            || reports_redis_down("scheduler"),
        ),
        ("tenants_says_it_waits_for_redis_when_redis_is_down", || {
            reports_redis_down("tenants")
        }),
        (
            "prometheus_says_it_waits_for_redis_when_redis_is_down",
            || reports_redis_down("prometheus"),
        ),
        (
            "stream_consumer_leaves_the_group_and_exits_on_the_first_sigint",
            || stream_consumer_stops_on("INT"),
        ),
        (
            "stream_consumer_leaves_the_group_and_exits_on_the_first_sigterm",
            || stream_consumer_stops_on("TERM"),
        ),
        (
            "stream_consumer_says_it_waits_for_redis_when_redis_is_down",
            || reports_redis_down("stream_consumer"),
        ),
        (
            "hand_off_resumes_every_moved_stream_from_the_offset_handed_over",
            hand_off_resumes_every_moved_stream,
        ),
    ]);
}

/// `hand_off` runs to its end: every stream `replica-b` takes (half at its join, the
/// rest at `a`'s shutdown) resumes from the offset `a` handed off, none starts cold, and
/// the join's moves were warm (named for `b`, which prepared each first).
fn hand_off_resumes_every_moved_stream() {
    let redis = RedisServer::start();
    let mut process = ExampleProcess::start("hand_off", &[], &[("REDIS_URL", &redis.url())]);
    let status = process.wait_for_exit(RUNNING * 2);
    let lines = process.lines();
    assert!(status.success(), "exit {status}:\n{}", lines.join("\n"));
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count("(first owner)"), 8, "{}", lines.join("\n"));
    assert_eq!(count("resumed at offset"), 8, "{}", lines.join("\n"));
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("resumed at offset"))
            .all(|l| l.starts_with("replica-b: ")),
        "{}",
        lines.join("\n")
    );
    assert_eq!(count("starts cold"), 0, "{}", lines.join("\n"));
    // The join's four moves were warm: b prepared each one, and a named b.
    assert_eq!(count("replica-b: preparing "), 4, "{}", lines.join("\n"));
    assert_eq!(count("(handoff, to replica-b)"), 4, "{}", lines.join("\n"));
    // Each resume is at the offset its hand-off named.
    for line in lines.iter().filter(|l| l.contains("resumed at offset")) {
        let stream = line.split_whitespace().nth(1).unwrap();
        let offset = line
            .split_whitespace()
            .nth(5)
            .unwrap()
            .trim_end_matches(',');
        assert!(
            lines.iter().any(|l| l.starts_with("replica-a: ")
                && l.contains(&format!(" {stream} handed off at offset {offset} "))),
            "{line}: no hand-off at that offset:\n{}",
            lines.join("\n")
        );
    }
}

/// Starts `example` against `redis_url` the way its doc comment says to run it.
fn start(example: &str, redis_url: &str) -> ExampleProcess {
    match example {
        "prometheus" => {
            let port = free_port().to_string();
            ExampleProcess::start(
                "prometheus",
                &["--replica", "replica-a", "--port", &port],
                &[("REDIS_URL", redis_url)],
            )
        }
        "stream_consumer" => {
            let port = free_port().to_string();
            ExampleProcess::start(
                "stream_consumer",
                &["consume", "--replica", "replica-a", "--port", &port],
                &[("REDIS_URL", redis_url)],
            )
        }
        other => ExampleProcess::start(other, &["replica-a"], &[("REDIS_URL", redis_url)]),
    }
}

/// Sends `signal` once and checks that the example's own handler ran (it names the
/// signal) and that it exited 0 within [`EXIT`].
fn stop_with(process: &mut ExampleProcess, signal: &str) {
    process.signal(signal);
    let status = process.wait_for_exit(EXIT);
    assert!(
        status.success(),
        "exit status {status} after one SIG{signal}; it printed:\n{}",
        process.lines().join("\n")
    );
    let lines = process.lines();
    assert!(
        lines.iter().any(|l| l.contains(&format!("SIG{signal}: "))),
        "no line naming SIG{signal}:\n{}",
        lines.join("\n")
    );
}

/// Whether the duty's lease key exists.
fn lease_exists(redis: &RedisServer, duty: &str) -> bool {
    let key = DutyKeys::new("leasehold", duty).lease().to_owned();
    match redis.redis_cli(&["EXISTS", &key]).as_str() {
        "(integer) 1" => true,
        "(integer) 0" => false,
        other => panic!("EXISTS {key}: {other}"),
    }
}

fn scheduler_stops_on(signal: &str) {
    let redis = RedisServer::start();
    let mut process = start("scheduler", &redis.url());
    process.wait_for_line("replica-a: LEADER with fence", RUNNING);
    assert!(
        lease_exists(&redis, "scheduler"),
        "the leader holds the lease"
    );
    stop_with(&mut process, signal);
    assert!(
        !lease_exists(&redis, "scheduler"),
        "the lease was released on shutdown"
    );
}

fn prometheus_stops_on(signal: &str) {
    let redis = RedisServer::start();
    let mut process = start("prometheus", &redis.url());
    process.wait_for_line("replica-a: leading with fence", RUNNING);
    assert!(
        lease_exists(&redis, "scheduler"),
        "the leader holds the lease"
    );
    stop_with(&mut process, signal);
    assert!(
        !lease_exists(&redis, "scheduler"),
        "the lease was released on shutdown"
    );
}

/// When the signal comes: while the tenants are being claimed (the burst during which
/// the example used to sleep and drop a Ctrl-C), or once all 32 are served.
#[derive(Clone, Copy, PartialEq)]
enum When {
    MidClaims,
    Settled,
}

fn tenants_stops_on(signal: &str, when: When) {
    let redis = RedisServer::start();
    let mut process = start("tenants", &redis.url());
    if when == When::MidClaims {
        process.wait_for_line(": serving (fence", RUNNING);
    } else {
        process.wait_for_line("replica-a: owns 32 of 32 tenants", RUNNING);
        let status = group_status(&redis, "tenants");
        assert_eq!(status.replicas.len(), 1, "one live replica: {status:?}");
        assert!(
            status.partitions.iter().all(|p| p.owner.is_some()),
            "every tenant owned: {status:?}"
        );
    }
    stop_with(&mut process, signal);
    let status = group_status(&redis, "tenants");
    assert!(
        status.replicas.is_empty(),
        "no live replica left: {status:?}"
    );
    assert!(
        status.partitions.iter().all(|p| p.owner.is_none()),
        "every tenant released: {status:?}"
    );
}

/// `stream_consumer` leaves its group on one signal: every tenant it consumed is
/// released (its cursor handed off), and nothing is left live.
fn stream_consumer_stops_on(signal: &str) {
    let redis = RedisServer::start();
    let mut process = start("stream_consumer", &redis.url());
    process.wait_for_line("replica-a: tenant-", RUNNING);
    stop_with(&mut process, signal);
    let lines = process.lines();
    assert!(
        lines.iter().any(|l| l.contains(": handed off at ")),
        "no cursor handed off:\n{}",
        lines.join("\n")
    );
    let status = group_status(&redis, "stream-consumers");
    assert!(
        status.replicas.is_empty(),
        "no live replica left: {status:?}"
    );
    assert!(
        status.partitions.iter().all(|p| p.owner.is_none()),
        "every tenant released: {status:?}"
    );
}

/// A group as the library reads it.
fn group_status(redis: &RedisServer, group: &str) -> leasehold_partitions::GroupStatus {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let store = RedisStore::connect(&redis.url()).expect("a store");
        leasehold_partitions::GroupAdmin::new(store.clone(), group)
            .unwrap()
            .status()
            .await
            .expect("read the group")
            .expect("the group exists")
    })
}

/// With nothing listening at its Redis URL, `example` says so on its output (once for
/// each new error, not once per retry), and one SIGINT still stops it cleanly.
fn reports_redis_down(example: &str) {
    let url = format!("redis://127.0.0.1:{}/", free_port());
    let mut process = start(example, &url);
    let line = process.wait_for_line("replica-a: waiting for Redis (", REPORTED);
    assert!(
        line.contains("refused"),
        "the message carries the cause: {line}"
    );
    // A few retries later (the backoff starts well below a second), no line has been
    // printed twice in a row.
    std::thread::sleep(Duration::from_secs(3));
    let lines = process.lines();
    let waiting: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("waiting for Redis"))
        .collect();
    assert!(
        waiting.windows(2).all(|w| w[0] != w[1]),
        "the same error printed twice in a row:\n{}",
        lines.join("\n")
    );
    stop_with(&mut process, "INT");
}
