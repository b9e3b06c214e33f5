//! A consumer per tenant, exactly once: every tenant has a Redis stream, the running
//! replicas share the tenants (a partition group balanced by the tenants' measured
//! arrival rates), and each entry's output lands exactly once, through kills, joins,
//! graceful leaves and paused owners.
//!
//! For each tenant it owns, a replica reads `stream:{tenant-07}` with `XREAD` and, for
//! each entry in order, appends the entry's id to `out:{tenant-07}` and moves
//! `cursor:{tenant-07}` to it in one fenced batch (`FencedWriter::batch`), so output and
//! cursor never disagree and a deposed owner's write is refused. A new term raises the
//! two keys' fences *before* it reads where to resume (`docs/fencing.md`, "Resuming
//! exactly once"); on a planned move the old owner hands its cursor to the next
//! (`Ownership::hand_off`). Each replica serves `/livez` (also `/healthz`), `/readyz`
//! (200 once it holds its share of the tenants: `CoordinatorHandle::readiness`), `/owned`
//! (the tenants it owns, as JSON) and `/metrics` (Prometheus) on one port;
//! `examples/kubernetes/` deploys it with those probes. The first Ctrl-C (SIGINT) or
//! SIGTERM leaves gracefully, handing every cursor over; while Redis cannot be reached
//! it says "waiting for Redis (...)" once for each new error.
//!
//! ```text
//! cargo run --release --example stream_consumer -- produce --rate 10
//! cargo run --release --example stream_consumer -- consume --replica replica-a --port 8081
//! cargo run --release --example stream_consumer -- consume --replica replica-b --port 8082
//! curl -s localhost:8081/owned; curl -s localhost:8081/metrics | grep '^leasehold_owned'
//! ```
//!
//! `produce` appends to every tenant's stream at a steady rate (tenant i at
//! `rate × (1 + (i − 1) mod 3)` entries per second, so the tenants weigh 1, 2 and 3
//! units) until Ctrl-C. Flags (or environment): `--redis-url` (`REDIS_URL`, default
//! `redis://127.0.0.1:6379/`), `--tenants` (default 8); for `consume`: `--replica`
//! (`REPLICA_ID`, default `replica-<pid>`), `--port` (`HTTP_PORT`, default 8080; every
//! interface), `--lease-ms` (default 3000). The workspace's `tests/stream_consumer.rs`
//! runs both against a real redis-server and checks that every tenant's output is its
//! stream's ids, in order, once each. `docs/recipes.md` walks through it.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use clap::{Args, Parser, Subcommand};
use leasehold_partitions::ErrorChain;
use leasehold_partitions::redis;
use leasehold_partitions::{
    Coordinator, CoordinatorHandle, DutyError, DutyResult, FencedWriteError, FencedWriter,
    GroupConfig, HandOffError, LoadDamping, Ownership, PartitionsError, RedisStore,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use tokio::sync::watch;
use tokio::time::Instant;

/// The partition group the consumers form.
const GROUP: &str = "stream-consumers";
/// Entries read per `XREAD`.
const READ_COUNT: usize = 100;
/// How long an `XREAD` waits for new entries: short, since the loop also samples the
/// arrival rate between reads (the connection's response timeout is this plus 2 s).
const READ_BLOCK: Duration = Duration::from_millis(200);
/// How often an owner measures its tenant's arrival rate and reports it.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// One process: a consumer replica, or the producer feeding the streams.
#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
    /// The Redis server.
    #[arg(
        long,
        env = "REDIS_URL",
        global = true,
        default_value = "redis://127.0.0.1:6379/"
    )]
    redis_url: String,
    /// How many tenants (`tenant-01`, `tenant-02`, ...).
    #[arg(long, global = true, default_value_t = 8)]
    tenants: usize,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Consume the tenants' streams as one replica of the group.
    Consume(ConsumeArgs),
    /// Append entries to every tenant's stream at a steady rate.
    Produce(ProduceArgs),
}

