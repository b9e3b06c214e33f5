//! `leasehold-bench tables`: the figures in the docs, regenerated from the committed
//! reports in `docs/bench/*.json`, so a figure and its source cannot drift apart.
//!
//! `docs/bench/run.sh` runs the benchmarks and stores each command's JSON lines as
//! `docs/bench/<name>.json` (`{"name", "command", "date", "reports": [...]}`; the last
//! report is the summary). A doc marks each generated table with
//! `<!-- table: <generator> -->` and `<!-- /table -->`; `tables --write` rewrites what is
//! between them, `tables --check` (run by the test suite) fails if anything differs.
//!
//! The generators live with their scenarios (`scenarios/<name>.rs`, `TABLES`); here
//! are the reports' loading, the markers, the helpers the generators share, and the
//! README's table, which quotes most scenarios.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::args::TablesArgs;
use crate::group::measured::ModeReport;
use crate::scenarios::{load, rebalance, rebalance_load, rolling};
use crate::stats::Summary;
use crate::store::BoxError;

/// The files that carry generated tables.
pub const DOCS: [&str; 6] = [
    "README.md",
    "docs/benchmarks.md",
    "docs/partitions.md",
    "docs/partitions-reference.md",
    "docs/guarantees.md",
    "docs/election.md",
];

const OPEN: &str = "<!-- table: ";
const CLOSE: &str = "<!-- /table -->";

/// Every committed benchmark run, by name.
pub type Benches = BTreeMap<String, Bench>;

/// A table generator: its name (as a marker gives it) and the function that makes the
/// table from the committed reports (given the name, for generators of several).
pub type Table = (&'static str, fn(&str, &Benches) -> Result<String, BoxError>);

/// One committed benchmark run: a `docs/bench/<name>.json` file.
#[derive(Debug, Clone, Deserialize)]
pub struct Bench {
    /// Its name: the file's, `docs/bench/<name>.json`.
    pub name: String,
    /// The command, as run (`leasehold-bench ...`).
    pub command: String,
    /// When (UTC date).
    pub date: String,
    /// Every JSON line it printed (each scenario reads them as its typed reports).
    #[serde(default)]
    pub reports: Vec<Value>,
}

impl Bench {
    /// The summary: the last report.
    pub fn last(&self) -> &Value {
        self.reports.last().unwrap_or(&Value::Null)
    }

    /// The summary as the scenario's typed report `T`.
    ///
    /// # Errors
    /// A summary that is not a `T` (a field renamed or gone since the report was
    /// committed), naming the file.
    pub fn last_as<T: DeserializeOwned>(&self) -> Result<T, BoxError> {
        self.report_as(self.last(), "last report")
    }

    /// `report`, one of its reports (`which` says which), as the typed report `T`.
    ///
    /// # Errors
    /// A report that is not a `T`, naming the file.
    pub fn report_as<T: DeserializeOwned>(
        &self,
        report: &Value,
        which: &str,
    ) -> Result<T, BoxError> {
        T::deserialize(report).map_err(|e| {
            format!(
                "docs/bench/{}.json: its {which} is not a {}: {e}",
                self.name,
                std::any::type_name::<T>()
            )
            .into()
        })
    }

    /// The line saying where the figures come from.
    pub fn source(&self) -> String {
        format!("`{}` ({})", self.command, self.date)
    }
}

/// Reads every `<name>.json` in `dir`.
///
/// # Errors
/// A file that cannot be read or is not a report file.
pub fn load(dir: &Path) -> Result<Benches, BoxError> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let bench: Bench = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a report file: {e}", path.display()))?;
        out.insert(bench.name.clone(), bench);
    }
    Ok(out)
}

/// A figure with sensible precision: one decimal from 10 on, two below.
pub fn fig(x: f64) -> String {
    if x.is_nan() {
        "?".to_owned()
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

pub fn secs(ms: f64) -> String {
    format!("{:.2} s", ms / 1000.0)
}

pub fn get<'a>(benches: &'a Benches, name: &str) -> Result<&'a Bench, BoxError> {
    benches
        .get(name)
        .ok_or_else(|| format!("no docs/bench/{name}.json").into())
}

