//! `rolling`: a rolling restart (or deploy) of a balanced partition group, followed
//! through the replicas' own lines.
//!
//! 1. Cold start: N replica processes, every one spawned at once; wait until balanced
//!    by their lines, one lease more, and balanced again.
//! 2. Rolling phase: for each replica in turn, SIGTERM, wait for its graceful exit,
//!    start it again with the same replica id, then wait `--gap-ms` (1 s) before the
//!    next one. With `--paced`, as an orchestrator that waits for readiness would
//!    (`maxSurge: 1`, `maxUnavailable: 0`): start the replacement under a new id
//!    (`replica-5` for `replica-1` of 4), wait for its `ready` line, then SIGTERM the
//!    old one and wait for its exit. With `--sticky` every process runs with a rejoin grace, so a restart
//!    should move nothing. With `--add-partitions K` the restarted ("new version")
//!    processes have a list of P + K partitions at list version 2, the old ones P at
//!    version 1: the first new one applies the grown list, the old ones follow the
//!    group's set.
//! 3. After the last restart: wait until balanced again (all P + K owned, every
//!    replica joined, spread ≤ 1), one lease more and balanced again, or a limit; then
//!    report what was seen either way, and read `GroupAdmin::status` once to see whether
//!    Redis agrees.
//!
//! Measured on the children's clocks, from the start of the rolling phase to its end:
//! owner changes (by replica id: a sticky re-take is none), the unowned spells of the
//! old list's partitions ([`Unowned`]), and the processes that were kept out
//! ([`refusals`]: a `refused` line, or no `joined` line within a lease of the start).
//! From the cold start on: the state handed over across planned moves
//! ([`HandOffs`], with `--hand-off-bytes`), and the group's ledger of moves against
//! the owner changes seen.

mod books;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::{Instant, MissedTickBehavior, interval, sleep};

use crate::clock::{micros, now_us, span_ms};
use crate::group::event::{PartitionEvent, partition_names};
use crate::group::handoffs::HandOffs;
use crate::group::harness::{self, Fleet, convergence_limit};
use crate::group::ledger::{self, LedgerCheck};
use crate::group::ownership::{OwnerChanges, Progress};
use crate::group::rebalance::poll_interval;
use crate::group::status::{counts, describe};
use crate::stats::round3;
use crate::store::{BoxError, TargetArgs, Topology};

pub use self::books::{Refusal, Start, Unowned, refusals};

/// How long a sticky replica keeps its partitions by default: ten leases (capped at
/// the library's maximum, one day), comfortably more than a restart and its gap.
pub fn default_rejoin_grace_ms(lease_ms: u64) -> u64 {
    lease_ms.saturating_mul(10).min(86_400_000)
}

/// One restart of the rolling phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restart {
    /// The replica restarted.
    pub replica: String,
    /// With `--paced`: the replica that replaced it (started first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    /// With `--paced`: the replacement's start → its `ready` line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_ms: Option<f64>,
    /// Rolling phase's start → its SIGTERM.
    pub sigterm_ms: f64,
    /// SIGTERM → the old process exited (its graceful leave).
    pub exit_ms: f64,
    /// Exit → the new process started (with `--paced`, 0: it started before).
    pub respawn_ms: f64,
    /// Its start → the new process's `joined` line (`None`: never).
    pub joined_ms: Option<f64>,
    /// Owner changes from its SIGTERM until the next SIGTERM (the last one: until the
    /// end).
    pub moved: u64,
}

/// The report of `rolling`: the documented keys first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RollingReport {
    /// Always `rolling`.
    pub scenario: String,
    /// Every process ran with a rejoin grace.
    pub sticky: bool,
    /// Paced by readiness (`--paced`): each replacement started and ready before its
    /// old replica's SIGTERM.
    #[serde(default)]
    pub paced: bool,
    /// Owner changes during the rolling phase per partition of the old list (`moved`
    /// / P): 1 is each partition moving once in the deploy.
    #[serde(default)]
    pub moves_per_partition: f64,
    /// Partitions that changed owner more than once during the rolling phase.
    #[serde(default)]
    pub moved_more_than_once: usize,
    /// The deploy itself: the rolling phase's start → the last old replica's exit, in
    /// ms.
    #[serde(default)]
    pub deploy_ms: f64,
    /// P: the old list.
    pub partitions_before: usize,
    /// The group's partition count at the end, by `GroupAdmin::status`.
    pub partitions_after: usize,
    /// Owner changes during the rolling phase (by replica id).
    pub moved: u64,
    /// The longest unowned spell of a partition of the old list, in ms.
    pub max_unowned_ms: f64,
    /// Every such spell, summed, in ms.
    pub sum_unowned_ms: f64,
    /// Replica processes that reported a refusal or did not join within a lease.
    pub refused: usize,
    /// Every partition of the new list owned by a live replica at the end.
    pub all_owned: bool,
    /// max − min of the replicas' counts at the end, by their lines.
    pub spread: usize,
    /// What ran (its fields are the report's own in the JSON).
    #[serde(flatten)]
    pub setup: RollingSetup,
    /// The rest of the outcome (its fields are the report's own in the JSON).
    #[serde(flatten)]
    pub detail: RollingDetail,
}