#[derive(Debug, Args)]
struct ConsumeArgs {
    /// This replica's id.
    #[arg(long, env = "REPLICA_ID")]
    replica: Option<String>,
    /// Port of `/livez`, `/readyz`, `/owned` and `/metrics` (0: any free port).
    #[arg(long, env = "HTTP_PORT", default_value_t = 8080)]
    port: u16,
    /// Lease length in milliseconds.
    #[arg(long, default_value_t = 3000)]
    lease_ms: u64,
    /// On SIGTERM, leave within this many seconds
    /// (`CoordinatorHandle::shutdown_within`): a little less than the pod's
    /// `terminationGracePeriodSeconds`, so the process exits before it is killed.
    #[arg(long, env = "LEAVE_WITHIN_SECS", default_value_t = 25)]
    leave_within_secs: u64,
}

#[derive(Debug, Args)]
struct ProduceArgs {
    /// Entries per second appended to a tenant of weight 1 (others get 2× and 3×).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
}

/// Runs a consumer or the producer until the first SIGINT or SIGTERM. (Public so that
/// the workspace's tests can run this very code as child processes.)
#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        // Colours only on a terminal: logs piped to a file or a collector stay plain.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    // Installed before anything else: a signal from here on ends the run.
    let shutdown = shutdown_signal()?;
    let cli = Cli::parse();
    let tenants: Vec<String> = (1..=cli.tenants)
        .map(|i| format!("tenant-{i:02}"))
        .collect();
    match cli.mode {
        Mode::Consume(args) => consume(args, &cli.redis_url, tenants, shutdown).await,
        Mode::Produce(args) => produce(args, &cli.redis_url, tenants, shutdown).await,
    }
}

/// The keys of one tenant. One hash tag, `{tenant-07}`: a fenced batch is one script,
/// and one script touches the keys of one Redis Cluster slot only.
struct Keys {
    stream: String,
    out: String,
    cursor: String,
}

impl Keys {
    fn of(tenant: &str) -> Self {
        Self {
            stream: format!("stream:{{{tenant}}}"),
            out: format!("out:{{{tenant}}}"),
            cursor: format!("cursor:{{{tenant}}}"),
        }
    }
}

/// What every tenant's callback shares.
struct Shared {
    /// The group's store: leases, and the committed cursors' reads.
    store: RedisStore,
    writer: FencedWriter,
    /// Opens each term's own connection for its blocking `XREAD`s: on the store's
    /// shared connection a blocked read would hold back the lease renewals behind it.
    streams: redis::Client,
}

