//! `rebalance-lossy` (was `rebalance-lossy`), with `--topology
//! sentinel|cluster` (a cluster then gets one replica per primary): after the cold
//! start, the group's primary is cut off from its replicas, a joiner takes its share
//! on the primary only (`grants_lost`: the owners the replica lacks), then the primary
//! is killed and the topology promotes a replica that lacks the grants. The report
//! counts partition terms that start before an earlier owner's local deadline
//! (`overlaps`), the fence repeats, and the time until every partition is owned again
//! (`kill.all_owned_ms`). A fresh topology per run, one line per run; use a lease
//! longer than the failover takes (e.g. 10000).

use clap::Args as ClapArgs;

use crate::args::GroupArgs;
use crate::group::lossy;
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::BoxError;
use crate::tables::Table;

/// Options of `rebalance-lossy`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The group (one more replica joins after the cut).
    #[command(flatten)]
    pub group: GroupArgs,
    /// Runs, each on a fresh topology and group: one report line per run, then the
    /// summary.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,
}

impl Args {
    /// The settings `lossy` runs with.
    pub fn settings(&self) -> lossy::Settings {
        lossy::Settings {
            group: super::group_settings(&self.group),
            runs: self.runs,
        }
    }
}

/// The report.
pub use crate::group::lossy::LossyRebalanceReport as Report;

/// Runs the lossy failovers and prints the report.
///
/// # Errors
/// A topology that cannot lose writes, or a run that fails.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = lossy::run(&args.settings()).await?;
        print_last(&report)
    })
}

/// No docs' table (docs/benchmarks.md quotes the figures in its text).
pub const TABLES: &[Table] = &[];
