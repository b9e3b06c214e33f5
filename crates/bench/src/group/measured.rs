//! `rebalance-load --load shifting|stationary|feedback`: balancing by measured load against
//! synthetic tenants whose loads follow a Zipf law ([`tenants`](crate::group::tenants)),
//! shifting every `--shift-secs` or stationary with noise (with `feedback`, stationary
//! arrival rates into queues whose owners report what they achieve:
//! [`feedback`](crate::group::feedback)), in three modes run one after another, each on
//! its own servers, group and replica processes:
//!
//! - `load` (the mode under test): every callback reports its partition's load
//!   (`Ownership::report_load`) and the group takes its weights from the reports
//!   (`GroupConfigBuilder::weights_from_loads`, `--half-life-ms`,
//!   `--threshold-percent`);
//! - `static_weights`: the weights are set once to the loads at the start
//!   (`GroupAdmin::set_weight`) and never updated while the loads shift;
//! - `count_only`: no weights, the group balances by count.
//!
//! The weighted modes start with the weights set to the loads at the start (`load`
//! too, unless `--unseeded`: its reports then start from weight 1). The replicas are
//! spawned at once; the schedule's epoch (its first shift comes `--shift-secs` after
//! it) lies `--settle-secs` after the spawn, and the measured window is the
//! `--seconds` after the epoch. Over that window, every `--sample-ms`, the bench takes
//! the placement the replicas' own `owned` and `released` lines show and the true
//! synthetic loads (not the weights) and computes [`max_over_share`]; the report gives
//! its p50, p95 and max, and the owner changes in the window (`moves`,
//! `moves_per_min`) beside the hot-tenant changes (`hot_changes_per_min`: the hot ranks
//! that changed partition at the shifts inside the window, per minute).
//!
//! Every mode also reads the group's ledger of moves over the whole run: the planned
//! hand-offs' time without an owner ([`PlannedHandOffs`]) and the hand-offs that went
//! back to their giver (`self_moves`); and counts the ledger's moves (self-moves
//! included) from one minute after the spawn to the window's end
//! (`moves_after_first_minute`: a fleet whose loads hold still should move nothing
//! then). With `feedback`, the `load` mode's report gains
//! [`CatchUps`]: the backlogs its terms started with.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use leasehold_partitions::{GroupAdmin, Move, MoveCause};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::clock::{now_us, span_ms};
use crate::group::GroupSettings;
use crate::group::event::{PartitionEvent, partition_names};
use crate::group::feedback::{Feedback, Report};
use crate::group::harness::{Fleet, convergence_limit};
use crate::group::ledger;
use crate::group::ownership::OwnerChanges;
use crate::group::process::{LoadReports, Logged};
use crate::group::rebalance::poll_interval;
use crate::group::status::PREFIX;
use crate::group::tenants::{LoadMode, Schedule, max_over_share, partition_index};
use crate::stats::{percentile, round3};
use crate::store::{BoxError, Topology};

/// The load of the largest tenant (rank 1).
pub const SCALE: f64 = 1000.0;

/// The `max_over_share` issue 24 asks the p95 of shifting loads to stay within.
pub const TARGET: f64 = 1.3;

/// How a mode balances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Weights from the reported loads (the mode under test).
    Load,
    /// Weights set once to the loads at the start.
    StaticWeights,
    /// No weights.
    CountOnly,
}

impl Mode {
    /// Its name in reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::Load => "load",
            Self::StaticWeights => "static_weights",
            Self::CountOnly => "count_only",
        }
    }
}

/// p50, p95 and max of a series over time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OverTime {
    /// The nearest-rank median.
    pub p50: f64,
    /// The nearest-rank 95th percentile.
    pub p95: f64,
    /// The largest value.
    pub max: f64,
}

impl OverTime {
    /// Of `values` (rounded to 3 decimals); all 0 when empty.
    pub fn of(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| percentile(&sorted, q).map_or(0.0, round3);
        Self {
            p50: at(0.5),
            p95: at(0.95),
            max: at(1.0),
        }
    }
}