/// One replica: the group's coordinator, and the HTTP server beside it.
async fn consume(
    args: ConsumeArgs,
    url: &str,
    tenants: Vec<String>,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), Box<dyn std::error::Error>> {
    tokio::pin!(shutdown);
    let replica = args
        .replica
        .unwrap_or_else(|| format!("replica-{}", std::process::id()));
    // The recorder first, before anything records. `metrics-exporter-prometheus` 0.18 is
    // built on the `metrics` facade 0.24, the version Leasehold records into (the
    // workspace's `metrics = "0.24"`): an exporter on another facade version installs its
    // recorder into that version, and then no `leasehold_*` metric shows, with no error.
    // Series not updated for ten minutes are dropped: the `metrics` facade cannot
    // withdraw the series of a tenant that moved away, so without a cap they grow with
    // every tenant this replica ever owned (docs/partitions.md, "How many series").
    let prometheus = PrometheusBuilder::new()
        .idle_timeout(MetricKindMask::ALL, Some(Duration::from_secs(600)))
        .install_recorder()?;
    describe_metrics();
    // Bound before joining: a port in use fails the start, not a running member.
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, args.port))).await?;
    let port = listener.local_addr()?.port();

    let store = RedisStore::connect(url)?;
    let shared = Arc::new(Shared {
        writer: FencedWriter::new(store.clone()),
        streams: redis::Client::open(url)?,
        store: store.clone(),
    });
    let config = GroupConfig::builder(GROUP, tenants, replica.as_str())
        .lease(Duration::from_millis(args.lease_ms))
        // Weights follow the arrival rates the owners report, damped (the defaults:
        // half-life 60 s, and a new term's reports count after one lease).
        .weights_from_loads(LoadDamping::default())
        .build()?;
    let coordinator = Coordinator::new(store, config, move |tenant, lead| {
        serve_tenant(Arc::clone(&shared), tenant, lead)
    })
    .spawn();

    let app = Router::new()
        .route("/livez", get(livez))
        .route("/healthz", get(livez))
        .route("/readyz", get(readyz))
        .route("/owned", get(owned))
        .route("/metrics", get(render_metrics))
        .with_state(Http {
            coordinator: coordinator.clone(),
            metrics: prometheus.clone(),
        });
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = http_stopped.await;
            })
            .await
    });
    // Histograms are drained into their summaries by the upkeep (no HTTP listener of
    // the exporter's own runs it here).
    let upkeep = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            prometheus.run_upkeep();
        }
    });
    println!(
        "{replica}: consuming group '{GROUP}' on {url}; http://127.0.0.1:{port}/owned; Ctrl-C to leave"
    );

    let mut view = coordinator.subscribe();
    let mut error: Option<String> = None;
    loop {
        tokio::select! {
            signal = &mut shutdown => {
                println!(
                    "{replica}: {signal}: leaving; handing {} tenants over",
                    coordinator.status().owned.len()
                );
                break;
            }
            changed = view.changed() => {
                if changed.is_err() {
                    break; // the coordinator stopped
                }
                let now = view.borrow_and_update().error.as_ref().map(describe);
                if now != error {
                    match &now {
                        Some(e) => println!("{replica}: {e}"),
                        None => println!("{replica}: taking part again"),
                    }
                    error = now;
                }
            }
        }
    }
    // Every callback sees its term end (`Shutdown`), hands its cursor off and returns;
    // every lease is released; the others take the tenants at once. A callback still
    // running near the deadline is aborted and its tenant released without a cursor
    // (its successor resumes from the committed offset).
    if !coordinator
        .shutdown_within(Duration::from_secs(args.leave_within_secs))
        .await
    {
        println!("{replica}: the leave outran its deadline; what is left expires within a lease");
    }
    let _ = stop_http.send(());
    http.await??;
    upkeep.abort();
    println!("{replica}: left the group");
    Ok(())
}

