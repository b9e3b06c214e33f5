//! `leasehold-bench`: measures Leasehold across processes.
//!
//! Every scenario is a module of `scenarios/` (its arguments, its run, its report and
//! the docs' tables made from it), registered in one line of `scenarios/mod.rs`; see
//! `crates/bench/README.md`. The single-duty ones put the leader in a child OS process
//! (this binary, re-executed in its hidden `child` mode) and the follower in this
//! process; in the partition ones every replica is a child OS process (hidden
//! `partition-child` mode; or, with `load --replicas-per-process K`, K replicas per
//! process), followed through the children's own event lines.
//!
//! `--topology single|tls|sentinel|cluster` (default `single`) picks the Redis set-up
//! the `failover`, `handover`, `rebalance`, `load` and `rolling` scenarios start for
//! themselves: one server, one server over mutual TLS, a primary with one replica under
//! three Sentinels, or a three-primary cluster. The servers stay healthy throughout
//! (but see `failover-lossy` and `rebalance-lossy`, which kill the primary after
//! cutting it off from its replicas): only replica processes die. Children get the
//! store as a JSON `--store` spec and build it with the same code as the bench.
//! `--redis-url` uses an existing server instead (single only).
//!
//! Progress goes to stderr; the last line of stdout is one JSON report (`load` prints
//! one line per run and per partition and replica count before it, `rebalance` one
//! line per run when it makes several, `rebalance-lossy` always).
//!
//! The code follows that split, in three layers, each using only those below it:
//! `scenarios/` (one module per scenario, and the registry; each turns its command
//! line into the plain `Settings` of the machinery below) and `tables.rs` (the docs'
//! tables, regenerated from the committed reports); the machinery, `duty/` (the
//! single-duty runners and the child leader), `group/` (the partition runners and the
//! `partition-child` replica), `chaos/` and `route/`, which never name the scenarios;
//! and what they all share: `args.rs` (`--lease-ms`, the other shared arguments, the
//! child modes' options), `store.rs` (the Redis set-ups and the one place a store is
//! built; `store/failover.rs`, the servers' own failovers), `overlap.rs` (two owners
//! at once, by local deadlines), `clock.rs` (the wall clock every process of a run
//! shares), `stats.rs`, `proc_stats.rs` and `redis_stats.rs` (measuring). See
//! `crates/bench/README.md`.
//!
//! ```text
//! leasehold-bench failover --lease-ms 1000 --runs 10 [--dedicated] [--topology T | --redis-url URL]
//! leasehold-bench failover-lossy --topology sentinel|cluster --lease-ms 10000 --runs 20
//! leasehold-bench handover --lease-ms 1000 --runs 10 [--dedicated] [--topology T | --redis-url URL]
//! leasehold-bench soak --lease-ms 250 --seconds 600 --replicas 3 [--dedicated] [--saturate]
//! leasehold-bench rebalance --partitions 64 --replicas 4 --lease-ms 2000 [--runs R] [--hand-off-bytes N] [--topology T]
//! leasehold-bench rebalance-load --load shifting|stationary --partitions 64 --replicas 4 --lease-ms 2000 --seconds 300 [--half-life-ms 10000] [--modes load,static-weights,count-only]
//! leasehold-bench rebalance-load --load feedback --partitions 64 --replicas 4 --lease-ms 2000 --seconds 300 --modes load [--report throughput|arrival] [--service-factor 4]
//! leasehold-bench rebalance-lossy --topology sentinel|cluster --partitions 64 --replicas 4 --lease-ms 10000 --settle-ms 2000 --runs 5
//! leasehold-bench load --partitions 1000[,10000...] --replicas 4[,200...] [--replicas-per-process K] --lease-ms 1000 --seconds 10 [--runs R] [--topology T]
//! leasehold-bench rolling --partitions 64 --replicas 4 --lease-ms 2000 [--sticky] [--add-partitions K] [--hand-off-bytes N]
//! leasehold-bench add --partitions 64 --replicas 4 --lease-ms 2000 --adds 20
//! leasehold-bench chaos --replicas 5 --partitions 32 --lease-ms 1000 --seconds 60 --seed 42 [--hand-off-bytes N]
//! leasehold-bench simulate --seeds 20000
//! leasehold-bench stall --lease-ms 1000 [--block-leases 2.5] [--topology T | --redis-url URL]
//! leasehold-bench route --partitions 64 --replicas 4 --lease-ms 2000 --routers 100 --seconds 60 [--await-route-ms N]
//! ```

mod args;
mod chaos;
mod clock;
mod duty;
mod group;
mod overlap;
mod proc_stats;
mod redis_stats;
mod route;
mod scenarios;
mod stats;
mod store;
mod tables;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use serde::Serialize;
use tracing_subscriber::EnvFilter;

use crate::scenarios::Command;
use crate::store::BoxError;

/// Measures Leasehold's failover and hand-over across processes.
#[derive(Debug, Parser)]
#[command(name = "leasehold-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every elector warns at start that the throwaway server has no persistence; that is
    // expected here, so the elector's own warnings are off unless RUST_LOG asks for them.
    // Partition replicas under faults warn about every failed tick: errors only.
    let default_filter = match cli.command {
        Command::PartitionChild(_) | Command::RouteReplica(_) | Command::RouteClient(_) => "error",
        // Thousands of simulated replicas under faults: their logs are noise.
        Command::Simulate(_) => "off",
        _ => "warn,leasehold_election::elector=error",
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    match cli.command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leasehold-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the report as one line of stdout (the last one, unless more follow).
fn print_last(report: &impl Serialize) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string(report)?);
    Ok(())
}
