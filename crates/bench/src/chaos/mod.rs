//! `chaos`: a seeded fault schedule against partition replicas doing real fenced work,
//! then a check of everything they wrote.
//!
//! The bench starts a coordination redis-server and a resource store, and one replica
//! process per id, each reaching both servers through its own pair of fault proxies.
//! Every partition callback appends `partition,replica,fence,seq,sent_at_us` to the
//! partition's ledger on the resource store with `FencedWriter::rpush`, every few ms.
//! Faults (see [`mod@schedule`]) run one after another; at the end everything is healed,
//! the group must balance again, every replica is stopped, and every ledger is checked
//! (see [`check`]): zero stale writes accepted, no two replicas writing under one
//! fence, and per partition the time without writes, attributed to the fault active
//! when each gap began.
//!
//! With `--hand-off-bytes N` (64 by default) every term also hands off N bytes naming
//! itself, and the replicas' lines of the whole run are checked for *stale
//! deliveries* (see [`check::stale_deliveries`]): a term offered state that is not its
//! predecessor's is a violation like a stale write. The report's `hand_offs` counts
//! them with what the terms were offered ([`ChaosHandOffs`]).

mod check;
mod cluster;
mod progress;
mod schedule;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep_until};

use self::check::{LedgerCheck, StaleDelivery, Uptime, check_ledger, stale_deliveries, uptime};
use self::cluster::Cluster;
use self::progress::Sampler;
use self::schedule::{Fault, FaultKind, schedule};
use crate::clock::now_us;
use crate::group::event::{PartitionEvent, ledger_key, partition_names};
use crate::group::handoffs::{HandOffs, Staleness, Term, Terms, terms};
use crate::group::process::{EventLog, ReplicaSpec};
use crate::group::status::{GroupWatch, balanced, counts, describe, spread_of};
use crate::stats::round3;
use crate::store::{self, BoxError, StoreSpec};

/// Violation sentences kept in the report (all of them go to stderr).
const DETAILS: usize = 20;
/// How often the bench samples the ledgers' lengths.
const SAMPLE: Duration = Duration::from_millis(20);

/// Availability over the partitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Availability {
    /// The least available partition's fraction of the window with writes.
    pub min: f64,
    /// The median partition's.
    pub median: f64,
}

/// Gaps attributed to one fault kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GapStats {
    /// Gaps (over every partition).
    pub count: u64,
    /// Their total length.
    pub total_ms: f64,
    /// The longest.
    pub longest_ms: f64,
}

/// Hand-off state over a chaos run, from the replicas' lines (see
/// [`check::stale_deliveries`] and [`HandOffs`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChaosHandOffs {
    /// Terms offered any state.
    pub offered: u64,
    /// `owned` lines offered state that is not the previous term's: violations, must
    /// be 0.
    pub stale: u64,
    /// Terms offered no state, by their `no_hand_off` reason.
    pub not_offered: BTreeMap<String, u64>,
    /// Planned moves ([`HandOffs::moved`]): owner changes whose previous term ended
    /// for a planned reason.
    pub planned_moves: u64,
    /// Planned moves whose new term got exactly the previous term's state.
    pub state_delivered: u64,
    /// Planned moves whose new term got no state: allowed under faults (a Redis
    /// restart in between, a release lost in a black hole), informational.
    pub state_missing: u64,
    /// `state_missing` by the new term's `no_hand_off` reason.
    pub missing_why: BTreeMap<String, u64>,
    /// Terms whose state `Ownership::hand_off` accepted.
    pub left: u64,
    /// Terms whose `Ownership::hand_off` failed.
    pub errors: u64,
    /// Good deliveries of another length than was left.
    pub wrong_size: u64,
}

impl ChaosHandOffs {
    /// The summary of `h`, with `stale` stale deliveries.
    fn new(h: &HandOffs, stale: usize) -> Self {
        Self {
            offered: h.offered,
            stale: stale as u64,
            not_offered: h.not_offered.clone(),
            planned_moves: h.moved,
            state_delivered: h.state_delivered,
            state_missing: h.state_missing,
            missing_why: h.missing_why.clone(),
            left: h.left,
            errors: h.errors,
            wrong_size: h.wrong_size,
        }
    }
}

