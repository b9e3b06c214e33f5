//! What `leasehold dashboard` costs Redis, and how soon a move reaches a viewer: one
//! JSON line on stdout. Ignored by `cargo test` (it takes about two minutes); run it
//! with
//!
//! ```sh
//! cargo test -p leasehold-cli --test dashboard_measure -- --ignored --nocapture
//! ```
//!
//! A group of P = 1,000 partitions and N = 4 replicas (in this process) on a
//! redis-server of its own, and the dashboard at its defaults (`--interval 100ms
//! --refresh 5s`; `DASHBOARD_INTERVAL=1s` sets another `--interval`), connected
//! through a proxy here that counts the commands it sends. With 0, 1 and 10 viewers of
//! the group (`/events?group=`), over 20 s each: the dashboard's commands per second
//! (counted by the proxy), and every client's (`INFO commandstats` deltas: the
//! replicas' own renewals included). Then 25 times a partition is preferred on another
//! replica (`GroupAdmin::prefer`, which moves it): for every move the ledger records
//! meanwhile, the time from its claim (`started`) to the event that brings it to a
//! viewer.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_partitions::GroupAdmin;
use leasehold_testkit::RedisServer;
use serde_json::{Value, json};
use support::http::Events;
use support::{Dashboard, replica, store, wait_for_counts};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, sleep, timeout};

const PARTITIONS: usize = 1_000;
const REPLICAS: [&str; 4] = ["replica-a", "replica-b", "replica-c", "replica-d"];
const WINDOW: Duration = Duration::from_secs(20);
const MOVES: usize = 25;

/// Counts the commands in a stream of RESP requests (arrays of bulk strings).
#[derive(Default)]
struct Resp {
    line: Vec<u8>,
    /// Bulk strings still to come in this command, and bytes left of the current one.
    args: u64,
    body: u64,
    in_command: bool,
}

impl Resp {
    fn feed(&mut self, mut data: &[u8]) -> u64 {
        let mut done = 0;
        while !data.is_empty() {
            if self.body > 0 {
                let take = usize::try_from(self.body).unwrap().min(data.len());
                data = &data[take..];
                self.body -= take as u64;
                if self.body == 0 && self.args == 0 {
                    self.in_command = false;
                    done += 1;
                }
                continue;
            }
            let b = data[0];
            data = &data[1..];
            self.line.push(b);
            if b != b'\n' {
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let n: u64 = std::str::from_utf8(&line[1..line.len() - 2])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if self.in_command {
                // `$<len>`: the bulk string and its CRLF.
                self.args -= 1;
                self.body = n + 2;
            } else if line[0] == b'*' && n > 0 {
                self.in_command = true;
                self.args = n;
            } else {
                // An inline command.
                done += 1;
            }
        }
        done
    }
}

/// A proxy to `upstream` on a free loopback port, counting the commands sent through.
async fn counting_proxy(upstream: String) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicU64::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(&upstream).await.unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut resp = Resp::default();
                let mut buf = vec![0; 64 * 1024];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    counter.fetch_add(resp.feed(&buf[..n]), Ordering::Relaxed);
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
            });
        }
    });
    (addr, count)
}

/// Commands every client ran, by `INFO commandstats` (but `INFO`, this test's own).
fn all_commands(redis: &RedisServer) -> u64 {
    redis
        .redis_cli(&["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum::<u64>()
}

/// Commands per second over [`WINDOW`]: the dashboard's, and every client's.
async fn rates(redis: &RedisServer, dashboard: &AtomicU64) -> (f64, f64) {
    let (d0, a0) = (dashboard.load(Ordering::Relaxed), all_commands(redis));
    sleep(WINDOW).await;
    let (d1, a1) = (dashboard.load(Ordering::Relaxed), all_commands(redis));
    let per_s = |n: u64| (n as f64 / WINDOW.as_secs_f64() * 10.0).round() / 10.0;
    (per_s(d1 - d0), per_s(a1 - a0))
}

/// Milliseconds since the epoch of `2026-12-06T21:00:00.123Z`.
fn epoch_ms(t: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + n(11..13)) * 60 + n(14..16)) * 60_000 + n(17..19) * 1000 + n(20..23)
}

fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// A viewer whose events are read as they come, as a browser's would be, until aborted.
async fn open_viewer(addr: &str, path: &str) -> tokio::task::JoinHandle<()> {
    let mut v = Events::open(addr, path).await;
    v.until("group", |g| g["partitions"].is_array()).await;
    tokio::spawn(async move {
        loop {
            v.next().await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement of about two minutes: see the module's docs"]
async fn dashboard_cost_and_move_latency() {
    assert_eq!(epoch_ms("1970-01-02T00:00:01.002Z"), 86_401_002);
    let redis = RedisServer::start();
    let store = store(&redis);
    let group = "tenants";
    let fleet: Vec<_> = REPLICAS
        .iter()
        .map(|r| replica(&store, "leasehold", group, PARTITIONS, r))
        .collect();
    let even: Vec<(&str, usize)> = REPLICAS.iter().map(|r| (*r, PARTITIONS / 4)).collect();
    wait_for_counts(&store, "leasehold", group, &even).await;
    let (proxy, dashboard) = counting_proxy(redis.addr().to_string()).await;
    let interval = std::env::var("DASHBOARD_INTERVAL").unwrap_or_else(|_| "100ms".to_owned());
    let d = Dashboard::start(&format!("redis://{proxy}/"), &interval, "5s", &[]).await;
    let path = format!("/events?group={group}");

    let none = rates(&redis, &dashboard).await;
    // Every viewer's events are read as they come, as a browser would.
    let mut viewers = Vec::new();
    viewers.push(open_viewer(&d.addr, &path).await);
    let with_one = rates(&redis, &dashboard).await;
    for _ in 1..10 {
        viewers.push(open_viewer(&d.addr, &path).await);
    }
    let with_ten = rates(&redis, &dashboard).await;
    for v in viewers {
        v.abort();
    }

    // Moves: one viewer, each partition preferred on the next replica. Its events are
    // read, and timed, as they arrive (by a task of their own), not when this loop
    // gets to them.
    let mut viewer = Events::open(&d.addr, &path).await;
    let mut owners = std::collections::HashMap::new();
    let first = viewer.until("group", |g| g["partitions"].is_array()).await;
    let (tx, mut arrived_events) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        loop {
            let (name, event) = viewer.next().await;
            if tx.send((now_ms(), name, event)).is_err() {
                return;
            }
        }
    });
    for p in first["partitions"].as_array().unwrap() {
        owners.insert(
            p["partition"].as_str().unwrap().to_owned(),
            p["owner"].as_str().unwrap_or_default().to_owned(),
        );
    }
    let admin = GroupAdmin::new(store.clone(), group).unwrap();
    let mut latencies = Vec::new();
    let mut preferred_latencies = Vec::new();
    for i in 0..MOVES {
        let partition = format!("p{}", i * 37);
        let owner = owners[&partition].clone();
        let to = REPLICAS
            .iter()
            .find(|r| **r != owner)
            .copied()
            .unwrap_or(REPLICAS[0]);
        admin.prefer(&partition, to).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, name, event) = timeout(left, arrived_events.recv())
                .await
                .unwrap_or_else(|_| panic!("{partition} never showed on {to}"))
                .expect("the viewer's stream ended");
            if name != "group" {
                continue;
            }
            for p in event["partitions"].as_array().into_iter().flatten() {
                owners.insert(
                    p["partition"].as_str().unwrap().to_owned(),
                    p["owner"].as_str().unwrap_or_default().to_owned(),
                );
            }
            let mut arrived = false;
            for m in event["moves"].as_array().into_iter().flatten() {
                let took = at - epoch_ms(m["started"].as_str().unwrap());
                latencies.push(took);
                if m["partition"] == partition.as_str() && m["to"] == to {
                    preferred_latencies.push(took);
                    arrived = true;
                }
            }
            if arrived {
                break;
            }
        }
        admin.unprefer(&partition).await.unwrap();
        // Let the group settle before the next move.
        sleep(Duration::from_millis(1500)).await;
    }
    // The moves that arrived while the last one settled.
    while let Ok((at, name, event)) = arrived_events.try_recv() {
        if name == "group" {
            for m in event["moves"].as_array().into_iter().flatten() {
                latencies.push(at - epoch_ms(m["started"].as_str().unwrap()));
            }
        }
    }
    latencies.sort_unstable();
    preferred_latencies.sort_unstable();
    let summary = |l: &[i64]| {
        json!({"moves": l.len(), "p50_ms": percentile(l, 0.5), "p99_ms": percentile(l, 0.99),
               "max_ms": l.last()})
    };
    let line: Value = json!({
        "measure": "dashboard",
        "partitions": PARTITIONS,
        "replicas": REPLICAS.len(),
        "dashboard": {"interval": interval, "refresh": "5s"},
        "window_s": WINDOW.as_secs(),
        "dashboard_commands_per_s": {"viewers_0": none.0, "viewers_1": with_one.0, "viewers_10": with_ten.0},
        "all_clients_commands_per_s": {"viewers_0": none.1, "viewers_1": with_one.1, "viewers_10": with_ten.1},
        "move_to_viewer": {
            "preferred": summary(&preferred_latencies),
            "all_moves": summary(&latencies),
        },
        "redis": redis.redis_cli(&["INFO", "server"]).lines()
            .find_map(|l| l.strip_prefix("redis_version:")).unwrap_or("?").trim(),
    });
    println!("{line}");
    reader.abort();
    for f in fleet {
        f.shutdown().await;
    }
}
