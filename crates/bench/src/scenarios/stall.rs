//! `stall`, in one process: a duty that blocks its 2-worker runtime for 2.5 leases,
//! with the default elector and with `Elector::spawn_dedicated`.

use std::fmt::Write as _;

use clap::Args as ClapArgs;

use crate::args::LeaseArgs;
use crate::duty::stall;
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::{BoxError, TargetArgs};
use crate::tables::{Bench, Benches, Table, fig, get};

/// Options of `stall`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<1000, 100, 60_000>,
    /// How long the duty blocks, in leases.
    #[arg(long, default_value_t = 2.5)]
    pub block_leases: f64,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

impl Args {
    /// The settings `stall` runs with.
    pub fn settings(&self) -> stall::Settings {
        stall::Settings {
            lease_ms: self.lease.lease_ms,
            block_leases: self.block_leases,
            target: self.target.clone(),
        }
    }
}

/// The report.
pub use crate::duty::stall::StallReport as Report;

/// Runs both electors' cases and prints the report.
///
/// # Errors
/// Servers that cannot start, or a case that fails.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = stall::run(&args.settings()).await?;
        print_last(&report)
    })
}

/// The docs' tables of `stall` reports.
pub const TABLES: &[Table] = &[("stall", table)];

fn table(_: &str, b: &Benches) -> Result<String, BoxError> {
    stall_table(get(b, "stall")?)
}

fn stall_table(s: &Bench) -> Result<String, BoxError> {
    let mut out = String::from(
        "| elector | blocked | kept the lease | a successor led | duty's `check()` failed on resuming | `remaining()` on resuming (ms) | stalls reported |\n|---|---|---|---|---|---|---|\n",
    );
    let yes = |v: bool| if v { "yes" } else { "no" };
    let r: Report = s.last_as()?;
    for c in &r.cases {
        let successor = match c.successor_led_after_block_start_ms {
            Some(ms) => format!("yes, {} ms after the block began", fig(ms)),
            None => "no".to_owned(),
        };
        let blocked = match c.blocked.as_str() {
            "one_worker" => "one worker",
            "all_workers" => "all workers",
            _ => "?",
        };
        let _ = writeln!(
            out,
            "| {} | {blocked} | {} | {successor} | {} | {} | {} |",
            c.elector,
            yes(c.kept_lease),
            yes(c.duty_saw_term_over_on_resume),
            fig(c.remaining_on_resume_ms),
            c.stalls_reported,
        );
    }
    let _ = write!(out, "\nFrom {}.\n", s.source());
    Ok(out)
}
