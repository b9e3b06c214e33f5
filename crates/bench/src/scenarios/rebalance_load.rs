//! `rebalance-load` (was `rebalance-load`): balancing by measured load against
//! synthetic Zipf tenants whose hot ones change (`--load shifting`), or stay, with
//! noise (`stationary`), or stay and are queues whose owners report the throughput
//! they achieve, catch-ups included (`feedback`), beside static weights and count
//! only: the heaviest replica's load over its share over time, moves per minute, the
//! planned hand-offs' unowned time.

use std::fmt::Write as _;

use clap::Args as ClapArgs;

use crate::args::{GroupArgs, parse_service_factor};
use crate::group::tenants::LoadMode;
use crate::group::{feedback, measured};
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::BoxError;
use crate::tables::{Benches, Table, fig, get};

/// Options of `rebalance-load`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The group.
    #[command(flatten)]
    pub group: GroupArgs,
    /// The tenants, whose loads follow a Zipf law (`--load-zipf-s`, the largest
    /// 1000): `shifting` (the `--hot` top ranks go to other tenants every
    /// `--shift-secs`) or `stationary` (never reassigned, `--noise-percent` noise every second), reported
    /// by the callbacks (`Ownership::report_load`) and damped into weights
    /// (`--half-life-ms`); then the same loads with static weights and by count only
    /// (`--modes`), each on a fresh group for `--seconds`. The report gives each
    /// mode's `load.max_over_share` {p50, p95, max} over time and `moves_per_min`.
    /// `feedback`: the stationary loads are arrival rates into per-tenant queues that
    /// each owner serves at up to `--service-factor` times the rate, backlog first, and
    /// the callbacks report what they achieve (`--report`), so a move's catch-up shows
    /// in the reports.
    #[arg(long, value_enum)]
    pub load: LoadMode,
    /// Length of each mode's measured window, in seconds.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: u64,
    /// Spawn → the measured window, in seconds (the cold start must be over
    /// by then).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub settle_secs: u64,
    /// The balancing modes to run, in order: `load` (weights from the
    /// reports, the mode under test), `static-weights` (weights set to the loads at
    /// the start, never updated), `count-only` (no weights).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "load,static-weights,count-only"
    )]
    pub modes: Vec<measured::Mode>,
    /// The seed of the tenants' ranks, shifts and noise.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The Zipf exponent s (rank k carries 1000 / k^s).
    #[arg(long, default_value_t = 1.0)]
    pub load_zipf_s: f64,
    /// `shifting`: how many top ranks go to other tenants at each shift.
    #[arg(long, default_value_t = 8)]
    pub hot: usize,
    /// `shifting`: time between shifts, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub shift_secs: u64,
    /// Every load is scaled by a factor in 1 ± this % drawn every second.
    /// Default: 0 for `shifting`, 20 for `stationary`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub noise_percent: Option<u32>,
    /// The damping's half-life (`LoadDamping::half_life`), in milliseconds.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub half_life_ms: u64,
    /// The damping's threshold (`LoadDamping::threshold_percent`).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub threshold_percent: u32,
    /// How often every callback reports its load, in milliseconds.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub report_every_ms: u64,
    /// How often the placement is sampled, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub sample_ms: u64,
    /// The `load` mode starts from weight 1 (its reports bring the weights
    /// up, over a few half-lives: give it a longer `--settle-secs`) instead of weights
    /// set to the loads at the start.
    #[arg(long)]
    pub unseeded: bool,
    /// Every mode's report gains `series`, the sampled
    /// `max_over_share` in order.
    #[arg(long)]
    pub series: bool,
    /// `feedback`: what the callbacks report, `throughput` (entries processed
    /// per second, catch-ups included: what a naive consumer reports) or `arrival`
    /// (entries arrived per second). Default: `throughput`.
    #[arg(long, value_enum)]
    pub report: Option<feedback::Report>,
    /// `feedback`: an owner serves a tenant's queue at most this many times the
    /// tenant's mean arrival rate (the cap of a catch-up).
    #[arg(long, default_value_t = 4.0, value_parser = parse_service_factor)]
    pub service_factor: f64,
}

impl Args {
    /// The settings `measured` runs with.
    pub fn settings(&self) -> measured::Settings {
        measured::Settings {
            group: super::group_settings(&self.group),
            seconds: self.seconds,
            settle_secs: self.settle_secs,
            modes: self.modes.clone(),
            seed: self.seed,
            load_zipf_s: self.load_zipf_s,
            hot: self.hot,
            shift_secs: self.shift_secs,
            noise_percent: self.noise_percent,
            half_life_ms: self.half_life_ms,
            threshold_percent: self.threshold_percent,
            report_every_ms: self.report_every_ms,
            sample_ms: self.sample_ms,
            unseeded: self.unseeded,
            series: self.series,
            report: self.report,
            service_factor: self.service_factor,
        }
    }
}

/// The report.
pub use crate::group::measured::LoadBalanceReport as Report;

/// Runs every mode and prints the report.
///
/// # Errors
/// Inconsistent options, or a group that does not start or settle.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = measured::run(&args.settings(), args.load).await?;
        print_last(&report)
    })
}

/// The docs' tables of `rebalance-load` reports.
pub const TABLES: &[Table] = &[("load-seeds", load_seeds_table)];

/// The load-mode runs of shifting tenants with seeds other than the default (42).
pub const OTHER_SEEDS: [&str; 4] = [
    "rebalance-load-shifting-seed7",
    "rebalance-load-shifting-seed1",
    "rebalance-load-shifting-seed2",
    "rebalance-load-shifting-seed3",
];

/// Balancing by measured load, shifting tenants: the load mode of the default seed's
/// full run, then the load-mode runs of other seeds.
fn load_seeds_table(_: &str, b: &Benches) -> Result<String, BoxError> {
    let mut out = String::from(
        "| seed | max load / share p50 | p95 | max | samples above 1.3 | recoveries (s) | moves per minute | per hot change |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut sources = Vec::new();
    for name in std::iter::once("rebalance-load-shifting").chain(OTHER_SEEDS) {
        let bench = get(b, name)?;
        let r: Report = bench.last_as()?;
        let mode = r
            .under_test
            .as_ref()
            .ok_or_else(|| format!("docs/bench/{name}.json: no load mode"))?;
        let m = &mode.load.max_over_share;
        let recoveries: Vec<String> = mode
            .load
            .recovery_secs
            .iter()
            .map(|v| v.map_or_else(|| "-".to_owned(), |x| format!("{x:.0}")))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | **{}** | {} | {:.1} % | {} | {} | **{}** |",
            r.settings.seed,
            fig(m.p50),
            fig(m.p95),
            fig(m.max),
            100.0 * mode.load.share_above_1_3,
            recoveries.join(", "),
            fig(mode.moves_per_min),
            fig(r.moves_per_hot_change.unwrap_or(f64::NAN)),
        );
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}
