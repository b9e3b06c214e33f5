//! `rebalance`: partition replicas as separate OS processes, followed through their own
//! event lines (the precise instants) and `GroupAdmin::status` reads (what Redis says,
//! membership included) on the bench's clock.
//!
//! 1. Cold start: every replica spawned at once; time from the first spawn until every
//!    partition is owned, and until the group is balanced (every replica joined, each
//!    partition owned once, spread ≤ 1); owner changes on the way are the cold start's
//!    hand-offs.
//! 2. Kill: SIGKILL one replica; time until the survivors own every one of its
//!    partitions (the last survivor's `owned` line), and until balanced.
//! 3. Join: start a new replica; time until balanced again, and how many partitions
//!    changed owner (`owned` lines after the spawn, until a whole lease passes with no
//!    move: a weighted group may refine within its bound after it is balanced; the
//!    final placement and loads are read then).
//!
//! From the cold start on, with `--hand-off-bytes`: the state handed over across
//! planned moves (the cold start's and the join's hand-offs; the kill's take-overs are
//! crashes), [`HandOffs`]. Always: whether the hand-offs that named their receiver
//! went to it ([`Receivers`]); with `--prepare` (warm moves), whether the receivers
//! prepared before the old terms ended ([`Warm`]).
//!
//! Each phase also waits until a `GroupAdmin::status` read agrees (`confirmed_ms`: the
//! killed replica must also have left the heartbeat set). Those reads cost Redis a
//! scan of the group, so they come at most every [`poll_interval`]: P × 10 µs, within
//! 5..=100 ms.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use leasehold_partitions::GroupAdmin;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::args::WeightsArg;
use crate::clock::{micros, now_us, span_ms};
use crate::group::GroupSettings;
use crate::group::event::{PartitionEvent, partition_names};
use crate::group::handoffs::HandOffs;
use crate::group::harness::{self, Fleet, convergence_limit};
use crate::group::ledger::{self, LedgerCheck};
use crate::group::ownership::{Balance, Loads, OwnerChanges};
use crate::group::process::{Logged, WarmMoves};
use crate::group::status::{PREFIX, balanced_by, counts, describe, spread_of};
use crate::group::warm::{Receivers, Warm};
use crate::group::weights::{self, LoadReport};
use crate::stats::{Summary, round3};
use crate::store::{BoxError, Topology};

/// How often the bench reads the group from Redis for `partitions` partitions: 10 µs
/// per partition, at least 5 ms, at most 100 ms (a read scans every partition's key).
pub fn poll_interval(partitions: usize) -> Duration {
    let us = u64::try_from(partitions)
        .unwrap_or(u64::MAX)
        .saturating_mul(10);
    Duration::from_micros(us).clamp(Duration::from_millis(5), Duration::from_millis(100))
}

/// The cold start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ColdStart {
    /// The server's uptime when the replicas were spawned (whole seconds, in ms): the
    /// bench waits until its own fresh server has run for more than a lease (a new group
    /// then grants after one renew interval: `docs/guarantees.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_age_ms: Option<u64>,
    /// First spawn → every partition owned.
    pub all_owned_ms: f64,
    /// First spawn → balanced.
    pub balanced_ms: f64,
    /// First spawn → the first `GroupAdmin::status` read that shows it balanced.
    pub confirmed_ms: f64,
    /// Partitions that changed owner after first being owned, until one lease after
    /// balance.
    pub handoffs: u64,
    /// The replicas' own hand-off counts (partitions released to rebalance), summed.
    pub reported_handoffs: u64,
}

/// The crash of one replica.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kill {
    /// The replica killed.
    pub replica: String,
    /// SIGKILL → the last of its partitions owned by a survivor (that survivor's
    /// `owned` line).
    pub all_owned_ms: f64,
    /// SIGKILL → balanced among the survivors.
    pub balanced_ms: f64,
    /// SIGKILL → the first `GroupAdmin::status` read that shows it balanced among the
    /// survivors (its heartbeat gone too).
    pub confirmed_ms: f64,
    /// SIGKILL → the victim's session (and with it every lease it holds) expires, from
    /// its time left in a `GroupAdmin::status` read just before the kill (taken as of the
    /// read's start, so it errs early): the least any take-over can take.
    pub expiry_ms: f64,
    /// `all_owned_ms - expiry_ms`: the library's share.
    pub overshoot_ms: f64,
}

