//! Requests routed to the owner of their tenant: replicas of a partition group serve
//! the tenants they own over HTTP and redirect the rest, and a client that is not a
//! member sends each request straight to the owner its `Router` names.
//!
//! Each `serve` process is a replica of the group `tenants` (partitions `tenant-00`,
//! `tenant-01`, ...) that advertises `127.0.0.1:<port>` (`GroupConfigBuilder::advertise`)
//! and answers `GET /tenants/{tenant}/...` (any path below the tenant):
//!
//! - `200` with `{"tenant", "replica", "fence"}` if it owns the tenant now
//!   (`CoordinatorHandle::owns`: local, no I/O);
//! - `421 Misdirected Request` with the owner's address in `x-leasehold-owner` (and
//!   `{"owner": ...}`) if another replica owns it, as the replica's own `Router` says
//!   (the request is counted, `CoordinatorHandle::misrouted`);
//! - `503` with `retry-after` if no owner is known (between a release and the next
//!   claim: it waits up to a second for one first);
//! - `404` for a tenant that is not one of the group's.
//!
//! It also serves `/livez` and `/readyz` (200 once it holds its share:
//! `CoordinatorHandle::readiness`). The first Ctrl-C (SIGINT) or SIGTERM leaves
//! gracefully: the tenants are released and taken by the others at once, and the
//! replica keeps answering (with redirects to the new owners) until its router has
//! heard of every new owner, then stops and exits 0.
//!
//! The `client` keeps a `Router` of the group (one pub/sub subscription, checked once a
//! minute: a still group costs it nothing else), picks the tenants in turn at a steady
//! rate, looks each one's owner up (`Router::owner`: a map read) and sends the request
//! there, following at most one redirect. At the end it prints one JSON line: `requests`,
//! `ok` (served by the first replica asked), `redirected` (served after one redirect),
//! `unavailable` (no owner known, a `503`, or the named owner not running: a killed
//! owner's tenants until its lease runs out; `unreachable` counts those last ones
//! apart) and `failed` (anything else: not served although the tenant had an owner).
//!
//! ```text
//! cargo run --release --example router -- serve --replica replica-a --port 8081
//! cargo run --release --example router -- serve --replica replica-b --port 8082
//! cargo run --release --example router -- serve --replica replica-c --port 8083
//! curl -si localhost:8081/tenants/tenant-07/orders
//! cargo run --release --example router -- client --requests-per-s 200 --seconds 30
//! ```
//!
//! Kill a replica, start another or stop one with Ctrl-C while the client runs: its
//! `failed` stays 0. Flags (or environment): `--redis-url` (`REDIS_URL`, default
//! `redis://127.0.0.1:6379/`), `--tenants` (default 64); for `serve`: `--replica`
//! (`REPLICA_ID`, default `replica-<pid>`), `--port` (`HTTP_PORT`, default 8080; it
//! listens on 127.0.0.1 only, the address it advertises), `--lease-ms` (default 3000).
//! The workspace's `tests/router_example.rs` runs three replicas and a client through a
//! kill, a join and a graceful leave, and `leasehold-bench route` measures the same code
//! with up to a thousand routers.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router as HttpRouter};
use clap::{Args, Parser, Subcommand};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use leasehold_partitions::ErrorChain;
use leasehold_partitions::{
    Coordinator, CoordinatorHandle, GroupConfig, Ownership, PartitionsError, RedisStore, Route,
    Router,
};
use serde_json::json;
use tokio::time::Instant;

/// The partition group the replicas form.
pub const GROUP: &str = "tenants";
/// The header of a `421` that names the owner's address.
pub const OWNER_HEADER: &str = "x-leasehold-owner";
/// How long a replica asked for a tenant that nobody owns now, or that its router names
/// it the owner of before its term has started here, waits for that to settle before it
/// answers `503`.
const SETTLE: Duration = Duration::from_secs(1);
/// How long a leaving replica keeps redirecting at most, after its leases are released,
/// while its tenants find their new owners.
const DRAIN: Duration = Duration::from_secs(10);
/// After its router has heard of every new owner: a moment more for the clients' routers,
/// told by the same notices.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// A client request's limit (each of the two, when redirected).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection's limit.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How many failures' reasons a client keeps for its summary.
const FAILURES_KEPT: usize = 10;

/// One process: a replica serving its tenants, or a client.
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
    /// How many tenants (`tenant-00`, `tenant-01`, ...).
    #[arg(long, global = true, default_value_t = 64)]
    tenants: usize,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Serve the tenants this replica owns; redirect the rest.
    Serve(ServeArgs),
    /// Send requests to the tenants' owners at a steady rate.
    Client(ClientArgs),
}

