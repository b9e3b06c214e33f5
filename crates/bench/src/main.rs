//! `leasehold-bench`: measures Leasehold across processes.
//!
//! Single duty: each run puts the leader in a child OS process (this binary,
//! re-executed in its hidden `child` mode) and the follower in this process, on a
//! fresh duty:
//!
//! - `failover`: SIGKILL the leader at a random point of its renew cycle; report the
//!   time until the follower leads and the overshoot beyond the lease's expiry;
//! - `handover`: SIGTERM the leader, which shuts down gracefully (release plus
//!   notification); report the time until the follower leads.
//!
//! Partitions: every replica is a child OS process (hidden `partition-child` mode) and
//! the bench watches the group through `group_status`:
//!
//! - `rebalance`: cold start, SIGKILL of one replica, join of a new one;
//! - `load`: the steady-state request rate of a balanced group;
//! - `chaos`: a seeded fault schedule against replicas doing fenced ledger writes,
//!   then a check of every ledger.
//!
//! In one process: `stall`, a duty that blocks its 2-worker runtime for 2.5 leases,
//! with the default elector and with `Elector::spawn_dedicated`.
//!
//! `--topology single|tls|sentinel|cluster` (default `single`) picks the Redis set-up
//! the `failover`, `handover`, `rebalance` and `load` scenarios start for themselves:
//! one server, one server over mutual TLS, a primary with one replica under three
//! Sentinels, or a three-primary cluster. The servers stay healthy throughout: only
//! replica processes die. Children get the store as a JSON `--store` spec and build it
//! with the same code as the bench. `--redis-url` uses an existing server instead
//! (single only).
//!
//! Progress goes to stderr; the last line of stdout is one JSON report, with
//! `"topology"` in the four scenarios above.
//!
//! ```text
//! leasehold-bench failover --lease-ms 1000 --runs 10 [--topology T | --redis-url URL]
//! leasehold-bench handover --lease-ms 1000 --runs 10 [--topology T | --redis-url URL]
//! leasehold-bench rebalance --partitions 64 --replicas 4 --lease-ms 2000 [--topology T]
//! leasehold-bench load --partitions 1000 --replicas 4 --lease-ms 1000 --seconds 10 [--topology T]
//! leasehold-bench chaos --replicas 5 --partitions 32 --lease-ms 1000 --seconds 60 --seed 42
//! leasehold-bench stall --lease-ms 1000 [--block-leases 2.5] [--topology T | --redis-url URL]
//! ```

mod chaos;
mod child;
mod event;
mod failover;
mod fleet;
mod follower;
mod group;
mod handover;
mod harness;
mod leader;
mod load;
mod partition_child;
mod partition_event;
mod rebalance;
mod replica;
mod setup;
mod stall;
mod stats;
mod topology;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;
use tracing_subscriber::EnvFilter;

use crate::harness::Harness;
use crate::setup::BoxError;
use crate::topology::{ConnArgs, TargetArgs};

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
    /// Partition replicas as processes: cold start, SIGKILL of one, join of another.
    Rebalance(RebalanceArgs),
    /// Steady-state requests per second of a balanced partition group.
    Load(LoadArgs),
    /// Seeded faults against replicas doing fenced writes; checks every ledger.
    Chaos(ChaosArgs),
    /// A duty blocking its runtime: the default elector against the dedicated one.
    Stall(stall::StallArgs),
    /// Run one elector and report its events as JSON lines (used by the scenarios).
    #[command(hide = true)]
    Child(ChildArgs),
    /// Run one partition coordinator and report its events as JSON lines.
    #[command(hide = true)]
    PartitionChild(PartitionChildArgs),
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
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the hidden `child` mode.
#[derive(Debug, Args)]
pub struct ChildArgs {
    /// The coordination store.
    #[command(flatten)]
    pub conn: ConnArgs,
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

/// Options of the `rebalance` scenario.
#[derive(Debug, Args)]
pub struct RebalanceArgs {
    /// Number of partitions.
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Replicas at the start (one more joins at the end).
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Settle time of a starting replica, in milliseconds. Default: one lease.
    #[arg(long)]
    pub settle_ms: Option<u64>,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the `load` scenario.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Number of partitions.
    #[arg(long, default_value_t = 1000, value_parser = parse_count)]
    pub partitions: usize,
    /// Number of replicas.
    #[arg(long, default_value_t = 4, value_parser = parse_count)]
    pub replicas: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Length of the measurement window, in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the `chaos` scenario (it always starts its own two redis-servers).
#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// Number of replicas.
    #[arg(long, default_value_t = 5, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Number of partitions.
    #[arg(long, default_value_t = 32, value_parser = parse_count)]
    pub partitions: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub lease_ms: u64,
    /// Length of the fault schedule, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Seed of the fault schedule: the same seed gives the same schedule.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How often each partition callback appends a ledger record, in milliseconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub write_every_ms: u64,
}

/// Options of the hidden `partition-child` mode.
#[derive(Debug, Args)]
pub struct PartitionChildArgs {
    /// The coordination store.
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Group name.
    #[arg(long)]
    pub group: String,
    /// Number of partitions (named `p0000`, `p0001`, ...).
    #[arg(long, value_parser = parse_count)]
    pub partitions: usize,
    /// Replica id.
    #[arg(long)]
    pub replica: String,
    /// Lease in milliseconds.
    #[arg(long)]
    pub lease_ms: u64,
    /// Settle time in milliseconds. Default: one lease.
    #[arg(long)]
    pub settle_ms: Option<u64>,
    /// Redis URL of a resource store: each partition callback appends fenced ledger
    /// records there.
    #[arg(long)]
    pub ledger_url: Option<String>,
    /// How often a callback appends a ledger record, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub write_every_ms: u64,
}

fn parse_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a count in 1..=100000")),
    }
}

fn parse_replicas(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (2..=100).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a replica count in 2..=100")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every elector warns at start that the throwaway server has no persistence; that is
    // expected here, so the elector's own warnings are off unless RUST_LOG asks for them.
    // Partition replicas under faults warn about every failed tick: errors only.
    let default_filter = match cli.command {
        Command::PartitionChild(_) => "error",
        _ => "warn,leasehold_election::elector=error",
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
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
        Command::PartitionChild(args) => partition_child::run(&args).await,
        Command::Rebalance(args) => print_last(&rebalance::run(&args).await?),
        Command::Load(args) => print_last(&load::run(&args).await?),
        Command::Chaos(args) => {
            let report = chaos::run(&args).await?;
            print_last(&report)?;
            match report.violations {
                0 => Ok(()),
                n => Err(format!("{n} violations (seed {})", args.seed).into()),
            }
        }
        Command::Stall(args) => print_last(&stall::run(&args).await?),
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
