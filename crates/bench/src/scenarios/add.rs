//! `add`: partitions added one at a time to a running group; the time until each is
//! owned.

use clap::Args as ClapArgs;

use crate::args::{LeaseArgs, parse_count, parse_replicas};
use crate::group::add;
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::{BoxError, TargetArgs};
use crate::tables::{Bench, Benches, Table, fig, get};

/// Options of `add`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Number of partitions before the additions.
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Number of replicas.
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<2000>,
    /// Partitions to add, one at a time.
    #[arg(long, default_value_t = 20, value_parser = parse_count)]
    pub adds: usize,
    /// Pause after each addition is owned, in milliseconds.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub gap_ms: u64,
    /// Run every replica at this niceness (`nice -n`, 0..=19); see `load`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

impl Args {
    /// The settings `add` runs with.
    pub fn settings(&self) -> add::Settings {
        add::Settings {
            partitions: self.partitions,
            replicas: self.replicas,
            lease_ms: self.lease.lease_ms,
            adds: self.adds,
            gap_ms: self.gap_ms,
            replica_nice: self.replica_nice,
            target: self.target.clone(),
        }
    }
}

/// The report.
pub use crate::group::add::AddReport as Report;

/// Runs the additions and prints the report.
///
/// # Errors
/// A group that does not start, or an addition that is not owned in time.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = add::run(&args.settings()).await?;
        print_last(&report)
    })
}

/// The docs' tables of `add` reports.
pub const TABLES: &[Table] = &[("add", table)];

fn table(_: &str, b: &Benches) -> Result<String, BoxError> {
    add_table(get(b, "add")?)
}

/// Partitions added to a running group.
fn add_table(a: &Bench) -> Result<String, BoxError> {
    let r: Report = a.last_as()?;
    Ok(format!(
        "{adds} partitions added one at a time to {p} partitions on {n} replicas (lease {lease} ms, renew interval {ri} ms): owned {p50} ms after the add was sent (median; max {max} ms), the add's own round trip {call} ms; {within} of {adds} within one renew interval + one round trip.\n\nFrom {src}.\n",
        adds = r.adds,
        p = r.partitions,
        n = r.replicas,
        lease = r.lease_ms,
        ri = fig(r.renew_interval_ms),
        p50 = fig(r.owned_ms.p50),
        max = fig(r.owned_ms.max),
        call = fig(r.add_call_ms.p50),
        within = r.within_target,
        src = a.source(),
    ))
}
