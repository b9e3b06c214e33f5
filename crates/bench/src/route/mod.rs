//! `route`: the replicas are `examples/router.rs`'s `serve` (compiled in, run by this
//! binary's hidden `route-replica` mode), the routers live in client processes (hidden
//! `route-client` mode, `client.rs`), each with a store and so a subscription of its
//! own, sending the example's requests (its `Caller`) at a steady rate. The bench starts
//! Redis and the replicas, waits until every tenant is routed, starts the clients'
//! load, and runs a kill (SIGKILL), a join, a graceful leave (SIGTERM) and a paced
//! rolling restart (each replica stopped with SIGTERM and started again under the same
//! id and port once the previous one has its share back). Then the load stops and,
//! once the group has been still for a while, it counts the routers' own commands over
//! a still window with `MONITOR` (the routers' connections are the ones `CLIENT LIST`
//! names `leasehold-router`; Redis 7.0 keeps no per-client command count).
//!
//! Staleness: each router's `changes()` is timestamped on arrival (wall clock) in the
//! client process; at the end the client reads the ledger of moves and, for each new
//! term a router heard of after it was ready, takes its arrival minus the time in its
//! ledger entry's id (the Redis server's clock, same machine).

#[allow(dead_code)]
#[path = "../../../../examples/router.rs"]
pub mod example;

pub mod client;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use clap::Args as ClapArgs;
use leasehold_partitions::Router;
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, sleep_until, timeout};

use crate::group::process::signal;
use crate::stats::{Percentiles, percentile, round3};
use crate::store::BoxError;

/// A replica's start: process, Redis connection, join.
const STARTED: Duration = Duration::from_secs(60);
/// A move to settle (a kill's tenants after its lease, a join's share).
const SETTLED: Duration = Duration::from_secs(120);
/// Every router of a client process reading its table (1,000 routers' full reads and
/// subscriptions on a busy machine).
const CLIENTS_READY: Duration = Duration::from_secs(300);
/// From a SIGTERM to the exit (the leaver redirects until its tenants have new owners).
const EXIT: Duration = Duration::from_secs(30);
/// The group counts as still once no route changed for this long.
const QUIET: Duration = Duration::from_secs(3);
/// The name of the routers' connections in `CLIENT LIST`.
pub const ROUTER_CLIENT: &str = "leasehold-router";

/// Options of the hidden `route-replica` mode: the example's `serve`.
#[derive(Debug, ClapArgs)]
pub struct ReplicaArgs {
    /// The Redis server.
    #[arg(long)]
    pub redis_url: String,
    /// Number of tenants.
    #[arg(long)]
    pub tenants: usize,
    /// The example's own flags.
    #[command(flatten)]
    pub serve: example::ServeArgs,
}

/// Runs one replica: `examples/router.rs`'s `serve`, until SIGINT or SIGTERM.
///
/// # Errors
/// The example's.
pub async fn replica(args: &ReplicaArgs) -> Result<(), BoxError> {
    let shutdown = example::shutdown_signal()?;
    example::serve(
        args.serve.clone(),
        &args.redis_url,
        example::tenants(args.tenants),
        shutdown,
    )
    .await
    .map_err(|e| e.to_string().into())
}

/// The report: the last line of stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RouteReport {
    /// Routers.
    pub routers: usize,
    /// `Router::owner`, each call timed alone (the timer's own cost included), in ns.
    pub lookup_ns: Quantiles,
    /// From each move's ledger entry to each router's table having it, in ms.
    pub staleness_ms: Staleness,
    /// Requests sent.
    pub requests: u64,
    /// Served by the replica the router named.
    pub ok: u64,
    /// Served after one redirect.
    pub redirected: u64,
    /// Not served with no owner at that instant: none known, a `503`, or the named
    /// owner not running (a killed replica's tenants until its lease ran out).
    pub unavailable: u64,
    /// Not served although the tenant had an owner.
    pub failed: u64,
    /// Commands the routers' connections sent over the still window, per router per
    /// second (`MONITOR`).
    pub idle_commands_per_router_per_s: f64,
    /// Redis's CPU (user + sys, `INFO cpu`) over the run under load, in % of one core.
    pub redis_cpu_pct: f64,
}