/// The arrival of a new replica.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Join {
    /// The new replica.
    pub replica: String,
    /// Spawn → balanced with the newcomer.
    pub balanced_ms: f64,
    /// Spawn → the first `GroupAdmin::status` read that shows it balanced.
    pub confirmed_ms: f64,
    /// Owner changes (`owned` lines) from the spawn until one lease after balance.
    pub moved: u64,
    /// The weights of the partitions that changed owner, summed (with `--weights`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_weight: Option<u64>,
}

/// The final report of `rebalance`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RebalanceReport {
    /// Always `rebalance`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// Partition count.
    pub partitions: usize,
    /// Replicas at the start.
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// How often the group was read from Redis.
    pub poll_ms: f64,
    /// The cold start.
    pub cold_start: ColdStart,
    /// The kill.
    pub kill: Kill,
    /// The join.
    pub join: Join,
    /// Partitions per replica at the end (from Redis).
    pub final_counts: BTreeMap<String, usize>,
    /// max − min of `final_counts`.
    pub spread: usize,
    /// `zipf` with `--weights`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
    /// Whether the weights were only drawn, not set in the group (`--count-only`).
    pub count_only: bool,
    /// The starting replicas' capacities (with `--capacities`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacities: Option<Vec<u32>>,
    /// The loads at the end against the capacity shares (with `--weights` or
    /// `--capacities`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadReport>,
    /// The group's ledger of moves against the owner changes the replicas' lines
    /// showed, from the cold start on.
    #[serde(default)]
    pub ledger: LedgerCheck,
    /// `--move-budget`: every replica's budget (hand-offs per renew interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub move_budget: Option<u32>,
    /// With `--move-budget`: the most hand-offs released in one renew interval (the
    /// ledger's `max_handoffs_per_interval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_moves_per_interval: Option<usize>,
    /// What the planned moves handed over (its fields are the report's own in the
    /// JSON).
    #[serde(flatten)]
    pub handed: Handed,
}

/// What the planned moves of a rebalance handed over, from the cold start on, in
/// [`RebalanceReport`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Handed {
    /// Bytes of state every callback handed off when its term ended
    /// (`--hand-off-bytes`; 0: none).
    #[serde(default)]
    pub hand_off_bytes: usize,
    /// The state handed over across planned moves.
    #[serde(default)]
    pub hand_offs: HandOffs,
    /// The hand-offs that named their receiver, and whether it took them.
    #[serde(default)]
    pub receivers: Receivers,
    /// With `--prepare`: the warm moves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm: Option<Warm>,
}

/// The last line after several runs: the last run's report and `over_runs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LastLine {
    /// The last run's report.
    #[serde(flatten)]
    pub report: RebalanceReport,
    /// Over every run (absent after a single run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_runs: Option<OverRuns>,
}

/// {min, median, max} of a run's figures over every run, in [`LastLine`]; `None` where
/// no run has the figure (older reports lack some).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverRuns {
    /// How many runs.
    pub runs: u64,
    /// First spawn → every partition owned.
    pub cold_all_owned_ms: Option<Summary>,
    /// Kill → every partition owned again.
    pub kill_all_owned_ms: Option<Summary>,
    /// The kill's overshoot past the victim's expiry.
    pub kill_overshoot_ms: Option<Summary>,
    /// Join → balanced.
    pub join_balanced_ms: Option<Summary>,
    /// Partitions moved by the join.
    pub join_moved: Option<Summary>,
    /// Hand-offs that named their receiver.
    pub receivers_named: Option<Summary>,
    /// Of those, the ones the named receiver took.
    pub receivers_taken_by_named: Option<Summary>,
    /// With warm moves (its fields are `over_runs`' own in the JSON).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub warm: Option<WarmOverRuns>,
}