/// The set-up of a `rolling` run, in [`RollingReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RollingSetup {
    /// The Redis set-up.
    pub topology: Topology,
    /// Replicas.
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// Pause after each restart before the next SIGTERM.
    pub gap_ms: u64,
    /// The rejoin grace every process ran with (`None`: not sticky).
    pub rejoin_grace_ms: Option<u64>,
    /// K: partitions the new version adds.
    pub added: usize,
    /// The list versions of the old and the new processes (0: unversioned).
    pub list_versions: [u64; 2],
    /// The group's list version at the end, by `GroupAdmin::status`.
    pub group_list_version: u64,
}

/// The outcome of a `rolling` run beyond its headline figures, in [`RollingReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RollingDetail {
    /// Balanced at the end (by the replicas' lines).
    pub balanced: bool,
    /// The last restart's new process started → balanced (`None`: not within the
    /// limit).
    pub balanced_ms: Option<f64>,
    /// The rolling phase, start to end (the end of the last wait), in ms.
    pub rolling_ms: f64,
    /// Unowned spells of the old list's partitions.
    pub unowned_gaps: u64,
    /// The partition of the longest spell, and when that spell began (ms into the
    /// rolling phase).
    pub longest_unowned: Option<(String, f64)>,
    /// Old-list partitions still unowned at the end.
    pub still_unowned: Vec<String>,
    /// Owner changes by (from, to), as `from→to ×n`.
    pub moves: String,
    /// Which processes were refused, and why.
    pub refusals: Vec<Refusal>,
    /// Each restart.
    pub restarts: Vec<Restart>,
    /// Partitions per live replica at the end, by their lines.
    pub final_counts: BTreeMap<String, usize>,
    /// Partitions per live replica at the end, by `GroupAdmin::status`.
    pub redis_counts: BTreeMap<String, usize>,
    /// The group's ledger of moves against the owner changes the replicas' lines
    /// showed, from the cold start on.
    #[serde(default)]
    pub ledger: LedgerCheck,
    /// Bytes of state every callback handed off when its term ended
    /// (`--hand-off-bytes`; 0: none).
    #[serde(default)]
    pub hand_off_bytes: usize,
    /// The state handed over across planned moves, from the cold start on.
    #[serde(default)]
    pub hand_offs: HandOffs,
    /// `--leave-within-ms`: every replica left with `shutdown_within` this long.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leave_within_ms: Option<u64>,
    /// The longest leave: a replica's SIGTERM → its process's exit, in ms (the longest
    /// of the restarts' `exit_ms`).
    #[serde(default)]
    pub leave_ms: f64,
}

/// What `rolling` runs (see its options for each field's meaning).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Partitions (before `add_partitions`).
    pub partitions: usize,
    /// Replicas.
    pub replicas: usize,
    /// The lease of every partition, in milliseconds.
    pub lease_ms: u64,
    /// Restarted replicas rejoin within their grace.
    pub sticky: bool,
    /// The grace of `sticky`, in milliseconds (`None`: the default).
    pub rejoin_grace_ms: Option<u64>,
    /// Partitions the deploy adds.
    pub add_partitions: usize,
    /// Pause between restarts, in milliseconds.
    pub gap_ms: u64,
    /// Each restart waits for the group to be balanced first.
    pub paced: bool,
    /// Settle time of a starting replica, in milliseconds (`None`: one lease).
    pub settle_ms: Option<u64>,
    /// How long a phase may take, in seconds (`None`: from the group's size).
    pub limit_secs: Option<u64>,
    /// Bytes of state every callback hands off (0: none).
    pub hand_off_bytes: usize,
    /// A stopping replica leaves within this many milliseconds.
    pub leave_within_ms: Option<u64>,
    /// Every replica's niceness.
    pub replica_nice: u8,
    /// The Redis set-up.
    pub target: TargetArgs,
}