/// `| | min | median | max |` rows of summaries, each with its label, bold or not.
pub fn summary_rows(rows: &[(&Summary, &str, bool)]) -> String {
    let mut out = String::from("| | min | median | max |\n|---|---|---|---|\n");
    for (s, label, bold) in rows {
        let cells = [s.min, s.median, s.max].map(fig);
        if *bold {
            let _ = writeln!(
                out,
                "| **{label}** | **{}** | **{}** | **{}** |",
                cells[0], cells[1], cells[2]
            );
        } else {
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} |",
                cells[0], cells[1], cells[2]
            );
        }
    }
    out
}

/// Every generator, by the name a marker gives: the scenarios' (each module's
/// `TABLES`, gathered by the registry) and the README's.
///
/// # Errors
/// A missing report, or one without the fields the table needs.
pub fn generate(name: &str, b: &Benches) -> Result<String, BoxError> {
    let (_, generator) = crate::scenarios::TABLES
        .iter()
        .copied()
        .flatten()
        .chain(OWN)
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("no table generator named {name:?}"))?;
    generator(name, b)
}

/// The tables made of several scenarios' reports.
const OWN: &[Table] = &[("readme", readme)];

/// `p50 / p99 / max` of a summary or percentiles.
pub fn p50_p99_max(p50: f64, p99: f64, max: f64) -> String {
    format!("{} / {} / {}", fig(p50), fig(p99), fig(max))
}

/// A table of one row per report in `rows` (a first cell, then the report's name):
/// `| first | cells of its summary |` (read as a `T`), then where they all come from.
pub fn one_row_each<T: DeserializeOwned>(
    b: &Benches,
    header: &str,
    rows: &[(String, String)],
    cells: fn(&T) -> String,
) -> Result<String, BoxError> {
    let mut out = format!("{header}\n");
    let mut sources = Vec::new();
    for (first, name) in rows {
        let bench = get(b, name)?;
        let _ = writeln!(out, "| {first} | {} |", cells(&bench.last_as()?));
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}

/// Which elector a report ran: `spawn` or `spawn_dedicated`.
pub fn elector(dedicated: bool) -> &'static str {
    if dedicated {
        "`spawn_dedicated`"
    } else {
        "`spawn`"
    }
}

/// The lease of any report.
#[derive(Debug, Deserialize)]
struct Lease {
    lease_ms: u64,
}

/// The rows of `names`, each led by its lease (read from the report).
pub fn by_lease(b: &Benches, names: &[&str]) -> Result<Vec<(String, String)>, BoxError> {
    names
        .iter()
        .map(|name| {
            Ok((
                format!("{} ms", get(b, name)?.last_as::<Lease>()?.lease_ms),
                (*name).to_owned(),
            ))
        })
        .collect()
}

/// The topologies a `--topology` run covers, each with its report's name.
const TOPOLOGIES: [(&str, &str); 4] = [
    ("single", ""),
    ("tls", "-tls"),
    ("sentinel", "-sentinel"),
    ("cluster", "-cluster"),
];

/// `min / median / max` of a summary.
pub fn spread3(s: &Summary) -> String {
    format!("{} / {} / {}", fig(s.min), fig(s.median), fig(s.max))
}

/// A row per topology of the reports `base` (single), `base-tls`, `base-sentinel` and
/// `base-cluster`: the topology, then `cells` of its summary (read as a `T`).
pub fn by_topology<T: DeserializeOwned>(
    b: &Benches,
    header: &str,
    base: &str,
    cells: fn(&T) -> String,
) -> Result<String, BoxError> {
    let rows: Vec<(String, String)> = TOPOLOGIES
        .iter()
        .map(|(topology, suffix)| ((*topology).to_owned(), format!("{base}{suffix}")))
        .collect();
    one_row_each(b, header, &rows, cells)
}

