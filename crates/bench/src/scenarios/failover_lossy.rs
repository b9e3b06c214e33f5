//! `failover-lossy` (was `failover-lossy`), with `--topology
//! sentinel|cluster`: a failover of the *servers* that loses the leader's grant. The
//! child leader (`--one-term`: it never campaigns again, as a leader cut off from the
//! new primary would not) acquires after its primary is cut off from the replicas;
//! the primary is killed at a random point of its renew cycle; the topology promotes a
//! replica that lacks the grant. The report counts the terms that started while an
//! earlier holder was still entitled to its own (`overlaps`), the fence repeats,
//! `detection_ms` (kill → a new primary named) and `leaderless_ms` (kill → the
//! follower leads). A fresh topology per run; the servers are first left up for a
//! lease + 2 s, or the restart hold of a young server would hide the loss. Use a lease
//! longer than the failover takes (e.g. 10000).

use clap::Args as ClapArgs;

use crate::args::LeaseArgs;
use crate::duty::lossy;
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::{BoxError, TargetArgs};
use crate::tables::Table;

/// Options of `failover-lossy`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<1000>,
    /// Number of runs.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Run every elector (the child's and the follower's) with
    /// `Elector::spawn_dedicated`.
    #[arg(long)]
    pub dedicated: bool,
    /// The Redis set-up (`--topology sentinel|cluster`).
    #[command(flatten)]
    pub target: TargetArgs,
}

impl Args {
    /// The settings `lossy` runs with.
    pub fn settings(&self) -> lossy::Settings {
        lossy::Settings {
            lease_ms: self.lease.lease_ms,
            runs: self.runs,
            dedicated: self.dedicated,
            target: self.target.clone(),
        }
    }
}

/// The report.
pub use crate::duty::lossy::LossyReport as Report;

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