/// Runs the scenario.
///
/// # Errors
/// If the servers or a process cannot start, the cold start does not balance in
/// time, a replica exits on its own or does not leave cleanly after SIGTERM, or Redis
/// cannot be read. A rolling phase that ends unbalanced is reported, not an error.
pub async fn run(settings: &Settings) -> Result<RollingReport, BoxError> {
    let before = settings.partitions;
    let mut fleet = Fleet::start(
        &settings.target,
        "rolling",
        before,
        settings.lease_ms,
        settings.settle_ms,
        poll_interval(before + settings.add_partitions),
        settings.replica_nice,
    )?;
    fleet.spec.list_version = u64::from(settings.add_partitions > 0);
    fleet.spec.rejoin_grace_ms = settings.sticky.then(|| {
        settings
            .rejoin_grace_ms
            .unwrap_or_else(|| default_rejoin_grace_ms(settings.lease_ms))
    });
    fleet.spec.hand_off_bytes = settings.hand_off_bytes;
    fleet.spec.leave_within_ms = settings.leave_within_ms;
    let result = phases(&mut fleet, settings).await;
    let stopped = fleet.shutdown().await;
    let report = result?;
    stopped?;
    Ok(report)
}

async fn phases(fleet: &mut Fleet, settings: &Settings) -> Result<RollingReport, BoxError> {
    let lease = fleet.lease();
    let (before, after) = (
        settings.partitions,
        settings.partitions + settings.add_partitions,
    );
    let ids: Vec<String> = (1..=settings.replicas)
        .map(|i| format!("replica-{i}"))
        .collect();
    let mut starts = Vec::new();

    // Cold start.
    let since = Instant::now();
    let limit = convergence_limit(before, lease);
    let old = fleet.spec.clone();
    for id in &ids {
        let at_us = fleet.spawn_with(&old, id, 1)?;
        starts.push(Start {
            replica: id.clone(),
            incarnation: 1,
            at_us,
        });
    }
    let p = fleet
        .wait_events("cold start: balanced", since, limit, Progress::balanced)
        .await?;
    eprintln!("cold start: balanced: {}", p.describe());
    sleep(lease).await;
    fleet
        .wait_events(
            "cold start: balanced a lease later",
            since,
            limit + lease,
            Progress::balanced,
        )
        .await?;

    // Rolling phase.
    let mut new = old.clone();
    if settings.add_partitions > 0 {
        new.partitions = after;
        new.list_version = 2;
    }
    let gap = Duration::from_millis(settings.gap_ms);
    let rolling_us = now_us();
    let mut restarts = Vec::new();
    let mut terms_us = Vec::new();
    let mut set_from = Some(fleet.log.len());
    let mut fresh = settings.replicas;
    for (i, id) in ids.iter().enumerate() {
        if settings.paced {
            // The replacement first, under a new id; the old one leaves once it is ready.
            fresh += 1;
            let next = format!("replica-{fresh}");
            let from = fleet.log.len();
            let at_us = fleet.spawn_with(&new, &next, 1)?;
            starts.push(Start {
                replica: next.clone(),
                incarnation: 1,
                at_us,
            });
            let ready_us = until_ready(fleet, &next, from, convergence_limit(after, lease))
                .await
                .map_err(|e| format!("replacing {id}: {e}"))?;
            let term_us = now_us();
            fleet
                .stop(id, harness::EXIT)
                .await
                .map_err(|e| format!("stopping {id}: {e}"))?;
            let exit_us = now_us();
            // Gone for good (its id is not started again): it no longer counts as a
            // live replica, so balance is judged among the others.
            fleet.log.retire(id);
            eprintln!(
                "rolling: {next} ready {:.1} ms after its start; {id} left in {:.1} ms; {}",
                span_ms(at_us, ready_us),
                span_ms(term_us, exit_us),
                fleet.log.progress().describe()
            );
            terms_us.push(term_us);
            restarts.push(Step {
                old: id.clone(),
                new: next,
                incarnation: 1,
                term_us,
                exit_us,
                at_us,
                ready_us: Some(ready_us),
            });
            continue;
        }
        let term_us = now_us();
        fleet
            .stop(id, harness::EXIT)
            .await
            .map_err(|e| format!("restart of {id}: {e}"))?;
        let exit_us = now_us();
        let at_us = fleet.spawn_with(&new, id, 2)?;
        starts.push(Start {
            replica: id.clone(),
            incarnation: 2,
            at_us,
        });
        eprintln!(
            "rolling: {id} left in {:.1} ms and was started again; {}",
            span_ms(term_us, exit_us),
            fleet.log.progress().describe()
        );
        terms_us.push(term_us);
        restarts.push(Step {
            old: id.clone(),
            new: id.clone(),
            incarnation: 2,
            term_us,
            exit_us,
            at_us,
            ready_us: None,
        });
        if i + 1 < ids.len() {
            sleep(gap).await;
            fleet
                .check_running()
                .map_err(|e| format!("after the restart of {id}: {e}"))?;
        }
        follow_set(fleet, after, &mut set_from);
    }
    let deployed_us = restarts.last().map_or(rolling_us, |r| r.exit_us);

    // Balanced again, or the limit.
    fleet.log.expect_partitions(after);
    let last_start_us = restarts.last().map_or(rolling_us, |r| r.at_us);
    let limit = settings
        .limit_secs
        .map_or_else(|| convergence_limit(after, lease), Duration::from_secs);
    let deadline = Instant::now() + limit;
    let mut balanced_ms = None;
    if let Some(p) = until_balanced(fleet, deadline, limit).await? {
        balanced_ms = Some(span_ms(last_start_us, p.clock_us));
        eprintln!(
            "rolling: balanced {:.1} ms after the last start: {}",
            span_ms(last_start_us, p.clock_us),
            p.describe()
        );
        sleep(lease).await;
        if until_balanced(fleet, deadline + lease, limit + lease)
            .await?
            .is_none()
        {
            balanced_ms = None;
        }
    }
    let end_us = now_us();
    let progress = fleet.log.progress();
    let status = fleet.watch.status().await?.ok_or("the group is gone")?;
    let live = fleet.live();
    let redis_counts = counts(&status, &live);
    let ledger = ledger::check(fleet).await?;

    // The books.
    let log = fleet.log.snapshot();
    let moved = OwnerChanges::count(&log, rolling_us, end_us);
    let unowned = Unowned::of(&log, &partition_names(before), rolling_us, end_us);
    let refused = refusals(&starts, &log, micros(lease));
    let hand_offs = HandOffs::of(&log);
    let restarts: Vec<Restart> = restarts
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let until = terms_us.get(i + 1).map_or(end_us, |next| next - 1);
            let joined_us = log.iter().find_map(|l| match l.event {
                PartitionEvent::Joined { at_us: j }
                    if l.replica == step.new && l.incarnation == step.incarnation =>
                {
                    Some(j)
                }
                _ => None,
            });
            Restart {
                replica: step.old.clone(),
                replacement: (step.new != step.old).then(|| step.new.clone()),
                ready_ms: step.ready_us.map(|r| round3(span_ms(step.at_us, r))),
                sigterm_ms: round3(span_ms(rolling_us, step.term_us)),
                exit_ms: round3(span_ms(step.term_us, step.exit_us)),
                respawn_ms: round3(span_ms(step.exit_us, step.at_us.max(step.exit_us))),
                joined_ms: joined_us.map(|j| round3(span_ms(step.at_us, j))),
                moved: OwnerChanges::count(&log, step.term_us, until).changes,
            }
        })
        .collect();
    let leave_ms = restarts.iter().map(|r| r.exit_ms).fold(0.0, f64::max);
    eprintln!(
        "rolling: {} owner changes [{}]; {} unowned spells of the old list, longest {:.1} ms, {:.1} ms in all; {} refused",
        moved.changes,
        moved.describe(),
        unowned.gaps,
        unowned.max_ms,
        unowned.sum_ms,
        refused.len()
    );
    for r in &refused {
        eprintln!(
            "rolling: refused: {} (process {}): {}",
            r.replica, r.incarnation, r.reason
        );
    }
    eprintln!(
        "rolling: ledger: {} entries {:?}; matches the {} owner changes observed: {}; state_bytes as left ({} bytes): {} ({} mismatches {:?})",
        ledger.entries,
        ledger.causes,
        ledger.observed,
        ledger.matches_observed,
        settings.hand_off_bytes,
        ledger.state_matches,
        ledger.state_mismatches,
        ledger.state_mismatched
    );
    eprintln!(
        "rolling: hand-offs of {} bytes: {}",
        settings.hand_off_bytes,
        hand_offs.describe()
    );
    for e in &hand_offs.examples {
        eprintln!("rolling: hand-off: {e}");
    }
    if redis_counts != progress.counts() {
        eprintln!(
            "rolling: Redis disagrees with the replicas at the end: Redis says {}; the replicas say {}",
            describe(&status),
            progress.describe()
        );
    }
    Ok(RollingReport {
        scenario: "rolling".to_owned(),
        sticky: settings.sticky,
        paced: settings.paced,
        moves_per_partition: round3(moved.changes as f64 / before.max(1) as f64),
        moved_more_than_once: moved.per_partition.values().filter(|n| **n > 1).count(),
        deploy_ms: round3(span_ms(rolling_us, deployed_us)),
        partitions_before: before,
        partitions_after: status.partitions.len(),
        moved: moved.changes,
        max_unowned_ms: round3(unowned.max_ms),
        sum_unowned_ms: round3(unowned.sum_ms),
        refused: refused.len(),
        all_owned: progress.all_owned(),
        spread: progress.spread(),
        setup: RollingSetup {
            topology: fleet.servers.topology,
            replicas: settings.replicas,
            lease_ms: settings.lease_ms,
            gap_ms: settings.gap_ms,
            rejoin_grace_ms: old.rejoin_grace_ms,
            added: settings.add_partitions,
            list_versions: [old.list_version, new.list_version],
            group_list_version: status.list_version,
        },
        detail: RollingDetail {
            balanced: balanced_ms.is_some() && progress.balanced(),
            balanced_ms: balanced_ms.map(round3),
            rolling_ms: round3(span_ms(rolling_us, end_us)),
            unowned_gaps: unowned.gaps,
            longest_unowned: unowned
                .longest
                .map(|(p, at)| (p, round3(span_ms(rolling_us, at)))),
            still_unowned: unowned.open,
            moves: moved.describe(),
            refusals: refused,
            restarts,
            final_counts: progress.counts(),
            redis_counts,
            ledger,
            hand_off_bytes: settings.hand_off_bytes,
            hand_offs,
            leave_within_ms: settings.leave_within_ms,
            leave_ms,
        },
    })
}

