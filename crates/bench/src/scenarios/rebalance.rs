//! `rebalance`: partition replicas as child processes (hidden `partition-child` mode),
//! followed through their event lines and `GroupAdmin::status` reads (at most every 100 ms
//! for large groups): a cold start, the SIGKILL of one replica, the join of a new one.
//! Weighted (`--weights zipf`, `--capacities`), with a move budget, with state handed
//! off (`--hand-off-bytes`) or warm moves (`--prepare`). With `--runs R`, one line per
//! run, then the last run's with `over_runs`.
//!
//! Balancing by measured load is `rebalance-load`; a failover of the servers that
//! loses grants, `rebalance-lossy`.

use std::fmt::Write as _;

use clap::Args as ClapArgs;

use crate::args::{GroupArgs, WeightsArg, parse_hand_off_bytes};
use crate::group::process::WarmMoves;
use crate::group::rebalance;
use crate::scenarios::block_on;
use crate::stats::Summary;
use crate::store::BoxError;
use crate::tables::{Bench, Benches, Table, fig, get, secs};

/// Options of `rebalance`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The group (one more replica joins at the end).
    #[command(flatten)]
    pub group: GroupArgs,
    /// Tenant sizes: `zipf` draws each partition's weight from a Zipf law (the k-th
    /// largest weighs 1000 / k^s), seeded, and sets it in the group before the cold
    /// start. The report gains a `load` section and the join's `moved_weight`.
    #[arg(long, value_enum)]
    pub weights: Option<WeightsArg>,
    /// The Zipf exponent s of `--weights zipf`.
    #[arg(long, default_value_t = 1.1, requires = "weights")]
    pub zipf_s: f64,
    /// The seed of `--weights zipf`.
    #[arg(long, default_value_t = 1, requires = "weights")]
    pub weight_seed: u64,
    /// With `--weights`: draw the same weights but do not tell the library (it balances
    /// by count), to compare the loads a count-only group ends with.
    #[arg(long, requires = "weights")]
    pub count_only: bool,
    /// Each starting replica's capacity, in order (as many as `--replicas`; the joiner
    /// has capacity 1).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub capacities: Option<Vec<u32>>,
    /// Runs of the whole scenario, each on a fresh group: one report line per run,
    /// then a last line with the last run's report and `over_runs` {min, median, max}
    /// of its times and moves.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,
    /// Every replica runs with this move budget
    /// (`GroupConfigBuilder::move_budget(MoveBudget::Moves(K))`): at most K hand-offs to even
    /// out the group per renew interval. The report gains `move_budget` and
    /// `max_moves_per_interval` (the most hand-offs released in one renew interval,
    /// from the ledger's server times).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub move_budget: Option<u32>,
    /// Every partition callback hands off N bytes of state when its term ends
    /// (`Ownership::hand_off`: a header naming the term, padded to N; 0: none, at
    /// most 1 MiB). The report's `hand_offs` counts the planned moves whose new term
    /// got exactly the previous term's state, and the ledger check its `state_bytes`.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_hand_off_bytes)]
    pub hand_off_bytes: usize,
    /// Warm moves (`GroupConfigBuilder::prepare_moves`): a replica handing a
    /// partition to a named receiver asks it to prepare first and waits one renew
    /// interval (lease / 3; `--prepare-ms` sets the wait) for it; each receiver
    /// prepares by sleeping `--prepare-work-ms`. The report gains `warm`: the
    /// hand-offs whose receiver prepared before the old term ended, those that timed
    /// out, and the time without an owner across them.
    #[arg(long)]
    pub prepare: bool,
    /// Warm moves (as `--prepare`) waiting this long for the receiver, in
    /// milliseconds.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub prepare_ms: Option<u64>,
    /// With `--prepare`: how long each receiver's preparation takes (a sleep), in
    /// milliseconds.
    #[arg(long, value_name = "M", default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    pub prepare_work_ms: u64,
}

impl Args {
    /// The settings `rebalance` runs with.
    pub fn settings(&self) -> rebalance::Settings {
        rebalance::Settings {
            group: super::group_settings(&self.group),
            weights: self.weights,
            zipf_s: self.zipf_s,
            weight_seed: self.weight_seed,
            count_only: self.count_only,
            capacities: self.capacities.clone(),
            runs: self.runs,
            move_budget: self.move_budget,
            hand_off_bytes: self.hand_off_bytes,
            warm: (self.prepare || self.prepare_ms.is_some()).then_some(WarmMoves { within_ms: self.prepare_ms, work_ms: self.prepare_work_ms }),
        }
    }
}

/// The report of each run.
pub use crate::group::rebalance::RebalanceReport as Report;

