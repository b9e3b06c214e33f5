//! The JSON lines of `load`: one per run, one summary per (partition count, replica
//! count) pair, and the comparison across the pairs in the last one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{Percentiles, max_of, median, round3};
use crate::store::{BoxError, Topology};

/// The figures of `load`: one cold start and its steady window, or (in a summary) the
/// worst or median of several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// What ran (its fields are the report's own in the JSON).
    #[serde(flatten)]
    pub setup: LoadSetup,
    /// First spawn → every partition owned by a replica (by the replicas' `owned`
    /// lines, on their clock).
    pub all_owned_ms: f64,
    /// First spawn → every partition owned exactly once, every replica joined, spread
    /// ≤ 1 (by the replicas' lines).
    pub balanced_ms: f64,
    /// Requests per second over the steady window, all replicas together (`EVALSHA`,
    /// `EVAL`, `PING` from `INFO commandstats`), minus `background_per_sec`.
    pub requests_per_sec: f64,
    /// `requests_per_sec` / replicas.
    pub per_replica_per_sec: f64,
    /// Requests per second the servers saw over a window of the same length before any
    /// replica started: the Sentinels' `PING`s under Sentinel, 0 elsewhere.
    pub background_per_sec: f64,
    /// CPU of the server processes over the steady window, % of one core:
    /// `used_cpu_user + used_cpu_sys` of `INFO cpu`, summed over the nodes, with the
    /// background window's rate subtracted.
    pub redis_cpu_pct: f64,
    /// Server time of the requests themselves (scripts included), % of one core, from
    /// `INFO commandstats` `usec` (background subtracted).
    pub redis_cmd_cpu_pct: f64,
    /// The busiest replica process's CPU over the steady window, % of one core
    /// (`utime + stime` of `/proc/<pid>/stat`; a process runs K coordinators).
    pub client_cpu_pct_max: f64,
    /// The largest peak RSS of a replica process (`VmHWM`, read at the end of the
    /// window), in MiB.
    pub client_rss_mib_max: f64,
    /// Server-side execution time of the coordination scripts (`EVALSHA`/`EVAL` in the
    /// slow log, threshold 0) from the first spawn to the end of the window, in ms.
    pub script_ms: Percentiles,
    /// How many script runs `script_ms` covers.
    pub script_count: u64,
    /// The same, for the steady window only.
    pub steady_script_ms: Percentiles,
    /// The longest script run before the steady window (cold start and settling), in
    /// ms.
    pub cold_start_script_ms_max: f64,
    /// `script_ms` for each group script by name (`tick`, `claim`, `release`, `add`,
    /// `leave`, `held`, `eval` for a body sent after `NOSCRIPT`).
    pub script_ms_by_name: BTreeMap<String, Percentiles>,
    /// max − min of the replicas' owned counts at the end of the window.
    pub spread: usize,
    /// `owned` lines during the steady window: partitions that changed owner while the
    /// group should have been still.
    pub steady_moves: u64,
    /// The ticks and rosters at steady state (their fields are the report's own in
    /// the JSON).
    #[serde(flatten)]
    pub ticks: Ticks,
}

/// What a `load` case ran, in [`LoadReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSetup {
    /// Always `load`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// Partition count.
    pub partitions: usize,
    /// Replica count (coordinators, N).
    pub replicas: usize,
    /// Coordinators per replica process (K, `--replicas-per-process`).
    #[serde(default)]
    pub replicas_per_process: usize,
    /// Replica processes (N / K).
    #[serde(default)]
    pub processes: usize,
    /// The lease.
    pub lease_ms: u64,
    /// Length of the steady window.
    pub seconds: u64,
    /// The replicas' niceness (`--replica-nice`).
    pub replica_nice: u8,
}

