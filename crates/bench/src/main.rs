//! `leasehold-bench`: measures Leasehold's failover and hand-over across processes.
//!
//! Each run puts the leader in a child OS process (this binary, re-executed in its
//! hidden `child` mode) and the follower in this process, on a fresh duty:
//!
//! - `failover`: SIGKILL the leader at a random point of its renew cycle; report the
//!   time until the follower leads and the overshoot beyond the lease's expiry;
//! - `handover`: SIGTERM the leader, which shuts down gracefully (release plus
//!   notification); report the time until the follower leads.
//!
//! Progress goes to stderr; the last line of stdout is one JSON report.
//!
//! ```text
//! leasehold-bench failover --lease-ms 1000 --runs 10 [--redis-url URL]
//! leasehold-bench handover --lease-ms 1000 --runs 10 [--redis-url URL]
//! ```

mod child;
mod event;
mod failover;
mod follower;
mod handover;
mod harness;
mod leader;
mod setup;
mod stats;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;
use tracing_subscriber::EnvFilter;

use crate::harness::Harness;
use crate::setup::BoxError;

/// Measures Leasehold's failover and hand-over across processes.
#[derive(Debug, Parser)]
#[command(name = "leasehold-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// SIGKILL the leader process; time until the follower leads.
    Failover(ScenarioArgs),
    /// SIGTERM the leader process (graceful release); time until the follower leads.
    Handover(ScenarioArgs),
    /// Run one elector and report its events as JSON lines (used by the scenarios).
    #[command(hide = true)]
    Child(ChildArgs),
}

/// Options of the `failover` and `handover` scenarios.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// Lease of every elector, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Number of runs.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Use this Redis instead of starting a throwaway redis-server.
    #[arg(long)]
    pub redis_url: Option<String>,
}

/// Options of the hidden `child` mode.
#[derive(Debug, Args)]
pub struct ChildArgs {
    /// Redis URL.
    #[arg(long)]
    pub redis_url: String,
    /// Duty to campaign for.
    #[arg(long)]
    pub duty: String,
    /// Replica id.
    #[arg(long)]
    pub replica: String,
    /// Lease in milliseconds.
    #[arg(long)]
    pub lease_ms: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every elector warns at start that the throwaway server has no persistence; that is
    // expected here, so the elector's own warnings are off unless RUST_LOG asks for them.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,leasehold_election::elector=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(BoxError::from)
        .and_then(|rt| rt.block_on(dispatch(cli.command)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leasehold-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> Result<(), BoxError> {
    match command {
        Command::Child(args) => child::run(&args).await,
        Command::Failover(args) => {
            let harness = Harness::start(&args)?;
            print_last(&failover::run(&harness, runs(&args)?).await?)
        }
        Command::Handover(args) => {
            let harness = Harness::start(&args)?;
            print_last(&handover::run(&harness, runs(&args)?).await?)
        }
    }
}

fn runs(args: &ScenarioArgs) -> Result<usize, BoxError> {
    Ok(usize::try_from(args.runs)?)
}

/// Prints the report as the last line of stdout.
fn print_last(report: &impl Serialize) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string(report)?);
    Ok(())
}