/// p50, p99 and max of a set of values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Tail {
    /// The nearest-rank median.
    pub p50: f64,
    /// The nearest-rank 99th percentile.
    pub p99: f64,
    /// The largest value.
    pub max: f64,
}

impl Tail {
    /// Of `values` (rounded to 3 decimals); all 0 when empty.
    pub fn of(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| percentile(&sorted, q).map_or(0.0, round3);
        Self {
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// The planned hand-offs of a run: the ledger's entries of cause `handoff` (the cold
/// start and the settling included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PlannedHandOffs {
    /// How many.
    pub count: usize,
    /// How long each left its partition without an owner (the entry's `unowned`: from
    /// the giver's release to the taker's claim, on the server's clock), in ms; all 0
    /// without hand-offs.
    pub unowned_ms: Tail,
}

/// A ledger entry, as the hand-off figures read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry<'a> {
    cause: MoveCause,
    from: Option<&'a str>,
    to: &'a str,
    unowned: Option<Duration>,
    /// When the new term started (the server's clock, ms).
    started_ms: u64,
}

impl<'a> From<&'a Move> for Entry<'a> {
    fn from(m: &'a Move) -> Self {
        Self {
            cause: m.cause,
            from: m.from.as_deref(),
            to: &m.to,
            unowned: m.unowned,
            started_ms: m.started_ms,
        }
    }
}

/// The moves among `entries` (every new term but a first owner's: self-moves count)
/// that started from `from_ms` to `to_ms` (both included).
fn moves_between(entries: &[Entry<'_>], from_ms: u64, to_ms: u64) -> usize {
    entries
        .iter()
        .filter(|e| e.cause != MoveCause::New && (from_ms..=to_ms).contains(&e.started_ms))
        .count()
}

/// The planned hand-offs among `entries`, and how many of them went back to their
/// giver (`from` = `to`: a self-move).
fn hand_off_figures(entries: &[Entry<'_>]) -> (PlannedHandOffs, usize) {
    let hand_offs: Vec<&Entry<'_>> = entries
        .iter()
        .filter(|e| e.cause == MoveCause::HandOff)
        .collect();
    let unowned: Vec<f64> = hand_offs
        .iter()
        .filter_map(|e| e.unowned)
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    let self_moves = hand_offs.iter().filter(|e| e.from == Some(e.to)).count();
    (
        PlannedHandOffs {
            count: hand_offs.len(),
            unowned_ms: Tail::of(&unowned),
        },
        self_moves,
    )
}

/// `--load feedback`, the `load` mode: the backlogs its terms started with (their
/// `backlog` lines, the whole run), in ms of the tenant's mean arrivals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CatchUps {
    /// Terms by where their queue came from: `handed_over` (the previous term's
    /// hand-off), `committed` (nothing handed over: the last commit), `origin` (a first
    /// owner: every arrival since the spawn).
    pub terms: BTreeMap<String, usize>,
    /// The backlog of the terms after a move (`handed_over` and `committed`): the
    /// arrivals while nobody served the tenant, and any backlog the giver left.
    pub backlog_ms: Tail,
    /// The backlog of the first owners (`origin`): the cold start's.
    pub first_backlog_ms: Tail,
}

impl CatchUps {
    /// From the `backlog` lines of `log`.
    pub fn of(log: &[Logged]) -> Self {
        let mut out = Self::default();
        let (mut moved, mut first) = (Vec::new(), Vec::new());
        for l in log {
            if let PartitionEvent::Backlog {
                backlog_ms, source, ..
            } = &l.event
            {
                *out.terms.entry(source.clone()).or_default() += 1;
                let ms = *backlog_ms as f64;
                if source == "origin" {
                    first.push(ms);
                } else {
                    moved.push(ms);
                }
            }
        }
        out.backlog_ms = Tail::of(&moved);
        out.first_backlog_ms = Tail::of(&first);
        out
    }
}

/// The loads of one mode over the window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadOverTime {
    /// The heaviest replica's true load over its equal share of the total, sampled.
    pub max_over_share: OverTime,
    /// Samples taken.
    pub samples: usize,
    /// The fraction of the samples whose `max_over_share` is above [`TARGET`] (1.3).
    pub share_above_1_3: f64,
    /// Samples at which some partition had no owner (between a release and the next
    /// claim).
    pub samples_with_unowned: usize,
    /// Per shift in the window (`shifting`): seconds from the shift to the first sample
    /// at or below [`TARGET`] (1.3) before the next shift; `null` if none was.
    pub recovery_secs: Vec<Option<f64>>,
}

