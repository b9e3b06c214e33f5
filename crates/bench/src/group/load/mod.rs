//! `load`: how long a cold start takes to converge, and what a balanced group costs
//! in its steady state: requests, the servers' CPU, the coordination scripts' server
//! time, and the replica processes' CPU and memory.
//!
//! Each run starts fresh servers and a fresh fleet of replica processes:
//!
//! 1. A background window (no replica yet) measures the servers' own traffic and CPU
//!    (the Sentinels' `PING`s, the server's cron), which is subtracted below.
//! 2. Every node is set to log every command in its slow log (threshold 0, a long
//!    log), emptied; then every replica is spawned at once.
//! 3. "All owned" and "balanced" are decided from the replicas' own `owned`,
//!    `released` and `joined` lines, folded in as they arrive; nothing polls Redis,
//!    so the slow log and `INFO` see only the replicas' traffic.
//! 4. One lease after balance, the steady window: `INFO commandstats` and `INFO cpu`
//!    of every node, `/proc` of every replica process, and the roster bytes the
//!    processes report (their `roster_bytes` lines) at its start and end.
//! 5. After it: the slow log (scripts before and inside the window; the tick's inside
//!    it are `tick_us`), the settings put back, and one `GroupAdmin::status` read to check
//!    that Redis agrees with the replicas.
//!
//! `--replicas-per-process K` runs the N replicas as N / K processes of K coordinators
//! each (`process-1`, ...; the replica ids stay `replica-1` ... `replica-N`); the
//! per-process figures (CPU, RSS) are then per process of K. Lists of partition and
//! replica counts run every pair, each with its summary line; the last one compares
//! them.
//!
//! On a cluster it sums every node; under Sentinel it reads the primary; under TLS,
//! the server's plain port. With `--redis-url` it changes that server's slow log
//! settings for the run (and empties its slow log).

mod report;

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::clock::{now_us, span_ms};
use crate::group::event::PartitionEvent;
use crate::group::harness::{Fleet, convergence_limit};
use crate::group::ownership::Progress;
use crate::group::status::{balanced, counts, describe};
use crate::proc_stats::{self, ProcSample};
use crate::redis_stats::{self, REQUESTS, SLOWLOG_MAX_LEN, ServerSample, Stat};
use crate::stats::{Percentiles, max_of, round3};
use crate::store::{BoxError, TargetArgs};

pub use self::report::{LoadReport, LoadSetup, RunReport, SummaryReport, Ticks};

/// What `load` runs (see its options for each field's meaning).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Partition counts, one case each (with `replicas`).
    pub partitions: Vec<usize>,
    /// Replica counts, one case each (with `partitions`).
    pub replicas: Vec<usize>,
    /// Replicas per child process.
    pub replicas_per_process: usize,
    /// The lease of every partition, in milliseconds.
    pub lease_ms: u64,
    /// Length of the steady window, in seconds.
    pub seconds: u64,
    /// Runs of each case.
    pub runs: u64,
    /// How long the cold start may take, in seconds (`None`: from the group's size).
    pub limit_secs: Option<u64>,
    /// Every replica's niceness.
    pub replica_nice: u8,
    /// The Redis set-up.
    pub target: TargetArgs,
}

/// Runs the scenario for each (partition count, replica count) pair and run, printing
/// one JSON line per run and one summary line per pair (the last one compares the
/// pairs).
///
/// # Errors
/// If a replica count is not a multiple of `--replicas-per-process`, a run does not
/// converge in time, a replica misbehaves, or Redis cannot be read.
pub async fn run(settings: &Settings) -> Result<(), BoxError> {
    let runs = usize::try_from(settings.runs)?;
    let cases = cases(
        &settings.partitions,
        &settings.replicas,
        settings.replicas_per_process,
    )?;
    let mut summaries: Vec<SummaryReport> = Vec::new();
    for (i, &(partitions, replicas)) in cases.iter().enumerate() {
        let mut reports = Vec::new();
        let k = settings.replicas_per_process;
        for run in 1..=runs {
            eprintln!(
                "load: {partitions} partitions on {replicas} replicas ({} processes of {k}), run {run}/{runs}",
                replicas / k
            );
            let case = Case {
                partitions,
                replicas,
                run,
            };
            let report = one_run(settings, case).await.map_err(|e| {
                format!("{partitions} partitions on {replicas} replicas, run {run}: {e}")
            })?;
            println!("{}", serde_json::to_string(&report)?);
            reports.push(report);
        }
        let mut summary = report::summarize(&reports)?;
        summaries.push(summary.clone());
        if i + 1 == cases.len() && summaries.len() > 1 {
            summary.comparison = Some(report::compare(&summaries));
        }
        println!("{}", serde_json::to_string(&summary)?);
    }
    Ok(())
}