/// An integer with thousands separated by commas (1,786,279).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The README's measurement table.
fn readme(_: &str, b: &Benches) -> Result<String, BoxError> {
    let f: crate::scenarios::failover::Report = get(b, "failover")?.last_as()?;
    let h: crate::scenarios::handover::Report = get(b, "handover")?.last_as()?;
    let r64: rebalance::Last = get(b, "rebalance-64")?.last_as()?;
    let r10k: rebalance::Report = get(b, "rebalance-10k")?.last_as()?;
    let l1k: load::Report = get(b, "load-1k-4")?.last_as()?;
    let l10k: load::Report = get(b, "load-10k")?.last_as()?;
    let l100k: load::Report = get(b, "load-100k")?.last_as()?;
    let roll: rolling::Report = get(b, "rolling")?.last_as()?;
    let sticky: rolling::Report = get(b, "rolling-sticky")?.last_as()?;
    let roll_add: rolling::Report = get(b, "rolling-add")?.last_as()?;
    let roll_state: rolling::Report = get(b, "rolling-handoff")?.last_as()?;
    let add: crate::scenarios::add::Report = get(b, "add")?.last_as()?;
    let zipf: rebalance::Report = get(b, "rebalance-zipf")?.last_as()?;
    let zipf_count: rebalance::Report = get(b, "rebalance-zipf-count")?.last_as()?;
    let max_over_share =
        |r: &rebalance::Report| r.load.as_ref().map_or(f64::NAN, |l| l.max_over_share);
    let shifting: rebalance_load::Report = get(b, "rebalance-load-shifting")?.last_as()?;
    // The other seeds' runs (load mode only): the worst p95 and moves per hot change.
    let seeds = rebalance_load::OTHER_SEEDS
        .iter()
        .map(|name| get(b, name)?.last_as())
        .collect::<Result<Vec<rebalance_load::Report>, _>>()?;
    let worst =
        |f: &dyn Fn(&rebalance_load::Report) -> f64| seeds.iter().map(f).fold(0.0, f64::max);
    let p95 = |m: Option<&ModeReport>| m.map_or(f64::NAN, |m| m.load.max_over_share.p95);
    let per_hot_change = |r: &rebalance_load::Report| r.moves_per_hot_change.unwrap_or(f64::NAN);
    let cmd = |n: &str| get(b, n).map(|x| x.command.clone());
    Ok(format!(
        "| what | command | result |\n|---|---|---|\n\
         | take-over after SIGKILL, past the real lease expiry | `{}` | median {} ms late |\n\
         | graceful hand-over (SIGTERM → follower leads) | `{}` | median {} ms |\n\
         | a duty blocking its 2-worker runtime for 2.5 leases | `{}` | default elector, every worker blocked: lease lost, the duty sees its term over on resuming; `spawn_dedicated`: lease kept, no successor |\n\
         | 64 partitions / 4 replicas: a killed replica's partitions owned again | `{}` | {}; lease 2 s, its session expired at {} |\n\
         | … a joiner: balanced, partitions moved | same | {}; {} moved (its share) |\n\
         | 10,000 partitions / 10 replicas: cold start → all owned, a kill → owned again | `{}` | {}; {} after the kill |\n\
         | steady Redis load, 1,000 partitions on 4 replicas | `{}` | {} requests/s, {} % of a core |\n\
         | … 10,000 partitions on 10 replicas (10 cold starts) | `{}` | {} % of a core, {}× that of 1,000; all owned ≤ {} |\n\
         | … 100,000 partitions on 10 replicas | `{}` | {} % of a core; all owned after {} (lease 10 s) |\n\
         | rolling restart of 4 replicas (64 partitions): longest a partition went unowned | `{}` | {} ms, {} moved; with `--sticky`: {} moved |\n\
         | … a deploy adding 8 partitions | `{}` | {} refused; {} of {} partitions owned at the end; spread {} |\n\
         | … each term handing 4 KiB of state to the next owner | `{}` | state delivered in {} of {} planned moves, {} stale; longest unowned {} ms |\n\
         | a partition added at runtime: owned after | `{}` | median {} ms (renew interval {} ms) |\n\
         | Zipf-sized tenants on 4 replicas: largest load / its share | `{}` | {} balanced by weight, {} by count |\n\
         | … their 8 hottest changing every minute, balanced by the load callbacks report: largest load / its share at p95; moves | `{}` | {} ({} by count); {} moves per hot tenant changed; with seeds 7, 1, 2, 3 at worst {} and {} |\n",
        cmd("failover")?,
        fig(f.overshoot_ms.median),
        cmd("handover")?,
        fig(h.handover_ms.median),
        cmd("stall")?,
        cmd("rebalance-64")?,
        rebalance::secs_over(&r64, |o| o.kill_all_owned_ms, r64.report.kill.all_owned_ms),
        secs(r64.report.kill.expiry_ms),
        rebalance::secs_over(&r64, |o| o.join_balanced_ms, r64.report.join.balanced_ms),
        r64.report.join.moved,
        cmd("rebalance-10k")?,
        secs(r10k.cold_start.all_owned_ms),
        secs(r10k.kill.all_owned_ms),
        cmd("load-1k-4")?,
        fig(l1k.report.requests_per_sec),
        fig(l1k.report.redis_cpu_pct),
        cmd("load-10k")?,
        fig(l10k.report.redis_cpu_pct),
        fig(load::redis_cpu_ratio(&l10k)),
        secs(l10k.report.all_owned_ms),
        cmd("load-100k")?,
        fig(l100k.report.redis_cpu_pct),
        secs(l100k.report.all_owned_ms),
        cmd("rolling")?,
        fig(roll.max_unowned_ms),
        roll.moved,
        sticky.moved,
        cmd("rolling-add")?,
        roll_add.refused,
        if roll_add.all_owned {
            roll_add.partitions_after.to_string()
        } else {
            "not all".to_owned()
        },
        roll_add.partitions_after,
        roll_add.spread,
        cmd("rolling-handoff")?,
        roll_state.detail.hand_offs.state_delivered,
        roll_state.detail.hand_offs.moved,
        roll_state.detail.hand_offs.stale,
        fig(roll_state.detail.hand_offs.unowned_ms.max),
        cmd("add")?,
        fig(add.owned_ms.p50),
        fig(add.renew_interval_ms),
        cmd("rebalance-zipf")?,
        fig(max_over_share(&zipf)),
        fig(max_over_share(&zipf_count)),
        cmd("rebalance-load-shifting")?,
        fig(p95(shifting.under_test.as_ref())),
        fig(p95(shifting.baselines.get("count_only"))),
        fig(per_hot_change(&shifting)),
        fig(worst(&|r| p95(r.under_test.as_ref()))),
        fig(worst(&per_hot_change)),
    ))
}