/// One tenant, for one term of this replica's ownership.
async fn serve_tenant(shared: Arc<Shared>, tenant: String, lead: Ownership) -> DutyResult {
    let me = lead.replica_id().to_owned();
    let keys = Keys::of(&tenant);
    let fence = lead.fence();

    // (1) Raise both keys' fences to this term's, before reading anything. Until a key
    // has seen this term's fence, a deposed owner's write still carries a fence the key
    // accepts: one sent before a pause or a partition, landing now. If it landed after
    // the read below, the cursor would move under this term, which would process that
    // entry again and output it twice. After the raise it is refused (`Stale`), so what
    // the read finds is final; a deposed write that landed before the raise is part of
    // it, output and cursor together (4).
    let raise = shared.writer.batch().raise(&keys.out).raise(&keys.cursor);
    if let Err(e) = raise.commit(fence).await {
        return deposed(&me, &tenant, &lead, e);
    }
    // (2) Where the previous owner stopped, if it handed that over: offered only when
    // its term was the one just before this and gave its lease back, so it is the
    // committed cursor (no read needed). (3) Else the committed cursor.
    let (mut cursor, from) = match lead.handed_over() {
        Ok(bytes) => (String::from_utf8(bytes.to_vec())?, "handed over".to_owned()),
        Err(why) => (
            committed_cursor(&shared.store, &keys.cursor).await?,
            format!("committed; {why}"),
        ),
    };
    println!("{me}: {tenant}: fence {fence}: resuming after {cursor} ({from})");

    let mut conn = shared
        .streams
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new()
                .set_response_timeout(Some(READ_BLOCK + Duration::from_secs(2))),
        )
        .await?;
    let mut arrivals = Arrivals::default();
    let mut read_failing = false;
    // (4) Process from there, in order.
    'term: loop {
        arrivals
            .report(&mut conn, &keys.stream, &tenant, &lead)
            .await?;
        let read = tokio::select! {
            () = lead.cancelled() => break,
            read = read_after(&mut conn, &keys.stream, &cursor) => read,
        };
        let ids = match read {
            Ok(ids) => {
                read_failing = false;
                ids
            }
            Err(e) => {
                // A read changes nothing: try again in a moment.
                if !read_failing {
                    println!("{me}: {tenant}: reading the stream failed ({e}); retrying");
                }
                read_failing = true;
                tokio::time::sleep(READ_BLOCK).await;
                continue;
            }
        };
        for id in ids {
            // The term may have ended meanwhile (also a local deadline passed in a
            // pause): stop before the side effect, and still hand off below.
            if lead.check().is_err() {
                break 'term;
            }
            // The entry's output (here its id) and the cursor past it: both or neither.
            // Never raced against `cancelled()`: a commit dropped midway may or may not
            // have landed, and the cursor handed off below must be the committed one.
            let step = shared
                .writer
                .batch()
                .rpush(&keys.out, &id)
                .set(&keys.cursor, &id);
            match step.commit(fence).await {
                Ok(()) => {
                    metrics::counter!("stream_consumer_entries_total", "tenant" => tenant.clone())
                        .increment(1);
                    cursor = id;
                }
                Err(e @ FencedWriteError::Stale { .. }) => return deposed(&me, &tenant, &lead, e),
                // No reply (a timeout, a broken connection): the batch may have landed.
                // Its effect is not known, so end the term without handing a cursor
                // off: the next term raises first (refusing this batch if it is still
                // on its way) and reads the cursor, which says whether it landed.
                Err(e) => return Err(e.into()),
            }
        }
    }
    metrics::gauge!("stream_consumer_arrivals_per_second", "tenant" => tenant.clone()).set(0.0);
    // The term is ending. On a planned move (a hand-over, a drain, a shutdown) the
    // cursor goes to the next owner with the release; after a lost lease nothing is
    // handed over and the next owner reads the committed cursor.
    let why = lead
        .end_reason()
        .map_or_else(String::new, |r| r.to_string());
    match lead.hand_off(cursor.clone()) {
        Ok(()) => match lead.successor() {
            Some(next) => println!("{me}: {tenant}: handed off at {cursor} ({why}, to {next})"),
            None => println!("{me}: {tenant}: handed off at {cursor} ({why})"),
        },
        Err(HandOffError::LeaseLost) => {
            println!("{me}: {tenant}: stopped at {cursor} ({why}): lease lost, nothing handed off");
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// `Stale`: a newer term owns the tenant and has written or raised its keys; stop
/// quietly. Any other error ends the term as failed.
fn deposed(me: &str, tenant: &str, lead: &Ownership, e: FencedWriteError) -> DutyResult {
    match e {
        FencedWriteError::Stale { highest, .. } => {
            metrics::counter!("stream_consumer_deposed_total").increment(1);
            println!(
                "{me}: {tenant}: deposed: fence {} refused, the keys have seen {highest}",
                lead.fence()
            );
            Ok(())
        }
        e => Err(e.into()),
    }
}

/// The committed cursor: the id of the last entry whose output landed (`0-0`: none).
async fn committed_cursor(store: &RedisStore, key: &str) -> Result<String, DutyError> {
    let reply = store.query(redis::cmd("GET").arg(key)).await?;
    let committed: Option<String> = redis::from_redis_value(reply)?;
    Ok(committed.unwrap_or_else(|| "0-0".to_owned()))
}

/// The ids of the entries after `cursor`, oldest first (none if nothing arrives within
/// [`READ_BLOCK`]).
async fn read_after(
    conn: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    cursor: &str,
) -> Result<Vec<String>, redis::RedisError> {
    // `[[stream, [[id, [field, value, ...]], ...]]]`, or nil when nothing came.
    type Entries = Vec<(String, redis::Value)>;
    let reply: Option<Vec<(String, Entries)>> = redis::cmd("XREAD")
        .arg("COUNT")
        .arg(READ_COUNT)
        .arg("BLOCK")
        .arg(READ_BLOCK.as_millis() as u64)
        .arg("STREAMS")
        .arg(stream)
        .arg(cursor)
        .query_async(conn)
        .await?;
    Ok(reply
        .into_iter()
        .flatten()
        .flat_map(|(_, entries)| entries)
        .map(|(id, _fields)| id)
        .collect())
}

/// Measures a tenant's arrival rate: entries appended to its stream per second.
///
/// Reported as the tenant's load, not the rate this owner processes: right after a move
/// the new owner catches up with the backlog that built up while nobody owned the
/// tenant, several times its arrival rate for a while, and reported, that would look
/// like a step in load and move tenants for nothing. (The group also ignores a new
/// term's reports for its first lease, `LoadDamping::warm_up`, but the arrival rate
/// does not need that.)
#[derive(Default)]
struct Arrivals {
    /// The stream's length at the last sample, and when.
    last: Option<(Instant, u64)>,
}

impl Arrivals {
    /// Samples `XLEN` once per [`REPORT_EVERY`] and reports the rate since the last
    /// sample. (These streams are never trimmed; a trimmed stream would sample
    /// `XINFO STREAM`'s `entries-added`, which counts every entry ever appended.)
    async fn report(
        &mut self,
        conn: &mut redis::aio::MultiplexedConnection,
        stream: &str,
        tenant: &str,
        lead: &Ownership,
    ) -> DutyResult {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|(at, _)| now.duration_since(at) < REPORT_EVERY)
        {
            return Ok(());
        }
        let Ok(len) = redis::cmd("XLEN")
            .arg(stream)
            .query_async::<u64>(conn)
            .await
        else {
            return Ok(()); // measured at the next read
        };
        if let Some((at, before)) = self.last {
            let rate = len.saturating_sub(before) as f64 / now.duration_since(at).as_secs_f64();
            lead.report_load(rate)?;
            metrics::gauge!("stream_consumer_arrivals_per_second", "tenant" => tenant.to_owned())
                .set(rate);
        }
        self.last = Some((now, len));
        Ok(())
    }
}

/// The HTTP server's state: the coordinator and the metrics recorder.
#[derive(Clone)]
struct Http {
    coordinator: CoordinatorHandle<RedisStore>,
    metrics: PrometheusHandle,
}

/// Liveness: 200 while the coordinator runs; 503 once it has stopped (restart me).
/// Redis being unreachable is not a reason to restart: the replica waits for it.
async fn livez(State(http): State<Http>) -> impl IntoResponse {
    if http.coordinator.is_running() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stopped\n")
    }
}

