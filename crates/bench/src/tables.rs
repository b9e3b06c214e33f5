//! `leasehold-bench tables`: the figures in the docs, regenerated from the committed
//! reports in `docs/bench/*.json`, so a figure and its source cannot drift apart.
//!
//! `docs/bench/run.sh` runs the benchmarks and stores each command's JSON lines as
//! `docs/bench/<name>.json` (`{"name", "command", "date", "reports": [...]}`; the last
//! report is the summary). A doc marks each generated table with
//! `<!-- table: <generator> -->` and `<!-- /table -->`; `tables --write` rewrites what is
//! between them, `tables --check` (run by the test suite) fails if anything differs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

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

/// One committed benchmark run.
#[derive(Debug, Clone)]
pub struct Bench {
    /// The command, as run (`leasehold-bench ...`).
    pub command: String,
    /// When (UTC date).
    pub date: String,
    /// Every JSON line it printed.
    pub reports: Vec<Value>,
}

impl Bench {
    /// The summary: the last report.
    fn last(&self) -> &Value {
        self.reports.last().unwrap_or(&Value::Null)
    }

    /// The line saying where the figures come from.
    fn source(&self) -> String {
        format!("`{}` ({})", self.command, self.date)
    }
}

/// Reads every `<name>.json` in `dir`.
///
/// # Errors
/// A file that cannot be read or is not a report file.
pub fn load(dir: &Path) -> Result<BTreeMap<String, Bench>, BoxError> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a report file: {e}", path.display()))?;
        let field = |k: &str| {
            v[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{}: no {k:?}", path.display()))
        };
        let bench = Bench {
            command: field("command")?,
            date: field("date")?,
            reports: v["reports"].as_array().cloned().unwrap_or_default(),
        };
        out.insert(field("name")?, bench);
    }
    Ok(out)
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// A figure with sensible precision: one decimal from 10 on, two below.
fn fig(x: f64) -> String {
    if x.is_nan() {
        "?".to_owned()
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn secs(ms: f64) -> String {
    format!("{:.2} s", ms / 1000.0)
}

/// A time in seconds from a report: with several runs (`over_runs.<key>`), the median
/// and the range, else the one run's `single`.
fn secs_over(v: &Value, key: &str, single: &Value) -> String {
    let o = &v["over_runs"];
    match (o["runs"].as_u64(), o[key].get("median")) {
        (Some(runs), Some(median)) => format!(
            "{} median, {:.2}–{} over {runs} runs",
            secs(num(median)),
            num(&o[key]["min"]) / 1000.0,
            secs(num(&o[key]["max"])),
        ),
        _ => secs(num(single)),
    }
}

fn get<'a>(benches: &'a BTreeMap<String, Bench>, name: &str) -> Result<&'a Bench, BoxError> {
    benches
        .get(name)
        .ok_or_else(|| format!("no docs/bench/{name}.json").into())
}