/// The warm moves' figures over every run, in [`OverRuns`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WarmOverRuns {
    /// Receivers that prepared before the old term ended.
    pub warm_prepared: Option<Summary>,
    /// Preparations that timed out.
    pub warm_timed_out: Option<Summary>,
    /// The median time without an owner across a warm move.
    pub warm_unowned_p50_ms: Option<Summary>,
    /// The longest time without an owner across a warm move.
    pub warm_unowned_max_ms: Option<Summary>,
}

impl OverRuns {
    /// The figures of `reports` (in a report that has `warm`, with warm moves).
    pub fn of(reports: &[RebalanceReport], warm: bool) -> Self {
        // As a JSON report shows them: a figure that is not finite is `null`, skipped.
        let over = |f: &dyn Fn(&RebalanceReport) -> Option<f64>| {
            let values: Vec<f64> = reports
                .iter()
                .filter_map(f)
                .filter(|v| v.is_finite())
                .collect();
            Summary::of(&values)
        };
        let warm_over = |f: fn(&Warm) -> f64| over(&|r| r.handed.warm.as_ref().map(f));
        Self {
            runs: reports.len() as u64,
            cold_all_owned_ms: over(&|r| Some(r.cold_start.all_owned_ms)),
            kill_all_owned_ms: over(&|r| Some(r.kill.all_owned_ms)),
            kill_overshoot_ms: over(&|r| Some(r.kill.overshoot_ms)),
            join_balanced_ms: over(&|r| Some(r.join.balanced_ms)),
            join_moved: over(&|r| Some(r.join.moved as f64)),
            receivers_named: over(&|r| Some(r.handed.receivers.named as f64)),
            receivers_taken_by_named: over(&|r| Some(r.handed.receivers.taken_by_named as f64)),
            warm: warm.then(|| WarmOverRuns {
                warm_prepared: warm_over(|w| w.prepared as f64),
                warm_timed_out: warm_over(|w| w.timed_out as f64),
                warm_unowned_p50_ms: warm_over(|w| w.unowned_ms.p50),
                warm_unowned_max_ms: warm_over(|w| w.unowned_ms.max),
            }),
        }
    }
}

/// Runs the scenario `settings.runs` times, printing each run's report (and, over
/// several, a last line with `over_runs`).
///
/// # Errors
/// If a phase does not complete in time, or a replica misbehaves.
pub async fn run_all(settings: &Settings) -> Result<(), BoxError> {
    let mut reports = Vec::new();
    for _ in 0..settings.runs {
        let report = run(settings).await?;
        // Through `Value`: its keys print sorted, as every committed report has them.
        println!("{}", serde_json::to_value(&report)?);
        reports.push(report);
    }
    if let Some(report) = reports.last().filter(|_| settings.runs > 1) {
        let last = LastLine {
            report: report.clone(),
            over_runs: Some(OverRuns::of(&reports, settings.warm.is_some())),
        };
        println!("{}", serde_json::to_value(&last)?);
    }
    Ok(())
}

/// What `rebalance` runs (see its options for each field's meaning).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The group (one more replica joins at the end).
    pub group: GroupSettings,
    /// Tenant sizes drawn from a law, if any.
    pub weights: Option<WeightsArg>,
    /// The Zipf exponent of `weights`.
    pub zipf_s: f64,
    /// The seed of `weights`.
    pub weight_seed: u64,
    /// Draw the weights but balance by count.
    pub count_only: bool,
    /// Each starting replica's capacity, in order.
    pub capacities: Option<Vec<u32>>,
    /// Runs, each on a fresh group.
    pub runs: u64,
    /// Every replica's move budget.
    pub move_budget: Option<u32>,
    /// Bytes of state every callback hands off (0: none).
    pub hand_off_bytes: usize,
    /// Warm moves, if asked for.
    pub warm: Option<WarmMoves>,
}