/// `serve`'s flags.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// This replica's id.
    #[arg(long, env = "REPLICA_ID")]
    pub replica: Option<String>,
    /// The HTTP port, on 127.0.0.1 (the address it advertises).
    #[arg(long, env = "HTTP_PORT", default_value_t = 8080)]
    pub port: u16,
    /// Lease length in milliseconds.
    #[arg(long, default_value_t = 3000)]
    pub lease_ms: u64,
}

/// `client`'s flags.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Requests per second, over the tenants in turn.
    #[arg(long, default_value_t = 100.0)]
    pub requests_per_s: f64,
    /// How long to send them (or until Ctrl-C).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
}

/// Runs a replica or a client until the first SIGINT or SIGTERM (the client also until
/// its time is up). (Public so that the workspace's tests can run this very code as
/// child processes.)
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
    let tenants = tenants(cli.tenants);
    match cli.mode {
        Mode::Serve(args) => serve(args, &cli.redis_url, tenants, shutdown).await,
        Mode::Client(args) => client(args, &cli.redis_url, tenants, shutdown).await,
    }
}

/// The group's partitions: `tenant-00`, `tenant-01`, ...
pub fn tenants(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tenant-{i:02}")).collect()
}

/// What the HTTP handlers share.
#[derive(Clone)]
struct Http {
    coordinator: CoordinatorHandle<RedisStore>,
    /// The group's owners, to redirect to. On the coordinator's store: the two share
    /// its one subscription.
    router: Arc<Router>,
    replica: Arc<str>,
    tenants: Arc<HashSet<String>>,
}

/// One replica: the group's coordinator, its router, and the HTTP server.
pub async fn serve(
    args: ServeArgs,
    url: &str,
    tenants: Vec<String>,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), Box<dyn std::error::Error>> {
    tokio::pin!(shutdown);
    let replica = args
        .replica
        .unwrap_or_else(|| format!("replica-{}", std::process::id()));
    // Bound before joining: a port in use fails the start, not a running member.
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port))).await?;
    let address = listener.local_addr()?.to_string();

    let store = RedisStore::connect(url)?;
    let config = GroupConfig::builder(GROUP, tenants.clone(), replica.as_str())
        .lease(Duration::from_millis(args.lease_ms))
        // Stored with this replica's entry: the claim's move notices carry it to every
        // router, and a full read finds it.
        .advertise(address.as_str())
        .build()?;
    let coordinator = Coordinator::new(
        store,
        config,
        |_tenant: String, lead: Ownership| async move {
            // The tenant's work would run here; requests only ask `owns`.
            lead.cancelled().await;
            Ok(())
        },
    )
    .spawn();
    let router = Arc::new(coordinator.admin().router());

    let http = Http {
        coordinator: coordinator.clone(),
        router: Arc::clone(&router),
        replica: replica.as_str().into(),
        tenants: Arc::new(tenants.into_iter().collect()),
    };
    let app = HttpRouter::new()
        .route("/tenants/{tenant}", get(tenant))
        .route("/tenants/{tenant}/{*rest}", get(tenant))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(http);
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = http_stopped.await;
            })
            .await
    });
    println!(
        "{replica}: serving group '{GROUP}' on {url} at http://{address}/tenants/<tenant>/...; \
         Ctrl-C to leave"
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
    let held = coordinator.status().owned;
    // Every lease released: the others claim the tenants at once.
    coordinator.shutdown().await;
    // Requests still come, from clients whose routers have not heard of the new owners
    // yet: keep redirecting them until this replica's router has heard of every one.
    let drained = tokio::time::timeout(DRAIN, async {
        let mut changes = router.changes();
        while held.iter().any(|t| {
            router
                .owner(t)
                .is_none_or(|route| route.replica() == replica)
        }) {
            if changes
                .recv()
                .await
                .is_err_and(|e| matches!(e, tokio::sync::broadcast::error::RecvError::Closed))
            {
                break;
            }
        }
    })
    .await;
    if drained.is_ok() {
        tokio::time::sleep(DRAIN_GRACE).await;
    }
    let _ = stop_http.send(());
    server.await??;
    router.shutdown().await;
    println!("{replica}: left the group");
    Ok(())
}