/// The line before the report: what it leaves out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Detail {
    /// `Router::owner`, the first lookup after 10 ms of load (cold caches), in ns.
    pub cold_lookup_ns: Percentiles,
    /// Of `unavailable`: the named owner not running (refused or reset).
    pub unreachable: u64,
    /// Route changes the clients' readers missed (fell behind by 4,096).
    pub changes_lagged: u64,
    /// Route changes heard of with no ledger entry.
    pub changes_unmatched: u64,
    /// Commands of the routers' connections over the still window.
    pub idle_router_commands: u64,
    /// The routers' connections `CLIENT LIST` named.
    pub idle_router_connections: usize,
    /// The still window, in s.
    pub idle_window_s: f64,
    /// The first failures' reasons.
    pub failures: Vec<String>,
}

/// A p50 and a p99.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Staleness percentiles and how many (router, move) pairs they cover.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Staleness {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Samples.
    pub count: usize,
}

/// A child process of the run, its stdout read line by line.
struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Proc {
    fn spawn(exe: &PathBuf, name: &str, args: &[String]) -> Result<Self, BoxError> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::unbounded_channel();
        let tag = name.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.len() < 400 {
                    eprintln!("[{tag}] {line}");
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            name: name.to_owned(),
            stdin: child.stdin.take(),
            child,
            lines,
        })
    }

    /// The next line containing `needle`, within `limit`.
    async fn line_with(&mut self, needle: &str, limit: Duration) -> Result<String, BoxError> {
        let name = self.name.clone();
        timeout(limit, async {
            while let Some(line) = self.lines.recv().await {
                if line.contains(needle) {
                    return Ok(line);
                }
            }
            Err(format!("{name} ended before saying {needle:?}").into())
        })
        .await
        .map_err(|_| format!("{name}: no {needle:?} within {limit:?}"))?
    }

    async fn say(&mut self, what: &str) -> Result<(), BoxError> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        stdin.write_all(format!("{what}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }

    fn pid(&self) -> Result<u32, BoxError> {
        Ok(self.child.id().ok_or("the process has exited")?)
    }

    async fn exit(&mut self, limit: Duration) -> Result<std::process::ExitStatus, BoxError> {
        let name = self.name.clone();
        Ok(timeout(limit, self.child.wait())
            .await
            .map_err(|_| format!("{name}: still running {limit:?} after the signal"))??)
    }
}

/// The replicas running, by id, with their ports.
struct Fleet {
    exe: PathBuf,
    url: String,
    settings: Settings,
    running: BTreeMap<String, (u16, Proc)>,
}

impl Fleet {
    async fn start(&mut self, id: &str, port: u16) -> Result<(), BoxError> {
        let args: Vec<String> = [
            "route-replica",
            "--redis-url",
            &self.url,
            "--tenants",
            &self.settings.partitions.to_string(),
            "--replica",
            id,
            "--port",
            &port.to_string(),
            "--lease-ms",
            &self.settings.lease_ms.to_string(),
        ]
        .map(str::to_owned)
        .into();
        let mut proc = Proc::spawn(&self.exe, id, &args)?;
        proc.line_with("serving group", STARTED).await?;
        self.running.insert(id.to_owned(), (port, proc));
        Ok(())
    }

    fn ids(&self) -> HashSet<String> {
        self.running.keys().cloned().collect()
    }
}

/// A loopback port that was free a moment ago.
fn free_port() -> Result<u16, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until `probe` routes every tenant to a replica of `live`, and `member` (if
/// any) owns at least one.
async fn routed(
    probe: &Router,
    partitions: usize,
    live: &HashSet<String>,
    member: Option<&str>,
    what: &str,
) -> Result<(), BoxError> {
    let deadline = Instant::now() + SETTLED;
    let mut changes = probe.changes();
    loop {
        let routes = probe.routes();
        if routes.len() == partitions
            && routes.iter().all(|(_, r)| live.contains(r.replica()))
            && member.is_none_or(|m| routes.iter().any(|(_, r)| r.replica() == m))
        {
            return Ok(());
        }
        tokio::select! {
            _ = changes.recv() => {}
            () = sleep(Duration::from_millis(100)) => {}
            () = sleep_until(deadline) => {
                return Err(format!("not {what} within {SETTLED:?}").into());
            }
        }
    }
}

/// Waits until no route changed for [`QUIET`] (at most [`SETTLED`]).
async fn still(probe: &Router) -> Result<(), BoxError> {
    let deadline = Instant::now() + SETTLED;
    let mut changes = probe.changes();
    loop {
        tokio::select! {
            _ = changes.recv() => {}
            () = sleep(QUIET) => return Ok(()),
            () = sleep_until(deadline) => return Err("the group never went still".into()),
        }
    }
}

/// `used_cpu_user + used_cpu_sys` of the server, in seconds.
async fn redis_cpu(conn: &mut redis::aio::MultiplexedConnection) -> Result<f64, BoxError> {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    Ok(crate::redis_stats::cpu_secs(&info).ok_or("INFO cpu without used_cpu_*")?)
}

/// The addresses of the routers' connections (`CLIENT LIST`, by name).
async fn router_addresses(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Result<HashSet<String>, BoxError> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query_async(conn).await?;
    Ok(named(&list, ROUTER_CLIENT))
}

/// The addresses of the connections named `name` in a `CLIENT LIST` reply.
fn named(list: &str, name: &str) -> HashSet<String> {
    list.lines()
        .filter(|l| l.split(' ').any(|f| f.strip_prefix("name=") == Some(name)))
        .filter_map(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("addr="))
                .map(str::to_owned)
        })
        .collect()
}