/// One mode's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModeReport {
    /// The loads over the window.
    pub load: LoadOverTime,
    /// Owner changes in the window (from the replicas' `owned` lines).
    pub moves: u64,
    /// `moves` per minute of the window.
    pub moves_per_min: f64,
    /// Owner changes per whole minute of the window (the last, partial one included).
    pub moves_by_minute: Vec<u64>,
    /// Spawn → every partition owned.
    pub cold_start_all_owned_ms: f64,
    /// Owner changes from the spawn until the window (the cold start's and the
    /// settling's).
    pub settle_moves: u64,
    /// The group's ledger of moves holds exactly the owner changes the replicas' lines
    /// showed.
    pub ledger_matches_observed: bool,
    /// Partitions per replica at the end (by the replicas' lines).
    pub final_counts: BTreeMap<String, usize>,
    /// With `--series`: every sample of `max_over_share`, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<f64>>,
    /// The planned hand-offs (the ledger's cause `handoff`) of the whole run, and how
    /// long they left their partitions without an owner.
    #[serde(default)]
    pub hand_offs: PlannedHandOffs,
    /// Ledger entries of cause `handoff` whose giver took the partition back (`from` =
    /// `to`), over the whole run.
    #[serde(default)]
    pub self_moves: usize,
    /// The ledger's moves (every new term but a first owner's, self-moves included)
    /// that started from one minute after the spawn to the end of the window (the
    /// server's clock against the bench's: the same machine's).
    #[serde(default)]
    pub moves_after_first_minute: usize,
    /// `--load feedback`, the `load` mode: the backlogs its terms started with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catch_ups: Option<CatchUps>,
}

/// The report of `rebalance-load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadBalanceReport {
    /// Always `rebalance-load`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// Partition (tenant) count.
    pub partitions: usize,
    /// Replicas.
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// `shifting`, `stationary` or `feedback`.
    pub load_mode: String,
    /// The tenants, the damping and the sampling (their fields are the report's own
    /// in the JSON).
    #[serde(flatten)]
    pub settings: Asked,
    /// Shifts inside the window.
    pub shifts: u64,
    /// Hot ranks that changed partition at those shifts.
    pub hot_changes: usize,
    /// `hot_changes` per minute of the window.
    pub hot_changes_per_min: f64,
    /// The mode under test (`load`): `load`, `moves`, `moves_per_min`, ...
    #[serde(flatten)]
    pub under_test: Option<ModeReport>,
    /// `moves_per_min / hot_changes_per_min` of `load` (target ≤ 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moves_per_hot_change: Option<f64>,
    /// The same figures for `static_weights` and `count_only`.
    pub baselines: BTreeMap<String, ModeReport>,
}

/// What a `rebalance-load` run was asked for, in [`LoadBalanceReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Asked {
    /// Length of each mode's measured window.
    pub seconds: u64,
    /// Spawn → the window, in seconds.
    pub settle_secs: u64,
    /// The schedule's seed.
    pub seed: u64,
    /// The Zipf exponent.
    pub zipf_s: f64,
    /// The load of the largest tenant.
    pub scale: f64,
    /// Hot ranks that change hands at each shift.
    pub hot: usize,
    /// Time between shifts (shifting only).
    pub shift_secs: u64,
    /// Per-second noise on every load, in %.
    pub noise_percent: u32,
    /// The damping's half-life (`load`).
    pub half_life_ms: u64,
    /// The damping's threshold (`load`).
    pub threshold_percent: u32,
    /// How often a callback reports its load (`load`).
    pub report_every_ms: u64,
    /// Whether `load` started from weights set to the loads at the start.
    pub seeded_weights: bool,
    /// `feedback`: what the callbacks reported, `throughput` or `arrival`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// `feedback`: an owner served a tenant at most this many times its mean arrival
    /// rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_factor: Option<f64>,
    /// How often the placement was sampled.
    pub sample_ms: u64,
}

