//! `load`: cold-start convergence and the steady-state cost of a balanced group
//! (requests, Redis CPU, script times and the tick's (`tick_us`), the roster bytes
//! the replicas receive (`roster_bytes_per_s`), the replicas' CPU and memory), over
//! `--runs` cold starts and lists of partition and replica counts (compared in the
//! last line's `compare`); `--replicas-per-process K` runs K coordinators in each
//! replica process, so a thousand replicas fit on one machine. One line per run and
//! per partition and replica count before the last.

use std::fmt::Write as _;

use clap::Args as ClapArgs;

use crate::args::{LeaseArgs, parse_count, parse_per_process};
use crate::group::load;
use crate::scenarios::block_on;
use crate::stats::Percentiles;
use crate::store::{BoxError, TargetArgs};
use crate::tables::{Bench, Benches, Table, by_topology, fig, get, secs};

/// Options of `load`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Number of partitions; a comma-separated list (`1000,10000`) runs the scenario for
    /// each count in turn and compares them.
    #[arg(long, default_value = "1000", value_delimiter = ',', value_parser = parse_count)]
    pub partitions: Vec<usize>,
    /// Number of replicas (coordinators, N); a comma-separated list (`10,200`) runs the
    /// scenario for each count in turn and compares them. With lists of both, every
    /// pair runs (each partition count with each replica count, in that order), and
    /// the comparison has one entry per pair.
    #[arg(long, default_value = "4", value_delimiter = ',', value_parser = parse_count)]
    pub replicas: Vec<usize>,
    /// Coordinators per replica process (K): N / K processes each run K coordinators,
    /// each with its own session, store connection and replica id, so that N = 1000
    /// fits on one machine (`--replicas 1000 --replicas-per-process 10`: 100
    /// processes). Every count of `--replicas` must be a multiple of K.
    #[arg(long, default_value_t = 1, value_parser = parse_per_process)]
    pub replicas_per_process: usize,
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<1000>,
    /// Length of the measurement window, in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Cold starts per partition count, each on a fresh redis-server and fresh replicas.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub runs: u64,
    /// Longest a cold start may take to balance, in seconds. Default: 30 s + 30 leases
    /// + 1 ms per partition.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub limit_secs: Option<u64>,
    /// Run every replica at this niceness (`nice -n`, 0..=19). On a machine where the
    /// replicas share the cores with the Redis server, 10 keeps them from preempting
    /// the server in the middle of a script, as a server on its own core would be.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

impl Args {
    /// The settings `load` runs with.
    pub fn settings(&self) -> load::Settings {
        load::Settings {
            partitions: self.partitions.clone(),
            replicas: self.replicas.clone(),
            replicas_per_process: self.replicas_per_process,
            lease_ms: self.lease.lease_ms,
            seconds: self.seconds,
            runs: self.runs,
            limit_secs: self.limit_secs,
            replica_nice: self.replica_nice,
            target: self.target.clone(),
        }
    }
}

/// Runs every case and prints the reports.
///
/// # Errors
/// A group that does not start or balance in time.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move { load::run(&args.settings()).await })
}

/// The summary line of a partition and replica count (the last one adds the
/// comparison across the counts).
pub use crate::group::load::SummaryReport as Report;

/// The docs' tables of `load` reports.
pub const TABLES: &[Table] = &[
    ("group-500-load", group_500),
    ("load-1k-4", one_k_4),
    ("load-cost", load_cost),
    ("load-10k-runs", ten_k_runs),
    ("load-wide", wide),
    ("scripts", scripts),
    ("topology-load", topology),
];

/// A summary line's Redis CPU at the last partition count over that at the first
/// (`NaN` without a comparison).
pub fn redis_cpu_ratio(r: &Report) -> f64 {
    r.comparison
        .as_ref()
        .and_then(|c| c.redis_cpu_ratio)
        .unwrap_or(f64::NAN)
}

/// A script's server time by name (`NaN`s if the report has none of it).
fn script(r: &Report, name: &str) -> Percentiles {
    r.report
        .script_ms_by_name
        .get(name)
        .copied()
        .unwrap_or(Percentiles {
            p50: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
        })
}

fn group_500(_: &str, b: &Benches) -> Result<String, BoxError> {
    let l = get(b, "group-500-load")?;
    let r = l.last_as::<Report>()?.report;
    Ok(format!(
        "{} partitions on {} replicas with a {} ms lease, for {} s after a cold start (all owned after {}): **{} moves** at steady state, Redis at {} % of a core, {} requests/s.\n\nFrom {}.\n",
        r.setup.partitions,
        r.setup.replicas,
        r.setup.lease_ms,
        r.setup.seconds,
        secs(r.all_owned_ms),
        r.steady_moves,
        fig(r.redis_cpu_pct),
        fig(r.requests_per_sec),
        l.source()
    ))
}

fn one_k_4(_: &str, b: &Benches) -> Result<String, BoxError> {
    let l = get(b, "load-1k-4")?;
    let last: Report = l.last_as()?;
    let (r, tick) = (&last.report, script(&last, "tick"));
    Ok(format!(
        "| partitions | replicas | lease | requests/s | per replica | Redis CPU | tick (server) p50 / max |\n\
         |---|---|---|---|---|---|---|\n\
         | {} | {} | {} ms | {} | {} | {} % | {} / {} ms |\n\nFrom {}.\n",
        r.setup.partitions,
        r.setup.replicas,
        r.setup.lease_ms,
        fig(r.requests_per_sec),
        fig(r.per_replica_per_sec),
        fig(r.redis_cpu_pct),
        fig(tick.p50),
        fig(tick.max),
        l.source()
    ))
}