/// The final report of `chaos`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChaosReport {
    /// Always `chaos`.
    pub scenario: String,
    /// The schedule's seed.
    pub seed: u64,
    /// Length of the fault window.
    pub seconds: u64,
    /// Replicas (joiners not counted).
    pub replicas: usize,
    /// Partitions.
    pub partitions: usize,
    /// The lease.
    pub lease_ms: u64,
    /// Faults run, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Records in all ledgers.
    pub writes_accepted: u64,
    /// Terms whose writing ended on a stale rejection (reported by the replicas).
    pub stale_rejected: u64,
    /// Stale writes accepted, fences written by two replicas, malformed records, stale
    /// hand-off deliveries, and liveness failures (the group not balancing after
    /// healing, a replica not stopping on SIGTERM).
    pub violations: u64,
    /// The first violations, as sentences.
    pub violation_details: Vec<String>,
    /// Per-partition fraction of the window with writes (gaps above the threshold
    /// count as unavailable).
    pub availability: Availability,
    /// The longest stretch without writes of any partition.
    pub longest_gap_ms: f64,
    /// A gap counts as unavailability above this.
    pub gap_threshold_ms: f64,
    /// Gaps by the fault active when they began (`none`: before the first fault).
    pub gaps: BTreeMap<String, GapStats>,
    /// Records of a term that landed after a later record of the same term.
    pub reordered: u64,
    /// Ledger writes that failed with a store error, in terms that ended cleanly.
    pub write_errors: u64,
    /// Partitions per replica at the end.
    pub final_counts: BTreeMap<String, usize>,
    /// max − min of `final_counts`.
    pub spread: usize,
    /// The state the terms handed off (its fields are the report's own in the JSON).
    #[serde(flatten)]
    pub state: ChaosState,
}

/// The state handed off over a chaos run, in [`ChaosReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChaosState {
    /// Bytes of state every term hands off (`--hand-off-bytes`; 0: none).
    pub hand_off_bytes: usize,
    /// What the terms were offered of their predecessors' state.
    pub hand_offs: ChaosHandOffs,
}

/// A fault as it ran.
#[derive(Debug, Clone)]
struct Applied {
    kind: FaultKind,
    /// What it hit, as the bench printed it.
    target: String,
    start_us: u64,
    /// When it was healed (its start, for an instant fault).
    end_us: u64,
}

/// What the run produced before the check.
#[derive(Debug, Default)]
struct Timeline {
    start_us: u64,
    end_us: u64,
    applied: Vec<Applied>,
    liveness: Vec<String>,
    final_counts: BTreeMap<String, usize>,
    /// Per partition, when its ledger was seen growing.
    grew: Vec<Vec<u64>>,
}

/// What `chaos` runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Replica processes.
    pub replicas: usize,
    /// Partitions.
    pub partitions: usize,
    /// The lease of every partition, in milliseconds.
    pub lease_ms: u64,
    /// How long the faults go on, in seconds.
    pub seconds: u64,
    /// The seed of the fault schedule.
    pub seed: u64,
    /// How often a callback appends a ledger record, in milliseconds.
    pub write_every_ms: u64,
    /// Bytes of state every callback hands off (0: none).
    pub hand_off_bytes: usize,
}