/// What `rebalance-load` runs (see its options for each field's meaning).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The group.
    pub group: GroupSettings,
    /// Length of each mode's measured window, in seconds.
    pub seconds: u64,
    /// Spawn → the measured window, in seconds.
    pub settle_secs: u64,
    /// The balancing modes to run, in order.
    pub modes: Vec<Mode>,
    /// The seed of the tenants' ranks, shifts and noise.
    pub seed: u64,
    /// The Zipf exponent of the tenants' loads.
    pub load_zipf_s: f64,
    /// `shifting`: how many top ranks move at each shift.
    pub hot: usize,
    /// `shifting`: time between shifts, in seconds.
    pub shift_secs: u64,
    /// Noise on every load, in percent (`None`: the load mode's default).
    pub noise_percent: Option<u32>,
    /// The damping's half-life, in milliseconds.
    pub half_life_ms: u64,
    /// The damping's threshold.
    pub threshold_percent: u32,
    /// How often every callback reports its load, in milliseconds.
    pub report_every_ms: u64,
    /// How often the placement is sampled, in milliseconds.
    pub sample_ms: u64,
    /// The `load` mode starts from weight 1.
    pub unseeded: bool,
    /// Every mode's report gains `series`.
    pub series: bool,
    /// `feedback`: what the callbacks report (`None`: throughput).
    pub report: Option<Report>,
    /// `feedback`: an owner's service rate over the mean arrival rate, at most.
    pub service_factor: f64,
}

/// Runs every mode of `--modes` in turn and prints the report.
///
/// # Errors
/// A fleet that cannot start, a replica that exits, a cold start slower than
/// `--settle-secs`; `--report` without `--load feedback`.
pub async fn run(settings: &Settings, load_mode: LoadMode) -> Result<LoadBalanceReport, BoxError> {
    let feedback = load_mode == LoadMode::Feedback;
    if settings.report.is_some() && !feedback {
        return Err("--report is for --load feedback".into());
    }
    let report = feedback.then(|| settings.report.unwrap_or(Report::Throughput));
    let noise_percent = settings.noise_percent.unwrap_or(match load_mode {
        LoadMode::Shifting => 0,
        LoadMode::Stationary | LoadMode::Feedback => 20,
    });
    let mut template = Schedule {
        mode: load_mode,
        partitions: settings.group.partitions,
        seed: settings.seed,
        zipf_s: settings.load_zipf_s,
        scale: SCALE,
        hot: settings.hot,
        shift_ms: settings.shift_secs.saturating_mul(1000),
        noise_percent,
        epoch_us: 0,
    };
    let minutes = settings.seconds as f64 / 60.0;
    let shifts = template.shift_at(settings.seconds.saturating_mul(1_000_000).saturating_sub(1));
    let hot_changes: usize = (1..=shifts).map(|k| template.hot_changes(k)).sum();
    let mut under_test = None;
    let mut baselines = BTreeMap::new();
    let mut topology = Topology::Single;
    for mode in dedup(&settings.modes) {
        eprintln!("== {} balancing, {} loads", mode.label(), load_mode.label());
        let (report, t) = run_mode(settings, mode, &mut template, report).await?;
        topology = t;
        eprintln!(
            "{}: max load / share p50 {} p95 {} max {}; {} moves ({:.2}/min) [{:?}], {} after the first minute; {} hand-offs, unowned p50 {} p99 {} max {} ms, {} self-moves",
            mode.label(),
            report.load.max_over_share.p50,
            report.load.max_over_share.p95,
            report.load.max_over_share.max,
            report.moves,
            report.moves_per_min,
            report.moves_by_minute,
            report.moves_after_first_minute,
            report.hand_offs.count,
            report.hand_offs.unowned_ms.p50,
            report.hand_offs.unowned_ms.p99,
            report.hand_offs.unowned_ms.max,
            report.self_moves
        );
        match mode {
            Mode::Load => under_test = Some(report),
            other => {
                baselines.insert(other.label().to_owned(), report);
            }
        }
    }
    let hot_changes_per_min = round3(hot_changes as f64 / minutes);
    Ok(LoadBalanceReport {
        scenario: "rebalance-load".to_owned(),
        topology,
        partitions: settings.group.partitions,
        replicas: settings.group.replicas,
        lease_ms: settings.group.lease_ms,
        load_mode: load_mode.label().to_owned(),
        settings: Asked {
            seconds: settings.seconds,
            settle_secs: settings.settle_secs,
            seed: settings.seed,
            zipf_s: settings.load_zipf_s,
            scale: SCALE,
            hot: settings.hot,
            shift_secs: settings.shift_secs,
            noise_percent,
            half_life_ms: settings.half_life_ms,
            threshold_percent: settings.threshold_percent,
            report_every_ms: settings.report_every_ms,
            seeded_weights: !settings.unseeded,
            report: report.map(|r| r.label().to_owned()),
            service_factor: feedback.then_some(settings.service_factor),
            sample_ms: settings.sample_ms,
        },
        shifts,
        hot_changes,
        hot_changes_per_min,
        moves_per_hot_change: under_test
            .as_ref()
            .filter(|_| hot_changes > 0)
            .map(|r| round3(r.moves_per_min / hot_changes_per_min)),
        under_test,
        baselines,
    })
}

