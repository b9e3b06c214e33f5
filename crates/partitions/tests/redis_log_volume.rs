//! What a replica writes to its log during a Redis outage, against a real redis-server
//! behind a fault proxy: one line per group event, with counts, never one per
//! partition. (A binary of its own: it installs the process's log subscriber.)

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_testkit::{FaultProxy, RedisServer};
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(20);
/// The partitions the one replica holds.
const P: usize = 17;

/// Every log line written, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_logged_in_a_few_group_lines_not_one_per_partition() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .init();

    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let store = RedisStore::builder(proxy.url())
        .call_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut fleet = Fleet::new(store, P, LEASE);
    fleet.start("a");
    fleet.converge(LIMIT).await;
    captured.clear();

    // Redis out of reach for three leases: every partition steps down at its deadline.
    proxy.blackhole();
    let a = fleet.replicas["a"].subscribe();
    let start = Instant::now();
    while !a.borrow().owned.is_empty() {
        assert!(start.elapsed() < LIMIT, "a still owns partitions");
        sleep(Duration::from_millis(10)).await;
    }
    sleep(LEASE * 2).await;
    let during = captured.lines();
    proxy.reset_connections();
    proxy.pass();
    fleet.converge(LIMIT).await;
    let lines = captured.lines();

    if std::env::var_os("SHOW_LOG").is_some() {
        eprintln!("{}", lines.join("\n"));
    }
    let warnings: Vec<&String> = lines.iter().filter(|l| l.contains(" WARN ")).collect();
    // The heartbeat failing (once), the step-downs summed up per tick (at most a few:
    // the partitions' deadlines all pass within one renew interval), the session lost
    // and the store no longer listing them: a handful, against 3 × 17 + before.
    assert!(
        warnings.len() <= 8,
        "{} warnings for {P} partitions:\n{}",
        warnings.len(),
        lines.join("\n")
    );
    let heartbeat = warnings
        .iter()
        .filter(|l| l.contains("heartbeat to Redis failed"))
        .count();
    assert_eq!(heartbeat, 1, "{}", lines.join("\n"));
    let summed: usize = during
        .iter()
        .filter(|l| l.contains(" WARN ") && l.contains("stepped down from"))
        .filter_map(|l| {
            let at = l.find("partitions=")? + "partitions=".len();
            l[at..].split_whitespace().next()?.parse::<usize>().ok()
        })
        .sum();
    assert_eq!(
        summed,
        P,
        "every step-down counted once:\n{}",
        during.join("\n")
    );
    // No per-partition line at warn: no partition name appears in a warning but in
    // the summaries' few examples.
    let named = warnings
        .iter()
        .filter(|l| l.contains("partition=") || l.contains("redis call failed"))
        .count();
    assert_eq!(named, 0, "{}", lines.join("\n"));
    // Nor at info: no partition's elector says it stopped or leads again.
    let per_partition = lines.iter().filter(|l| l.contains("elector{")).count();
    assert_eq!(per_partition, 0, "{}", lines.join("\n"));
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" INFO ") && l.contains("heartbeat reaches Redis again")),
        "the recovery is logged:\n{}",
        lines.join("\n")
    );
    fleet.ledger.assert_no_double_ownership();
}
