//! The hidden `route-client` mode: routers, each on a store of its own, and the
//! example's requests through them at a steady rate. Driven by lines on stdin: `go`
//! starts the load, `stop` ends it (it prints the counts), `report` reads the ledger of
//! moves and prints the staleness and lookup samples, then the process exits.
//!
//! Every router's `changes()` is read by a task of its own that stamps each change
//! with the wall clock as it arrives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Args as ClapArgs;
use leasehold_partitions::{GroupAdmin, RedisStore, Router};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::broadcast::error::RecvError;

use super::example::{self, Caller, Tally};
use super::{ROUTER_CLIENT, shutdown_all};
use crate::clock::now_us;
use crate::store::BoxError;

/// How often the lookup sampler wakes, and how many lookups it times then after the
/// first.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
const BURST: usize = 20;
/// Ledger entries read per page.
const PAGE: usize = 1_000;

/// Options of the hidden `route-client` mode.
#[derive(Debug, ClapArgs)]
pub struct ClientArgs {
    /// The Redis server.
    #[arg(long)]
    pub redis_url: String,
    /// Routers in this process.
    #[arg(long)]
    pub routers: usize,
    /// Number of tenants.
    #[arg(long)]
    pub tenants: usize,
    /// Requests per second from this process.
    #[arg(long)]
    pub requests_per_s: f64,
    /// See `route --await-route-ms`.
    #[arg(long, default_value_t = 0)]
    pub await_route_ms: u64,
}

/// The line printed after `stop`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Done {
    /// How the requests ended.
    pub counts: CountsLine,
    /// The first failures' reasons.
    pub failures: Vec<String>,
}

/// [`example::Counts`], serialised.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CountsLine {
    /// Every request.
    pub requests: u64,
    /// Served by the replica the router named.
    pub ok: u64,
    /// Served after one redirect.
    pub redirected: u64,
    /// No owner at that instant.
    pub unavailable: u64,
    /// Of `unavailable`: the owner not running.
    pub unreachable: u64,
    /// Not served although the tenant had an owner.
    pub failed: u64,
}

/// The line printed after `report`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Samples {
    /// Per router and new term heard of after the routers were ready: arrival minus the
    /// ledger entry's time, in ms.
    pub staleness_ms: Vec<f64>,
    /// `Router::owner`, each timed alone, in a burst on one router (warm caches), in ns.
    pub lookup_ns: Vec<u32>,
    /// `Router::owner`, the first of each burst (after 10 ms of load: cold caches), in ns.
    pub cold_lookup_ns: Vec<u32>,
    /// Changes a router's reader missed (it fell behind by 4,096).
    pub lagged: u64,
    /// Changes heard of with no ledger entry (none expected).
    pub unmatched: u64,
}

/// One route change as it arrived: partition, fence, wall-clock µs.
type Arrival = (String, u64, u64);

