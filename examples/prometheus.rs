//! A replica that campaigns for one duty and serves its Leasehold metrics to Prometheus.
//!
//! The library only records metrics through the `metrics` facade; the application picks
//! the exporter. Here `metrics-exporter-prometheus` serves them on
//! `http://<host>:<port>/metrics` (every path answers), with histogram buckets for the
//! two latency histograms so they can be aggregated across replicas. Run three replicas
//! of one duty and scrape them:
//!
//! ```text
//! cargo run --release --example prometheus -- --replica replica-a --port 9464
//! cargo run --release --example prometheus -- --replica replica-b --port 9465
//! cargo run --release --example prometheus -- --replica replica-c --port 9466
//! curl -s localhost:9464/metrics localhost:9465/metrics localhost:9466/metrics | grep '^leasehold_is_leader'
//! ```
//!
//! Exactly one of them reports `leasehold_is_leader{duty="scheduler",...} 1`. Stop the
//! leader (the first Ctrl-C or SIGTERM releases the lease at once) and another one takes
//! over; while Redis cannot be reached a replica says "waiting for Redis (...)" once for
//! each new error. The alerts to build on these metrics are in `docs/operations.md`.
//!
//! Flags (or environment): `--replica` (`REPLICA_ID`, default `replica-<pid>`), `--duty`
//! (default `scheduler`), `--port` (`METRICS_PORT`, default 9464; listens on every
//! interface), `--redis-url` (`REDIS_URL`, default `redis://127.0.0.1:6379/`),
//! `--lease-ms` (default 3000).

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use leasehold_election::{
    Elector, ElectorConfig, ErrorChain, Leadership, RedisStore, metrics as m,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// One replica of a duty, with a Prometheus endpoint.
#[derive(Debug, Parser)]
struct Args {
    /// This replica's id.
    #[arg(long, env = "REPLICA_ID")]
    replica: Option<String>,
    /// The duty to campaign for.
    #[arg(long, default_value = "scheduler")]
    duty: String,
    /// Port of the `/metrics` endpoint.
    #[arg(long, env = "METRICS_PORT", default_value_t = 9464)]
    port: u16,
    /// The Redis server.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379/")]
    redis_url: String,
    /// Lease length in milliseconds.
    #[arg(long, default_value_t = 3000)]
    lease_ms: u64,
}

/// Runs the replica until the first SIGINT or SIGTERM. (Public so that the workspace's
/// `tests/prometheus_metrics.rs` and `tests/examples.rs` can run this very code as child
/// processes.)
#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        // Colours only on a terminal: logs piped to a file or a collector stay plain.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    // One shutdown future for the whole run, its handlers installed before anything
    // else: a signal that arrives at any point from here on ends the loop below.
    let shutdown = shutdown_signal()?;
    tokio::pin!(shutdown);
    let args = Args::parse();
    let replica = args
        .replica
        .unwrap_or_else(|| format!("replica-{}", std::process::id()));

    // One recorder per process, installed before anything records: it also starts the
    // HTTP listener on this runtime.
    let listen = SocketAddr::from((Ipv4Addr::UNSPECIFIED, args.port));
    PrometheusBuilder::new()
        .with_http_listener(listen)
        .set_buckets_for_metric(
            Matcher::Full(m::RENEW_RTT.to_owned()),
            &[
                0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            ],
        )?
        .set_buckets_for_metric(
            Matcher::Full(m::TIME_TO_LEADER.to_owned()),
            &[
                0.001, 0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ],
        )?
        .install()?;

    let store = RedisStore::connect(&args.redis_url)?;
    let config = ElectorConfig::builder(args.duty.as_str(), replica.as_str())
        .lease(Duration::from_millis(args.lease_ms))
        .build()?;
    let elector = Elector::new(store, config, |lead: Leadership| async move {
        println!("{}: leading with fence {}", lead.replica_id(), lead.fence());
        lead.cancelled().await;
        Ok(())
    })
    .spawn();
    println!(
        "{replica}: campaigning for {:?}; metrics on http://127.0.0.1:{}/metrics; Ctrl-C to leave",
        args.duty, args.port
    );

    let mut status = elector.subscribe();
    let mut error: Option<String> = None;
    loop {
        tokio::select! {
            signal = &mut shutdown => {
                println!("{replica}: {signal}: releasing the lease");
                break;
            }
            changed = status.changed() => {
                if changed.is_err() {
                    break;
                }
                let now = status.borrow_and_update().last_error.as_ref().map(|e| ErrorChain(e).to_string());
                if now != error {
                    match &now {
                        Some(e) => println!("{replica}: waiting for Redis ({e})"),
                        None => println!("{replica}: Redis is reachable"),
                    }
                    error = now;
                }
            }
        }
    }
    elector.shutdown().await;
    println!("{replica}: released");
    Ok(())
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
