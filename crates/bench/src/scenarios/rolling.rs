//! `rolling`: every replica restarted in turn (SIGTERM, the same id started again, 1 s
//! apart), optionally sticky (a rejoin grace), as a deploy that grows the list, or
//! paced by readiness; owner changes, unowned spells and refusals from the children's
//! lines.

use std::fmt::Write as _;

use clap::Args as ClapArgs;

use crate::args::{LeaseArgs, parse_added, parse_count, parse_hand_off_bytes, parse_replicas};
use crate::group::rolling;
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::{BoxError, TargetArgs};
use crate::tables::{Benches, Table, fig, get};

/// Options of `rolling`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Number of partitions (P: the old list).
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Number of replicas.
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<2000>,
    /// Every process runs with a rejoin grace: a restart keeps its partitions for
    /// the same replica id.
    #[arg(long)]
    pub sticky: bool,
    /// The rejoin grace of `--sticky`, in milliseconds. Default: 10 leases.
    #[arg(long, requires = "sticky", value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub rejoin_grace_ms: Option<u64>,
    /// K: the restarted ("new version") processes run with P + K partitions at list
    /// version 2, the old ones with P at version 1. Default 0: no list change (and no
    /// list versions).
    #[arg(long, default_value_t = 0, value_parser = parse_added)]
    pub add_partitions: usize,
    /// Pause after each restart before the next SIGTERM, in milliseconds (not with
    /// `--paced`, which waits for readiness instead).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub gap_ms: u64,
    /// Deploy as an orchestrator paced by readiness would (Kubernetes' `maxSurge: 1`,
    /// `maxUnavailable: 0` with the `/readyz` of `examples/kubernetes/`): for each old
    /// replica, start its replacement (a new replica id), wait until the replacement is
    /// ready in the group's sense (`CoordinatorHandle::readiness`), then SIGTERM the old
    /// one and wait for its exit.
    #[arg(long, conflicts_with_all = ["sticky", "add_partitions"])]
    pub paced: bool,
    /// Settle time of a starting replica, in milliseconds. Default: one lease.
    #[arg(long)]
    pub settle_ms: Option<u64>,
    /// Longest the group may take to balance after the last restart, in seconds (then
    /// the report says what was seen). Default: 30 s + 30 leases + 1 ms per partition.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub limit_secs: Option<u64>,
    /// Every partition callback hands off N bytes of state when its term ends
    /// (`Ownership::hand_off`: a header naming the term, padded to N; 0: none, at
    /// most 1 MiB). The report's `hand_offs` counts the planned moves whose new term
    /// got exactly the previous term's state, and the ledger check its `state_bytes`.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_hand_off_bytes)]
    pub hand_off_bytes: usize,
    /// Every replica leaves with `CoordinatorHandle::shutdown_within` this many
    /// milliseconds on SIGTERM (as under a pod's `terminationGracePeriodSeconds`), not
    /// `shutdown()`; the report's `leave_ms` says how long the longest leave took.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub leave_within_ms: Option<u64>,
    /// Run every replica at this niceness (`nice -n`, 0..=19); see `load`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

impl Args {
    /// The settings `rolling` runs with.
    pub fn settings(&self) -> rolling::Settings {
        rolling::Settings {
            partitions: self.partitions,
            replicas: self.replicas,
            lease_ms: self.lease.lease_ms,
            sticky: self.sticky,
            rejoin_grace_ms: self.rejoin_grace_ms,
            add_partitions: self.add_partitions,
            gap_ms: self.gap_ms,
            paced: self.paced,
            settle_ms: self.settle_ms,
            limit_secs: self.limit_secs,
            hand_off_bytes: self.hand_off_bytes,
            leave_within_ms: self.leave_within_ms,
            replica_nice: self.replica_nice,
            target: self.target.clone(),
        }
    }
}

/// The report.
pub use crate::group::rolling::RollingReport as Report;

/// Runs the restarts and prints the report.
///
/// # Errors
/// A group that does not start, or a replica that misbehaves.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = rolling::run(&args.settings()).await?;
        print_last(&report)
    })
}

/// The docs' tables of `rolling` reports.
pub const TABLES: &[Table] = &[("rolling", table)];

/// The rolling runs side by side.
fn table(_: &str, b: &Benches) -> Result<String, BoxError> {
    let mut out = String::from(
        "| restart of every replica | partitions | moved | moves per partition | longest unowned | unowned, summed | refused | all owned | spread |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut sources = Vec::new();
    for (name, label) in [
        (
            "rolling",
            "default: stop, start again, 1 s apart (graceful hand-off)",
        ),
        (
            "rolling-paced",
            "`--paced`: a new replica first, the old one stopped once it is ready",
        ),
        ("rolling-sticky", "`--sticky` (rejoin grace 20 s)"),
        (
            "rolling-add",
            "`--add-partitions 8` (a deploy growing the list)",
        ),
    ] {
        let bench = get(b, name)?;
        let r: Report = bench.last_as()?;
        let _ = writeln!(
            out,
            "| {label} | {} → {} | **{}** | {} | **{} ms** | {} ms | {} | {} | {} |",
            r.partitions_before,
            r.partitions_after,
            r.moved,
            fig(r.moved as f64 / (r.partitions_before as f64).max(1.0)),
            fig(r.max_unowned_ms),
            fig(r.sum_unowned_ms),
            r.refused,
            if r.all_owned { "yes" } else { "no" },
            r.spread,
        );
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}
