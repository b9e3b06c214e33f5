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

mod check;
mod cluster;
mod progress;
mod schedule;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use tokio::time::{Instant, sleep_until};

use self::check::{LedgerCheck, Uptime, check_ledger, uptime};
use self::cluster::Cluster;
use self::progress::Sampler;
use self::schedule::{Fault, FaultKind, schedule};
use crate::ChaosArgs;
use crate::clock::now_us;
use crate::group::event::{PartitionEvent, ledger_key, partition_names};
use crate::group::process::{EventLog, ReplicaSpec};
use crate::group::status::{GroupWatch, balanced, counts, describe, spread_of};
use crate::stats::round3;
use crate::store::{self, BoxError, StoreSpec};

/// Violation sentences kept in the report (all of them go to stderr).
const DETAILS: usize = 20;
/// How often the bench samples the ledgers' lengths.
const SAMPLE: Duration = Duration::from_millis(20);

/// Availability over the partitions.
#[derive(Debug, Clone, Serialize)]
pub struct Availability {
    /// The least available partition's fraction of the window with writes.
    pub min: f64,
    /// The median partition's.
    pub median: f64,
}

/// Gaps attributed to one fault kind.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GapStats {
    /// Gaps (over every partition).
    pub count: u64,
    /// Their total length.
    pub total_ms: f64,
    /// The longest.
    pub longest_ms: f64,
}

/// The final report of `chaos`.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosReport {
    /// Always `chaos`.
    pub scenario: &'static str,
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
    pub faults: BTreeMap<&'static str, u64>,
    /// Records in all ledgers.
    pub writes_accepted: u64,
    /// Terms whose writing ended on a stale rejection (reported by the replicas).
    pub stale_rejected: u64,
    /// Stale writes accepted, fences written by two replicas, malformed records, and
    /// liveness failures (the group not balancing after healing, a replica not
    /// stopping on SIGTERM).
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
    pub gaps: BTreeMap<&'static str, GapStats>,
    /// Records of a term that landed after a later record of the same term.
    pub reordered: u64,
    /// Ledger writes that failed with a store error, in terms that ended cleanly.
    pub write_errors: u64,
    /// Partitions per replica at the end.
    pub final_counts: BTreeMap<String, usize>,
    /// max − min of `final_counts`.
    pub spread: usize,
}

/// A fault as it ran.
#[derive(Debug, Clone)]
struct Applied {
    kind: FaultKind,
    start_us: u64,
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

/// Runs the scenario.
///
/// # Errors
/// If a server or process cannot be started, or Redis cannot be read. Violations are
/// reported, not errors.
pub async fn run(args: &ChaosArgs) -> Result<ChaosReport, BoxError> {
    let lease = Duration::from_millis(args.lease_ms);
    let log = EventLog::new(args.partitions);
    let group = format!("chaos-{}", args.seed);
    let spec = ReplicaSpec {
        exe: std::env::current_exe()?,
        group: group.clone(),
        partitions: args.partitions,
        lease_ms: args.lease_ms,
        settle_ms: None,
        write_every_ms: args.write_every_ms,
        nice: 0,
        list_version: 0,
        rejoin_grace_ms: None,
        capacity: 1,
        move_budget: None,
        hand_off_bytes: 0,
    };
    let mut cluster = Cluster::start(spec, log.clone())?;
    let watch = GroupWatch::new(
        store::build_store(&StoreSpec::single(cluster.coordination_url()), lease)?,
        &group,
        Duration::from_millis(20),
    );
    let plan = schedule(args.seed, args.seconds, args.replicas, lease);
    eprintln!("seed {}: {} faults", args.seed, plan.len());
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

    let driven = drive(&mut cluster, &watch, &log, &plan, args).await;
    let stopped = cluster.stop_all().await;
    let mut timeline = driven?;
    if let Err(e) = stopped {
        timeline
            .liveness
            .push(format!("liveness: stopping the replicas at the end: {e}"));
    }
    let ledgers = read_ledgers(&cluster.resource_url(), args.partitions).await?;
    Ok(report(args, &timeline, &ledgers, &log))
}

/// Starts the replicas, runs the schedule, heals, and waits for the group to balance.
async fn drive(
    cluster: &mut Cluster,
    watch: &GroupWatch,
    log: &EventLog,
    plan: &[Fault],
    args: &ChaosArgs,
) -> Result<Timeline, BoxError> {
    let lease = Duration::from_millis(args.lease_ms);
    let limit = Duration::from_secs(10) + lease * 30;
    for i in 1..=args.replicas {
        cluster.add(&format!("replica-{i}")).await?;
    }
    let live = cluster.replicas();
    let (status, _) = watch
        .poll_until("warm-up: balanced", limit, |s| balanced(s, &live))
        .await?;
    eprintln!("warm-up: balanced ({})", describe(&status));

    let sampler = Sampler::start(&cluster.resource_url(), args.partitions, SAMPLE)?;
    let start = Instant::now();
    let mut t = Timeline {
        start_us: now_us(),
        ..Timeline::default()
    };
    for fault in plan {
        sleep_until(start + fault.at).await;
        t.applied.push(Applied {
            kind: fault.kind,
            start_us: now_us(),
        });
        let owning = match fault.kind {
            FaultKind::RedisRestart | FaultKind::Join => String::new(),
            _ => {
                let id = cluster.id(fault.replica);
                format!("{id} (owning {})", log.owned_now(id))
            }
        };
        let joiner = apply(cluster, fault).await?;
        let target = joiner.unwrap_or(fault.replica);
        eprintln!(
            "{:>7.2} s: {} {}",
            start.elapsed().as_secs_f64(),
            fault.kind.name(),
            match fault.kind {
                FaultKind::RedisRestart => "coordination server".to_owned(),
                FaultKind::Join => cluster.id(target).to_owned(),
                _ => owning,
            }
        );
        sleep_until(start + fault.at + fault.duration).await;
        if let Err(e) = heal(cluster, fault, target).await {
            t.liveness
                .push(format!("liveness: healing {}: {e}", fault.kind.name()));
        }
    }
    sleep_until(start + Duration::from_secs(args.seconds)).await;
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
fn report(args: &ChaosArgs, t: &Timeline, ledgers: &[Vec<String>], log: &EventLog) -> ChaosReport {
    let threshold_us = (args.write_every_ms * 10_000).max(100_000);
    let names = partition_names(args.partitions);
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

    let mut details: Vec<String> = t.liveness.clone();
    details.extend(checks.iter().flat_map(|c| c.violations.iter().cloned()));
    for d in &details {
        eprintln!("VIOLATION {d}");
    }
    let mut gaps: BTreeMap<&'static str, GapStats> = BTreeMap::new();
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
        let g = gaps.entry(kind).or_default();
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
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    for a in &t.applied {
        *faults.entry(a.kind.name()).or_default() += 1;
    }
    let (mut stale_rejected, mut write_errors) = (0, 0);
    for logged in log.snapshot() {
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
        scenario: "chaos",
        seed: args.seed,
        seconds: args.seconds,
        replicas: args.replicas,
        partitions: args.partitions,
        lease_ms: args.lease_ms,
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
    }
}
