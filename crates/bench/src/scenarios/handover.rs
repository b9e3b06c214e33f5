//! `handover`: SIGTERM the leader process, which shuts down gracefully (release plus
//! notification); the time until the follower leads.

use crate::duty::{Harness, handover};
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::BoxError;
use crate::tables::{Benches, Table, by_topology, get, spread3, summary_rows};

/// Options of `handover` (those of `failover`).
pub type Args = crate::args::DutyArgs;

/// The report.
pub use crate::duty::handover::HandoverReport as Report;

/// Runs `args.runs` hand-overs and prints the report.
///
/// # Errors
/// Servers that cannot start, or a run that fails.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let harness = Harness::start(&super::duty_settings(&args))?;
        let report: Report = handover::run(&harness, usize::try_from(args.runs)?).await?;
        print_last(&report)
    })
}

/// The docs' tables of `handover` reports.
pub const TABLES: &[Table] = &[("handover", table), ("topology-handover", topology)];

fn table(_: &str, b: &Benches) -> Result<String, BoxError> {
    let h = get(b, "handover")?;
    let r: Report = h.last_as()?;
    Ok(format!(
        "{}\nFrom {}.\n",
        summary_rows(&[
            (&r.handover_ms, "hand-over, from sending SIGTERM (ms)", true),
            (&r.signal_ms, "of which delivering the signal (ms)", false),
            (
                &r.from_sigterm_ms,
                "from the child's SIGTERM handler to the follower leading (ms)",
                false,
            ),
        ]),
        h.source()
    ))
}

fn topology(_: &str, b: &Benches) -> Result<String, BoxError> {
    by_topology(
        b,
        "| topology | hand-over from sending SIGTERM (ms) min / median / max | from the child's SIGTERM handler (ms) min / median / max |\n|---|---|---|",
        "handover",
        |r: &Report| {
            format!(
                "{} | {}",
                spread3(&r.handover_ms),
                spread3(&r.from_sigterm_ms)
            )
        },
    )
}