/// Runs the scenario.
///
/// # Errors
/// If a server or process cannot be started, or Redis cannot be read. Violations are
/// reported, not errors.
pub async fn run(settings: &Settings) -> Result<ChaosReport, BoxError> {
    let lease = Duration::from_millis(settings.lease_ms);
    let log = EventLog::new(settings.partitions);
    let group = format!("chaos-{}", settings.seed);
    let spec = ReplicaSpec {
        exe: std::env::current_exe()?,
        group: group.clone(),
        partitions: settings.partitions,
        lease_ms: settings.lease_ms,
        settle_ms: None,
        write_every_ms: settings.write_every_ms,
        nice: 0,
        list_version: 0,
        rejoin_grace_ms: None,
        capacity: 1,
        move_budget: None,
        hand_off_bytes: settings.hand_off_bytes,
        leave_within_ms: None,
        prepare: None,
        load: None,
    };
    let mut cluster = Cluster::start(spec, log.clone())?;
    let watch = GroupWatch::new(
        store::build_store(&StoreSpec::single(cluster.coordination_url()), lease)?,
        &group,
        Duration::from_millis(20),
    );
    let plan = schedule(settings.seed, settings.seconds, settings.replicas, lease);
    eprintln!("seed {}: {} faults", settings.seed, plan.len());
    for f in &plan {
        eprintln!(
            "  at {:>7.2} s: {:<13} replica index {} for {:.2} s{}",
            f.at.as_secs_f64(),
            f.kind.name(),
            f.replica,
            f.duration.as_secs_f64(),
            if f.kind == FaultKind::Latency {
                format!(" (+{} ms each way)", f.latency.as_millis())
            } else {
                String::new()
            }
        );
    }

    let driven = drive(&mut cluster, &watch, &log, &plan, settings).await;
    let stopped = cluster.stop_all().await;
    let mut timeline = driven?;
    if let Err(e) = stopped {
        timeline
            .liveness
            .push(format!("liveness: stopping the replicas at the end: {e}"));
    }
    let ledgers = read_ledgers(&cluster.resource_url(), settings.partitions).await?;
    Ok(report(settings, &timeline, &ledgers, &log))
}

/// Starts the replicas, runs the schedule, heals, and waits for the group to balance.
async fn drive(
    cluster: &mut Cluster,
    watch: &GroupWatch,
    log: &EventLog,
    plan: &[Fault],
    settings: &Settings,
) -> Result<Timeline, BoxError> {
    let lease = Duration::from_millis(settings.lease_ms);
    let limit = Duration::from_secs(10) + lease * 30;
    for i in 1..=settings.replicas {
        cluster.add(&format!("replica-{i}")).await?;
    }
    let live = cluster.replicas();
    let (status, _) = watch
        .poll_until("warm-up: balanced", limit, |s| balanced(s, &live))
        .await?;
    eprintln!("warm-up: balanced ({})", describe(&status));

    let sampler = Sampler::start(&cluster.resource_url(), settings.partitions, SAMPLE)?;
    let start = Instant::now();
    let mut t = Timeline {
        start_us: now_us(),
        ..Timeline::default()
    };
    for fault in plan {
        sleep_until(start + fault.at).await;
        let start_us = now_us();
        let owning = match fault.kind {
            FaultKind::RedisRestart | FaultKind::Join => String::new(),
            _ => {
                let id = cluster.id(fault.replica);
                format!("{id} (owning {})", log.owned_now(id))
            }
        };
        let joiner = apply(cluster, fault).await?;
        let target = joiner.unwrap_or(fault.replica);
        let what = match fault.kind {
            FaultKind::RedisRestart => "coordination server".to_owned(),
            FaultKind::Join => cluster.id(target).to_owned(),
            _ => owning,
        };
        eprintln!(
            "{:>7.2} s: {} {what}",
            start.elapsed().as_secs_f64(),
            fault.kind.name(),
        );
        sleep_until(start + fault.at + fault.duration).await;
        if let Err(e) = heal(cluster, fault, target).await {
            t.liveness
                .push(format!("liveness: healing {}: {e}", fault.kind.name()));
        }
        t.applied.push(Applied {
            kind: fault.kind,
            target: what,
            start_us,
            end_us: now_us(),
        });
    }
    sleep_until(start + Duration::from_secs(settings.seconds)).await;
    cluster.heal().await?;
    let live = cluster.replicas();
    match watch
        .poll_until("after healing: balanced", limit, |s| balanced(s, &live))
        .await
    {
        Ok((status, _)) => {
            eprintln!("healed: balanced ({})", describe(&status));
            t.final_counts = counts(&status, &live);
        }
        Err(e) => {
            t.liveness.push(format!("liveness: {e}"));
            if let Some(status) = watch.status().await? {
                t.final_counts = counts(&status, &live);
            }
        }
    }
    t.end_us = now_us();
    t.grew = sampler.finish().await?;
    Ok(t)
}