/// One run of the scenario.
///
/// # Errors
/// A fleet that cannot start, or a phase that does not converge in time.
pub async fn run(settings: &Settings) -> Result<RebalanceReport, BoxError> {
    let mut fleet = Fleet::start(
        &settings.group.target,
        "rebalance",
        settings.group.partitions,
        settings.group.lease_ms,
        settings.group.settle_ms,
        poll_interval(settings.group.partitions),
        settings.group.replica_nice,
    )?;
    fleet.spec.move_budget = settings.move_budget;
    fleet.spec.hand_off_bytes = settings.hand_off_bytes;
    fleet.spec.prepare = settings.warm;
    let result = phases(&mut fleet, settings).await;
    let stopped = fleet.shutdown().await;
    let report = result?;
    stopped?;
    Ok(report)
}

/// The weights and capacities of a run, and how balance is judged.
async fn setup_loads(fleet: &mut Fleet, settings: &Settings) -> Result<Option<Loads>, BoxError> {
    if settings.weights.is_none() && settings.capacities.is_none() {
        return Ok(None);
    }
    let names = partition_names(settings.group.partitions);
    let weights = match settings.weights {
        Some(WeightsArg::Zipf) => weights::zipf(&names, settings.zipf_s, settings.weight_seed),
        None => HashMap::new(),
    };
    let capacities: HashMap<String, u32> = settings
        .capacities
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("replica-{}", i + 1), *c))
        .collect();
    let loads = Loads {
        total: names
            .iter()
            .map(|n| weights.get(n).copied().unwrap_or(1))
            .sum(),
        max_weight: weights.values().copied().max().unwrap_or(1).max(1),
        weights,
        capacities,
    };
    if settings.weights.is_some() && !settings.count_only {
        // The group, with its weights, before the measured replicas start: nothing
        // moves for them. A first replica creates it (an admin never does) and leaves
        // within its grant window, before anything could be granted to it.
        let admin = GroupAdmin::new(fleet.watch.store().clone(), &fleet.spec.group)?
            .with_key_prefix(PREFIX)?;
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
        // It owned nothing; it is not one of the replicas balance is judged over.
        fleet.log.retire(creator);
        for n in &names {
            let w = loads.weight(n);
            if w != 1 {
                admin.set_weight(n, w).await?;
            }
        }
    }
    Ok(Some(loads))
}

