//! Scrapes `examples/prometheus.rs`: three replicas of one duty, each in its own process
//! (a metrics recorder is global to a process), against a real redis-server.
//!
//! The example's source is compiled into this test (`#[path]`), and the test re-executes
//! its own binary as each replica: the exact example code is what gets scraped, without
//! `cargo run` and without a second copy of it as a `[[bin]]`. This is a `harness = false`
//! test, so `main` decides which role a process plays.

#[allow(dead_code)]
#[path = "../examples/prometheus.rs"]
mod prometheus;
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use leasehold_testkit::RedisServer;

use self::support::{CHILD_ENV, free_port};

const DUTY: &str = "scrape-test";
const LEASE_MS: u64 = 1_000;
const LIMIT: Duration = Duration::from_secs(20);

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        support::child(prometheus::main);
    }
    support::run(&[(
        "three_replicas_export_exactly_one_leader",
        three_replicas_export_exactly_one_leader,
    )]);
}

/// The child processes, killed when dropped (also when the test panics).
struct Replicas(Vec<(String, u16, Child)>);

impl Drop for Replicas {
    fn drop(&mut self) {
        for (_, _, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Replicas {
    fn start(redis_url: &str, names: &[&str]) -> Self {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut replicas = Vec::new();
        for name in names {
            let port = free_port();
            let child = Command::new(&exe)
                .env(CHILD_ENV, "prometheus")
                .env_remove("REDIS_URL")
                .env_remove("METRICS_PORT")
                .env_remove("REPLICA_ID")
                .args(["--replica", name, "--duty", DUTY, "--redis-url", redis_url])
                .args([
                    "--port",
                    &port.to_string(),
                    "--lease-ms",
                    &LEASE_MS.to_string(),
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("the test binary re-executes itself");
            replicas.push(((*name).to_owned(), port, child));
        }
        Self(replicas)
    }

    /// Every live replica's `leasehold_is_leader` for the duty (0 when a replica does not
    /// export the series), or `None` while one of them does not answer yet.
    fn is_leader(&self) -> Option<Vec<(String, f64)>> {
        self.0
            .iter()
            .map(|(name, port, _)| {
                let body = scrape(*port)?;
                let samples = parse(&body);
                let value = samples
                    .iter()
                    .filter(|s| s.metric == "leasehold_is_leader")
                    .filter(|s| s.labels.get("duty") == Some(DUTY))
                    .inspect(|s| assert_eq!(s.labels.get("replica"), Some(name.as_str())))
                    .map(|s| match s.value {
                        prometheus_parse::Value::Gauge(v) => v,
                        ref other => panic!("leasehold_is_leader is not a gauge: {other:?}"),
                    })
                    .sum();
                Some((name.clone(), value))
            })
            .collect()
    }

    /// Waits until exactly one replica leads, and returns it.
    fn wait_for_one_leader(&self) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let seen = self.is_leader();
            if let Some(values) = &seen {
                let sum: f64 = values.iter().map(|(_, v)| v).sum();
                if sum == 1.0 {
                    let leader = values.iter().find(|(_, v)| *v == 1.0);
                    return leader.expect("a single 1").0.clone();
                }
            }
            assert!(Instant::now() < deadline, "no single leader: {seen:?}");
            sleep(Duration::from_millis(50));
        }
    }
}

/// `GET /metrics` over HTTP/1.0 (so the body is neither chunked nor kept alive).
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    Some(body.to_owned())
}

/// Parses an exposition with `prometheus-parse`. Its `Scrape` skips lines it does not
/// understand, so first every line must be a `# HELP`, a `# TYPE` or a sample with a
/// numeric value, and every Leasehold series must belong to a family with a HELP text
/// and a TYPE.
fn parse(body: &str) -> Vec<prometheus_parse::Sample> {
    use prometheus_parse::LineInfo;
    let mut families = Vec::new();
    for line in body.lines() {
        match LineInfo::parse(line) {
            LineInfo::Empty | LineInfo::Doc { .. } => {}
            LineInfo::Type {
                metric_name,
                metric_alias,
                ..
            } => families.push(metric_alias.unwrap_or(metric_name)),
            LineInfo::Sample { value, .. } => {
                let ok = value.parse::<f64>().is_ok() || value == "NaN";
                assert!(ok, "not a number in {line:?}:\n{body}");
            }
            LineInfo::Ignored => panic!("unparsable line {line:?}:\n{body}"),
        }
    }
    let lines = body.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("the exposition parses");
    for s in scrape
        .samples
        .iter()
        .filter(|s| s.metric.starts_with("leasehold_"))
    {
        let family = families
            .iter()
            .find(|f| {
                let suffix = s.metric.strip_prefix(f.as_str());
                matches!(suffix, Some("" | "_bucket" | "_sum" | "_count"))
            })
            .unwrap_or_else(|| panic!("no TYPE for {}:\n{body}", s.metric));
        assert!(
            scrape.docs.contains_key(family),
            "no HELP for {family}:\n{body}"
        );
    }
    scrape.samples
}

fn three_replicas_export_exactly_one_leader() {
    let redis = RedisServer::start();
    let mut replicas = Replicas::start(&redis.url(), &["replica-a", "replica-b", "replica-c"]);
    let leader = replicas.wait_for_one_leader();

    // It stays that way: the sum is 1 at every scrape over a few renewals.
    let until = Instant::now() + Duration::from_millis(LEASE_MS);
    while Instant::now() < until {
        let values = replicas.is_leader().expect("every replica answers");
        let leaders: Vec<_> = values.iter().filter(|(_, v)| *v == 1.0).collect();
        assert_eq!(leaders.len(), 1, "{values:?}");
        assert_eq!(leaders[0].0, leader, "{values:?}");
        assert_eq!(
            values.iter().map(|(_, v)| v).sum::<f64>(),
            1.0,
            "{values:?}"
        );
        sleep(Duration::from_millis(100));
    }

    // Crash the leader: the two others export exactly one leader again within a lease.
    let i = replicas
        .0
        .iter()
        .position(|(n, _, _)| *n == leader)
        .unwrap();
    let (_, _, mut child) = replicas.0.remove(i);
    child.kill().unwrap();
    child.wait().unwrap();
    let next = replicas.wait_for_one_leader();
    assert_ne!(next, leader);
}