/// `modes` in order, each once.
fn dedup(modes: &[Mode]) -> Vec<Mode> {
    let mut out: Vec<Mode> = Vec::new();
    for m in modes {
        if !out.contains(m) {
            out.push(*m);
        }
    }
    out
}

/// One mode on a fleet of its own; `template`'s epoch is set for it. With `report`
/// (`--load feedback`), its `load` mode serves queues and reports `report`.
async fn run_mode(
    settings: &Settings,
    mode: Mode,
    template: &mut Schedule,
    report: Option<Report>,
) -> Result<(ModeReport, Topology), BoxError> {
    let mut fleet = Fleet::start(
        &settings.group.target,
        &format!("rebalance-load-{}", mode.label().replace('_', "-")),
        settings.group.partitions,
        settings.group.lease_ms,
        settings.group.settle_ms,
        poll_interval(settings.group.partitions),
        settings.group.replica_nice,
    )?;
    // The queues' commits (`--load feedback`), kept until the replicas have stopped.
    let commits = report.map(|_| tempfile::tempdir()).transpose()?;
    let serving = report.zip(commits.as_ref().map(tempfile::TempDir::path));
    let result = measure(&mut fleet, settings, mode, template, serving).await;
    let stopped = fleet.shutdown().await;
    drop(commits);
    let report = result?;
    stopped?;
    Ok((report, fleet.servers.topology))
}

