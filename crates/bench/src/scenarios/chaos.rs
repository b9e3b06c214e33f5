//! `chaos`: a seeded fault schedule against replicas doing fenced ledger writes and
//! handing off state, then a check of every ledger and of every state offered. It
//! always starts its own two redis-servers.

use std::fmt::Write as _;

use clap::Args as ClapArgs;

use crate::args::{LeaseArgs, parse_count, parse_hand_off_bytes, parse_replicas};
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::BoxError;
use crate::tables::{Bench, Benches, Table, count, fig, get, thousands};

/// Options of `chaos`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Number of replicas.
    #[arg(long, default_value_t = 5, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Number of partitions.
    #[arg(long, default_value_t = 32, value_parser = parse_count)]
    pub partitions: usize,
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<1000, 100, 60_000>,
    /// Length of the fault schedule, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Seed of the fault schedule: the same seed gives the same schedule.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How often each partition callback appends a ledger record, in milliseconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub write_every_ms: u64,
    /// Every partition callback hands off N bytes of state when its term ends
    /// (`Ownership::hand_off`: a header naming the term, padded to N; 0: none, at
    /// most 1 MiB). Whatever the terms are offered is checked over the whole run: state
    /// that is not the previous term's is a violation (`hand_offs.stale`).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = parse_hand_off_bytes)]
    pub hand_off_bytes: usize,
}

impl Args {
    /// The settings `crate::chaos` runs with.
    pub fn settings(&self) -> crate::chaos::Settings {
        crate::chaos::Settings {
            replicas: self.replicas,
            partitions: self.partitions,
            lease_ms: self.lease.lease_ms,
            seconds: self.seconds,
            seed: self.seed,
            write_every_ms: self.write_every_ms,
            hand_off_bytes: self.hand_off_bytes,
        }
    }
}

/// The report.
pub use crate::chaos::ChaosReport as Report;

/// Runs the schedule, prints the report, and fails on any violation.
///
/// # Errors
/// Servers or replicas that cannot start, or violations.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = crate::chaos::run(&args.settings()).await?;
        print_last(&report)?;
        match report.violations {
            0 => Ok(()),
            n => Err(format!("{n} violations (seed {})", args.seed).into()),
        }
    })
}

/// The docs' tables of `chaos` reports.
pub const TABLES: &[Table] = &[("chaos", table), ("chaos-summary", summary)];

fn table(_: &str, b: &Benches) -> Result<String, BoxError> {
    chaos(get(b, "chaos")?)
}

fn summary(_: &str, b: &Benches) -> Result<String, BoxError> {
    chaos_summary(get(b, "chaos")?)
}

fn chaos(c: &Bench) -> Result<String, BoxError> {
    let r: Report = c.last_as()?;
    let mut out = String::from("| fault | count |\n|---|---|\n");
    for (k, v) in &r.faults {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    let _ = write!(
        out,
        "\n| checked at the end | result |\n|---|---|\n\
         | fenced writes accepted | {} |\n\
         | stale writes rejected by the fence (a deposed owner still writing) | {} |\n\
         | **violations** (a write accepted with a fence lower than an earlier one, a fence written by two replicas, malformed records, liveness after healing) | **{}** |\n\
         | every partition owned at the end, spread among live replicas | spread {} |\n\
         | availability (fraction of time a partition had an owner writing): min / median | {} % / {} % |\n\
         | longest gap in a partition's ledger | {} ms |\n",
        thousands(r.writes_accepted),
        count(r.stale_rejected, "stale write"),
        r.violations,
        r.spread,
        fig(r.availability.min * 100.0),
        fig(r.availability.median * 100.0),
        fig(r.longest_gap_ms),
    );
    let _ = write!(
        out,
        "\nGaps longer than {} ms, by the fault active when they started:\n\n| fault | gaps | total | longest |\n|---|---|---|---|\n",
        fig(r.gap_threshold_ms)
    );
    for (k, g) in &r.gaps {
        let _ = writeln!(
            out,
            "| {k} | {} | {} s | {} ms |",
            g.count,
            fig(g.total_ms / 1000.0),
            fig(g.longest_ms),
        );
    }
    let _ = write!(out, "\nFrom {}.\n", c.source());
    Ok(out)
}

/// One sentence on the chaos run, for the README.
fn chaos_summary(c: &Bench) -> Result<String, BoxError> {
    let r: Report = c.last_as()?;
    let faults: u64 = r.faults.values().sum();
    Ok(format!(
        "A seeded chaos run (`{}`, {}) accepted {} fenced writes through {faults} faults, \
         the fence refused {}, and the check found **{} violations** \
         ([docs/guarantees.md](docs/guarantees.md#the-chaos-run-zero-stale-writes-under-faults)).\n",
        c.command,
        c.date,
        thousands(r.writes_accepted),
        count(r.stale_rejected, "stale write"),
        r.violations,
    ))
}