/// `text` with every marked table regenerated.
///
/// # Errors
/// A marker without its end, or a generator's error.
pub fn render(text: &str, benches: &Benches) -> Result<String, BoxError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let (before, marker) = rest.split_at(at);
        out.push_str(before);
        let line_end = marker
            .find('\n')
            .ok_or("a table marker without a newline")?;
        let name = marker[OPEN.len()..line_end]
            .trim()
            .trim_end_matches("-->")
            .trim();
        let close = marker
            .find(CLOSE)
            .ok_or_else(|| format!("table {name:?} has no {CLOSE}"))?;
        out.push_str(&marker[..=line_end]);
        out.push_str(&generate(name, benches)?);
        out.push_str(CLOSE);
        rest = &marker[close + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Regenerates the tables of `files` (relative to `root`) from `root/docs/bench`;
/// rewrites them with `write`, else returns the files that differ.
///
/// # Errors
/// Unreadable files or reports, or a generator's error.
pub fn run(root: &Path, files: &[PathBuf], write: bool) -> Result<Vec<PathBuf>, BoxError> {
    let benches = load(&root.join("docs/bench"))?;
    let mut stale = Vec::new();
    for file in files {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path)?;
        let new = render(&text, &benches)?;
        if new != text {
            if write {
                std::fs::write(&path, new)?;
            }
            stale.push(file.clone());
        }
    }
    Ok(stale)
}

/// `leasehold-bench tables`: checks the docs' tables against the reports, or rewrites
/// them (`--write`).
///
/// # Errors
/// A generator's error, or (without `--write`) tables out of date.
pub fn check(args: &TablesArgs) -> Result<(), BoxError> {
    let files: Vec<PathBuf> = DOCS.iter().map(Into::into).collect();
    let stale = run(&args.root, &files, args.write)?;
    match (stale.is_empty(), args.write) {
        (true, _) => Ok(()),
        (false, true) => {
            for f in &stale {
                eprintln!("rewrote the tables of {}", f.display());
            }
            Ok(())
        }
        (false, false) => Err(format!(
            "tables out of date with docs/bench/*.json in {}: run `leasehold-bench tables --write`",
            stale
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into()),
    }
}

/// `n` and `what`, plural unless `n` is 1: "1 stale write", "10 stale writes".
pub fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{} {what}s", thousands(n))
    }
}

#[cfg(test)]
mod tests;