/// Readiness in the group's sense: 200 once this replica holds its share of the
/// tenants; 503 with the reason while it joins, settles, takes its share, is drained
/// or leaves (an orchestrator replaces the next replica only once this one is ready).
async fn readyz(State(http): State<Http>) -> impl IntoResponse {
    match http.coordinator.readiness() {
        Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

/// The tenants this replica owns, as a JSON list.
async fn owned(State(http): State<Http>) -> Json<Vec<String>> {
    Json(http.coordinator.status().owned.iter().cloned().collect())
}

/// Every metric, Leasehold's and this example's, in Prometheus's text format.
async fn render_metrics(State(http): State<Http>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        http.metrics.render(),
    )
}

/// The help texts of this example's own metrics (Leasehold describes its own).
fn describe_metrics() {
    metrics::describe_counter!(
        "stream_consumer_entries_total",
        "Entries processed (output and cursor committed), by tenant"
    );
    metrics::describe_gauge!(
        "stream_consumer_arrivals_per_second",
        "Entries appended to the tenant's stream per second, as reported as its load"
    );
    metrics::describe_counter!(
        "stream_consumer_deposed_total",
        "Terms that found a newer term had written or raised their keys"
    );
}

/// The producer: appends `n=<seq>` to every tenant's stream at its rate until the first
/// SIGINT or SIGTERM, then prints how many entries each stream got.
async fn produce(
    args: ProduceArgs,
    url: &str,
    tenants: Vec<String>,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.rate.is_finite() && args.rate > 0.0) {
        return Err(format!("--rate must be a positive number, not {}", args.rate).into());
    }
    let client = redis::Client::open(url)?;
    let (stop, stopped) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, tenant) in tenants.into_iter().enumerate() {
        let rate = args.rate * (1 + i % 3) as f64;
        let client = client.clone();
        let mut stopped = stopped.clone();
        tasks.spawn(async move {
            let stream = Keys::of(&tenant).stream;
            let mut conn = None;
            let mut appended = 0_u64;
            let mut failing = false;
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped.wait_for(|s| *s) => break,
                    _ = tick.tick() => {}
                }
                let result = match &mut conn {
                    Some(c) => append(c, &stream, appended + 1).await,
                    None => match client.get_multiplexed_async_connection().await {
                        Ok(mut c) => {
                            let r = append(&mut c, &stream, appended + 1).await;
                            conn = Some(c);
                            r
                        }
                        Err(e) => Err(e),
                    },
                };
                match result {
                    Ok(()) => {
                        appended += 1;
                        failing = false;
                    }
                    Err(e) => {
                        if !failing {
                            println!("producer: {tenant}: waiting for Redis ({e})");
                        }
                        failing = true;
                    }
                }
            }
            (tenant, appended)
        });
    }
    println!(
        "producer: appending to {} streams on {url}; Ctrl-C to stop",
        tasks.len()
    );
    let signal = shutdown.await;
    println!("producer: {signal}: stopping");
    let _ = stop.send(true);
    let mut totals = tasks.join_all().await;
    totals.sort();
    for (tenant, appended) in totals {
        println!("producer: {tenant}: appended {appended}");
    }
    Ok(())
}