async fn measure(
    fleet: &mut Fleet,
    settings: &Settings,
    mode: Mode,
    template: &mut Schedule,
    serving: Option<(Report, &Path)>,
) -> Result<ModeReport, BoxError> {
    let names = partition_names(settings.group.partitions);
    // The weights, before the measured replicas start (the epoch is not known yet, but
    // the loads before it are those of shift 0 whatever it is).
    let initial = Schedule {
        noise_percent: 0,
        ..template.clone()
    }
    .loads(0);
    let seeded = match mode {
        Mode::Load => !settings.unseeded,
        Mode::StaticWeights => true,
        Mode::CountOnly => false,
    };
    if seeded {
        set_weights(fleet, &names, &initial).await?;
    }
    let start_us = now_us();
    template.epoch_us = start_us + settings.settle_secs.saturating_mul(1_000_000);
    let schedule = template.clone();
    // Only the mode under test reports loads, and so serves queues.
    let serving = serving.filter(|_| mode == Mode::Load);
    if mode == Mode::Load {
        let feedback = serving
            .map(|(report, dir)| {
                serde_json::to_string(&Feedback {
                    service_factor: settings.service_factor,
                    report,
                    origin_us: start_us,
                    commit_dir: dir.to_path_buf(),
                })
            })
            .transpose()?;
        fleet.spec.load = Some(LoadReports {
            schedule: serde_json::to_string(&schedule)?,
            every_ms: settings.report_every_ms,
            half_life_ms: settings.half_life_ms,
            threshold_percent: settings.threshold_percent,
            feedback,
        });
    }
    for i in 1..=settings.group.replicas {
        fleet.spawn(&format!("replica-{i}"))?;
    }
    let limit = convergence_limit(settings.group.partitions, fleet.lease());
    let p = fleet
        .wait_events("cold start: all owned", Instant::now(), limit, |p| {
            p.milestones.all_owned_us.is_some()
        })
        .await?;
    let owned_us = p.milestones.all_owned_us.unwrap_or(p.clock_us);
    let cold_start_all_owned_ms = span_ms(start_us, owned_us);
    eprintln!(
        "{}: every partition owned after {cold_start_all_owned_ms:.1} ms; the window starts {} s after the spawn",
        mode.label(),
        settings.settle_secs
    );
    let end_us = schedule.epoch_us + settings.seconds.saturating_mul(1_000_000);
    if now_us() >= schedule.epoch_us {
        return Err(format!(
            "{}: the cold start outlasted --settle-secs {}",
            mode.label(),
            settings.settle_secs
        )
        .into());
    }
    let mut next_note = schedule.epoch_us;
    loop {
        let now = now_us();
        if now >= end_us {
            break;
        }
        fleet.check_running()?;
        if now >= next_note {
            let moves = OwnerChanges::count(&fleet.log.snapshot(), schedule.epoch_us, now);
            eprintln!(
                "{}: {:.0} s into the window, shift {}, {} moves so far: {}",
                mode.label(),
                span_ms(schedule.epoch_us, now) / 1000.0,
                schedule.shift_at(now),
                moves.changes,
                fleet.log.progress().describe()
            );
            next_note = now + 30_000_000;
        }
        let wait = Duration::from_micros((end_us - now).min(1_000_000));
        tokio::time::sleep(wait).await;
    }
    let log = fleet.log.snapshot();
    let live = fleet.live();
    let times: Vec<u64> = (0..)
        .map(|i| schedule.epoch_us + i * settings.sample_ms.max(1) * 1000)
        .take_while(|t| *t < end_us)
        .collect();
    let placements = placements(&log, &times);
    let mut ratios = Vec::with_capacity(times.len());
    let mut samples_with_unowned = 0;
    for (t, owners) in times.iter().zip(&placements) {
        if owners.len() < settings.group.partitions {
            samples_with_unowned += 1;
        }
        ratios.push(max_over_share(&schedule.loads(*t), owners, &live));
    }
    let moves = OwnerChanges::count(&log, schedule.epoch_us, end_us).changes;
    let settle_moves = OwnerChanges::count(&log, start_us, schedule.epoch_us).changes;
    let entries = ledger::read(fleet).await?;
    let ledger = ledger::check_moves(fleet, &entries);
    let entries: Vec<Entry<'_>> = entries.iter().map(Entry::from).collect();
    let (hand_offs, self_moves) = hand_off_figures(&entries);
    let moves_after_first_minute = moves_between(
        &entries,
        (start_us / 1000).saturating_add(60_000),
        end_us / 1000,
    );
    Ok(ModeReport {
        load: LoadOverTime {
            max_over_share: OverTime::of(&ratios),
            samples: ratios.len(),
            share_above_1_3: round3(
                ratios.iter().filter(|r| **r > TARGET).count() as f64 / ratios.len().max(1) as f64,
            ),
            samples_with_unowned,
            recovery_secs: recovery(&times, &ratios, &shift_times(&schedule, end_us)),
        },
        moves,
        moves_per_min: round3(moves as f64 / (settings.seconds as f64 / 60.0)),
        moves_by_minute: by_minute(&log, schedule.epoch_us, end_us),
        cold_start_all_owned_ms: round3(cold_start_all_owned_ms),
        settle_moves,
        ledger_matches_observed: ledger.matches_observed,
        final_counts: fleet.log.progress().counts(),
        series: settings
            .series
            .then(|| ratios.iter().copied().map(round3).collect()),
        hand_offs,
        self_moves,
        moves_after_first_minute,
        catch_ups: serving.map(|_| CatchUps::of(&log)),
    })
}

