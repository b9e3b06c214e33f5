//! `simulate`: the partition group's deterministic fault simulation
//! (`leasehold_partitions::sim`) over many seeds, two at a time on this machine's
//! cores. One JSON line: seeds, simulated seconds, events, violations, and for each
//! failing seed its violations and the command that replays it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Args as ClapArgs;
use leasehold_partitions::sim::{self, SimOptions, SimReport};
use serde::{Deserialize, Serialize};

use crate::print_last;
use crate::store::BoxError;
use crate::tables::{Bench, Benches, Table, get, thousands};

/// Options of `simulate`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// How many seeds to run (from `--from`).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Run only this seed (and print its fault log to stderr with `--verbose`).
    #[arg(long, conflicts_with_all = ["seeds", "from"])]
    pub seed: Option<u64>,
    /// Print the fault log of every failing seed to stderr.
    #[arg(long)]
    pub verbose: bool,
    /// Threads (default: the machine's cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Only these faults, comma-separated (default: all of kill, stop, dup, lossy,
    /// hole, set, drain, weight, wipe).
    #[arg(long, value_parser = parse_faults)]
    pub faults: Option<SimOptions>,
}

fn parse_faults(s: &str) -> Result<SimOptions, String> {
    SimOptions::only(s)
}

#[derive(Debug, Serialize, Deserialize)]
struct Failure {
    seed: u64,
    replay: String,
    violations: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    scenario: String,
    faults: Vec<String>,
    seeds: u64,
    from: u64,
    simulated_s: f64,
    events: u64,
    terms: u64,
    /// Sticky replicas killed and back within their grace whose partitions the
    /// oracle checked came back to them (reports before 2026-12-07 have none).
    #[serde(default)]
    sticky_kills_checked: u64,
    pub violations: u64,
    failures: Vec<Failure>,
    wall_s: f64,
}

/// Runs the seeds (every seed on a runtime of its own, on threads of this process)
/// and prints the report.
///
/// # Errors
/// Threads that cannot start, or violations.
pub fn run(args: Args) -> Result<(), BoxError> {
    let (report, passed) = simulate(&args)?;
    print_last(&report)?;
    if passed {
        Ok(())
    } else {
        Err(format!("{} violations", report.violations).into())
    }
}

/// The docs' tables of `simulate` reports.
pub const TABLES: &[Table] = &[("simulate", table)];

fn table(_: &str, b: &Benches) -> Result<String, BoxError> {
    simulate_table(get(b, "simulate")?)
}

/// Runs the seeds; the report, and whether every seed passed.
fn simulate(args: &Args) -> Result<(Report, bool), BoxError> {
    let (from, count) = match args.seed {
        Some(s) => (s, 1),
        None => (args.from, args.seeds),
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, std::num::NonZero::get));
    let started = Instant::now();
    let simulated_ms = AtomicU64::new(0);
    let events = AtomicU64::new(0);
    let terms = AtomicU64::new(0);
    let sticky = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let verbose = args.verbose || args.seed.is_some();
    let options = args.faults.clone().unwrap_or_default();
    let failed = sim::run_many(from, count, &options, threads, |r: &SimReport| {
        simulated_ms.fetch_add(
            u64::try_from(r.simulated.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        events.fetch_add(r.events, Ordering::Relaxed);
        terms.fetch_add(r.terms as u64, Ordering::Relaxed);
        sticky.fetch_add(r.sticky_kills_checked as u64, Ordering::Relaxed);
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        if !r.violations.is_empty() {
            eprintln!("seed {}: {} violations", r.seed, r.violations.len());
            for v in r.violations.iter().take(5) {
                eprintln!("  {v}");
            }
            if verbose {
                for line in &r.log {
                    eprintln!("    {line}");
                }
            }
        } else if verbose {
            for line in &r.log {
                eprintln!("    {line}");
            }
        }
        if n.is_multiple_of(1000) {
            eprintln!("{n} of {count} seeds done");
        }
    });
    let violations = failed.iter().map(|r| r.violations.len() as u64).sum();
    let report = Report {
        scenario: "simulate".to_owned(),
        faults: options.faults.iter().map(ToString::to_string).collect(),
        seeds: count,
        from,
        simulated_s: simulated_ms.load(Ordering::Relaxed) as f64 / 1e3,
        events: events.load(Ordering::Relaxed),
        terms: terms.load(Ordering::Relaxed),
        sticky_kills_checked: sticky.load(Ordering::Relaxed),
        violations,
        failures: failed
            .iter()
            .map(|r| Failure {
                seed: r.seed,
                replay: sim::replay_command(r.seed, &options),
                violations: r.violations.clone(),
            })
            .collect(),
        wall_s: started.elapsed().as_secs_f64(),
    };
    Ok((report, violations == 0))
}

/// The partition group simulation's totals.
fn simulate_table(sim: &Bench) -> Result<String, BoxError> {
    let r: Report = sim.last_as()?;
    Ok(format!(
        "| seeds | simulated time | events | terms | **violations** | wall time (2 threads) |\n\
         |---|---|---|---|---|---|\n\
         | {} | {:.1} h | {} | {} | **{}** | {:.0} s |\n\n\
         From {}.\n",
        thousands(r.seeds),
        r.simulated_s / 3600.0,
        thousands(r.events),
        thousands(r.terms),
        r.violations,
        r.wall_s,
        sim.source()
    ))
}
