//! `soak`: `--replicas` child processes campaigning for one duty for `--seconds`,
//! nobody killed, optionally with busy runtimes (`--saturate`): the terms that ended
//! anyway (spurious failovers), the renew round trips and the leaderless time.

use clap::Args as ClapArgs;

use crate::args::{LeaseArgs, parse_replicas};
use crate::duty::soak;
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::{BoxError, TargetArgs};
use crate::tables::{
    Benches, Table, by_lease, elector, fig, one_row_each, p50_p99_max,
};

/// Options of `soak`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<250>,
    /// How long the replicas run, in seconds.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Replica processes campaigning for the one duty.
    #[arg(long, default_value_t = 3, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Every elector with `Elector::spawn_dedicated`.
    #[arg(long)]
    pub dedicated: bool,
    /// Keep every replica's application runtime busy: a CPU-bound task on every worker
    /// (computing 5 ms between yields), and a duty that blocks its worker for two
    /// leases every 3 s.
    #[arg(long)]
    pub saturate: bool,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

impl Args {
    /// The settings `soak` runs with.
    pub fn settings(&self) -> soak::Settings {
        soak::Settings {
            lease_ms: self.lease.lease_ms,
            seconds: self.seconds,
            replicas: self.replicas,
            dedicated: self.dedicated,
            saturate: self.saturate,
            target: self.target.clone(),
        }
    }
}

/// The report.
pub use crate::duty::soak::SoakReport as Report;

/// Runs the soak and prints the report.
///
/// # Errors
/// Servers or replicas that cannot start.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = soak::run(&args.settings()).await?;
        print_last(&report)
    })
}

/// The docs' tables of `soak` reports.
pub const TABLES: &[Table] = &[("lease-soak", lease_soak)];

/// The soak of short leases with busy runtimes, default and dedicated electors.
fn lease_soak(_: &str, b: &Benches) -> Result<String, BoxError> {
    one_row_each(
        b,
        "| lease | elector | replicas, time | terms | spurious failovers | renew round trip (ms) p50 / p99 / max | leaderless in all (ms) |\n|---|---|---|---|---|---|---|",
        &by_lease(b, &["soak-250", "soak-250-dedicated"])?,
        |r: &Report| {
            let reasons = if r.spurious_reasons.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = r
                    .spurious_reasons
                    .iter()
                    .map(|(k, v)| format!("{v} {k}"))
                    .collect();
                format!(" ({})", list.join(", "))
            };
            let l = &r.renew_latency_ms;
            format!(
                "{} | {}, {} s | {} | **{}**{reasons} | {} | {}",
                elector(r.dedicated),
                r.replicas,
                r.seconds,
                r.terms,
                r.spurious_failovers,
                p50_p99_max(l.p50, l.p99, l.max),
                fig(r.leaderless_ms_total),
            )
        },
    )
}