/// `XADD stream * n <seq>`. (A reply lost to a broken connection may leave the entry
/// appended and uncounted: the consumers' outputs follow the stream, not the count.)
async fn append(
    conn: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    seq: u64,
) -> Result<(), redis::RedisError> {
    redis::cmd("XADD")
        .arg(stream)
        .arg("*")
        .arg("n")
        .arg(seq)
        .query_async::<String>(conn)
        .await
        .map(drop)
}

/// What keeps this replica from taking part: Redis out of reach (retried at every
/// tick), or a conflict someone has to resolve.
fn describe(e: &PartitionsError) -> String {
    match e {
        PartitionsError::Store(e) => format!("waiting for Redis ({})", ErrorChain(e)),
        other => format!("not claiming tenants: {}", ErrorChain(other)),
    }
}

/// Resolves with the signal's name on the first SIGINT (Ctrl-C) or SIGTERM. On Unix
/// the handlers are installed by this call, not on the first poll.
fn shutdown_signal() -> std::io::Result<impl Future<Output = &'static str>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => "SIGINT",
                _ = terminate.recv() => "SIGTERM",
            }
        })
    }
    #[cfg(not(unix))]
    {
        let ctrl_c = tokio::signal::ctrl_c();
        Ok(async move {
            let _ = ctrl_c.await;
            "Ctrl-C"
        })
    }
}