/// The tick's server time and the rosters' bytes at steady state, in [`LoadReport`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Ticks {
    /// Server-side execution time of a tick (`EVALSHA` of the heartbeat's or the whole
    /// tick's digest in the slow log) inside the steady window, in µs
    /// (`script_ms_by_name.heartbeat` and `.tick` have them in ms from the first spawn
    /// on).
    #[serde(default)]
    pub tick_us: Percentiles,
    /// How many tick runs `tick_us` covers.
    #[serde(default)]
    pub tick_count: u64,
    /// Bytes of roster the replicas received per second over the steady window, all
    /// together (`CoordinatorHandle::roster_bytes_received`, as the processes report
    /// it every 100 ms; a tick's reply carries the roster only when it changed, so a
    /// still group's is near 0).
    #[serde(default)]
    pub roster_bytes_per_s: f64,
    /// Bytes of roster the replicas received from the first spawn to the start of the
    /// steady window (the cold start and settling), all together.
    #[serde(default)]
    pub cold_start_roster_bytes: u64,
}

/// One run's line: the figures and each replica's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The figures.
    #[serde(flatten)]
    pub report: LoadReport,
    /// Which run of this partition count (from 1).
    pub run: usize,
    /// Each replica's CPU over the steady window, % of one core.
    pub client_cpu_pct: BTreeMap<String, f64>,
    /// Each replica's peak RSS, in MiB.
    pub client_rss_mib: BTreeMap<String, f64>,
}

/// One partition count's line, after its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryReport {
    /// Over the runs: the worst (largest) `all_owned_ms`, `balanced_ms`,
    /// `redis_cpu_pct`, `client_cpu_pct_max`, `client_rss_mib_max`, `script_ms.max`
    /// and `.p99`, `tick_us.max` and `.p99`, `roster_bytes_per_s`,
    /// `cold_start_script_ms_max`, `spread`, `steady_moves` and `script_count`; the
    /// median of `script_ms.p50`, `tick_us.p50` and of every other figure.
    #[serde(flatten)]
    pub report: LoadReport,
    /// Number of runs.
    pub runs: usize,
    /// Each run's `all_owned_ms`.
    pub all_owned_ms_runs: Vec<f64>,
    /// Each run's `balanced_ms`.
    pub balanced_ms_runs: Vec<f64>,
    /// Each run's `redis_cpu_pct`.
    pub redis_cpu_pct_runs: Vec<f64>,
    /// In the last line of lists of partition or replica counts: each pair's summary
    /// figures.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
}

/// How the cost grows with the partition count and the replica count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// One entry per (partition count, replica count) pair, in the order run.
    pub compare: Vec<Compared>,
    /// `redis_cpu_pct` of the last pair / that of the first; `null` if the first is 0.
    pub redis_cpu_ratio: Option<f64>,
}

/// One pair's summary, in a [`Comparison`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    /// The partition count.
    pub partitions: usize,
    /// The replica count (N).
    pub replicas: usize,
    /// Coordinators per replica process (K).
    pub replicas_per_process: usize,
    /// Its `requests_per_sec`.
    pub requests_per_sec: f64,
    /// Its `redis_cpu_pct`.
    pub redis_cpu_pct: f64,
    /// Its `redis_cmd_cpu_pct`.
    pub redis_cmd_cpu_pct: f64,
    /// Its `script_ms`.
    pub script_ms: Percentiles,
    /// Its `all_owned_ms`.
    pub all_owned_ms: f64,
    /// Its `balanced_ms`.
    pub balanced_ms: f64,
    /// Its `tick_us`.
    pub tick_us: Percentiles,
    /// Its `roster_bytes_per_s`.
    pub roster_bytes_per_s: f64,
    /// Its `client_cpu_pct_max` (per process of K).
    pub client_cpu_pct_max: f64,
}