fn ten_k_runs(_: &str, b: &Benches) -> Result<String, BoxError> {
    let l = get(b, "load-10k")?;
    let r: Report = l.last_as()?;
    let runs: Vec<String> = r.all_owned_ms_runs.iter().map(|ms| secs(*ms)).collect();
    Ok(format!(
        "{} cold starts of {} partitions on {} replicas (lease {} ms): every partition owned after {} (worst {}).\n\nFrom {}.\n",
        r.runs,
        r.report.setup.partitions,
        r.report.setup.replicas,
        r.report.setup.lease_ms,
        runs.join(", "),
        secs(r.report.all_owned_ms),
        l.source()
    ))
}

fn wide(_: &str, b: &Benches) -> Result<String, BoxError> {
    load_wide(get(b, "load-wide")?)
}

fn topology(_: &str, b: &Benches) -> Result<String, BoxError> {
    by_topology(
        b,
        "| topology | requests/s | per replica | server's own traffic subtracted (requests/s) | Redis CPU |\n|---|---|---|---|---|",
        "load-1k-4",
        |r: &Report| {
            let r = &r.report;
            format!(
                "{} | {} | {} | {} %",
                fig(r.requests_per_sec),
                fig(r.per_replica_per_sec),
                fig(r.background_per_sec),
                fig(r.redis_cpu_pct),
            )
        },
    )
}

/// The cost model's table: one row per benchmark at scale.
fn load_cost(_: &str, b: &Benches) -> Result<String, BoxError> {
    let mut out = String::from(
        "| partitions | replicas | lease | all owned after a cold start | Redis CPU (steady) | requests/s | tick p50 / max (server) | longest script | replica CPU / peak RSS |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut rows: Vec<Report> = Vec::new();
    let l10 = get(b, "load-10k")?;
    // The per-P summaries of the 1k,10k command, then the 100k command's.
    for r in &l10.reports {
        if r.get("runs").is_some() {
            rows.push(l10.report_as(r, "summary")?);
        }
    }
    let l100 = get(b, "load-100k")?;
    rows.push(l100.last_as()?);
    for last in &rows {
        let (r, tick) = (&last.report, script(last, "tick"));
        let _ = writeln!(
            out,
            "| {} | {} | {} s | {} | {} % of a core | {} | {} / {} ms | {} ms | {} % / {} MiB |",
            r.setup.partitions,
            r.setup.replicas,
            r.setup.lease_ms as f64 / 1000.0,
            secs(r.all_owned_ms),
            fig(r.redis_cpu_pct),
            fig(r.requests_per_sec),
            fig(tick.p50),
            fig(tick.max),
            fig(r.script_ms.max),
            fig(r.client_cpu_pct_max),
            fig(r.client_rss_mib_max),
        );
    }
    let ratio = redis_cpu_ratio(&l10.last_as()?);
    let _ = write!(
        out,
        "\nWorst of the runs for every figure but the medians. Redis CPU at 10,000 partitions \
         is {}× that at 1,000 (same 10 replicas, same command). From {} and {}.\n",
        fig(ratio),
        l10.source(),
        l100.source()
    );
    Ok(out)
}

/// The cost model in N: one row per replica count of the `--replicas` list.
fn load_wide(l: &Bench) -> Result<String, BoxError> {
    let mut out = String::from(
        "| replicas | processes × coordinators | all owned after a cold start | Redis CPU (steady) | requests/s | tick p50 / p99 / max (server, µs) | roster bytes/s (steady) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let last: Report = l.last_as()?;
    let compare = last
        .comparison
        .as_ref()
        .map(|c| &c.compare)
        .ok_or("load-wide: no compare entries")?;
    for c in compare {
        let k = (c.replicas_per_process as f64).max(1.0);
        let tick = &c.tick_us;
        let _ = writeln!(
            out,
            "| {} | {} × {} | {} | {} % of a core | {} | {} / {} / {} | {} |",
            c.replicas,
            c.replicas as f64 / k,
            k,
            secs(c.all_owned_ms),
            fig(c.redis_cpu_pct),
            fig(c.requests_per_sec),
            tick.p50.round(),
            tick.p99.round(),
            tick.max.round(),
            c.roster_bytes_per_s.round(),
        );
    }
    let _ = write!(out, "\nFrom {}.\n", l.source());
    Ok(out)
}

/// Each group script's server time, by name, at 10,000 partitions.
fn scripts(_: &str, b: &Benches) -> Result<String, BoxError> {
    let niced = get(b, "load-10k")?;
    let plain = get(b, "load-10k-unniced")?;
    let mut out = String::from(
        "| script | runs of it | p50 | p99 | max | max, replicas not niced |\n|---|---|---|---|---|---|\n",
    );
    let by: Report = niced.last_as()?;
    let plain_by: Report = plain.last_as()?;
    for (name, p) in &by.report.script_ms_by_name {
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} ms | {} ms | {} ms | {} ms |",
            if name == "eval" {
                "first run of each script (body sent)"
            } else {
                "every call"
            },
            fig(p.p50),
            fig(p.p99),
            fig(p.max),
            fig(script(&plain_by, name).max),
        );
    }
    let _ = write!(out, "\nFrom {} and {}.\n", niced.source(), plain.source());
    Ok(out)
}