/// `GET /tenants/{tenant}/...`: served here, redirected to the owner, or `503` while
/// the tenant has none.
async fn tenant(State(http): State<Http>, Path(params): Path<HashMap<String, String>>) -> Response {
    let tenant = params.get("tenant").map_or("", String::as_str);
    if !http.tenants.contains(tenant) {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": "no such tenant", "tenant": tenant })),
        )
            .into_response();
    }
    // Subscribed before the first look, so that no change is missed while waiting.
    let mut changes = http.router.changes();
    let mut view = http.coordinator.subscribe();
    let until = Instant::now() + SETTLE;
    let mut stopped = false;
    loop {
        if let Some(fence) = http.coordinator.owns(tenant) {
            return Json(json!({
                "tenant": tenant,
                "replica": &*http.replica,
                "fence": fence.get(),
            }))
            .into_response();
        }
        // Claimed here and not running yet, or ending here: `owned` holds a partition
        // from the claim that won it until its release. Its route may still name the
        // previous owner (the claim's notice not heard yet), which would send the
        // client back there: wait for the term to start, or to end, first.
        let settling = view.borrow().owned.contains(tenant);
        let late = Instant::now() >= until;
        match http.router.owner(tenant) {
            // Another replica owns it: send the client there.
            Some(route) if route.replica() != &*http.replica && (!settling || late) => {
                http.coordinator.misrouted(tenant);
                let Some(owner) = route.address() else {
                    return unavailable("the owner advertises no address");
                };
                let mut response = (
                    StatusCode::MISDIRECTED_REQUEST,
                    Json(json!({ "tenant": tenant, "owner": owner, "replica": route.replica() })),
                )
                    .into_response();
                if let Ok(value) = HeaderValue::from_str(owner) {
                    response.headers_mut().insert(OWNER_HEADER, value);
                }
                return response;
            }
            _ if late => break,
            // Named here but not running here: a term whose notice came before its
            // start here, or one ending here (released, not yet claimed elsewhere). Or
            // no owner now. Either settles within moments: wait for it.
            _ => {}
        }
        tokio::select! {
            changed = changes.recv() => {
                if matches!(changed, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                    break;
                }
            }
            // Once the coordinator has stopped (this replica leaving), only the router
            // changes.
            changed = view.changed(), if !stopped => stopped = changed.is_err(),
            () = tokio::time::sleep_until(until) => {}
        }
    }
    http.coordinator.misrouted(tenant);
    unavailable("no owner now")
}

/// `503` with a `retry-after` of one second.
fn unavailable(why: &str) -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "error": why })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Liveness: 200 while the coordinator runs.
async fn livez(State(http): State<Http>) -> impl IntoResponse {
    if http.coordinator.is_running() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stopped\n")
    }
}

/// Readiness in the group's sense: 200 once this replica holds its share.
async fn readyz(State(http): State<Http>) -> impl IntoResponse {
    match http.coordinator.readiness() {
        Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

/// The client: a router of the group and a steady load through it.
async fn client(
    args: ClientArgs,
    url: &str,
    tenants: Vec<String>,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.requests_per_s.is_finite() && args.requests_per_s > 0.0) {
        return Err(format!(
            "--requests-per-s must be positive, not {}",
            args.requests_per_s
        )
        .into());
    }
    tokio::pin!(shutdown);
    let router = router_of(url, "leasehold-router")?;
    println!("client: reading the owners of group '{GROUP}' on {url}");
    tokio::select! {
        () = router.wait_until_ready() => {}
        signal = &mut shutdown => {
            println!("client: {signal}: stopping before the first request");
            return Ok(());
        }
    }
    println!(
        "client: {} tenants routed; sending {} requests per second for {} s",
        router.status().routes,
        args.requests_per_s,
        args.seconds
    );
    let tally = Arc::new(Tally::default());
    let until = async {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(args.seconds)) => {}
            signal = &mut shutdown => println!("client: {signal}: stopping"),
        }
    };
    let router = Arc::new(router);
    load(
        std::slice::from_ref(&router),
        &Caller::new(),
        &tenants,
        args.requests_per_s,
        until,
        &tally,
    )
    .await;
    router.shutdown().await;
    println!("{}", tally.summary());
    Ok(())
}

/// A router of the group on a store of its own, named `client_name` in `CLIENT LIST`,
/// whose subscription is checked once a minute: it keeps no lease, only listens.
pub fn router_of(url: &str, client_name: &str) -> Result<Router, Box<dyn std::error::Error>> {
    let store = RedisStore::builder(url)
        .subscription_ping(Duration::from_secs(60))
        .client_name(client_name)
        .build()?;
    Ok(Router::new(store, GROUP)?)
}