/// The (partition count, replica count) pairs to run, in order: every partition count
/// with every replica count.
///
/// # Errors
/// If a list is empty, or a replica count is not a multiple of `per_process`.
fn cases(
    partitions: &[usize],
    replicas: &[usize],
    per_process: usize,
) -> Result<Vec<(usize, usize)>, String> {
    if partitions.is_empty() || replicas.is_empty() || per_process == 0 {
        return Err("load needs a partition count, a replica count and K ≥ 1".to_owned());
    }
    if let Some(n) = replicas.iter().find(|&&n| n % per_process != 0) {
        return Err(format!(
            "--replicas {n} is not a multiple of --replicas-per-process {per_process}: \
             every replica process runs {per_process} coordinators"
        ));
    }
    Ok(partitions
        .iter()
        .flat_map(|&p| replicas.iter().map(move |&n| (p, n)))
        .collect())
}

/// The replica processes of `replicas` coordinators, `per_process` in each: (process
/// name, its replica ids). With one per process, each is named after its replica, as
/// in every other scenario.
fn processes(replicas: usize, per_process: usize) -> Vec<(String, Vec<String>)> {
    let ids: Vec<String> = (1..=replicas).map(|i| format!("replica-{i}")).collect();
    if per_process <= 1 {
        return ids.into_iter().map(|id| (id.clone(), vec![id])).collect();
    }
    ids.chunks(per_process)
        .enumerate()
        .map(|(j, chunk)| (format!("process-{}", j + 1), chunk.to_vec()))
        .collect()
}

/// Which run: its partition count, its replica count, its number (from 1).
#[derive(Debug, Clone, Copy)]
struct Case {
    partitions: usize,
    replicas: usize,
    run: usize,
}

/// One cold start and steady window on fresh servers and replicas.
async fn one_run(settings: &Settings, case: Case) -> Result<RunReport, BoxError> {
    let partitions = case.partitions;
    let mut fleet = Fleet::start(
        &settings.target,
        "load",
        partitions,
        settings.lease_ms,
        None,
        Duration::from_millis(50),
        settings.replica_nice,
    )?;
    let result = measure(&mut fleet, settings, case).await;
    let stopped = fleet.shutdown().await;
    let report = result?;
    stopped?;
    Ok(report)
}

async fn measure(
    fleet: &mut Fleet,
    settings: &Settings,
    case: Case,
) -> Result<RunReport, BoxError> {
    let window = Duration::from_secs(settings.seconds);
    let mut conns = Vec::new();
    for url in &fleet.servers.stats_urls {
        conns.push(redis_stats::connect(url).await?);
    }
    // What the servers see before any replica runs (the Sentinels' PINGs, the
    // server's cron): not the replicas' doing, so it is subtracted below.
    let background = Window::measure(&mut conns, &[], window).await?;
    eprintln!(
        "background before any replica, over {:.3} s: {}; server CPU {:.2} %",
        background.secs,
        background.describe(),
        background.cpu_pct()
    );
    let saved = redis_stats::start_slowlog(&mut conns).await?;
    let measured = steady(fleet, &mut conns, settings, case).await;
    let restored = redis_stats::restore_slowlog(&mut conns, &saved).await;
    let steady = measured?;
    restored?;

    // After the window, outside it: does Redis agree with the replicas' reports?
    let live = fleet.live();
    let status = fleet.watch.status().await?.ok_or("the group is gone")?;
    let redis_counts = counts(&status, &live);
    if !balanced(&status, &live) || redis_counts != steady.progress.counts() {
        return Err(format!(
            "Redis disagrees with the replicas at the end: Redis says {}; the replicas say {}",
            describe(&status),
            steady.progress.describe()
        )
        .into());
    }
    Ok(steady.report(settings, fleet, case, &background))
}