/// The client address of a `MONITOR` line (`None` for a script's own commands, whose
/// brackets hold `lua`, and for anything else).
fn monitored_client(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once('[')?;
    let (inside, _) = rest.split_once(']')?;
    inside.split_whitespace().nth(1).filter(|a| *a != "lua")
}

/// Commands sent by a connection of `from` over `window`, by `MONITOR` (its lines are
/// `<time> [<db> <addr>] "<command>" ...`; commands of scripts, `[<db> lua]`, are not a
/// client's).
async fn monitor(port: u16, from: &HashSet<String>, window: Duration) -> Result<u64, BoxError> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(b"MONITOR\r\n").await?;
    let mut count = 0_u64;
    let mut buffer = Vec::new();
    let mut chunk = vec![0_u8; 64 * 1024];
    let end = Instant::now() + window;
    let mut first = true;
    loop {
        let read = tokio::select! {
            read = stream.read(&mut chunk) => read?,
            () = sleep_until(end) => break,
        };
        if read == 0 {
            return Err("MONITOR connection closed".into());
        }
        buffer.extend_from_slice(&chunk[..read]);
        while let Some(at) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=at).collect();
            let line = String::from_utf8_lossy(&line);
            if first {
                first = false; // `+OK`
                continue;
            }
            if monitored_client(&line).is_some_and(|a| from.contains(a)) {
                count += 1;
            }
        }
    }
    Ok(count)
}

/// What `route` runs (see its options for each field's meaning).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Partitions (tenants).
    pub partitions: usize,
    /// Replica processes.
    pub replicas: usize,
    /// The lease of every partition, in milliseconds.
    pub lease_ms: u64,
    /// Routers, in all.
    pub routers: usize,
    /// Routers per client process.
    pub routers_per_process: usize,
    /// Length of each phase, in seconds.
    pub seconds: u64,
    /// Requests per second through every router.
    pub requests_per_s: f64,
    /// Length of the still group's window, in seconds.
    pub still_seconds: u64,
    /// How long a request waits for a route, in milliseconds.
    pub await_route_ms: u64,
}