/// Starts a fault; returns the joiner's index for `join`.
async fn apply(cluster: &mut Cluster, f: &Fault) -> Result<Option<usize>, BoxError> {
    let i = f.replica;
    match f.kind {
        FaultKind::Kill => cluster.kill(i).await?,
        FaultKind::Pause => cluster.pause(i).await?,
        FaultKind::Blackhole => cluster.blackhole(i),
        FaultKind::Latency => cluster.latency(i, f.latency),
        FaultKind::Reset => cluster.reset(i),
        FaultKind::RedisRestart => cluster.restart_coordination().await?,
        FaultKind::Term => {
            if let Err(e) = cluster.term(i).await {
                eprintln!("  {} did not leave cleanly: {e}", cluster.id(i));
            }
        }
        FaultKind::Join => return Ok(Some(cluster.join().await?)),
    }
    Ok(None)
}

/// Ends a fault.
async fn heal(cluster: &mut Cluster, f: &Fault, target: usize) -> Result<(), BoxError> {
    match f.kind {
        FaultKind::Kill | FaultKind::Term => cluster.restart(target),
        FaultKind::Pause => cluster.resume(target).await,
        FaultKind::Blackhole | FaultKind::Latency => {
            cluster.pass(target);
            Ok(())
        }
        FaultKind::Reset | FaultKind::RedisRestart => Ok(()),
        FaultKind::Join => cluster.remove(target).await,
    }
}

/// Every partition's ledger, in order.
async fn read_ledgers(url: &str, partitions: usize) -> Result<Vec<Vec<String>>, BoxError> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut ledgers = Vec::with_capacity(partitions);
    for p in partition_names(partitions) {
        let lines: Vec<String> = redis::cmd("LRANGE")
            .arg(ledger_key(&p))
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await?;
        ledgers.push(lines);
    }
    Ok(ledgers)
}