/// What one run measured from the spawn to the end of the steady window.
#[derive(Debug)]
struct Steady {
    /// First spawn → all owned, → balanced (ms).
    all_owned_ms: f64,
    balanced_ms: f64,
    /// The steady window.
    window: Window,
    /// The replicas' counters at the end of the window.
    progress: Progress,
    /// `owned` lines during the window.
    moves: u64,
    /// Script runs (ms): all since the spawn, those before the window, those inside.
    scripts: Vec<f64>,
    cold_scripts: Vec<f64>,
    steady_scripts: Vec<f64>,
    /// Every script run (ms) by the group script's name.
    by_name: BTreeMap<String, Vec<f64>>,
    /// The tick script's runs inside the window (µs).
    steady_ticks: Vec<f64>,
    /// Roster bytes the replicas reported receiving: before the window, and inside it.
    cold_roster_bytes: u64,
    steady_roster_bytes: u64,
}

/// Spawns the replicas, waits for balance by their lines, one lease more, then measures
/// the steady window and reads the slow logs.
async fn steady(
    fleet: &mut Fleet,
    conns: &mut [MultiplexedConnection],
    settings: &Settings,
    case: Case,
) -> Result<Steady, BoxError> {
    let partitions = case.partitions;
    let lease = fleet.lease();
    let limit = settings
        .limit_secs
        .map_or_else(|| convergence_limit(partitions, lease), Duration::from_secs);
    let since = Instant::now();
    let start_us = now_us();
    for (name, replicas) in processes(case.replicas, settings.replicas_per_process) {
        fleet.spawn_many(&name, &replicas)?;
    }
    let p = fleet
        .wait_events("cold start: all owned", since, limit, |p| {
            p.milestones.all_owned_us.is_some()
        })
        .await?;
    let all_owned_ms = p
        .milestones
        .all_owned_us
        .map_or(0.0, |at| span_ms(start_us, at));
    eprintln!("cold start: all owned after {all_owned_ms:.1} ms");
    let p = fleet
        .wait_events("cold start: balanced", since, limit, |p| {
            p.milestones.balanced_us.is_some()
        })
        .await?;
    let balanced_ms = p
        .milestones
        .balanced_us
        .map_or(0.0, |at| span_ms(start_us, at));
    eprintln!(
        "cold start: balanced after {balanced_ms:.1} ms ({}); {} lines",
        p.describe(),
        fleet.log.len()
    );
    tokio::time::sleep(lease).await;
    fleet
        .wait_events(
            "balanced again before the window",
            since,
            limit + lease,
            Progress::balanced,
        )
        .await?;

    let marks = redis_stats::slowlog_marks(conns).await?;
    let from_line = fleet.log.len();
    let pids = fleet.pids();
    let cold_roster_bytes = fleet.log.roster_bytes();
    let window = Window::measure(conns, &pids, Duration::from_secs(settings.seconds)).await?;
    let steady_roster_bytes = fleet.log.roster_bytes().saturating_sub(cold_roster_bytes);
    let progress = fleet.log.progress();
    let moves = fleet
        .log
        .since(from_line)
        .iter()
        .filter(|l| matches!(l.event, PartitionEvent::Owned { .. }))
        .count() as u64;
    if !progress.balanced() {
        return Err(format!(
            "not balanced at the end of the window, by the replicas' lines: {}",
            progress.describe()
        )
        .into());
    }
    eprintln!(
        "steady window of {:.3} s: {}; {moves} owner changes",
        window.secs,
        window.describe()
    );

    let logs = redis_stats::slowlog_entries(conns).await?;
    let (mut scripts, mut cold_scripts, mut steady_scripts) = (Vec::new(), Vec::new(), Vec::new());
    let names = leasehold_partitions::script_hashes();
    let mut by_name: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut steady_ticks = Vec::new();
    for (entries, mark) in logs.iter().zip(&marks) {
        if entries.len() as u64 >= SLOWLOG_MAX_LEN {
            eprintln!(
                "warning: a slow log is full ({SLOWLOG_MAX_LEN} entries): the oldest script runs are not counted"
            );
        }
        for e in entries.iter().filter(|e| e.is_script()) {
            let ms = e.duration_us as f64 / 1000.0;
            scripts.push(ms);
            let name = e.script_name(&names);
            if let Some(name) = name {
                by_name.entry(name.to_owned()).or_default().push(ms);
            }
            if name.is_some_and(|n| TICKS.contains(&n)) && e.id > *mark {
                steady_ticks.push(e.duration_us as f64);
            }
            if e.id > *mark {
                steady_scripts.push(ms);
            } else {
                cold_scripts.push(ms);
            }
        }
    }
    Ok(Steady {
        all_owned_ms,
        balanced_ms,
        window,
        progress,
        moves,
        scripts,
        cold_scripts,
        steady_scripts,
        by_name,
        steady_ticks,
        cold_roster_bytes,
        steady_roster_bytes,
    })
}