/// Creates the group with `loads` (rounded, at least 1) as its weights, before the
/// measured replicas start: a first replica creates it (an admin never does) and leaves
/// within its grant window, owning nothing.
async fn set_weights(fleet: &mut Fleet, names: &[String], loads: &[f64]) -> Result<(), BoxError> {
    let admin =
        GroupAdmin::new(fleet.watch.store().clone(), &fleet.spec.group)?.with_key_prefix(PREFIX)?;
    let creator = "group-creator";
    fleet.spawn(creator)?;
    let start = Instant::now();
    while !admin.exists().await? {
        if start.elapsed() > Duration::from_secs(30) {
            return Err("the first replica did not create the group in 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fleet.stop(creator, Duration::from_secs(30)).await?;
    fleet.log.retire(creator);
    for (n, x) in names.iter().zip(loads) {
        let w = (x.round() as u64).max(1);
        if w != 1 {
            admin.set_weight(n, w).await?;
        }
    }
    Ok(())
}

/// The placement at each of `times` (ascending wall µs) by the `owned` and `released`
/// lines in `log` dated at or before it: partition index → the replicas holding it.
pub fn placements(log: &[Logged], times: &[u64]) -> Vec<BTreeMap<usize, Vec<String>>> {
    let mut events: Vec<(u64, bool, usize, &str)> = log
        .iter()
        .filter_map(|l| match &l.event {
            PartitionEvent::Owned {
                partition, at_us, ..
            } => Some((
                *at_us,
                true,
                partition_index(partition)?,
                l.replica.as_str(),
            )),
            PartitionEvent::Released {
                partition, at_us, ..
            } => Some((
                *at_us,
                false,
                partition_index(partition)?,
                l.replica.as_str(),
            )),
            _ => None,
        })
        .collect();
    // Stable: lines dated alike keep their order.
    events.sort_by_key(|e| e.0);
    let mut owners: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut next = events.iter().peekable();
    let mut out = Vec::with_capacity(times.len());
    for &t in times {
        while let Some(&&(at, owned, p, replica)) = next.peek() {
            if at > t {
                break;
            }
            next.next();
            let holders = owners.entry(p).or_default();
            if owned {
                holders.push(replica.to_owned());
            } else if let Some(i) = holders.iter().position(|h| h == replica) {
                holders.remove(i);
            }
            if holders.is_empty() {
                owners.remove(&p);
            }
        }
        out.push(owners.clone());
    }
    out
}

/// The instants (wall µs) of `schedule`'s shifts after its epoch and before `end_us`.
fn shift_times(schedule: &Schedule, end_us: u64) -> Vec<u64> {
    if !schedule.mode.shifts() {
        return Vec::new();
    }
    let every = schedule.shift_ms.max(1).saturating_mul(1000);
    (1..)
        .map(|k| schedule.epoch_us + k * every)
        .take_while(|t| *t < end_us)
        .collect()
}

/// For each of `shifts`, seconds from it to the first of the samples (`ratios` taken
/// at `times`, ascending) at or below [`TARGET`] before the next shift.
fn recovery(times: &[u64], ratios: &[f64], shifts: &[u64]) -> Vec<Option<f64>> {
    shifts
        .iter()
        .enumerate()
        .map(|(k, &at)| {
            let next = shifts.get(k + 1).copied().unwrap_or(u64::MAX);
            times
                .iter()
                .zip(ratios)
                .find(|(t, r)| **t >= at && **t < next && **r <= TARGET)
                .map(|(t, _)| round3(span_ms(at, *t) / 1000.0))
        })
        .collect()
}

/// Owner changes in each minute from `from_us` to `to_us` (the last one partial).
fn by_minute(log: &[Logged], from_us: u64, to_us: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = from_us;
    while at < to_us {
        let until = (at + 60_000_000).min(to_us);
        // `count` takes both ends; a change dated exactly at a minute's end counts in
        // that minute and not the next.
        let start = if at == from_us { at } else { at + 1 };
        out.push(OwnerChanges::count(log, start, until).changes);
        at = until;
    }
    out
}

#[cfg(test)]
mod tests;