/// The summary of one partition count's runs.
///
/// # Errors
/// If `runs` is empty.
pub fn summarize(runs: &[RunReport]) -> Result<SummaryReport, BoxError> {
    let first = &runs.first().ok_or("no runs to summarize")?.report;
    let each =
        |f: fn(&LoadReport) -> f64| -> Vec<f64> { runs.iter().map(|r| f(&r.report)).collect() };
    let worst = |f: fn(&LoadReport) -> f64| round3(max_of(each(f)).unwrap_or(0.0));
    let mid = |f: fn(&LoadReport) -> f64| round3(median(&each(f)).unwrap_or(0.0));
    let worst_n = |f: fn(&LoadReport) -> u64| runs.iter().map(|r| f(&r.report)).max().unwrap_or(0);
    let report = LoadReport {
        all_owned_ms: worst(|r| r.all_owned_ms),
        balanced_ms: worst(|r| r.balanced_ms),
        requests_per_sec: mid(|r| r.requests_per_sec),
        per_replica_per_sec: mid(|r| r.per_replica_per_sec),
        background_per_sec: mid(|r| r.background_per_sec),
        redis_cpu_pct: worst(|r| r.redis_cpu_pct),
        redis_cmd_cpu_pct: mid(|r| r.redis_cmd_cpu_pct),
        client_cpu_pct_max: worst(|r| r.client_cpu_pct_max),
        client_rss_mib_max: worst(|r| r.client_rss_mib_max),
        script_ms: Percentiles {
            p50: mid(|r| r.script_ms.p50),
            p99: worst(|r| r.script_ms.p99),
            max: worst(|r| r.script_ms.max),
        },
        script_count: worst_n(|r| r.script_count),
        steady_script_ms: Percentiles {
            p50: mid(|r| r.steady_script_ms.p50),
            p99: worst(|r| r.steady_script_ms.p99),
            max: worst(|r| r.steady_script_ms.max),
        },
        cold_start_script_ms_max: worst(|r| r.cold_start_script_ms_max),
        script_ms_by_name: by_name(runs),
        spread: runs.iter().map(|r| r.report.spread).max().unwrap_or(0),
        steady_moves: worst_n(|r| r.steady_moves),
        ticks: Ticks {
            tick_us: Percentiles {
                p50: mid(|r| r.ticks.tick_us.p50),
                p99: worst(|r| r.ticks.tick_us.p99),
                max: worst(|r| r.ticks.tick_us.max),
            },
            tick_count: worst_n(|r| r.ticks.tick_count),
            roster_bytes_per_s: worst(|r| r.ticks.roster_bytes_per_s),
            cold_start_roster_bytes: worst_n(|r| r.ticks.cold_start_roster_bytes),
        },
        ..first.clone()
    };
    Ok(SummaryReport {
        report,
        runs: runs.len(),
        all_owned_ms_runs: each(|r| r.all_owned_ms),
        balanced_ms_runs: each(|r| r.balanced_ms),
        redis_cpu_pct_runs: each(|r| r.redis_cpu_pct),
        comparison: None,
    })
}

/// Per script name over the runs: the median p50, the worst p99 and max.
fn by_name(runs: &[RunReport]) -> BTreeMap<String, Percentiles> {
    let mut all: BTreeMap<String, Vec<Percentiles>> = BTreeMap::new();
    for r in runs {
        for (name, p) in &r.report.script_ms_by_name {
            all.entry(name.clone()).or_default().push(*p);
        }
    }
    all.into_iter()
        .map(|(name, ps)| {
            let p50s: Vec<f64> = ps.iter().map(|p| p.p50).collect();
            let p = Percentiles {
                p50: round3(median(&p50s).unwrap_or(0.0)),
                p99: round3(max_of(ps.iter().map(|p| p.p99)).unwrap_or(0.0)),
                max: round3(max_of(ps.iter().map(|p| p.max)).unwrap_or(0.0)),
            };
            (name, p)
        })
        .collect()
}

