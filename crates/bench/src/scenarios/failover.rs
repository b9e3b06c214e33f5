//! `failover`: SIGKILL the leader process at a random point of its renew cycle; the
//! time until the follower leads and the overshoot beyond the lease's expiry.
//!
//! `--dedicated` runs both electors with `Elector::spawn_dedicated`; `--topology
//! single|tls|sentinel|cluster` picks the Redis set-up (see `failover-lossy` for a
//! failover of the servers themselves).

use crate::duty::{Harness, failover};
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::BoxError;
use crate::tables::{
    Benches, Table, by_lease, by_topology, elector, get, one_row_each, p50_p99_max,
    spread3, summary_rows,
};

/// Options of `failover` (shared with `handover`).
pub type Args = crate::args::DutyArgs;

/// The report.
pub use crate::duty::failover::FailoverReport as Report;

/// Runs `args.runs` failovers and prints the report.
///
/// # Errors
/// Servers that cannot start, or a run that fails.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let harness = Harness::start(&super::duty_settings(&args))?;
        let report: Report = failover::run(&harness, usize::try_from(args.runs)?).await?;
        print_last(&report)
    })
}

/// The docs' tables of `failover` reports.
pub const TABLES: &[Table] = &[
    ("failover", table),
    ("lease-failover", lease_failover),
    ("topology-failover", topology),
];

fn table(_: &str, b: &Benches) -> Result<String, BoxError> {
    let f = get(b, "failover")?;
    let r: Report = f.last_as()?;
    Ok(format!(
        "{}\nFrom {}.\n",
        summary_rows(&[
            (&r.failover_ms, "failover (ms)", false),
            (&r.since_renew_ms, "since last renewal (ms)", false),
            (&r.overshoot_ms, "overshoot after real expiry (ms)", true),
        ]),
        f.source()
    ))
}

/// Lease length against the SIGKILL failover, default and dedicated electors.
fn lease_failover(_: &str, b: &Benches) -> Result<String, BoxError> {
    one_row_each(
        b,
        "| lease | elector | runs | SIGKILL → next leader's duty (ms) p50 / p99 / max | past the real expiry (ms) p50 / p99 / max |\n|---|---|---|---|---|",
        &by_lease(b, &["failover", "failover-250", "failover-250-dedicated"])?,
        |r: &Report| {
            let (f, o) = (&r.failover_ms, &r.overshoot_ms);
            format!(
                "{} | {} | {} | {}",
                elector(r.dedicated),
                r.runs.len(),
                p50_p99_max(f.p50, f.p99, f.max),
                p50_p99_max(o.p50, o.p99, o.max),
            )
        },
    )
}

fn topology(_: &str, b: &Benches) -> Result<String, BoxError> {
    by_topology(
        b,
        "| topology | overshoot after real expiry (ms) min / median / max | failover (ms) min / median / max |\n|---|---|---|",
        "failover",
        |r: &Report| {
            format!(
                "{} | {}",
                spread3(&r.overshoot_ms),
                spread3(&r.failover_ms)
            )
        },
    )
}
