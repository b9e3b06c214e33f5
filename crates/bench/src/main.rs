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
//! `--dedicated` runs both electors with `Elector::spawn_dedicated`. `soak` runs
//! `--replicas` child processes campaigning for one duty for `--seconds`, nobody
//! killed, optionally with busy runtimes (`--saturate`), and counts the terms that
//! ended anyway (spurious failovers), the renew round trips and the leaderless time.
//!
//! Partitions: every replica is a child OS process (hidden `partition-child` mode; or,
//! with `load --replicas-per-process K`, K replicas per process); the bench follows the group through the children's own event lines, and `rebalance`
//! also through `group_status` reads (at most every 100 ms for large groups):
//!
//! - `rebalance`: cold start, SIGKILL of one replica, join of a new one; with
//!   `--load shifting|stationary|feedback` instead, balancing by measured load against
//!   synthetic Zipf tenants whose hot ones change (or stay, with noise; or stay and are
//!   queues whose owners report the throughput they achieve, catch-ups included),
//!   beside static weights and count only: the heaviest replica's load over its share
//!   over time, moves per minute, the planned hand-offs' unowned time;
//! - `load`: cold-start convergence and the steady-state cost of a balanced group
//!   (requests, Redis CPU, script times and the tick's (`tick_us`), the roster bytes
//!   the replicas receive (`roster_bytes_per_s`), the replicas' CPU and memory), over
//!   `--runs` cold starts and lists of partition and replica counts (compared in the
//!   last line's `compare`); `--replicas-per-process K` runs K coordinators in each
//!   replica process, so a thousand replicas fit on one machine;
//! - `rolling`: every replica restarted in turn (SIGTERM, the same id started again,
//!   1 s apart), optionally sticky (a rejoin grace) or as a deploy that grows the
//!   list; owner changes, unowned spells and refusals from the children's lines;
//! - `chaos`: a seeded fault schedule against replicas doing fenced ledger writes
//!   and handing off state, then a check of every ledger and of every state offered.
//!
//! In one process: `stall`, a duty that blocks its 2-worker runtime for 2.5 leases,
//! with the default elector and with `Elector::spawn_dedicated`.
//!
//! `--topology single|tls|sentinel|cluster` (default `single`) picks the Redis set-up
//! the `failover`, `handover`, `rebalance`, `load` and `rolling` scenarios start for
//! themselves:
//! one server, one server over mutual TLS, a primary with one replica under three
//! Sentinels, or a three-primary cluster. The servers stay healthy throughout (but see
//! `--lose-writes` below): only replica processes die. Children get the store as a JSON `--store` spec and build it
//! with the same code as the bench. `--redis-url` uses an existing server instead
//! (single only).
//!
//! `--lose-writes` (`failover` and `rebalance`, with `--topology sentinel|cluster`; a
//! cluster then gets one replica per primary) kills the *primary* instead, after
//! cutting it off from its replicas so that the grants made since live on it alone;
//! the topology promotes a replica that lacks them. Each run starts a fresh topology.
//! The report counts the terms that started while an earlier holder was still entitled
//! to its own (its last successful acquire or renewal send + the lease): `overlaps`,
//! and `fence_repeats`:
//!
//! - `failover --lose-writes`: the child leader (`--one-term`: it never campaigns
//!   again, as a leader cut off from the new primary would not) acquires after the
//!   cut; the primary is killed at a random point of its renew cycle; `detection_ms`
//!   (kill → a new primary named) and `leaderless_ms` (kill → the follower leads).
//!   The servers are first left up for a lease + 2 s, or the restart hold of a young
//!   server would hide the loss;
//! - `rebalance --lose-writes`: after the cold start, the cut, then a joiner takes
//!   its share on the primary only (`grants_lost`: the owners the replica lacks);
//!   then the kill, and `kill.all_owned_ms` (kill → every partition owned again).
//!
//! Use a lease longer than the failover takes (2–4 s here): with a shorter one, the
//! old holders' deadlines pass before any replica is promoted and nothing can overlap.
//!
//! Progress goes to stderr; the last line of stdout is one JSON report, with
//! `"topology"` in the four scenarios above (`load` prints one line per run and per
//! partition and replica count before it, and `rebalance` one line per run when it makes several,
//! or always with `--lose-writes`).
//!
//! The code follows that split: `duty/` (the single-duty scenarios and the child
//! leader), `group/` (the partition scenarios and the `partition-child` replica),
//! `chaos/`, and what they share: `store.rs` (the Redis set-ups and the one place a
//! store is built; `store/failover.rs`, the servers' own failovers), `overlap.rs` (two
//! owners at once, by local deadlines), `clock.rs` (the wall clock every process of a
//! run shares), `stats.rs`, `proc_stats.rs` and `redis_stats.rs` (measuring);
//! `tables.rs` regenerates the docs' tables from the committed reports.
//!
//! ```text
//! leasehold-bench failover --lease-ms 1000 --runs 10 [--dedicated] [--topology T | --redis-url URL]
//! leasehold-bench failover --lose-writes --topology sentinel|cluster --lease-ms 10000 --runs 20
//! leasehold-bench handover --lease-ms 1000 --runs 10 [--dedicated] [--topology T | --redis-url URL]
//! leasehold-bench soak --lease-ms 250 --seconds 600 --replicas 3 [--dedicated] [--saturate]
//! leasehold-bench rebalance --partitions 64 --replicas 4 --lease-ms 2000 [--runs R] [--hand-off-bytes N] [--topology T]
//! leasehold-bench rebalance --load shifting|stationary --partitions 64 --replicas 4 --lease-ms 2000 --seconds 300 [--half-life-ms 10000] [--modes load,static-weights,count-only]
//! leasehold-bench rebalance --load feedback --partitions 64 --replicas 4 --lease-ms 2000 --seconds 300 --modes load [--report throughput|arrival] [--service-factor 4]
//! leasehold-bench rebalance --lose-writes --topology sentinel|cluster --partitions 64 --replicas 4 --lease-ms 10000 --settle-ms 2000 --runs 5
//! leasehold-bench load --partitions 1000[,10000...] --replicas 4[,200...] [--replicas-per-process K] --lease-ms 1000 --seconds 10 [--runs R] [--topology T]
//! leasehold-bench rolling --partitions 64 --replicas 4 --lease-ms 2000 [--sticky] [--add-partitions K] [--hand-off-bytes N]
//! leasehold-bench chaos --replicas 5 --partitions 32 --lease-ms 1000 --seconds 60 --seed 42 [--hand-off-bytes N]
//! leasehold-bench stall --lease-ms 1000 [--block-leases 2.5] [--topology T | --redis-url URL]
//! ```