async fn phases(fleet: &mut Fleet, settings: &Settings) -> Result<RebalanceReport, BoxError> {
    let lease = fleet.lease();
    let limit = convergence_limit(settings.group.partitions, lease);
    let n = settings.group.replicas;
    if let Some(caps) = &settings.capacities
        && caps.len() != n
    {
        return Err(format!(
            "--capacities lists {} capacities for {n} replicas",
            caps.len()
        )
        .into());
    }
    let loads = setup_loads(fleet, settings).await?;
    let by_load = settings
        .capacities
        .as_ref()
        .is_some_and(|c| c.iter().any(|x| *x != 1))
        || (settings.weights.is_some() && !settings.count_only);
    let balance = match (&loads, by_load) {
        (Some(l), true) => Balance::Load(Arc::new(l.clone())),
        _ => Balance::Count,
    };
    fleet.log.set_balance(balance.clone());

    // Cold start, on a server that has run for more than a lease (a restarted server
    // holds a new group's grants for a lease: tests/redis_cold_start.rs).
    let server_age_ms =
        crate::redis_stats::await_server_age(&fleet.servers.stats_urls, lease).await?;
    let start_us = now_us();
    for i in 1..=n {
        let mut spec = fleet.spec.clone();
        spec.capacity = settings.capacities.as_ref().map_or(1, |c| c[i - 1]);
        fleet.spawn_with(&spec, &format!("replica-{i}"), 1)?;
    }
    let (all_owned_ms, balanced_ms) = converge(fleet, "cold start", start_us, limit).await?;
    let confirmed_ms = confirm(fleet, "cold start", start_us, limit, &balance).await?;
    tokio::time::sleep(lease).await;
    let cold = OwnerChanges::count(&fleet.log.snapshot(), 0, now_us());
    let reported_handoffs = reported_handoffs(fleet);
    eprintln!(
        "cold start: all owned after {all_owned_ms:.1} ms, balanced after {balanced_ms:.1} ms, confirmed by Redis after {confirmed_ms:.1} ms; {} owner changes [{}], {reported_handoffs} hand-offs reported",
        cold.changes,
        cold.describe()
    );
    let cold_start = ColdStart {
        server_age_ms: Some(server_age_ms),
        all_owned_ms: round3(all_owned_ms),
        balanced_ms: round3(balanced_ms),
        confirmed_ms: round3(confirmed_ms),
        handoffs: cold.changes,
        reported_handoffs,
    };

    // Kill.
    let victim = "replica-1".to_owned();
    // The victim's session holds all its partitions: its time left comes from the
    // status's first script, read just after `read_us` (on a large group the pages
    // of partitions that follow take a while, so their own times left would be late).
    let read_us = now_us();
    let before = fleet.watch.status().await?.ok_or("the group is gone")?;
    let left = before
        .members
        .iter()
        .find(|m| m.replica == victim)
        .map(|m| m.session_left)
        .ok_or("the victim has no session")?;
    let (mut killed, orphans) = fleet.take(&victim).ok_or("no replica to kill")?;
    fleet.log.reset_milestones();
    let from_line = fleet.log.len();
    let kill_us = now_us();
    killed.kill()?;
    let expiry_ms = span_ms(kill_us, read_us + micros(left));
    let (owned_ms, kill_balanced_ms) = converge(fleet, "kill", kill_us, limit).await?;
    let taken = taken_over(&fleet.log.since(from_line), &victim, &orphans, kill_us);
    // The instant the last orphan got its owned line in a survivor (the milestone if
    // a survivor held one already).
    let kill_owned_ms = match taken.values().max() {
        Some(&last) if taken.len() == orphans.len() => span_ms(kill_us, last),
        _ => owned_ms,
    };
    let kill_confirmed_ms = confirm(fleet, "kill", kill_us, limit, &balance).await?;
    killed.wait(harness::EXIT).await?;
    eprintln!(
        "kill {victim}: its leases expire {expiry_ms:.1} ms after the kill; its {} partitions all owned after {kill_owned_ms:.1} ms, balanced after {kill_balanced_ms:.1} ms, confirmed by Redis after {kill_confirmed_ms:.1} ms",
        orphans.len()
    );
    let spans: Vec<f64> = taken.values().map(|&at| span_ms(kill_us, at)).collect();
    if let Some(s) = Summary::of(&spans) {
        eprintln!(
            "kill {victim}: {} take-overs, callbacks started {:.1} / {:.1} / {:.1} ms (min / median / max) after the kill",
            spans.len(),
            s.min,
            s.median,
            s.max
        );
    }
    tokio::time::sleep(lease).await;

    // Join.
    let joiner = format!("replica-{}", n + 1);
    let join_us = now_us();
    fleet.spawn(&joiner)?;
    fleet.log.reset_milestones();
    let (_, join_ms) = converge(fleet, "join", join_us, limit).await?;
    let join_confirmed_ms = confirm(fleet, "join", join_us, limit, &balance).await?;
    // At rest: a weighted group may still refine within its bound after the join is
    // confirmed; the final placement is read once a whole lease passed with no move
    // (at most `limit` after the join).
    let mut seen = OwnerChanges::count(&fleet.log.snapshot(), join_us, now_us()).changes;
    loop {
        tokio::time::sleep(lease).await;
        let now = OwnerChanges::count(&fleet.log.snapshot(), join_us, now_us()).changes;
        if now == seen || now_us().saturating_sub(join_us) > limit.as_micros() as u64 {
            break;
        }
        seen = now;
    }
    let log = fleet.log.snapshot();
    let moved = OwnerChanges::count(&log, join_us, now_us());
    let moved_weight = loads.as_ref().and(settings.weights).map(|_| {
        let l = loads.as_ref().expect("weights");
        moved_since(&log, join_us).iter().map(|p| l.weight(p)).sum()
    });
    eprintln!(
        "join {joiner}: balanced after {join_ms:.1} ms, confirmed by Redis after {join_confirmed_ms:.1} ms; {} partitions moved [{}]",
        moved.changes,
        moved.describe()
    );

    let live = fleet.live();
    let status = fleet.watch.status().await?.ok_or("the group is gone")?;
    let final_counts = counts(&status, &live);
    let ledger = ledger::check(fleet).await?;
    eprintln!(
        "ledger: {} entries {:?}; matches the {} owner changes observed: {}; state_bytes as left ({} bytes): {} ({} mismatches {:?})",
        ledger.entries,
        ledger.causes,
        ledger.observed,
        ledger.matches_observed,
        settings.hand_off_bytes,
        ledger.state_matches,
        ledger.state_mismatches,
        ledger.state_mismatched
    );
    let hand_offs = HandOffs::of(&fleet.log.snapshot());
    eprintln!(
        "hand-offs of {} bytes: {}",
        settings.hand_off_bytes,
        hand_offs.describe()
    );
    for e in &hand_offs.examples {
        eprintln!("hand-off: {e}");
    }
    let receivers = Receivers::of(&fleet.log.snapshot());
    eprintln!("named receivers: {}", receivers.describe());
    let warm = settings.warm.map(|w| {
        // The child's default wait: the renew interval, lease / 3.
        let within_ms = w
            .within_ms
            .map_or(settings.group.lease_ms as f64 / 3.0, |ms| ms as f64);
        Warm::of(&fleet.log.snapshot(), round3(within_ms), w.work_ms)
    });
    if let Some(w) = &warm {
        eprintln!("warm moves: {}", w.describe());
    }
    if !balanced_by(&status, &live, &balance) {
        return Err(format!("unbalanced at the end: {}", describe(&status)).into());
    }
    let reported = fleet.log.progress();
    if reported.counts() != final_counts {
        return Err(format!(
            "Redis disagrees with the replicas at the end: Redis says {}; the replicas say {}",
            describe(&status),
            reported.describe()
        )
        .into());
    }
    Ok(RebalanceReport {
        scenario: "rebalance".to_owned(),
        topology: fleet.servers.topology,
        partitions: settings.group.partitions,
        replicas: n,
        lease_ms: settings.group.lease_ms,
        poll_ms: round3(poll_interval(settings.group.partitions).as_secs_f64() * 1000.0),
        cold_start,
        kill: Kill {
            replica: victim,
            all_owned_ms: round3(kill_owned_ms),
            balanced_ms: round3(kill_balanced_ms),
            confirmed_ms: round3(kill_confirmed_ms),
            expiry_ms: round3(expiry_ms),
            overshoot_ms: round3(kill_owned_ms - expiry_ms),
        },
        join: Join {
            replica: joiner,
            balanced_ms: round3(join_ms),
            confirmed_ms: round3(join_confirmed_ms),
            moved: moved.changes,
            moved_weight,
        },
        spread: spread_of(&final_counts),
        final_counts,
        weights: settings.weights.map(|_| "zipf".to_owned()),
        count_only: settings.count_only,
        capacities: settings.capacities.clone(),
        load: loads.as_ref().map(|l| {
            let owners: BTreeMap<String, String> = status
                .partitions
                .iter()
                .filter_map(|p| Some((p.partition.clone(), p.owner.clone()?)))
                .collect();
            weights::report(l, &owners, &live)
        }),
        move_budget: settings.move_budget,
        max_moves_per_interval: settings
            .move_budget
            .map(|_| ledger.max_handoffs_per_interval),
        ledger,
        handed: Handed {
            hand_off_bytes: settings.hand_off_bytes,
            hand_offs,
            receivers,
            warm,
        },
    })
}