/// The names of a tick's two scripts in [`leasehold_partitions::script_hashes`]: the
/// whole tick, and the heartbeat a replica sends first when its last tick changed
/// nothing.
const TICKS: [&str; 2] = ["tick", "heartbeat"];

impl Steady {
    fn report(
        &self,
        settings: &Settings,
        fleet: &Fleet,
        case: Case,
        background: &Window,
    ) -> RunReport {
        let w = &self.window;
        let rate = (w.calls_per_sec() - background.calls_per_sec()).max(0.0);
        let cmd_cpu = (w.usec_per_sec() - background.usec_per_sec()).max(0.0) / 1e6 * 100.0;
        let cpu = (w.cpu_pct() - background.cpu_pct()).max(0.0);
        let client_cpu: BTreeMap<String, f64> = w
            .clients
            .iter()
            .map(|(r, c)| (r.clone(), round3(c.cpu_pct)))
            .collect();
        let client_rss: BTreeMap<String, f64> = w
            .clients
            .iter()
            .map(|(r, c)| (r.clone(), round3(c.rss_peak_mib)))
            .collect();
        let replicas = case.replicas;
        RunReport {
            report: LoadReport {
                setup: LoadSetup {
                    scenario: "load".to_owned(),
                    topology: fleet.servers.topology,
                    partitions: case.partitions,
                    replicas,
                    replicas_per_process: settings.replicas_per_process,
                    processes: w.clients.len(),
                    lease_ms: settings.lease_ms,
                    seconds: settings.seconds,
                    replica_nice: settings.replica_nice,
                },
                all_owned_ms: round3(self.all_owned_ms),
                balanced_ms: round3(self.balanced_ms),
                requests_per_sec: round3(rate),
                per_replica_per_sec: round3(rate / replicas as f64),
                background_per_sec: round3(background.calls_per_sec()),
                redis_cpu_pct: round3(cpu),
                redis_cmd_cpu_pct: round3(cmd_cpu),
                client_cpu_pct_max: max_of(client_cpu.values().copied()).unwrap_or(0.0),
                client_rss_mib_max: max_of(client_rss.values().copied()).unwrap_or(0.0),
                script_ms: Percentiles::of(&self.scripts),
                script_count: self.scripts.len() as u64,
                steady_script_ms: Percentiles::of(&self.steady_scripts),
                cold_start_script_ms_max: round3(
                    max_of(self.cold_scripts.iter().copied()).unwrap_or(0.0),
                ),
                script_ms_by_name: self
                    .by_name
                    .iter()
                    .map(|(name, ms)| (name.clone(), Percentiles::of(ms)))
                    .collect(),
                spread: self.progress.spread(),
                steady_moves: self.moves,
                ticks: Ticks {
                    tick_us: Percentiles::of(&self.steady_ticks),
                    tick_count: self.steady_ticks.len() as u64,
                    roster_bytes_per_s: round3(self.steady_roster_bytes as f64 / w.secs),
                    cold_start_roster_bytes: self.cold_roster_bytes,
                },
            },
            run: case.run,
            client_cpu_pct: client_cpu,
            client_rss_mib: client_rss,
        }
    }
}

/// A replica process over the window.
#[derive(Debug, Clone, Copy)]
struct Client {
    cpu_pct: f64,
    rss_peak_mib: f64,
}

/// The stats of one measurement window.
#[derive(Debug, Clone)]
struct Window {
    /// Each of [`REQUESTS`]: calls and server time during the window.
    delta: BTreeMap<String, Stat>,
    /// Server CPU during the window, in seconds (all nodes).
    cpu_secs: f64,
    /// Each replica process's CPU and peak memory.
    clients: BTreeMap<String, Client>,
    /// Its length.
    secs: f64,
}