/// One step of the rolling phase: `old` left, `new` (process `incarnation`) started.
struct Step {
    old: String,
    new: String,
    incarnation: u32,
    /// The old one's SIGTERM and exit.
    term_us: u64,
    exit_us: u64,
    /// The new one's start, and (paced) its `ready` line.
    at_us: u64,
    ready_us: Option<u64>,
}

/// Waits for `replica`'s `ready` line (from line `from` on); returns its time.
///
/// # Errors
/// If a replica exits, or `limit` passes first.
async fn until_ready(
    fleet: &mut Fleet,
    replica: &str,
    from: usize,
    limit: Duration,
) -> Result<u64, BoxError> {
    let start = Instant::now();
    loop {
        let ready = fleet.log.since(from).iter().find_map(|l| match &l.event {
            PartitionEvent::Ready {
                ready: true, at_us, ..
            } if l.replica == replica => Some(*at_us),
            _ => None,
        });
        if let Some(at_us) = ready {
            return Ok(at_us);
        }
        fleet.check_running()?;
        if start.elapsed() > limit {
            return Err(format!(
                "{replica} not ready within {:.1} s: {}",
                limit.as_secs_f64(),
                fleet.log.progress().describe()
            )
            .into());
        }
        sleep(Duration::from_millis(5)).await;
    }
}