/// Checks the ledgers and the event log against the timeline.
fn report(
    settings: &Settings,
    t: &Timeline,
    ledgers: &[Vec<String>],
    log: &EventLog,
) -> ChaosReport {
    let threshold_us = (settings.write_every_ms * 10_000).max(100_000);
    let names = partition_names(settings.partitions);
    let checks: Vec<LedgerCheck> = names
        .iter()
        .zip(ledgers)
        .map(|(p, lines)| check_ledger(p, lines))
        .collect();
    let uptimes: Vec<Uptime> = t
        .grew
        .iter()
        .map(|grew| uptime(grew, (t.start_us, t.end_us), threshold_us))
        .collect();

    let log = log.snapshot();
    let terms = terms(&log);
    let stale = stale_deliveries(&log, &terms);
    let hand_offs = HandOffs::of_terms(&log, &terms);
    eprintln!(
        "hand-offs of {} bytes: {} terms offered state; {}",
        settings.hand_off_bytes,
        hand_offs.offered,
        hand_offs.describe()
    );
    for e in &hand_offs.examples {
        eprintln!("hand-off: {e}");
    }

    let mut details: Vec<String> = t.liveness.clone();
    details.extend(checks.iter().flat_map(|c| c.violations.iter().cloned()));
    let lease_us = settings.lease_ms * 1000;
    details.extend(stale.iter().map(|d| stale_sentence(d, &terms, t, lease_us)));
    for d in &details {
        eprintln!("VIOLATION {d}");
    }
    let mut gaps: BTreeMap<String, GapStats> = BTreeMap::new();
    for (partition, gap) in names
        .iter()
        .zip(&uptimes)
        .flat_map(|(p, u)| u.gaps.iter().map(move |g| (p, g)))
    {
        // The gap became one `threshold` after the last growth; a fault that started
        // by then (faults are at least a lease apart) is the one it follows.
        let kind = t
            .applied
            .iter()
            .rev()
            .find(|a| a.start_us <= gap.start_us + threshold_us)
            .map_or("none", |a| a.kind.name());
        eprintln!(
            "gap {partition}: {:.1} ms from {:.2} s ({kind})",
            gap.ms,
            gap.start_us.saturating_sub(t.start_us) as f64 / 1e6
        );
        let g = gaps.entry(kind.to_owned()).or_default();
        g.count += 1;
        g.total_ms = round3(g.total_ms + gap.ms);
        g.longest_ms = g.longest_ms.max(round3(gap.ms));
    }
    for (kind, g) in &gaps {
        eprintln!(
            "gaps after {kind}: {} totalling {:.1} ms, longest {:.1} ms",
            g.count, g.total_ms, g.longest_ms
        );
    }
    let mut faults: BTreeMap<String, u64> = BTreeMap::new();
    for a in &t.applied {
        *faults.entry(a.kind.name().to_owned()).or_default() += 1;
    }
    let (mut stale_rejected, mut write_errors) = (0, 0);
    for logged in &log {
        match logged.event {
            PartitionEvent::Rejected { .. } => stale_rejected += 1,
            PartitionEvent::Released {
                write_errors: n, ..
            } => write_errors += n,
            _ => {}
        }
    }
    let mut availability: Vec<f64> = uptimes.iter().map(|u| u.availability).collect();
    availability.sort_by(f64::total_cmp);
    let round4 = |x: f64| (x * 10_000.0).round() / 10_000.0;
    let min = availability.first().copied().unwrap_or(0.0);
    let median = availability
        .get(availability.len() / 2)
        .copied()
        .unwrap_or(0.0);
    ChaosReport {
        scenario: "chaos".to_owned(),
        seed: settings.seed,
        seconds: settings.seconds,
        replicas: settings.replicas,
        partitions: settings.partitions,
        lease_ms: settings.lease_ms,
        faults,
        writes_accepted: checks.iter().map(|c| c.writes).sum(),
        stale_rejected,
        violations: details.len() as u64,
        violation_details: details.into_iter().take(DETAILS).collect(),
        availability: Availability {
            min: round4(min),
            median: round4(median),
        },
        longest_gap_ms: round3(uptimes.iter().map(|u| u.longest_gap_ms).fold(0.0, f64::max)),
        gap_threshold_ms: threshold_us as f64 / 1000.0,
        gaps,
        reordered: checks.iter().map(|c| c.reordered).sum(),
        write_errors,
        spread: spread_of(&t.final_counts),
        final_counts: t.final_counts.clone(),
        state: ChaosState {
            hand_off_bytes: settings.hand_off_bytes,
            hand_offs: ChaosHandOffs::new(&hand_offs, stale.len()),
        },
    }
}