/// Runs the scenario.
///
/// # Errors
/// A process that does not start or report, or a group that does not settle.
pub async fn run(settings: &Settings) -> Result<RouteReport, BoxError> {
    let redis = RedisServer::start_with_args(&["--maxclients", "10000"]);
    let url = redis.url();
    let exe = std::env::current_exe()?;
    let mut fleet = Fleet {
        exe: exe.clone(),
        url: url.clone(),
        settings: settings.clone(),
        running: BTreeMap::new(),
    };
    for i in 0..settings.replicas {
        fleet.start(&format!("r{i}"), free_port()?).await?;
    }
    let probe = example::router_of(&url, "leasehold-bench-probe").map_err(|e| e.to_string())?;
    routed(&probe, settings.partitions, &fleet.ids(), None, "routed").await?;
    eprintln!(
        "route: {} replicas serve {} tenants",
        settings.replicas, settings.partitions
    );

    // The clients: every router reads its table before the load starts.
    let processes = settings.routers.div_ceil(settings.routers_per_process);
    let mut clients = Vec::new();
    for i in 0..processes {
        let routers = settings.routers / processes + usize::from(i < settings.routers % processes);
        let client_args: Vec<String> = [
            "route-client".to_owned(),
            "--redis-url".to_owned(),
            url.clone(),
            "--routers".to_owned(),
            routers.to_string(),
            "--tenants".to_owned(),
            settings.partitions.to_string(),
            "--requests-per-s".to_owned(),
            (settings.requests_per_s / processes as f64).to_string(),
            "--await-route-ms".to_owned(),
            settings.await_route_ms.to_string(),
        ]
        .into();
        clients.push(Proc::spawn(&exe, &format!("client-{i}"), &client_args)?);
    }
    for client in &mut clients {
        client.line_with("\"ready\"", CLIENTS_READY).await?;
    }
    eprintln!(
        "route: {} routers ready in {processes} processes",
        settings.routers
    );

    let mut stats = crate::redis_stats::connect(&url).await?;
    let cpu_before = redis_cpu(&mut stats).await?;
    for client in &mut clients {
        client.say("go").await?;
    }
    let started = Instant::now();
    let at = |share: f64| started + Duration::from_secs_f64(settings.seconds as f64 * share);

    // A kill: nothing released; its tenants move once its lease runs out.
    sleep_until(at(0.1)).await;
    let victim = fleet.running.keys().next().cloned().ok_or("no replica")?;
    eprintln!("route: kill {victim}");
    let (_, mut killed) = fleet.running.remove(&victim).ok_or("no victim")?;
    signal(killed.pid()?, "KILL").await?;
    killed.exit(EXIT).await?;
    routed(
        &probe,
        settings.partitions,
        &fleet.ids(),
        None,
        "routed after the kill",
    )
    .await?;

    // A join.
    sleep_until(at(0.3)).await;
    let joiner = format!("r{}", settings.replicas);
    eprintln!("route: join {joiner}");
    fleet.start(&joiner, free_port()?).await?;
    routed(
        &probe,
        settings.partitions,
        &fleet.ids(),
        Some(&joiner),
        "routed after the join",
    )
    .await?;

    // A graceful leave.
    sleep_until(at(0.5)).await;
    let leaver = fleet.running.keys().next().cloned().ok_or("no replica")?;
    eprintln!("route: {leaver} leaves");
    let (_, mut left) = fleet.running.remove(&leaver).ok_or("no leaver")?;
    signal(left.pid()?, "TERM").await?;
    let status = left.exit(EXIT).await?;
    if !status.success() {
        return Err(format!("{leaver} exited {status} after SIGTERM").into());
    }
    routed(
        &probe,
        settings.partitions,
        &fleet.ids(),
        None,
        "routed after the leave",
    )
    .await?;

    // A paced rolling restart: each replica in turn, the next once this one is back
    // with its share.
    sleep_until(at(0.65)).await;
    let ids: Vec<String> = fleet.running.keys().cloned().collect();
    for id in ids {
        eprintln!("route: restart {id}");
        let (port, mut old) = fleet.running.remove(&id).ok_or("no replica")?;
        signal(old.pid()?, "TERM").await?;
        let status = old.exit(EXIT).await?;
        if !status.success() {
            return Err(format!("{id} exited {status} after SIGTERM").into());
        }
        fleet.start(&id, port).await?;
        routed(
            &probe,
            settings.partitions,
            &fleet.ids(),
            Some(&id),
            "routed after a restart",
        )
        .await?;
    }
    if Instant::now() > at(1.0) {
        eprintln!(
            "route: the faults outran the run ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    }
    sleep_until(at(1.0)).await;

    // The load stops; each client says how its requests ended.
    let mut counts = example::Counts::default();
    let mut failures = Vec::new();
    for client in &mut clients {
        client.say("stop").await?;
        let line = client.line_with("\"counts\"", EXIT).await?;
        let done: client::Done = serde_json::from_str(&line)?;
        counts.requests += done.counts.requests;
        counts.ok += done.counts.ok;
        counts.redirected += done.counts.redirected;
        counts.unavailable += done.counts.unavailable;
        counts.unreachable += done.counts.unreachable;
        counts.failed += done.counts.failed;
        failures.extend(done.failures);
    }
    let loaded = started.elapsed().as_secs_f64();
    let redis_cpu_pct = (redis_cpu(&mut stats).await? - cpu_before) / loaded * 100.0;
    eprintln!("route: {counts:?} in {loaded:.1} s; failures: {failures:?}");
    let failures: Vec<String> = failures.into_iter().take(10).collect();

    // The still window: the routers' own commands.
    still(&probe).await?;
    let routers_at = router_addresses(&mut stats).await?;
    let window = Duration::from_secs(settings.still_seconds);
    let commands = monitor(redis.port(), &routers_at, window).await?;
    eprintln!(
        "route: {commands} commands from {} router connections over {window:?}",
        routers_at.len()
    );
    let idle = commands as f64 / settings.routers as f64 / window.as_secs_f64();

    // Each client's staleness and lookup samples.
    let mut staleness = Vec::new();
    let mut lookups = Vec::new();
    let mut cold = Vec::new();
    let (mut lagged, mut unmatched) = (0, 0);
    for client in &mut clients {
        client.say("report").await?;
        let line = client.line_with("\"staleness_ms\"", SETTLED).await?;
        let samples: client::Samples = serde_json::from_str(&line)?;
        eprintln!(
            "route: {}: {} staleness samples, {} lookups, {} changes lagged, {} unmatched",
            client.name,
            samples.staleness_ms.len(),
            samples.lookup_ns.len(),
            samples.lagged,
            samples.unmatched
        );
        staleness.extend(samples.staleness_ms);
        lookups.extend(samples.lookup_ns.into_iter().map(f64::from));
        cold.extend(samples.cold_lookup_ns.into_iter().map(f64::from));
        lagged += samples.lagged;
        unmatched += samples.unmatched;
        client.stdin = None;
        client.exit(EXIT).await?;
    }
    for (_, (_, mut replica)) in std::mem::take(&mut fleet.running) {
        signal(replica.pid()?, "TERM").await?;
        let _ = replica.exit(EXIT).await;
    }
    probe.shutdown().await;
    let stale = Percentiles::of(&staleness);
    // What the summary leaves out, on a line before it.
    let detail = Detail {
        cold_lookup_ns: Percentiles::of(&cold),
        unreachable: counts.unreachable,
        changes_lagged: lagged,
        changes_unmatched: unmatched,
        idle_router_commands: commands,
        idle_router_connections: routers_at.len(),
        idle_window_s: window.as_secs_f64(),
        failures,
    };
    println!(
        "{}",
        serde_json::to_string(&serde_json::json!({ "detail": detail }))?
    );
    lookups.sort_by(f64::total_cmp);
    Ok(RouteReport {
        routers: settings.routers,
        lookup_ns: Quantiles {
            p50: percentile(&lookups, 0.5).unwrap_or(0.0),
            p99: percentile(&lookups, 0.99).unwrap_or(0.0),
        },
        staleness_ms: Staleness {
            p50: stale.p50,
            p99: stale.p99,
            max: stale.max,
            count: staleness.len(),
        },
        requests: counts.requests,
        ok: counts.ok,
        redirected: counts.redirected,
        unavailable: counts.unavailable,
        failed: counts.failed,
        idle_commands_per_router_per_s: (idle * 1e6).round() / 1e6,
        redis_cpu_pct: round3(redis_cpu_pct),
    })
}

/// Shared by the client side: the shutdown of a set of routers.
pub async fn shutdown_all(routers: &[Arc<Router>]) {
    for router in routers {
        router.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitor_line_names_its_client_and_a_script_line_none() {
        let line = r#"+1700000000.123456 [0 127.0.0.1:54321] "PING""#;
        assert_eq!(monitored_client(line), Some("127.0.0.1:54321"));
        let script = r#"+1700000000.123456 [0 lua] "HGET" "k" "f""#;
        assert_eq!(monitored_client(script), None);
        assert_eq!(monitored_client("+OK"), None);
    }

    #[test]
    fn the_routers_connections_are_found_by_name() {
        let list = "id=3 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name=leasehold-router age=1 cmd=ping\n\
                    id=4 addr=127.0.0.1:5001 laddr=127.0.0.1:6379 fd=9 name= age=1 cmd=evalsha\n\
                    id=5 addr=127.0.0.1:5002 laddr=127.0.0.1:6379 fd=10 name=leasehold-router-x age=1 cmd=ping\n";
        let found = named(list, ROUTER_CLIENT);
        assert_eq!(found, HashSet::from(["127.0.0.1:5000".to_owned()]));
    }
}