/// The last line: the last run's report, and after several runs `over_runs`.
pub use crate::group::rebalance::{LastLine as Last, OverRuns};

/// A time in seconds: over several runs, the median and the range of `over`'s pick,
/// else the one run's `single`.
pub fn secs_over(last: &Last, pick: fn(&OverRuns) -> Option<Summary>, single: f64) -> String {
    match last.over_runs.as_ref().and_then(|o| Some((o.runs, pick(o)?))) {
        Some((runs, s)) => format!(
            "{} median, {:.2}–{} over {runs} runs",
            secs(s.median),
            s.min / 1000.0,
            secs(s.max),
        ),
        None => secs(single),
    }
}

/// Runs the scenario `--runs` times and prints the reports.
///
/// # Errors
/// A phase that does not complete in time, or a replica that misbehaves.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move { rebalance::run_all(&args.settings()).await })
}

/// The docs' tables of `rebalance` reports.
pub const TABLES: &[Table] = &[
    ("rebalance-64", table),
    ("rebalance-10k", table),
    ("rebalance-64-cluster", table),
    ("group-500-rebalance", table),
    ("weights", weights_table),
];

fn table(name: &str, b: &Benches) -> Result<String, BoxError> {
    rebalance_table(get(b, name)?)
}

fn rebalance_table(r: &Bench) -> Result<String, BoxError> {
    let last: Last = r.last_as()?;
    let v = &last.report;
    let (cold, kill, join) = (&v.cold_start, &v.kill, &v.join);
    let lease = v.lease_ms as f64;
    Ok(format!(
        "| event | result |\n|---|---|\n\
         | cold start of {p} partitions on {n} replicas ({hold}) | all owned and balanced after {cold_all}, **{handoffs} hand-offs** |\n\
         | SIGKILL of one replica | all owned again **{kill_all}** after the kill; its session expired {expiry} after it (overshoot {over} ms); bound lease + renew interval = {bound} |\n\
         | a replica joins | balanced after {join_ms} (it joins a served group without settling; a hand-off waits for two ticks in a row that agree, so a joiner waits one renew interval unless the second tick was due anyway), **{moved} partitions moved**: exactly its share |\n\
         \nFrom {src}; final spread {spread}{runs}.\n",
        p = v.partitions,
        n = v.replicas,
        // A report with the server's age ran its cold start on a server older than a
        // lease (the group grants after one renew interval); older reports held a lease.
        hold = match cold.server_age_ms {
            Some(age) => format!(
                "on a server up {}: the group grants after one renew interval",
                secs(age as f64)
            ),
            None => "settle = one lease, then claims".to_owned(),
        },
        cold_all = secs(cold.all_owned_ms),
        handoffs = cold.handoffs,
        kill_all = secs_over(&last, |o| o.kill_all_owned_ms, kill.all_owned_ms),
        expiry = secs(kill.expiry_ms),
        over = fig(kill.overshoot_ms),
        bound = secs(lease * 4.0 / 3.0),
        join_ms = secs_over(&last, |o| o.join_balanced_ms, join.balanced_ms),
        moved = join.moved,
        src = r.source(),
        spread = v.spread,
        runs = if last.over_runs.is_some() {
            " (the last run's; the medians and ranges over every run)"
        } else {
            ""
        },
    ))
}

/// Weighted balance beside count balance of the same tenants, and capacities.
fn weights_table(_: &str, b: &Benches) -> Result<String, BoxError> {
    let mut out = String::from(
        "| run | largest load / its share | bound (1 + largest weight / share) | loads at the end (share) | joiner: moved, weight moved |\n\
         |---|---|---|---|---|\n",
    );
    let mut sources = Vec::new();
    for (name, label) in [
        ("rebalance-zipf", "Zipf(1.1) weights, balanced by weight"),
        (
            "rebalance-zipf-count",
            "the same tenants, balanced by count (weights not set)",
        ),
        ("rebalance-capacities", "capacities 1, 1, 2, 2, unweighted"),
    ] {
        let bench = get(b, name)?;
        let r: Report = bench.last_as()?;
        let load = r.load.as_ref();
        let loads: Vec<String> = load
            .map(|l| {
                l.replicas
                    .values()
                    .map(|v| format!("{} ({})", v.load, fig(v.share)))
                    .collect()
            })
            .unwrap_or_default();
        let moved_weight = r
            .join
            .moved_weight
            .map_or_else(|| "-".to_owned(), |w| w.to_string());
        let _ = writeln!(
            out,
            "| {label} | **{}** | {} | {} | {}, {moved_weight} |",
            fig(load.map_or(f64::NAN, |l| l.max_over_share)),
            fig(1.0 + load.map_or(f64::NAN, |l| l.max_weight_over_share)),
            loads.join(", "),
            r.join.moved,
        );
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}