/// A stale delivery as a violation sentence: the receiving term, the term the state
/// names and the first seen term between them (with their lines), and the faults from
/// the named term's end (or, if the bench never saw it, three leases earlier) to the
/// receiving term's start. Times are from the start of the fault window.
fn stale_sentence(d: &StaleDelivery<'_>, terms: &Terms<'_>, t: &Timeline, lease_us: u64) -> String {
    let at = |us: u64| format!("{:.3} s", (us as f64 - t.start_us as f64) / 1e6);
    let seen = terms.get(d.partition);
    let term = |fence: u64| seen.and_then(|s| s.get(&fence));
    let lines = |fence: u64, term: &Term<'_>| {
        let end = match term.released {
            Some(r) => format!(
                "released at {} ({}, left {})",
                at(r.at_us),
                r.reason.unwrap_or("no reason"),
                r.left
                    .map_or_else(|| "nothing".to_owned(), |n| format!("{n} B"))
            ),
            None => "no released line".to_owned(),
        };
        format!(
            "@{fence} {}#{} owned at {}, {end}",
            term.replica,
            term.incarnation,
            at(term.owned_us)
        )
    };
    let (named, between) = match &d.why {
        Staleness::Skipped { fence, between, .. } => (Some(*fence), Some(*between)),
        Staleness::Unseen { fence } | Staleness::NotEarlier { fence } => (Some(*fence), None),
        Staleness::OtherPartition { .. } | Staleness::NamesNoTerm => (None, None),
    };
    let mut sentence = format!(
        "{}: stale hand-off state: term @{} ({}#{}, owned at {}) was offered {:?}: {}",
        d.partition,
        d.fence,
        d.replica,
        d.incarnation,
        at(d.at_us),
        d.header,
        d.why
    );
    let named_term = named.and_then(|f| term(f).map(|x| (f, x)));
    if let Some((f, x)) = named_term {
        sentence.push_str(&format!("; named term {}", lines(f, x)));
    }
    if let Some((f, x)) = between.and_then(|f| term(f).map(|x| (f, x))) {
        sentence.push_str(&format!("; first term between {}", lines(f, x)));
    }
    let from = named_term.map_or(d.at_us.saturating_sub(3 * lease_us), |(_, x)| {
        x.released.map_or(x.owned_us, |r| r.at_us)
    });
    let faults: Vec<String> = t
        .applied
        .iter()
        .filter(|a| a.start_us <= d.at_us && a.end_us >= from)
        .map(|a| {
            format!(
                "{} {} {}–{}",
                a.kind.name(),
                a.target,
                at(a.start_us),
                at(a.end_us)
            )
        })
        .collect();
    if faults.is_empty() {
        sentence.push_str(&format!("; no fault from {} to {}", at(from), at(d.at_us)));
    } else {
        sentence.push_str(&format!(
            "; faults from {} to {}: {}",
            at(from),
            at(d.at_us),
            faults.join(", ")
        ));
    }
    sentence
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::handoffs::tests::Got::{Nothing, State};
    use crate::group::handoffs::tests::{owned, released};

    #[test]
    fn a_stale_delivery_names_its_terms_and_the_faults_in_between() {
        let log = vec![
            owned(
                "replica-1",
                1,
                "p0003",
                10,
                1_000_000,
                Nothing("first_owner"),
            ),
            released("replica-1", 1, "p0003", 10, 3_000_000, "shutdown", Some(64)),
            owned(
                "replica-2",
                1,
                "p0003",
                11,
                3_100_000,
                State("p0003@10", 64),
            ),
            owned(
                "replica-3",
                2,
                "p0003",
                12,
                6_000_000,
                State("p0003@10", 64),
            ),
        ];
        let applied = |kind, target: &str, start_us, end_us| Applied {
            kind,
            target: target.to_owned(),
            start_us,
            end_us,
        };
        let t = Timeline {
            start_us: 1_000_000,
            applied: vec![
                applied(
                    FaultKind::Latency,
                    "replica-4 (owning 6)",
                    1_500_000,
                    2_500_000,
                ),
                applied(
                    FaultKind::Blackhole,
                    "replica-2 (owning 7)",
                    4_000_000,
                    5_500_000,
                ),
                applied(
                    FaultKind::RedisRestart,
                    "coordination server",
                    5_900_000,
                    5_900_000,
                ),
                applied(
                    FaultKind::Kill,
                    "replica-1 (owning 6)",
                    7_000_000,
                    8_000_000,
                ),
            ],
            ..Timeline::default()
        };
        let terms = terms(&log);
        let stale = stale_deliveries(&log, &terms);
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert_eq!(
            stale_sentence(&stale[0], &terms, &t, 1_000_000),
            "p0003: stale hand-off state: term @12 (replica-3#2, owned at 5.000 s) was offered \
             \"p0003@10\": it names term @10, but the bench saw 1 term(s) between them, the \
             first @11; named term @10 replica-1#1 owned at 0.000 s, released at 2.000 s \
             (shutdown, left 64 B); first term between @11 replica-2#1 owned at 2.100 s, no \
             released line; faults from 2.000 s to 5.000 s: blackhole replica-2 (owning 7) \
             3.000 s–4.500 s, redis_restart coordination server 4.900 s–4.900 s"
        );
    }
}