/// Waits for the milestones (since the last reset) by the replicas' lines: every
/// partition owned, then balanced. Returns both instants, in ms after `from_us`.
pub async fn converge(
    fleet: &mut Fleet,
    phase: &str,
    from_us: u64,
    limit: Duration,
) -> Result<(f64, f64), BoxError> {
    let since = Instant::now();
    let p = fleet
        .wait_events(&format!("{phase}: all owned"), since, limit, |p| {
            p.milestones.all_owned_us.is_some()
        })
        .await?;
    let owned_us = p.milestones.all_owned_us.unwrap_or(p.clock_us);
    let p = fleet
        .wait_events(&format!("{phase}: balanced"), since, limit, |p| {
            p.milestones.balanced_us.is_some()
        })
        .await?;
    let balanced_us = p.milestones.balanced_us.unwrap_or(p.clock_us);
    eprintln!("{phase}: {}", p.describe());
    Ok((span_ms(from_us, owned_us), span_ms(from_us, balanced_us)))
}

/// Polls `GroupAdmin::status` (every [`poll_interval`]) until Redis shows the live replicas
/// balanced; returns when, in ms after `from_us`.
pub async fn confirm(
    fleet: &Fleet,
    phase: &str,
    from_us: u64,
    limit: Duration,
    balance: &Balance,
) -> Result<f64, BoxError> {
    let live = fleet.live();
    let (_, at) = fleet
        .watch
        .poll_until(&format!("{phase}: balanced in Redis"), limit, |s| {
            balanced_by(s, &live, balance)
        })
        .await?;
    Ok(span_ms(from_us, at))
}