impl Window {
    /// Reads the servers' counters and the processes' `/proc`, waits `length`, reads
    /// them again.
    async fn measure(
        conns: &mut [MultiplexedConnection],
        pids: &[(String, u32)],
        length: Duration,
    ) -> Result<Self, BoxError> {
        let read_procs = || -> Result<Vec<ProcSample>, BoxError> {
            pids.iter()
                .map(|(_, pid)| proc_stats::sample(*pid))
                .collect()
        };
        let (before, t0) = (redis_stats::sample(conns).await?, now_us());
        let procs_before = read_procs()?;
        tokio::time::sleep(length).await;
        let (after, t1) = (redis_stats::sample(conns).await?, now_us());
        let procs_after = read_procs()?;
        let secs = span_ms(t0, t1) / 1000.0;
        Ok(Self {
            delta: delta(&before, &after),
            cpu_secs: (after.cpu_secs - before.cpu_secs).max(0.0),
            clients: pids
                .iter()
                .zip(procs_before.iter().zip(&procs_after))
                .map(|((replica, _), (b, a))| {
                    let client = Client {
                        cpu_pct: proc_stats::cpu_pct(b, a, secs),
                        rss_peak_mib: a.rss_peak_mib,
                    };
                    (replica.clone(), client)
                })
                .collect(),
            secs,
        })
    }

    fn calls_per_sec(&self) -> f64 {
        self.delta.values().map(|d| d.calls).sum::<u64>() as f64 / self.secs
    }

    fn usec_per_sec(&self) -> f64 {
        self.delta.values().map(|d| d.usec).sum::<u64>() as f64 / self.secs
    }

    /// Server CPU, % of one core.
    fn cpu_pct(&self) -> f64 {
        self.cpu_secs / self.secs * 100.0
    }

    /// Per command: calls per second and server time per call.
    fn describe(&self) -> String {
        let each: Vec<String> = REQUESTS
            .iter()
            .map(|&c| {
                let d = self.delta.get(c).copied().unwrap_or_default();
                format!(
                    "{c} {:.1}/s ({:.0} µs each)",
                    d.calls as f64 / self.secs,
                    d.usec as f64 / d.calls.max(1) as f64
                )
            })
            .collect();
        each.join(", ")
    }
}

/// Each of [`REQUESTS`]: `after − before`.
fn delta(before: &ServerSample, after: &ServerSample) -> BTreeMap<String, Stat> {
    REQUESTS
        .iter()
        .map(|&name| {
            let at = |s: &ServerSample| s.requests.get(name).copied().unwrap_or_default();
            let (a, b) = (at(before), at(after));
            let d = Stat {
                calls: b.calls.saturating_sub(a.calls),
                usec: b.usec.saturating_sub(a.usec),
            };
            (name.to_owned(), d)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_count_runs_with_every_replica_count() {
        assert_eq!(cases(&[1000], &[4], 1), Ok(vec![(1000, 4)]));
        assert_eq!(
            cases(&[200, 1000], &[10, 200], 10),
            Ok(vec![(200, 10), (200, 200), (1000, 10), (1000, 200)])
        );
        let e = cases(&[200], &[10, 25], 10).expect_err("25 is not a multiple of 10");
        assert!(e.contains("--replicas 25") && e.contains("--replicas-per-process 10"));
        assert!(cases(&[], &[4], 1).is_err());
        assert!(cases(&[200], &[4], 0).is_err());
    }

    #[test]
    fn replicas_are_grouped_into_processes_of_k() {
        let one = processes(3, 1);
        assert_eq!(one.len(), 3);
        assert_eq!(
            one[2],
            ("replica-3".to_owned(), vec!["replica-3".to_owned()])
        );
        let grouped = processes(1000, 10);
        assert_eq!(grouped.len(), 100);
        assert_eq!(grouped[0].0, "process-1");
        assert_eq!(grouped[0].1.len(), 10);
        assert_eq!(grouped[99].1[9], "replica-1000");
        let ids: std::collections::HashSet<&String> =
            grouped.iter().flat_map(|(_, ids)| ids).collect();
        assert_eq!(ids.len(), 1000, "every replica id once");
    }
}