mod args;
mod chaos;
mod clock;
mod duty;
mod group;
mod overlap;
mod proc_stats;
mod redis_stats;
mod simulate;
mod stats;
mod store;
mod tables;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde::Serialize;
use tracing_subscriber::EnvFilter;

pub use crate::args::{
    AddArgs, ChaosArgs, ChildArgs, LoadArgs, PartitionChildArgs, RebalanceArgs, RollingArgs,
    ScenarioArgs, SoakArgs, TablesArgs, WeightsArg,
};
use crate::duty::{Harness, child, failover, handover, lossy, soak, stall};
use crate::group::{add, load, measured, rebalance, rolling};
use crate::store::BoxError;

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
    /// Replica processes campaigning for one duty for a while, nobody killed: terms
    /// that end anyway, renew round trips, leaderless time.
    Soak(SoakArgs),
    /// Partition replicas as processes: cold start, SIGKILL of one, join of another.
    Rebalance(RebalanceArgs),
    /// Cold-start convergence and steady-state cost (requests, Redis CPU, script times,
    /// replica CPU and memory) of a partition group.
    Load(LoadArgs),
    /// Restart every partition replica in turn (optionally sticky, or a deploy that
    /// grows the list): owner changes, unowned time, refusals.
    Rolling(RollingArgs),
    /// Partitions added one at a time to a running group: time until each is owned.
    Add(AddArgs),
    /// Seeded faults against replicas doing fenced writes; checks every ledger.
    Chaos(ChaosArgs),
    /// The partition group's deterministic fault simulation over many seeds.
    Simulate(simulate::SimulateArgs),
    /// Regenerates the docs' tables from the committed reports in `docs/bench/`.
    Tables(TablesArgs),
    /// A duty blocking its runtime: the default elector against the dedicated one.
    Stall(stall::StallArgs),
    /// Run one elector and report its events as JSON lines (used by the scenarios).
    #[command(hide = true)]
    Child(ChildArgs),
    /// Run one partition coordinator and report its events as JSON lines.
    #[command(hide = true)]
    PartitionChild(PartitionChildArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every elector warns at start that the throwaway server has no persistence; that is
    // expected here, so the elector's own warnings are off unless RUST_LOG asks for them.
    // Partition replicas under faults warn about every failed tick: errors only.
    let default_filter = match cli.command {
        Command::PartitionChild(_) => "error",
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
    if let Command::Simulate(args) = &cli.command {
        // Every seed runs on a runtime of its own, on threads of this process.
        return match simulate::run(args) {
            Ok((report, passed)) => match print_last(&report) {
                Ok(()) if passed => ExitCode::SUCCESS,
                Ok(()) => {
                    eprintln!("leasehold-bench: {} violations", report.violations);
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("leasehold-bench: {e}");
                    ExitCode::FAILURE
                }
            },
            Err(e) => {
                eprintln!("leasehold-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
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
        Command::PartitionChild(args) => group::child::run(&args).await,
        Command::Tables(args) => {
            let files: Vec<std::path::PathBuf> = tables::DOCS.iter().map(Into::into).collect();
            let stale = tables::run(&args.root, &files, args.write)?;
            match (stale.is_empty(), args.write) {
                (true, _) => Ok(()),
                (false, true) => {
                    for f in &stale {
                        eprintln!("rewrote the tables of {}", f.display());
                    }
                    Ok(())
                }
                (false, false) => Err(format!(
                    "tables out of date with docs/bench/*.json in {}: run `leasehold-bench tables --write`",
                    stale
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                .into()),
            }
        }
        Command::Rebalance(args) if args.load.is_some() => {
            let mode = args.load.ok_or("no --load")?;
            print_last(&measured::run(&args, mode).await?)
        }
        Command::Rebalance(args) if args.lose_writes => {
            print_last(&group::lossy::run(&args).await?)
        }
        Command::Rebalance(args) => rebalance::run_all(&args).await,
        Command::Add(args) => print_last(&add::run(&args).await?),
        Command::Load(args) => load::run(&args).await,
        Command::Rolling(args) => print_last(&rolling::run(&args).await?),
        Command::Chaos(args) => {
            let report = chaos::run(&args).await?;
            print_last(&report)?;
            match report.violations {
                0 => Ok(()),
                n => Err(format!("{n} violations (seed {})", args.seed).into()),
            }
        }
        Command::Stall(args) => print_last(&stall::run(&args).await?),
        Command::Simulate(_) => unreachable!("run before the runtime starts"),
        Command::Failover(args) if args.lose_writes => print_last(&lossy::run(&args).await?),
        Command::Failover(args) => {
            let harness = Harness::start(&args)?;
            print_last(&failover::run(&harness, runs(&args)?).await?)
        }
        Command::Handover(args) if args.lose_writes => {
            Err("--lose-writes is for failover and rebalance".into())
        }
        Command::Handover(args) => {
            let harness = Harness::start(&args)?;
            print_last(&handover::run(&harness, runs(&args)?).await?)
        }
        Command::Soak(args) => print_last(&soak::run(&args).await?),
    }
}

fn runs(args: &ScenarioArgs) -> Result<usize, BoxError> {
    Ok(usize::try_from(args.runs)?)
}

/// Prints the report as one line of stdout (the last one, unless more follow).
fn print_last(report: &impl Serialize) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string(report)?);
    Ok(())
}