/// The comparison of the summaries of each pair, in the order run.
pub fn compare(summaries: &[SummaryReport]) -> Comparison {
    let compare: Vec<Compared> = summaries
        .iter()
        .map(|s| Compared {
            partitions: s.report.setup.partitions,
            replicas: s.report.setup.replicas,
            replicas_per_process: s.report.setup.replicas_per_process,
            requests_per_sec: s.report.requests_per_sec,
            tick_us: s.report.ticks.tick_us,
            roster_bytes_per_s: s.report.ticks.roster_bytes_per_s,
            client_cpu_pct_max: s.report.client_cpu_pct_max,
            redis_cpu_pct: s.report.redis_cpu_pct,
            redis_cmd_cpu_pct: s.report.redis_cmd_cpu_pct,
            script_ms: s.report.script_ms,
            all_owned_ms: s.report.all_owned_ms,
            balanced_ms: s.report.balanced_ms,
        })
        .collect();
    let ratio = match (compare.first(), compare.last()) {
        (Some(first), Some(last)) if first.redis_cpu_pct > 0.0 => {
            Some(round3(last.redis_cpu_pct / first.redis_cpu_pct))
        }
        _ => None,
    };
    Comparison {
        compare,
        redis_cpu_ratio: ratio,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(partitions: usize, all_owned_ms: f64, redis_cpu_pct: f64, p50: f64) -> LoadReport {
        LoadReport {
            setup: LoadSetup {
                scenario: "load".to_owned(),
                topology: Topology::Single,
                partitions,
                replicas: 3,
                replicas_per_process: 1,
                processes: 3,
                lease_ms: 1000,
                seconds: 3,
                replica_nice: 0,
            },
            all_owned_ms,
            balanced_ms: all_owned_ms + 1.0,
            requests_per_sec: redis_cpu_pct * 10.0,
            per_replica_per_sec: 1.0,
            background_per_sec: 0.0,
            redis_cpu_pct,
            redis_cmd_cpu_pct: redis_cpu_pct / 2.0,
            client_cpu_pct_max: redis_cpu_pct,
            client_rss_mib_max: 10.0 + redis_cpu_pct,
            script_ms: Percentiles {
                p50,
                p99: p50 * 2.0,
                max: p50 * 3.0,
            },
            script_count: 100,
            steady_script_ms: Percentiles::default(),
            cold_start_script_ms_max: p50 * 3.0,
            script_ms_by_name: [(
                "tick".to_owned(),
                Percentiles {
                    p50,
                    p99: p50,
                    max: p50 * 2.0,
                },
            )]
            .into(),
            spread: 1,
            steady_moves: 0,
            ticks: Ticks {
                tick_us: Percentiles {
                    p50: p50 * 1000.0,
                    p99: p50 * 2000.0,
                    max: p50 * 3000.0,
                },
                tick_count: 30,
                roster_bytes_per_s: redis_cpu_pct * 100.0,
                cold_start_roster_bytes: 5000,
            },
        }
    }

    fn run(report: LoadReport, run: usize) -> RunReport {
        RunReport {
            report,
            run,
            client_cpu_pct: BTreeMap::new(),
            client_rss_mib: BTreeMap::new(),
        }
    }

    #[test]
    fn a_summary_keeps_the_worst_and_the_median() {
        let runs = [
            run(report(100, 2000.0, 1.0, 0.1), 1),
            run(report(100, 2500.0, 3.0, 0.3), 2),
            run(report(100, 2100.0, 2.0, 0.2), 3),
        ];
        let s = summarize(&runs).expect("three runs");
        assert_eq!(s.runs, 3);
        assert_eq!(s.report.all_owned_ms, 2500.0);
        assert_eq!(s.report.balanced_ms, 2501.0);
        assert_eq!(s.report.redis_cpu_pct, 3.0);
        assert_eq!(s.report.client_rss_mib_max, 13.0);
        assert_eq!(s.report.script_ms.p50, 0.2, "median of p50");
        assert_eq!(s.report.script_ms.max, 0.9, "worst max");
        assert_eq!(s.report.requests_per_sec, 20.0, "median");
        let tick = s.report.script_ms_by_name["tick"];
        assert_eq!(
            (tick.p50, tick.max),
            (0.2, 0.6),
            "per script: median p50, worst max"
        );
        assert_eq!(
            (s.report.ticks.tick_us.p50, s.report.ticks.tick_us.max),
            (200.0, 900.0),
            "tick: median p50, worst max"
        );
        assert_eq!(s.report.ticks.roster_bytes_per_s, 300.0, "worst");
        assert_eq!(s.all_owned_ms_runs, [2000.0, 2500.0, 2100.0]);
        assert_eq!(s.redis_cpu_pct_runs, [1.0, 3.0, 2.0]);
        assert!(summarize(&[]).is_err());
    }

    #[test]
    fn a_comparison_lists_each_count_and_the_cpu_ratio() {
        let small = summarize(&[run(report(200, 10.0, 2.0, 0.1), 1)]).expect("one run");
        let large = summarize(&[run(report(1000, 20.0, 5.0, 0.4), 1)]).expect("one run");
        let c = compare(&[small.clone(), large]);
        assert_eq!(c.compare.len(), 2);
        assert_eq!(c.compare[1].partitions, 1000);
        assert_eq!(c.redis_cpu_ratio, Some(2.5));
        let idle = summarize(&[run(report(200, 10.0, 0.0, 0.1), 1)]).expect("one run");
        assert_eq!(compare(&[idle, small]).redis_cpu_ratio, None);
    }

    #[test]
    fn a_comparison_of_replica_counts_has_one_entry_per_count() {
        let at = |replicas: usize, per_process: usize, cpu: f64, p50: f64| {
            let mut r = report(1000, 2000.0 + replicas as f64, cpu, p50);
            r.setup.replicas = replicas;
            r.setup.replicas_per_process = per_process;
            r.setup.processes = replicas / per_process;
            summarize(&[run(r, 1)]).expect("one run")
        };
        let c = compare(&[at(10, 1, 2.0, 0.1), at(200, 10, 8.0, 0.3)]);
        let json = serde_json::to_value(&c).expect("serializes");
        let entries = json["compare"].as_array().expect("a list");
        assert_eq!(entries.len(), 2);
        for (entry, replicas) in entries.iter().zip([10, 200]) {
            assert_eq!(entry["replicas"], replicas);
            for key in [
                "partitions",
                "redis_cpu_pct",
                "tick_us",
                "all_owned_ms",
                "roster_bytes_per_s",
                "script_ms",
            ] {
                assert!(entry.get(key).is_some(), "{key} missing from {entry}");
            }
        }
        assert_eq!(entries[1]["tick_us"]["p50"], 300.0);
        assert_eq!(entries[1]["all_owned_ms"], 2200.0);
        assert_eq!(entries[1]["replicas_per_process"], 10);
        assert_eq!(c.redis_cpu_ratio, Some(4.0));
    }

    #[test]
    fn the_json_has_the_documented_keys() {
        let mut s = summarize(&[run(report(200, 10.0, 2.0, 0.1), 1)]).expect("one run");
        let plain = serde_json::to_value(&s).expect("serializes");
        assert!(plain.get("compare").is_none());
        s.comparison = Some(compare(std::slice::from_ref(&s)));
        let json = serde_json::to_value(&s).expect("serializes");
        for key in [
            "scenario",
            "topology",
            "partitions",
            "replicas",
            "lease_ms",
            "seconds",
            "all_owned_ms",
            "balanced_ms",
            "requests_per_sec",
            "per_replica_per_sec",
            "background_per_sec",
            "redis_cpu_pct",
            "redis_cmd_cpu_pct",
            "client_cpu_pct_max",
            "client_rss_mib_max",
            "spread",
            "runs",
            "all_owned_ms_runs",
            "balanced_ms_runs",
            "redis_cpu_pct_runs",
            "compare",
            "redis_cpu_ratio",
            "replicas_per_process",
            "processes",
            "tick_us",
            "tick_count",
            "roster_bytes_per_s",
            "cold_start_roster_bytes",
        ] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
        assert_eq!(json["script_ms"]["p50"], 0.1);
        assert!(json["script_ms"]["max"].is_number());
        assert_eq!(json["compare"][0]["partitions"], 200);
        let line = serde_json::to_value(run(report(200, 1.0, 1.0, 1.0), 4)).expect("serializes");
        assert_eq!(line["run"], 4);
        assert!(line["client_cpu_pct"].is_object());
    }
}