/// Sends `rate` requests per second until `until` resolves, the `i`-th to tenant
/// `i mod tenants` through router `i mod routers`, each on a task of its own; then
/// waits for the requests under way and returns.
pub async fn load(
    routers: &[Arc<Router>],
    caller: &Caller,
    tenants: &[String],
    rate: f64,
    until: impl Future<Output = ()>,
    tally: &Arc<Tally>,
) {
    tokio::pin!(until);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    // Behind (a busy machine): catch up in a burst, so the rate holds on average.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut running = tokio::task::JoinSet::new();
    let mut i = 0_usize;
    loop {
        tokio::select! {
            () = &mut until => break,
            _ = tick.tick() => {}
        }
        let router = Arc::clone(&routers[i % routers.len()]);
        let tenant = tenants[i % tenants.len()].clone();
        let caller = caller.clone();
        let tally = Arc::clone(tally);
        running.spawn(async move {
            let outcome = caller.call(&router, &tenant).await;
            tally.add(&outcome);
        });
        // Reap the finished ones as we go: the set stays as small as what is under way.
        while running.try_join_next().is_some() {}
        i += 1;
    }
    while running.join_next().await.is_some() {}
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Served by the replica the router named.
    Ok,
    /// Served by the replica the first one redirected to.
    Redirected,
    /// Not served: no owner now.
    Unavailable(Unavailable),
    /// Not served although the tenant had an owner: why.
    Failed(String),
}

/// Why nobody served a request, with nothing wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// The router knows no owner.
    NoOwner,
    /// The replica asked answered `503`: no owner now (between a release and the next
    /// claim).
    NoOwnerNow,
    /// Nothing answers at the owner's address (refused, or reset mid-request): the
    /// owner is not running, and holds the tenant until its lease runs out.
    Unreachable,
}

/// The HTTP client: pooled HTTP/1 connections, kept alive, to every replica.
#[derive(Clone, Debug)]
pub struct Caller {
    http: Client<HttpConnector, Empty<Bytes>>,
    /// How long a request whose tenant has no known owner waits for one.
    await_route: Duration,
}

impl Default for Caller {
    fn default() -> Self {
        Self::new()
    }
}

/// One reply: its status and the owner it names, if a redirect.
type Reply = (StatusCode, Option<String>);

