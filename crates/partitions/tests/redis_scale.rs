//! The group protocol at CI scale on a real redis-server: a cold start of thousands of
//! partitions converges, and what a steady tick costs Redis does not grow with the
//! number of partitions. (Figures at 10,000 and 100,000 partitions, with replicas as
//! separate processes, come from `leasehold-bench load`; see docs/benchmarks.md.)

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_testkit::RedisServer;
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(1_000);

/// These tests time a cold start and measure the server's time per tick: each runs
/// alone (`cargo test` runs a file's tests side by side; `.config/nextest.toml` puts
/// them in a group of one), or on a 2-core machine the others' fleets starve its
/// replicas and skew its figures.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// `calls` and `usec` per command from `INFO commandstats`.
fn commandstats(redis: &RedisServer) -> BTreeMap<String, (u64, u64)> {
    let info = redis.redis_cli(&["INFO", "commandstats"]);
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?
                    .parse::<u64>()
                    .ok()
            };
            Some((name.to_owned(), (field("calls")?, field("usec")?)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_partitions_on_three_replicas_converge_from_a_cold_start() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 5_000, LEASE);
    let start = Instant::now();
    fleet.start_all(&["a", "b", "c"]);
    // Settle (one lease) plus a few claim batches; generous for a busy 2-core machine.
    let took = fleet.converge(Duration::from_secs(30)).await;
    eprintln!("5,000 partitions on 3 replicas: balanced {took:?} after the start");
    assert!(fleet.balanced());
    assert!(start.elapsed() >= LEASE, "nobody claims before settling");
    let handoffs: u64 = fleet.replicas.values().map(|h| h.status().handoffs).sum();
    assert_eq!(handoffs, 0, "a cold start claims fair shares at once");
    for (_, h) in std::mem::take(&mut fleet.replicas) {
        h.shutdown().await;
    }
    fleet.ledger.assert_no_double_ownership();
}

/// Server time per script call (µs) and script calls per second, over a steady
/// window of a balanced group of `partitions` on `replicas` replicas.
async fn steady_tick_cost(partitions: usize, replicas: usize) -> (f64, f64) {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), partitions, LEASE);
    let names: Vec<String> = (0..replicas).map(|i| format!("r{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    fleet.start_all(&names);
    fleet.converge(Duration::from_secs(30)).await;
    sleep(LEASE).await;
    let before = commandstats(&redis);
    let t0 = Instant::now();
    sleep(Duration::from_secs(3)).await;
    let after = commandstats(&redis);
    let secs = t0.elapsed().as_secs_f64();
    assert!(fleet.balanced(), "stayed balanced through the window");
    for (_, h) in std::mem::take(&mut fleet.replicas) {
        h.shutdown().await;
    }
    let delta = |name: &str| {
        let (c0, u0) = before.get(name).copied().unwrap_or_default();
        let (c1, u1) = after.get(name).copied().unwrap_or_default();
        (c1 - c0, u1 - u0)
    };
    let (calls, usec) = delta("evalsha");
    let inner: Vec<String> = after
        .keys()
        .filter(|k| !["evalsha", "eval", "ping", "info"].contains(&k.as_str()))
        .map(|k| {
            let (c, u) = delta(k);
            format!("{k} {c}×{:.1}µs", u as f64 / c.max(1) as f64)
        })
        .collect();
    eprintln!(
        "P={partitions}: {calls} script calls in {secs:.2} s, {:.1} µs each; inside: {}",
        usec as f64 / calls.max(1) as f64,
        inner.join(", ")
    );
    assert!(calls > 0, "the replicas ticked");
    (usec as f64 / calls as f64, calls as f64 / secs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_tick_costs_redis_the_same_at_ten_times_the_partitions() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (small_us, small_rate) = steady_tick_cost(500, 3).await;
    let (large_us, large_rate) = steady_tick_cost(5_000, 3).await;
    // The old layout scanned every lease in every tick: 10× the partitions cost about
    // 10× per tick. Now a tick touches the members, not the partitions. (A few µs of
    // slack: a steady tick costs tens of µs, and a busy machine shifts that much.)
    assert!(
        large_us < 2.0 * small_us + 30.0,
        "server time per tick grew with P: {small_us:.1} µs at 500, {large_us:.1} µs at 5,000"
    );
    assert!(
        large_rate < 2.0 * small_rate,
        "requests grew with P: {small_rate:.1}/s at 500, {large_rate:.1}/s at 5,000"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_tick_costs_redis_about_the_same_at_ten_times_the_replicas() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (small_us, _) = steady_tick_cost(120, 3).await;
    let (large_us, _) = steady_tick_cost(120, 30).await;
    // A tick that read the whole roster cost about 6 µs more per member (30 members:
    // about 3× the 3-member tick). A steady tick now reads the roster only when it
    // changed, and finds the next expiry through the index.
    assert!(
        large_us < 1.5 * small_us + 20.0,
        "server time per tick grew with N: {small_us:.1} µs at 3 replicas, {large_us:.1} µs at 30"
    );
}