/// Once a replica's `group_set` line (from line `*from` on) shows the grown set of
/// `after` partitions, the bench's counters count `after` (for progress lines; the end
/// counts `after` in any case).
fn follow_set(fleet: &Fleet, after: usize, from: &mut Option<usize>) {
    let Some(i) = *from else { return };
    let lines = fleet.log.since(i);
    let grown = lines.iter().any(
        |l| matches!(l.event, PartitionEvent::GroupSet { partitions, .. } if partitions == after),
    );
    if grown {
        fleet.log.expect_partitions(after);
        *from = None;
    } else {
        *from = Some(i + lines.len());
    }
}

/// Waits until the replicas' lines say balanced, or `deadline`: returns the counters
/// then (`None` at the deadline, after saying on stderr what was last seen).
///
/// # Errors
/// If a replica exits.
async fn until_balanced(
    fleet: &mut Fleet,
    deadline: Instant,
    limit: Duration,
) -> Result<Option<Progress>, BoxError> {
    let start = Instant::now();
    let mut next_report = start + Duration::from_secs(10);
    let mut tick = interval(Duration::from_millis(5));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let p = fleet.log.progress();
        if p.balanced() {
            return Ok(Some(p));
        }
        fleet
            .check_running()
            .map_err(|e| format!("after the last restart: {e}; last seen {}", p.describe()))?;
        let now = Instant::now();
        if now >= deadline {
            eprintln!(
                "rolling: not balanced within {:.1} s of the last restart; last seen {}",
                limit.as_secs_f64(),
                p.describe()
            );
            return Ok(None);
        }
        if now >= next_report {
            next_report = now + Duration::from_secs(10);
            eprintln!(
                "rolling: waiting for balance, {:.0} s so far: {}",
                (now - start).as_secs_f64(),
                p.describe()
            );
        }
    }
}
