//! The fleet demo: replicas share partitions through fenced leases; one crashes, one
//! joins, one leaves gracefully, and every hand-over is measured.
//!
//! ```text
//! cargo run --release -p leasehold-demo                 # Redis if it can, else in memory
//! cargo run --release -p leasehold-demo -- --plot fleet.svg
//! cargo run --release -p leasehold-demo -- --memory --no-tui --lease-ms 500
//! ```
//!
//! Store: `--memory`, else `REDIS_URL` / `--redis-url`, else a private `redis-server` on a
//! free loopback port, else the embedded in-memory store. Replicas are tasks in this
//! process either way; with Redis each has its own connection pool, so they meet only
//! through the server. `RUST_LOG` (e.g. `RUST_LOG=warn`) shows the library's log lines
//! on stderr.
// The demo's backend choice holds a coordinator future on either store: its layout is
// deeper than the default limit allows once every group operation runs through
// `Protocol::run`.
#![recursion_limit = "256"]

mod backend;
mod plot;
mod runner;
mod state;
mod view;

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// The error type of everything here: the demo reports and exits.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Shows partitions moving across a fleet of replicas: start, crash, join, leave.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Replicas started at first (the script then kills one, adds one, stops one).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=64))]
    replicas: u16,
    /// Partitions shared by the fleet.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=4096))]
    partitions: u16,
    /// Lease of each partition, in milliseconds: a crashed replica's partitions wait
    /// for it to expire.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    lease_ms: u64,
    /// Pause after each hand-over before the next event, in milliseconds.
    #[arg(long, default_value_t = 3000)]
    script_delay_ms: u64,
    /// Redis to use instead of starting a private redis-server.
    #[arg(long, env = "REDIS_URL")]
    redis_url: Option<String>,
    /// Use the embedded in-memory store even if Redis is available (wins over
    /// `REDIS_URL`).
    #[arg(long)]
    memory: bool,
    /// Print plain progress lines instead of redrawing the screen (automatic when
    /// stdout is not a terminal).
    #[arg(long)]
    no_tui: bool,
    /// Also write the ownership timeline as an SVG chart to this file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The library logs through `tracing`: `RUST_LOG=warn` (or any filter) prints its
    // lines on stderr. Nothing by default, so that the live view stays clean.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .init();
    let tui = !args.no_tui
        && std::io::stdout().is_terminal()
        && std::env::var_os("TERM").is_some_and(|t| t != "dumb");
    let settings = runner::Settings {
        replicas: args.replicas.into(),
        partitions: args.partitions.into(),
        lease: Duration::from_millis(args.lease_ms),
        script_delay: Duration::from_millis(args.script_delay_ms),
        tui,
        plot: args.plot,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasehold-demo: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let demo = async {
            let chosen = backend::choose(
                args.memory,
                args.redis_url,
                Duration::from_millis(args.lease_ms),
            )
            .await?;
            runner::run(settings, chosen).await
        };
        tokio::select! {
            r = demo => r,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        }
    });
    if tui {
        print!("\x1b[?25h");
    }
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("leasehold-demo: some hand-over did not converge");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("leasehold-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