/// Runs the client until `report` (or stdin closes).
///
/// # Errors
/// A router that cannot be built, a ledger that cannot be read.
pub async fn run(args: &ClientArgs) -> Result<(), BoxError> {
    let mut routers = Vec::with_capacity(args.routers);
    let mut arrivals: Vec<Arc<Mutex<Vec<Arrival>>>> = Vec::with_capacity(args.routers);
    let lagged = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for _ in 0..args.routers {
        let router = Arc::new(
            example::router_of(&args.redis_url, ROUTER_CLIENT).map_err(|e| e.to_string())?,
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut changes = router.changes();
        let (into, lagged) = (Arc::clone(&log), Arc::clone(&lagged));
        tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(change) => {
                        let at = now_us();
                        if let Some(route) = change.route {
                            into.lock().unwrap_or_else(PoisonError::into_inner).push((
                                change.partition,
                                route.fence().get(),
                                at,
                            ));
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        lagged.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        });
        routers.push(router);
        arrivals.push(log);
    }
    for router in &routers {
        router.wait_until_ready().await;
    }
    let ready_us = now_us();
    println!(r#"{{"ready":{}}}"#, routers.len());

    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    wait_for(&mut stdin, "go").await?;
    let tally = Arc::new(Tally::default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let load = {
        let (routers, tally) = (routers.clone(), Arc::clone(&tally));
        let tenants = example::tenants(args.tenants);
        let caller = Caller::new().await_route(Duration::from_millis(args.await_route_ms));
        let rate = args.requests_per_s;
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let until = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            example::load(&routers, &caller, &tenants, rate, until, &tally).await;
        })
    };
    let sampler = {
        let routers = routers.clone();
        let tenants = example::tenants(args.tenants);
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let (mut cold, mut warm) = (Vec::new(), Vec::new());
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            let mut i = 0_usize;
            loop {
                tokio::select! {
                    _ = stopped.wait_for(|s| *s) => break,
                    _ = tick.tick() => {}
                }
                // The first lookup after the wait finds its router's table out of the
                // caches (the load ran meanwhile), as a request's lookup does; the
                // burst after it, on the same router, finds them warm.
                let router = &routers[i % routers.len()];
                for n in 0..=BURST {
                    let tenant = &tenants[(i + n * 7) % tenants.len()];
                    let took = timed_lookup(router, tenant);
                    if n == 0 {
                        cold.push(took)
                    } else {
                        warm.push(took)
                    }
                }
                i += 1;
            }
            (cold, warm)
        })
    };
    wait_for(&mut stdin, "stop").await?;
    let _ = stop.send(true);
    load.await?;
    let (cold, lookups) = sampler.await?;
    let c = tally.counts();
    let done = Done {
        counts: CountsLine {
            requests: c.requests,
            ok: c.ok,
            redirected: c.redirected,
            unavailable: c.unavailable,
            unreachable: c.unreachable,
            failed: c.failed,
        },
        failures: tally.failures(),
    };
    println!("{}", serde_json::to_string(&done)?);

    wait_for(&mut stdin, "report").await?;
    // Each new term's ledger time: the ms part of its entry's id (the server's clock).
    let admin = GroupAdmin::new(RedisStore::connect(&args.redis_url)?, example::GROUP)?;
    let mut started: HashMap<(String, u64), u64> = HashMap::new();
    let mut last: Option<String> = None;
    loop {
        let page = admin.moves(last.as_deref(), PAGE).await?;
        let Some(newest) = page.last() else { break };
        last = Some(newest.id.clone());
        for m in page {
            let ms =
                m.id.split_once('-')
                    .and_then(|(ms, _)| ms.parse::<u64>().ok())
                    .ok_or_else(|| format!("a ledger id without ms: {}", m.id))?;
            started.insert((m.partition, m.new_fence.get()), ms);
        }
    }
    let mut staleness = Vec::new();
    let mut unmatched = 0_u64;
    for log in &arrivals {
        let log = log.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = std::collections::HashSet::new();
        for (partition, fence, at) in log.iter() {
            if *at < ready_us || !seen.insert((partition.as_str(), *fence)) {
                continue;
            }
            match started.get(&(partition.clone(), *fence)) {
                Some(ms) => {
                    let stale = (*at as f64 / 1000.0 - *ms as f64).max(0.0);
                    staleness.push((stale * 1000.0).round() / 1000.0);
                }
                None => unmatched += 1,
            }
        }
    }
    let samples = Samples {
        staleness_ms: staleness,
        lookup_ns: lookups,
        cold_lookup_ns: cold,
        lagged: lagged.load(std::sync::atomic::Ordering::Relaxed),
        unmatched,
    };
    println!("{}", serde_json::to_string(&samples)?);
    shutdown_all(&routers).await;
    Ok(())
}

/// One `Router::owner` call, timed alone, in ns.
fn timed_lookup(router: &Router, tenant: &str) -> u32 {
    let start = std::time::Instant::now();
    let route = router.owner(tenant);
    let took = start.elapsed();
    std::hint::black_box(route);
    u32::try_from(took.as_nanos()).unwrap_or(u32::MAX)
}

/// Reads stdin until the line `word`.
async fn wait_for(
    stdin: &mut tokio::io::Lines<BufReader<tokio::io::Stdin>>,
    word: &str,
) -> Result<(), BoxError> {
    while let Some(line) = stdin.next_line().await? {
        if line.trim() == word {
            return Ok(());
        }
    }
    Err(format!("stdin closed before {word:?}").into())
}