impl Caller {
    /// A client with a pool of connections per replica.
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Self {
            http,
            await_route: Duration::ZERO,
        }
    }

    /// Has a request whose tenant has no known owner wait up to `wait` for the router
    /// to learn one (a claim in flight) before it counts as unavailable. Default: no
    /// wait.
    pub fn await_route(mut self, wait: Duration) -> Self {
        self.await_route = wait;
        self
    }

    /// The route of `tenant`, waiting up to [`await_route`](Self::await_route) for one.
    async fn route(&self, router: &Router, tenant: &str) -> Option<Route> {
        if self.await_route.is_zero() {
            return router.owner(tenant);
        }
        // Subscribed before the look, so that no change is missed.
        let mut changes = router.changes();
        if let Some(route) = router.owner(tenant) {
            return Some(route);
        }
        tokio::time::timeout(self.await_route, async {
            loop {
                match changes.recv().await {
                    Ok(change) if change.partition == tenant && change.route.is_some() => {
                        return change.route;
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if let Some(route) = router.owner(tenant) {
                            return Some(route);
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
        .await
        .ok()
        .flatten()
    }

    /// Sends a request for `tenant` to its owner as `router` names it, following at
    /// most one redirect.
    pub async fn call(&self, router: &Router, tenant: &str) -> Outcome {
        let Some(route) = self.route(router, tenant).await else {
            return Outcome::Unavailable(Unavailable::NoOwner);
        };
        let Some(address) = route.address() else {
            return Outcome::Failed(format!(
                "{tenant}: its owner {} advertises no address",
                route.replica()
            ));
        };
        match self.get(address, tenant).await {
            Ok((StatusCode::OK, _)) => Outcome::Ok,
            Ok((StatusCode::MISDIRECTED_REQUEST, Some(owner))) => {
                match self.get(&owner, tenant).await {
                    Ok((StatusCode::OK, _)) => Outcome::Redirected,
                    Ok((StatusCode::SERVICE_UNAVAILABLE, _)) => {
                        Outcome::Unavailable(Unavailable::NoOwnerNow)
                    }
                    Ok((status, _)) => Outcome::Failed(format!(
                        "{tenant}: {address} redirected to {owner}, which answered {status}"
                    )),
                    Err(Fault::Unreachable) => Outcome::Unavailable(Unavailable::Unreachable),
                    Err(Fault::Other(e)) => {
                        Outcome::Failed(format!("{tenant}: {address} redirected to {owner}: {e}"))
                    }
                }
            }
            Ok((StatusCode::SERVICE_UNAVAILABLE, _)) => {
                Outcome::Unavailable(Unavailable::NoOwnerNow)
            }
            Ok((status, _)) => Outcome::Failed(format!(
                "{tenant}: {address} ({}) answered {status}",
                route.replica()
            )),
            Err(Fault::Unreachable) => Outcome::Unavailable(Unavailable::Unreachable),
            Err(Fault::Other(e)) => {
                Outcome::Failed(format!("{tenant}: {address} ({}): {e}", route.replica()))
            }
        }
    }

    /// `GET http://{address}/tenants/{tenant}/orders`, its body read to the end (so
    /// that the connection goes back to the pool).
    async fn get(&self, address: &str, tenant: &str) -> Result<Reply, Fault> {
        let request = Request::get(format!("http://{address}/tenants/{tenant}/orders"))
            .body(Empty::new())
            .map_err(|e| Fault::Other(e.to_string()))?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(Fault::of)?;
            let status = response.status();
            let owner = response
                .headers()
                .get(OWNER_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            response
                .into_body()
                .collect()
                .await
                .map_err(|e| Fault::Other(e.to_string()))?;
            Ok((status, owner))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(Fault::Other(format!("no reply within {REQUEST_TIMEOUT:?}"))))
    }
}

/// A request that got no reply.
enum Fault {
    /// Nothing listens at the address, or the connection broke mid-request.
    Unreachable,
    Other(String),
}

impl Fault {
    fn of(e: hyper_util::client::legacy::Error) -> Self {
        if e.is_connect() {
            return Self::Unreachable;
        }
        // A connection the server's end closed or reset (it was killed) under the
        // request.
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            if let Some(e) = cause.downcast_ref::<hyper::Error>()
                && (e.is_incomplete_message() || e.is_canceled())
            {
                return Self::Unreachable;
            }
            if let Some(e) = cause.downcast_ref::<std::io::Error>()
                && matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::BrokenPipe
                )
            {
                return Self::Unreachable;
            }
            source = cause.source();
        }
        Self::Other(e.to_string())
    }
}

/// The client's counts, shared by its requests.
#[derive(Debug, Default)]
pub struct Tally {
    ok: AtomicU64,
    redirected: AtomicU64,
    no_owner: AtomicU64,
    no_owner_now: AtomicU64,
    unreachable: AtomicU64,
    failed: AtomicU64,
    /// The first failures' reasons.
    failures: Mutex<Vec<String>>,
}

/// A [`Tally`] read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every request.
    pub requests: u64,
    /// Served by the replica the router named.
    pub ok: u64,
    /// Served after one redirect.
    pub redirected: u64,
    /// Not served: no owner known, a `503`, or the owner not running.
    pub unavailable: u64,
    /// Of `unavailable`: the owner not running.
    pub unreachable: u64,
    /// Not served although the tenant had an owner.
    pub failed: u64,
}

impl Tally {
    /// Counts one request's outcome.
    pub fn add(&self, outcome: &Outcome) {
        let counter = match outcome {
            Outcome::Ok => &self.ok,
            Outcome::Redirected => &self.redirected,
            Outcome::Unavailable(Unavailable::NoOwner) => &self.no_owner,
            Outcome::Unavailable(Unavailable::NoOwnerNow) => &self.no_owner_now,
            Outcome::Unavailable(Unavailable::Unreachable) => &self.unreachable,
            Outcome::Failed(why) => {
                let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
                if failures.len() < FAILURES_KEPT {
                    failures.push(why.clone());
                }
                &self.failed
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn counts(&self) -> Counts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let unreachable = get(&self.unreachable);
        let unavailable = get(&self.no_owner) + get(&self.no_owner_now) + unreachable;
        let (ok, redirected, failed) = (get(&self.ok), get(&self.redirected), get(&self.failed));
        Counts {
            requests: ok + redirected + unavailable + failed,
            ok,
            redirected,
            unavailable,
            unreachable,
            failed,
        }
    }

    /// The first failures' reasons.
    pub fn failures(&self) -> Vec<String> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The client's summary line: the counts, and the first failures' reasons.
    pub fn summary(&self) -> String {
        let c = self.counts();
        json!({
            "requests": c.requests,
            "ok": c.ok,
            "redirected": c.redirected,
            "unavailable": c.unavailable,
            "unreachable": c.unreachable,
            "failed": c.failed,
            "failures": self.failures(),
        })
        .to_string()
    }
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
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = &'static str>> {
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