/// The partitions whose owner changed at or after `since_us` (by the `owned` lines).
fn moved_since(log: &[Logged], since_us: u64) -> BTreeSet<String> {
    let mut last: HashMap<&str, &str> = HashMap::new();
    let mut moved = BTreeSet::new();
    for l in log {
        if let PartitionEvent::Owned {
            partition, at_us, ..
        } = &l.event
        {
            let prev = last.insert(partition.as_str(), l.replica.as_str());
            if prev.is_some_and(|p| p != l.replica) && *at_us >= since_us {
                moved.insert(partition.clone());
            }
        }
    }
    moved
}

/// For each of `orphans` (the partitions `victim` owned), the first `owned` line of
/// another replica for it at or after `kill_us` (wall µs).
fn taken_over(
    log: &[Logged],
    victim: &str,
    orphans: &HashSet<String>,
    kill_us: u64,
) -> HashMap<String, u64> {
    let mut taken: HashMap<String, u64> = HashMap::new();
    for l in log.iter().filter(|l| l.replica != victim) {
        if let PartitionEvent::Owned {
            partition, at_us, ..
        } = &l.event
            && *at_us >= kill_us
            && orphans.contains(partition)
        {
            let first = taken.entry(partition.clone()).or_insert(*at_us);
            *first = (*first).min(*at_us);
        }
    }
    taken
}

/// The replicas' latest hand-off counts, summed.
fn reported_handoffs(fleet: &Fleet) -> u64 {
    let mut latest: BTreeMap<String, u64> = BTreeMap::new();
    for logged in fleet.log.snapshot() {
        if let PartitionEvent::Handoffs { total, .. } = logged.event {
            latest.insert(logged.replica, total);
        }
    }
    latest.values().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_slow_down_with_the_partition_count() {
        assert_eq!(poll_interval(64), Duration::from_millis(5));
        assert_eq!(poll_interval(1000), Duration::from_millis(10));
        assert_eq!(poll_interval(10_000), Duration::from_millis(100));
        assert_eq!(poll_interval(100_000), Duration::from_millis(100));
    }

    #[test]
    fn take_overs_are_the_survivors_first_owned_lines_after_the_kill() {
        let owned = |replica: &str, p: &str, at_us| Logged {
            replica: replica.into(),
            incarnation: 1,
            event: PartitionEvent::Owned {
                partition: p.into(),
                fence: 2,
                at_us,
                handed_over: None,
                handed_over_bytes: None,
                no_hand_off: None,
                no_hand_off_cause: None,
            },
        };
        let log = [
            owned("victim", "p0", 150),
            owned("b", "p9", 90),
            owned("b", "p0", 200),
            owned("c", "p1", 260),
            owned("c", "p0", 190),
            owned("c", "p9", 300),
        ];
        let orphans = HashSet::from(["p0".to_owned(), "p1".to_owned()]);
        let taken = taken_over(&log, "victim", &orphans, 100);
        assert_eq!(
            taken,
            HashMap::from([("p0".to_owned(), 190), ("p1".to_owned(), 260)])
        );
    }
}