/// `| | min | median | max |` rows of `Summary` objects (`min`, `median`, `max`).
fn summary_rows(report: &Value, rows: &[(&str, &str, bool)]) -> String {
    let mut out = String::from("| | min | median | max |\n|---|---|---|---|\n");
    for (key, label, bold) in rows {
        let s = &report[*key];
        let cells = [num(&s["min"]), num(&s["median"]), num(&s["max"])].map(fig);
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

/// Every generator, by the name a marker gives.
///
/// # Errors
/// A missing report, or one without the fields the table needs.
pub fn generate(name: &str, b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
    match name {
        "failover" => {
            let f = get(b, "failover")?;
            Ok(format!(
                "{}\nFrom {}.\n",
                summary_rows(
                    f.last(),
                    &[
                        ("failover_ms", "failover (ms)", false),
                        ("since_renew_ms", "since last renewal (ms)", false),
                        ("overshoot_ms", "overshoot after real expiry (ms)", true),
                    ],
                ),
                f.source()
            ))
        }
        "handover" => {
            let h = get(b, "handover")?;
            Ok(format!(
                "{}\nFrom {}.\n",
                summary_rows(
                    h.last(),
                    &[
                        ("handover_ms", "hand-over, from sending SIGTERM (ms)", true),
                        ("signal_ms", "of which delivering the signal (ms)", false),
                        (
                            "from_sigterm_ms",
                            "from the child's SIGTERM handler to the follower leading (ms)",
                            false,
                        ),
                    ],
                ),
                h.source()
            ))
        }
        "rebalance-64" | "rebalance-10k" | "rebalance-64-cluster" | "group-500-rebalance" => {
            rebalance(get(b, name)?)
        }
        "group-500-load" => {
            let l = get(b, "group-500-load")?;
            let r = l.last();
            Ok(format!(
                "{} partitions on {} replicas with a {} ms lease, for {} s after a cold start (all owned after {}): **{} moves** at steady state, Redis at {} % of a core, {} requests/s.\n\nFrom {}.\n",
                r["partitions"],
                r["replicas"],
                r["lease_ms"],
                r["seconds"],
                secs(num(&r["all_owned_ms"])),
                r["steady_moves"],
                fig(num(&r["redis_cpu_pct"])),
                fig(num(&r["requests_per_sec"])),
                l.source()
            ))
        }
        "load-1k-4" => {
            let l = get(b, "load-1k-4")?;
            let r = l.last();
            Ok(format!(
                "| partitions | replicas | lease | requests/s | per replica | Redis CPU | tick (server) p50 / max |\n\
                 |---|---|---|---|---|---|---|\n\
                 | {} | {} | {} ms | {} | {} | {} % | {} / {} ms |\n\nFrom {}.\n",
                r["partitions"],
                r["replicas"],
                r["lease_ms"],
                fig(num(&r["requests_per_sec"])),
                fig(num(&r["per_replica_per_sec"])),
                fig(num(&r["redis_cpu_pct"])),
                fig(num(&r["script_ms_by_name"]["tick"]["p50"])),
                fig(num(&r["script_ms_by_name"]["tick"]["max"])),
                l.source()
            ))
        }
        "load-cost" => load_cost(b),
        "load-10k-runs" => {
            let l = get(b, "load-10k")?;
            let r = l.last();
            let runs: Vec<String> = r["all_owned_ms_runs"]
                .as_array()
                .map(|a| a.iter().map(|v| secs(num(v))).collect())
                .unwrap_or_default();
            Ok(format!(
                "{} cold starts of {} partitions on {} replicas (lease {} ms): every partition owned after {} (worst {}).\n\nFrom {}.\n",
                r["runs"],
                r["partitions"],
                r["replicas"],
                r["lease_ms"],
                runs.join(", "),
                secs(num(&r["all_owned_ms"])),
                l.source()
            ))
        }
        "load-wide" => load_wide(get(b, "load-wide")?),
        "scripts" => scripts(b),
        "stall" => stall(get(b, "stall")?),
        "chaos" => chaos(get(b, "chaos")?),
        "simulate" => simulate(get(b, "simulate")?),
        "readme" => readme(b),
        "rolling" => rolling(b),
        "weights" => weights_table(b),
        "load-seeds" => load_seeds_table(b),
        "add" => add(get(b, "add")?),
        "topology-failover" => by_topology(
            b,
            "| topology | overshoot after real expiry (ms) min / median / max | failover (ms) min / median / max |\n|---|---|---|",
            "failover",
            |r| {
                format!(
                    "{} | {}",
                    spread3(&r["overshoot_ms"]),
                    spread3(&r["failover_ms"])
                )
            },
        ),
        "topology-handover" => by_topology(
            b,
            "| topology | hand-over from sending SIGTERM (ms) min / median / max | from the child's SIGTERM handler (ms) min / median / max |\n|---|---|---|",
            "handover",
            |r| {
                format!(
                    "{} | {}",
                    spread3(&r["handover_ms"]),
                    spread3(&r["from_sigterm_ms"])
                )
            },
        ),
        "topology-load" => by_topology(
            b,
            "| topology | requests/s | per replica | server's own traffic subtracted (requests/s) | Redis CPU |\n|---|---|---|---|---|",
            "load-1k-4",
            |r| {
                format!(
                    "{} | {} | {} | {} %",
                    fig(num(&r["requests_per_sec"])),
                    fig(num(&r["per_replica_per_sec"])),
                    fig(num(&r["background_per_sec"])),
                    fig(num(&r["redis_cpu_pct"])),
                )
            },
        ),
        "chaos-summary" => chaos_summary(get(b, "chaos")?),
        "lease-failover" => lease_failover(b),
        "lease-soak" => lease_soak(b),
        other => Err(format!("no table generator named {other:?}").into()),
    }
}

/// `p50 / p99 / max` of a `Summary` or `Percentiles` object.
fn p50_p99_max(s: &Value) -> String {
    format!(
        "{} / {} / {}",
        fig(num(&s["p50"])),
        fig(num(&s["p99"])),
        fig(num(&s["max"]))
    )
}

/// A table of one row per report in `rows` (a first cell, then the report's name):
/// `| first | cells of its summary |`, then where they all come from.
fn one_row_each(
    b: &BTreeMap<String, Bench>,
    header: &str,
    rows: &[(String, String)],
    cells: fn(&Value) -> String,
) -> Result<String, BoxError> {
    let mut out = format!("{header}\n");
    let mut sources = Vec::new();
    for (first, name) in rows {
        let bench = get(b, name)?;
        let _ = writeln!(out, "| {first} | {} |", cells(bench.last()));
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}

/// Which elector a report ran: `spawn` or `spawn_dedicated`.
fn elector(r: &Value) -> &'static str {
    if r["dedicated"].as_bool() == Some(true) {
        "`spawn_dedicated`"
    } else {
        "`spawn`"
    }
}

/// The rows of `names`, each led by its lease (read from the report).
fn by_lease(
    b: &BTreeMap<String, Bench>,
    names: &[&str],
) -> Result<Vec<(String, String)>, BoxError> {
    names
        .iter()
        .map(|name| {
            Ok((
                format!("{} ms", get(b, name)?.last()["lease_ms"]),
                (*name).to_owned(),
            ))
        })
        .collect()
}

/// Lease length against the SIGKILL failover, default and dedicated electors.
fn lease_failover(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
    one_row_each(
        b,
        "| lease | elector | runs | SIGKILL → next leader's duty (ms) p50 / p99 / max | past the real expiry (ms) p50 / p99 / max |\n|---|---|---|---|---|",
        &by_lease(b, &["failover", "failover-250", "failover-250-dedicated"])?,
        |r| {
            format!(
                "{} | {} | {} | {}",
                elector(r),
                r["runs"].as_array().map_or(0, Vec::len),
                p50_p99_max(&r["failover_ms"]),
                p50_p99_max(&r["overshoot_ms"]),
            )
        },
    )
}

/// The soak of short leases with busy runtimes, default and dedicated electors.
fn lease_soak(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
    one_row_each(
        b,
        "| lease | elector | replicas, time | terms | spurious failovers | renew round trip (ms) p50 / p99 / max | leaderless in all (ms) |\n|---|---|---|---|---|---|---|",
        &by_lease(b, &["soak-250", "soak-250-dedicated"])?,
        |r| {
            let reasons = r["spurious_reasons"]
                .as_object()
                .filter(|m| !m.is_empty())
                .map(|m| {
                    let list: Vec<String> = m.iter().map(|(k, v)| format!("{v} {k}")).collect();
                    format!(" ({})", list.join(", "))
                })
                .unwrap_or_default();
            format!(
                "{} | {}, {} s | {} | **{}**{reasons} | {} | {}",
                elector(r),
                r["replicas"],
                r["seconds"],
                r["terms"],
                r["spurious_failovers"],
                p50_p99_max(&r["renew_latency_ms"]),
                fig(num(&r["leaderless_ms_total"])),
            )
        },
    )
}

/// The topologies a `--topology` run covers, each with its report's name.
const TOPOLOGIES: [(&str, &str); 4] = [
    ("single", ""),
    ("tls", "-tls"),
    ("sentinel", "-sentinel"),
    ("cluster", "-cluster"),
];

/// `min / median / max` of a `Summary` object.
fn spread3(s: &Value) -> String {
    format!(
        "{} / {} / {}",
        fig(num(&s["min"])),
        fig(num(&s["median"])),
        fig(num(&s["max"]))
    )
}

/// A row per topology of the reports `base` (single), `base-tls`, `base-sentinel` and
/// `base-cluster`: the topology, then `cells` of its summary.
fn by_topology(
    b: &BTreeMap<String, Bench>,
    header: &str,
    base: &str,
    cells: fn(&Value) -> String,
) -> Result<String, BoxError> {
    let rows: Vec<(String, String)> = TOPOLOGIES
        .iter()
        .map(|(topology, suffix)| ((*topology).to_owned(), format!("{base}{suffix}")))
        .collect();
    one_row_each(b, header, &rows, cells)
}

/// One sentence on the chaos run, for the README.
fn chaos_summary(c: &Bench) -> Result<String, BoxError> {
    let r = c.last();
    let faults: u64 = r["faults"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    Ok(format!(
        "A seeded chaos run (`{}`, {}) accepted {} fenced writes through {faults} faults, \
         the fence refused {}, and the check found **{} violations** \
         ([docs/guarantees.md](docs/guarantees.md#the-chaos-run-zero-stale-writes-under-faults)).\n",
        c.command,
        c.date,
        thousands(r["writes_accepted"].as_u64().unwrap_or(0)),
        count(r["stale_rejected"].as_u64().unwrap_or(0), "stale write"),
        r["violations"],
    ))
}

/// The partition group simulation's totals.
fn simulate(sim: &Bench) -> Result<String, BoxError> {
    let r = sim.last();
    let int = |k: &str| thousands(r[k].as_u64().unwrap_or(0));
    Ok(format!(
        "| seeds | simulated time | events | terms | **violations** | wall time (2 threads) |\n\
         |---|---|---|---|---|---|\n\
         | {} | {:.1} h | {} | {} | **{}** | {:.0} s |\n\n\
         From {}.\n",
        int("seeds"),
        num(&r["simulated_s"]) / 3600.0,
        int("events"),
        int("terms"),
        r["violations"],
        num(&r["wall_s"]),
        sim.source()
    ))
}

/// An integer with thousands separated by commas (1,786,279).
fn thousands(n: u64) -> String {
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

/// The rolling runs side by side.
fn rolling(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
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
        let r = bench.last();
        let _ = writeln!(
            out,
            "| {label} | {} → {} | **{}** | {} | **{} ms** | {} ms | {} | {} | {} |",
            r["partitions_before"],
            r["partitions_after"],
            r["moved"],
            fig(num(&r["moved"]) / num(&r["partitions_before"]).max(1.0)),
            fig(num(&r["max_unowned_ms"])),
            fig(num(&r["sum_unowned_ms"])),
            r["refused"],
            if r["all_owned"].as_bool() == Some(true) {
                "yes"
            } else {
                "no"
            },
            r["spread"],
        );
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}

/// The load-mode runs of shifting tenants with seeds other than the default (42).
const OTHER_SEEDS: [&str; 4] = [
    "rebalance-load-shifting-seed7",
    "rebalance-load-shifting-seed1",
    "rebalance-load-shifting-seed2",
    "rebalance-load-shifting-seed3",
];

/// Balancing by measured load, shifting tenants: the load mode of the default seed's
/// full run, then the load-mode runs of other seeds.
fn load_seeds_table(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
    let mut out = String::from(
        "| seed | max load / share p50 | p95 | max | samples above 1.3 | recoveries (s) | moves per minute | per hot change |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut sources = Vec::new();
    for name in std::iter::once("rebalance-load-shifting").chain(OTHER_SEEDS) {
        let bench = get(b, name)?;
        let r = bench.last();
        let m = &r["load"]["max_over_share"];
        let recoveries: Vec<String> = r["load"]["recovery_secs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| {
                        v.as_f64()
                            .map_or_else(|| "-".to_owned(), |x| format!("{x:.0}"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {} | **{}** | {} | {:.1} % | {} | {} | **{}** |",
            r["seed"],
            fig(num(&m["p50"])),
            fig(num(&m["p95"])),
            fig(num(&m["max"])),
            100.0 * num(&r["load"]["share_above_1_3"]),
            recoveries.join(", "),
            fig(num(&r["moves_per_min"])),
            fig(num(&r["moves_per_hot_change"])),
        );
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}

/// Weighted balance beside count balance of the same tenants, and capacities.
fn weights_table(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
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
        let r = bench.last();
        let load = &r["load"];
        let loads: Vec<String> = load["replicas"]
            .as_object()
            .map(|m| {
                m.values()
                    .map(|v| format!("{} ({})", v["load"], fig(num(&v["share"]))))
                    .collect()
            })
            .unwrap_or_default();
        let moved_weight = r["join"]["moved_weight"]
            .as_u64()
            .map_or_else(|| "-".to_owned(), |w| w.to_string());
        let _ = writeln!(
            out,
            "| {label} | **{}** | {} | {} | {}, {moved_weight} |",
            fig(num(&load["max_over_share"])),
            fig(1.0 + num(&load["max_weight_over_share"])),
            loads.join(", "),
            r["join"]["moved"],
        );
        sources.push(bench.source());
    }
    let _ = write!(out, "\nFrom {}.\n", sources.join("; "));
    Ok(out)
}

/// Partitions added to a running group.
fn add(a: &Bench) -> Result<String, BoxError> {
    let r = a.last();
    Ok(format!(
        "{adds} partitions added one at a time to {p} partitions on {n} replicas (lease {lease} ms, renew interval {ri} ms): owned {p50} ms after the add was sent (median; max {max} ms), the add's own round trip {call} ms; {within} of {adds} within one renew interval + one round trip.\n\nFrom {src}.\n",
        adds = r["adds"],
        p = r["partitions"],
        n = r["replicas"],
        lease = r["lease_ms"],
        ri = fig(num(&r["renew_interval_ms"])),
        p50 = fig(num(&r["owned_ms"]["p50"])),
        max = fig(num(&r["owned_ms"]["max"])),
        call = fig(num(&r["add_call_ms"]["p50"])),
        within = r["within_target"],
        src = a.source(),
    ))
}

fn rebalance(r: &Bench) -> Result<String, BoxError> {
    let v = r.last();
    let (cold, kill, join) = (&v["cold_start"], &v["kill"], &v["join"]);
    let lease = num(&v["lease_ms"]);
    Ok(format!(
        "| event | result |\n|---|---|\n\
         | cold start of {p} partitions on {n} replicas ({hold}) | all owned and balanced after {cold_all}, **{handoffs} hand-offs** |\n\
         | SIGKILL of one replica | all owned again **{kill_all}** after the kill; its session expired {expiry} after it (overshoot {over} ms); bound lease + renew interval = {bound} |\n\
         | a replica joins | balanced after {join_ms} (it joins a served group without settling; a hand-off waits for two ticks in a row that agree, so a joiner waits one renew interval unless the second tick was due anyway), **{moved} partitions moved**: exactly its share |\n\
         \nFrom {src}; final spread {spread}{runs}.\n",
        p = v["partitions"],
        n = v["replicas"],
        // A report with the server's age ran its cold start on a server older than a
        // lease (the group grants after one renew interval); older reports held a lease.
        hold = match cold["server_age_ms"].as_f64() {
            Some(age) => format!(
                "on a server up {}: the group grants after one renew interval",
                secs(age)
            ),
            None => "settle = one lease, then claims".to_owned(),
        },
        cold_all = secs(num(&cold["all_owned_ms"])),
        handoffs = cold["handoffs"],
        kill_all = secs_over(v, "kill_all_owned_ms", &kill["all_owned_ms"]),
        expiry = secs(num(&kill["expiry_ms"])),
        over = fig(num(&kill["overshoot_ms"])),
        bound = secs(lease * 4.0 / 3.0),
        join_ms = secs_over(v, "join_balanced_ms", &join["balanced_ms"]),
        moved = join["moved"],
        src = r.source(),
        spread = v["spread"],
        runs = if v["over_runs"]["runs"].is_u64() {
            " (the last run's; the medians and ranges over every run)"
        } else {
            ""
        },
    ))
}

/// The cost model's table: one row per benchmark at scale.
fn load_cost(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
    let mut out = String::from(
        "| partitions | replicas | lease | all owned after a cold start | Redis CPU (steady) | requests/s | tick p50 / max (server) | longest script | replica CPU / peak RSS |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut rows: Vec<(&Value, &Bench)> = Vec::new();
    let l10 = get(b, "load-10k")?;
    // The per-P summaries of the 1k,10k command, then the 100k command's.
    for r in &l10.reports {
        if r.get("runs").is_some() {
            rows.push((r, l10));
        }
    }
    let l100 = get(b, "load-100k")?;
    rows.push((l100.last(), l100));
    for (r, _) in &rows {
        let tick = &r["script_ms_by_name"]["tick"];
        let _ = writeln!(
            out,
            "| {} | {} | {} s | {} | {} % of a core | {} | {} / {} ms | {} ms | {} % / {} MiB |",
            r["partitions"],
            r["replicas"],
            num(&r["lease_ms"]) / 1000.0,
            secs(num(&r["all_owned_ms"])),
            fig(num(&r["redis_cpu_pct"])),
            fig(num(&r["requests_per_sec"])),
            fig(num(&tick["p50"])),
            fig(num(&tick["max"])),
            fig(num(&r["script_ms"]["max"])),
            fig(num(&r["client_cpu_pct_max"])),
            fig(num(&r["client_rss_mib_max"])),
        );
    }
    let ratio = num(&l10.last()["redis_cpu_ratio"]);
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
    let compare = l.last()["compare"]
        .as_array()
        .ok_or("load-wide: no compare entries")?;
    for c in compare {
        let k = num(&c["replicas_per_process"]).max(1.0);
        let tick = &c["tick_us"];
        let _ = writeln!(
            out,
            "| {} | {} × {} | {} | {} % of a core | {} | {} / {} / {} | {} |",
            c["replicas"],
            num(&c["replicas"]) / k,
            k,
            secs(num(&c["all_owned_ms"])),
            fig(num(&c["redis_cpu_pct"])),
            fig(num(&c["requests_per_sec"])),
            num(&tick["p50"]).round(),
            num(&tick["p99"]).round(),
            num(&tick["max"]).round(),
            num(&c["roster_bytes_per_s"]).round(),
        );
    }
    let _ = write!(out, "\nFrom {}.\n", l.source());
    Ok(out)
}

/// Each group script's server time, by name, at 10,000 partitions.
fn scripts(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
    let niced = get(b, "load-10k")?;
    let plain = get(b, "load-10k-unniced")?;
    let mut out = String::from(
        "| script | runs of it | p50 | p99 | max | max, replicas not niced |\n|---|---|---|---|---|---|\n",
    );
    let by = &niced.last()["script_ms_by_name"];
    let plain_by = &plain.last()["script_ms_by_name"];
    if let Some(map) = by.as_object() {
        for (name, p) in map {
            let _ = writeln!(
                out,
                "| `{name}` | {} | {} ms | {} ms | {} ms | {} ms |",
                if name == "eval" {
                    "first run of each script (body sent)"
                } else {
                    "every call"
                },
                fig(num(&p["p50"])),
                fig(num(&p["p99"])),
                fig(num(&p["max"])),
                fig(num(&plain_by[name]["max"])),
            );
        }
    }
    let _ = write!(out, "\nFrom {} and {}.\n", niced.source(), plain.source());
    Ok(out)
}

fn stall(s: &Bench) -> Result<String, BoxError> {
    let mut out = String::from(
        "| elector | blocked | kept the lease | a successor led | duty's `check()` failed on resuming | `remaining()` on resuming (ms) | stalls reported |\n|---|---|---|---|---|---|---|\n",
    );
    let yes = |v: &Value| {
        if v.as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        }
    };
    for c in s.last()["cases"].as_array().into_iter().flatten() {
        let successor = match c["successor_led_after_block_start_ms"].as_f64() {
            Some(ms) => format!("yes, {} ms after the block began", fig(ms)),
            None => "no".to_owned(),
        };
        let blocked = match c["blocked"].as_str() {
            Some("one_worker") => "one worker",
            Some("all_workers") => "all workers",
            _ => "?",
        };
        let _ = writeln!(
            out,
            "| {} | {blocked} | {} | {successor} | {} | {} | {} |",
            c["elector"].as_str().unwrap_or("?"),
            yes(&c["kept_lease"]),
            yes(&c["duty_saw_term_over_on_resume"]),
            fig(num(&c["remaining_on_resume_ms"])),
            c["stalls_reported"],
        );
    }
    let _ = write!(out, "\nFrom {}.\n", s.source());
    Ok(out)
}

fn chaos(c: &Bench) -> Result<String, BoxError> {
    let r = c.last();
    let mut out = String::from("| fault | count |\n|---|---|\n");
    for (k, v) in r["faults"].as_object().into_iter().flatten() {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    let _ = write!(
        out,
        "\n| checked at the end | result |\n|---|---|\n\
         | fenced writes accepted | {} |\n\
         | stale writes rejected by the fence (a deposed owner still writing) | {} |\n\
         | **violations** (a write accepted with a fence lower than an earlier one, a fence written by two replicas, malformed records, liveness after healing) | **{}** |\n\
         | every partition owned at the end, spread among live replicas | spread {} |\n\
         | availability (fraction of time a partition had an owner writing): min / median | {} % / {} % |\n\
         | longest gap in a partition's ledger | {} ms |\n",
        thousands(r["writes_accepted"].as_u64().unwrap_or(0)),
        count(r["stale_rejected"].as_u64().unwrap_or(0), "stale write"),
        r["violations"],
        r["spread"],
        fig(num(&r["availability"]["min"]) * 100.0),
        fig(num(&r["availability"]["median"]) * 100.0),
        fig(num(&r["longest_gap_ms"])),
    );
    let _ = write!(
        out,
        "\nGaps longer than {} ms, by the fault active when they started:\n\n| fault | gaps | total | longest |\n|---|---|---|---|\n",
        fig(num(&r["gap_threshold_ms"]))
    );
    for (k, g) in r["gaps"].as_object().into_iter().flatten() {
        let _ = writeln!(
            out,
            "| {k} | {} | {} s | {} ms |",
            g["count"],
            fig(num(&g["total_ms"]) / 1000.0),
            fig(num(&g["longest_ms"])),
        );
    }
    let _ = write!(out, "\nFrom {}.\n", c.source());
    Ok(out)
}

/// The README's measurement table.
fn readme(b: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
    let f = get(b, "failover")?.last();
    let h = get(b, "handover")?.last();
    let r64 = get(b, "rebalance-64")?.last();
    let r10k = get(b, "rebalance-10k")?.last();
    let l1k = get(b, "load-1k-4")?.last();
    let l10k = get(b, "load-10k")?.last();
    let l100k = get(b, "load-100k")?.last();
    let roll = get(b, "rolling")?.last();
    let sticky = get(b, "rolling-sticky")?.last();
    let roll_add = get(b, "rolling-add")?.last();
    let roll_state = get(b, "rolling-handoff")?.last();
    let add = get(b, "add")?.last();
    let zipf = get(b, "rebalance-zipf")?.last();
    let zipf_count = get(b, "rebalance-zipf-count")?.last();
    let shifting = get(b, "rebalance-load-shifting")?.last();
    // The other seeds' runs (load mode only): the worst p95 and moves per hot change.
    let seeds = OTHER_SEEDS
        .iter()
        .map(|name| get(b, name).map(Bench::last))
        .collect::<Result<Vec<_>, _>>()?;
    let worst = |f: &dyn Fn(&Value) -> f64| seeds.iter().map(|r| f(r)).fold(0.0, f64::max);
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
        fig(num(&f["overshoot_ms"]["median"])),
        cmd("handover")?,
        fig(num(&h["handover_ms"]["median"])),
        cmd("stall")?,
        cmd("rebalance-64")?,
        secs_over(r64, "kill_all_owned_ms", &r64["kill"]["all_owned_ms"]),
        secs(num(&r64["kill"]["expiry_ms"])),
        secs_over(r64, "join_balanced_ms", &r64["join"]["balanced_ms"]),
        r64["join"]["moved"],
        cmd("rebalance-10k")?,
        secs(num(&r10k["cold_start"]["all_owned_ms"])),
        secs(num(&r10k["kill"]["all_owned_ms"])),
        cmd("load-1k-4")?,
        fig(num(&l1k["requests_per_sec"])),
        fig(num(&l1k["redis_cpu_pct"])),
        cmd("load-10k")?,
        fig(num(&l10k["redis_cpu_pct"])),
        fig(num(&l10k["redis_cpu_ratio"])),
        secs(num(&l10k["all_owned_ms"])),
        cmd("load-100k")?,
        fig(num(&l100k["redis_cpu_pct"])),
        secs(num(&l100k["all_owned_ms"])),
        cmd("rolling")?,
        fig(num(&roll["max_unowned_ms"])),
        roll["moved"],
        sticky["moved"],
        cmd("rolling-add")?,
        roll_add["refused"],
        if roll_add["all_owned"].as_bool() == Some(true) {
            roll_add["partitions_after"].clone()
        } else {
            Value::from("not all")
        },
        roll_add["partitions_after"],
        roll_add["spread"],
        cmd("rolling-handoff")?,
        roll_state["hand_offs"]["state_delivered"],
        roll_state["hand_offs"]["moved"],
        roll_state["hand_offs"]["stale"],
        fig(num(&roll_state["hand_offs"]["unowned_ms"]["max"])),
        cmd("add")?,
        fig(num(&add["owned_ms"]["p50"])),
        fig(num(&add["renew_interval_ms"])),
        cmd("rebalance-zipf")?,
        fig(num(&zipf["load"]["max_over_share"])),
        fig(num(&zipf_count["load"]["max_over_share"])),
        cmd("rebalance-load-shifting")?,
        fig(num(&shifting["load"]["max_over_share"]["p95"])),
        fig(num(
            &shifting["baselines"]["count_only"]["load"]["max_over_share"]["p95"]
        )),
        fig(num(&shifting["moves_per_hot_change"])),
        fig(worst(&|r| num(&r["load"]["max_over_share"]["p95"]))),
        fig(worst(&|r| num(&r["moves_per_hot_change"]))),
    ))
}

/// `text` with every marked table regenerated.
///
/// # Errors
/// A marker without its end, or a generator's error.
pub fn render(text: &str, benches: &BTreeMap<String, Bench>) -> Result<String, BoxError> {
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

/// `n` and `what`, plural unless `n` is 1: "1 stale write", "10 stale writes".
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{} {what}s", thousands(n))
    }
}

#[cfg(test)]
mod tests;
