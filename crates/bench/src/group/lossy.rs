//! `rebalance-lossy`: a failover of the group's primary that loses grants.
//!
//! Each run starts a fresh topology (a Sentinel set with one replica, or a cluster
//! with one replica per primary) and its replica processes, then:
//!
//! 1. cold start of `--replicas` replicas, until balanced (by their lines and by
//!    Redis);
//! 2. cuts the primary that serves the group off from its replicas, and starts one
//!    more replica: the joiner's join, the claims of the share handed to it and the
//!    givers' releases all live on the primary only (checked: `grants_lost` counts the
//!    partitions whose owner differs between the primary's and the replica's
//!    `owners`);
//! 3. SIGKILLs the primary: the topology promotes the replica, which still has the
//!    group as it was before the join (the joiner unknown, the handed-off partitions
//!    still their givers'), and the replicas go on against it;
//! 4. watches the replicas' lines until the group has been balanced, every partition
//!    owned, with no owner change for a lease + a renew interval (at least two
//!    leases after the new primary was named).
//!
//! Every term comes from the lines: `owned` starts it, `released` ends it with its
//! reason and its last successful send. A term that ended as planned (a hand-off, a
//! shutdown) was entitled until its release; a lost one until that send + the lease;
//! one still running, until the end. A term that starts while another replica's term
//! of the same partition is still entitled is an overlap ([`crate::overlap`]).
//! `kill.all_owned_ms` is the time from the kill until every partition is owned again:
//! the latest start, after the kill, of the spell of ownership that each partition is
//! in at the end (0 for a partition owned throughout).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;
use tokio::task::block_in_place;
use tokio::time::{Instant, sleep};

use crate::clock::{micros, now_us, span_ms};
use crate::group::GroupSettings;
use crate::group::event::{PartitionEvent, planned_end};
use crate::group::harness::{Fleet, convergence_limit};
use crate::group::ownership::{Balance, OwnerChanges};
use crate::group::process::Logged;
use crate::group::rebalance::{confirm, converge, poll_interval};
use crate::group::status::PREFIX;
use crate::overlap::{self, FenceRepeat, Overlap, Term};
use crate::stats::{Summary, round3};
use crate::store::{self, BoxError, Servers, Topology};

/// Longest the topology may take to name a new primary after the kill.
const DETECT_LIMIT: Duration = Duration::from_secs(30);
/// How often the bench looks at the lines while it waits for the group to settle.
const WATCH: Duration = Duration::from_millis(20);
/// How many overlaps and fence repeats a run lists (all are counted).
const EXAMPLES: usize = 5;

/// The join that happens on the primary only.
#[derive(Debug, Clone, Serialize)]
pub struct LossyJoin {
    /// The joiner.
    pub replica: String,
    /// Spawn → balanced with it (its lines).
    pub balanced_ms: f64,
    /// Owner changes from the spawn until Redis showed the group balanced.
    pub moved: u64,
}

/// The primary's kill and what followed.
#[derive(Debug, Clone, Serialize)]
pub struct LossyKill {
    /// The data node killed.
    pub primary_node: usize,
    /// The replica promoted.
    pub new_primary_node: usize,
    /// Kill → the topology named a new primary that answers as a master.
    pub detection_ms: f64,
    /// Kill → every partition owned again (see the module docs).
    pub all_owned_ms: f64,
    /// Kill → the last owner change before the group settled.
    pub settled_ms: f64,
    /// Terms that started after the kill.
    pub terms_after: usize,
    /// Owner changes after the kill.
    pub moved_after: u64,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct LossyRebalanceRun {
    /// First spawn → every partition owned and balanced, at the cold start.
    pub cold_start_balanced_ms: f64,
    /// The join on the primary only.
    pub join: LossyJoin,
    /// Partitions whose owner on the primary differs from the replica's copy just
    /// before the kill: the grants the failover loses.
    pub grants_lost: usize,
    /// The kill.
    pub kill: LossyKill,
    /// Terms that started while another replica's term of the partition was still
    /// entitled.
    pub overlaps: usize,
    /// Of them, terms that started before the kill (0 unless something else is wrong).
    pub overlaps_before_kill: usize,
    /// Partitions with at least one overlap.
    pub overlapping_partitions: usize,
    /// How long the earlier owner was still entitled, over the overlaps with an end.
    pub overlap_ms: Option<Summary>,
    /// Terms whose fence was not above every earlier fence of the partition.
    pub fence_repeats: usize,
    /// The first overlaps (in partition order).
    pub overlap_examples: Vec<PartitionOverlap>,
    /// The first fence repeats.
    pub fence_repeat_examples: Vec<PartitionRepeat>,
    /// Partitions per replica at the end (by their lines).
    pub final_counts: BTreeMap<String, usize>,
}

/// An overlap, with its partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionOverlap {
    /// The partition.
    pub partition: String,
    /// The overlap.
    #[serde(flatten)]
    pub overlap: Overlap,
}

/// A fence repeat, with its partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionRepeat {
    /// The partition.
    pub partition: String,
    /// The repeat.
    #[serde(flatten)]
    pub repeat: FenceRepeat,
}

/// Summaries of the kills over every run.
#[derive(Debug, Clone, Serialize)]
pub struct KillSummary {
    /// Kill → every partition owned again.
    pub all_owned_ms: Summary,
    /// Kill → a new primary named.
    pub detection_ms: Summary,
    /// Kill → the last owner change.
    pub settled_ms: Summary,
}

/// The final report of `rebalance-lossy`.
#[derive(Debug, Clone, Serialize)]
pub struct LossyRebalanceReport {
    /// Always `rebalance`.
    pub scenario: &'static str,
    /// Always `true`.
    pub lose_writes: bool,
    /// The Redis set-up.
    pub topology: Topology,
    /// Partition count.
    pub partitions: usize,
    /// Replicas at the start (one more joins).
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// Overlapping terms, summed over the runs.
    pub overlaps: usize,
    /// Fence repeats, summed over the runs.
    pub fence_repeats: usize,
    /// Summary of the runs' `grants_lost`.
    pub grants_lost: Summary,
    /// Summaries of the kills.
    pub kill: KillSummary,
    /// Every run, in order.
    pub runs: Vec<LossyRebalanceRun>,
}

/// What `rebalance-lossy` runs: the group, and how many runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The group (its `target` must have replicas: sentinel or cluster).
    pub group: GroupSettings,
    /// Runs, each on a fresh topology.
    pub runs: u64,
}

/// Runs `settings.runs` lossy failovers of a group, each on a fresh topology.
///
/// # Errors
/// On a topology without replicas, or the first run that fails.
pub async fn run(settings: &Settings) -> Result<LossyRebalanceReport, BoxError> {
    store::check_lossy_target(&settings.group.target)?;
    let mut all = Vec::new();
    for i in 1..=settings.runs {
        let r = one(settings).await.map_err(|e| format!("run {i}: {e}"))?;
        eprintln!(
            "run {i}/{}: {} grants lost; detection {:.1} ms, all owned again {:.1} ms after \
             the kill; {} overlaps on {} partitions, {} fence repeats",
            settings.runs,
            r.grants_lost,
            r.kill.detection_ms,
            r.kill.all_owned_ms,
            r.overlaps,
            r.overlapping_partitions,
            r.fence_repeats
        );
        println!("{}", serde_json::to_string(&r)?);
        all.push(r);
    }
    let over = |f: fn(&LossyRebalanceRun) -> f64| {
        let values: Vec<f64> = all.iter().map(f).collect();
        Summary::of(&values).ok_or("no runs")
    };
    Ok(LossyRebalanceReport {
        scenario: "rebalance",
        lose_writes: true,
        topology: settings.group.target.topology,
        partitions: settings.group.partitions,
        replicas: settings.group.replicas,
        lease_ms: settings.group.lease_ms,
        overlaps: all.iter().map(|r| r.overlaps).sum(),
        fence_repeats: all.iter().map(|r| r.fence_repeats).sum(),
        grants_lost: over(|r| r.grants_lost as f64)?,
        kill: KillSummary {
            all_owned_ms: over(|r| r.kill.all_owned_ms)?,
            detection_ms: over(|r| r.kill.detection_ms)?,
            settled_ms: over(|r| r.kill.settled_ms)?,
        },
        runs: all,
    })
}

/// One run on a fresh topology.
async fn one(settings: &Settings) -> Result<LossyRebalanceRun, BoxError> {
    let servers = block_in_place(|| Servers::start_with(&settings.group.target, true))?;
    let mut fleet = Fleet::on(
        servers,
        "rebalance-lossy",
        settings.group.partitions,
        settings.group.lease_ms,
        settings.group.settle_ms,
        poll_interval(settings.group.partitions),
        settings.group.replica_nice,
    )?;
    let result = phases(&mut fleet, settings).await;
    if let Err(e) = fleet.shutdown().await {
        tracing::warn!(error = %e, "a replica did not stop cleanly after the failover");
    }
    block_in_place(|| drop(fleet));
    result
}

async fn phases(fleet: &mut Fleet, settings: &Settings) -> Result<LossyRebalanceRun, BoxError> {
    let lease = fleet.lease();
    let renew_interval = store::config("probe", "probe", lease)?.renew_interval();
    let limit = convergence_limit(settings.group.partitions, lease);
    let n = settings.group.replicas;

    // Cold start.
    let start_us = now_us();
    for i in 1..=n {
        fleet.spawn(&format!("replica-{i}"))?;
    }
    let (_, cold_ms) = converge(fleet, "cold start", start_us, limit).await?;
    confirm(fleet, "cold start", start_us, limit, &Balance::Count).await?;
    eprintln!("cold start: balanced after {cold_ms:.1} ms");

    // The join, on the primary only.
    let owners_key = format!("{PREFIX}:{{{}}}:owners", fleet.spec.group);
    let primary = block_in_place(|| fleet.servers.cut_replication(&owners_key))?;
    let replicas = block_in_place(|| fleet.servers.replicas_of(primary))?;
    let replica = *replicas
        .first()
        .ok_or_else(|| format!("the primary (node {primary}) has no replica"))?;
    eprintln!("cut node {primary} off from its replicas {replicas:?}");
    let joiner = format!("replica-{}", n + 1);
    let join_us = now_us();
    fleet.spawn(&joiner)?;
    fleet.log.reset_milestones();
    let (_, join_ms) = converge(fleet, "join", join_us, limit).await?;
    confirm(fleet, "join", join_us, limit, &Balance::Count).await?;
    let moved = OwnerChanges::count(&fleet.log.snapshot(), join_us, now_us()).changes;
    let on_primary = block_in_place(|| fleet.servers.hash_on(primary, &owners_key))?;
    let on_replica = block_in_place(|| fleet.servers.hash_on(replica, &owners_key))?;
    let grants_lost = differing(&on_primary, &on_replica);
    eprintln!(
        "join {joiner} on the primary only: balanced after {join_ms:.1} ms, {moved} moved; \
         {grants_lost} owners differ on the replica"
    );

    // The kill.
    let kill_us = now_us();
    block_in_place(|| fleet.servers.kill_node(primary))?;
    let (new_primary_node, detected_us) = block_in_place(|| {
        fleet
            .servers
            .wait_for_new_primary(primary, &owners_key, DETECT_LIMIT)
    })?;
    let detection_ms = span_ms(kill_us, detected_us);
    eprintln!("new primary node {new_primary_node} after {detection_ms:.1} ms");
    let settled_us = settle(
        fleet,
        Instant::now() + lease * 2,
        lease + renew_interval,
        limit,
    )
    .await?;

    let log = fleet.log.snapshot();
    let end_us = fleet.log.progress().clock_us.max(now_us());
    let lease_us = micros(lease);
    let terms = terms(&log, lease_us);
    let all_owned_us = owned_again(&terms, settings.group.partitions, kill_us, end_us)?;
    let mut overlaps = Vec::new();
    let mut repeats = Vec::new();
    for (partition, ts) in &terms {
        let plain: Vec<Term> = ts.iter().map(|t| t.term.clone()).collect();
        overlaps.extend(
            overlap::overlaps(&plain)
                .into_iter()
                .map(|o| PartitionOverlap {
                    partition: partition.clone(),
                    overlap: o,
                }),
        );
        repeats.extend(
            overlap::fence_repeats(&plain)
                .into_iter()
                .map(|r| PartitionRepeat {
                    partition: partition.clone(),
                    repeat: r,
                }),
        );
    }
    let spans: Vec<f64> = overlaps
        .iter()
        .filter_map(|o| o.overlap.overlap_ms)
        .collect();
    let mut overlapping: Vec<&str> = overlaps.iter().map(|o| o.partition.as_str()).collect();
    overlapping.dedup();
    Ok(LossyRebalanceRun {
        cold_start_balanced_ms: round3(cold_ms),
        join: LossyJoin {
            replica: joiner,
            balanced_ms: round3(join_ms),
            moved,
        },
        grants_lost,
        kill: LossyKill {
            primary_node: primary,
            new_primary_node,
            detection_ms: round3(detection_ms),
            all_owned_ms: round3(span_ms(kill_us, all_owned_us)),
            settled_ms: round3(span_ms(kill_us, settled_us.max(kill_us))),
            terms_after: terms
                .values()
                .flatten()
                .filter(|t| t.term.start_us >= kill_us)
                .count(),
            moved_after: OwnerChanges::count(&log, kill_us, end_us).changes,
        },
        overlaps: overlaps.len(),
        overlaps_before_kill: overlaps
            .iter()
            .filter(|o| o.overlap.start_us < kill_us)
            .count(),
        overlapping_partitions: overlapping.len(),
        overlap_ms: Summary::of(&spans),
        fence_repeats: repeats.len(),
        overlap_examples: overlaps.into_iter().take(EXAMPLES).collect(),
        fence_repeat_examples: repeats.into_iter().take(EXAMPLES).collect(),
        final_counts: fleet.log.progress().counts(),
    })
}

/// Waits until the replicas' lines show the group balanced with no `owned` or
/// `released` line for `quiet`, and not before `not_before`; returns when the last of
/// those lines was read (wall µs).
///
/// # Errors
/// If a replica exits, or the group does not settle within `limit`.
async fn settle(
    fleet: &mut Fleet,
    not_before: Instant,
    quiet: Duration,
    limit: Duration,
) -> Result<u64, BoxError> {
    let deadline = Instant::now() + limit;
    let (mut seen, mut last_change) = (fleet.log.len(), (Instant::now(), now_us()));
    loop {
        sleep(WATCH).await;
        let new = fleet.log.since(seen);
        seen += new.len();
        if new.iter().any(|l| {
            matches!(
                l.event,
                PartitionEvent::Owned { .. } | PartitionEvent::Released { .. }
            )
        }) {
            last_change = (Instant::now(), now_us());
        }
        let progress = fleet.log.progress();
        let now = Instant::now();
        if now >= not_before && now >= last_change.0 + quiet && progress.balanced() {
            return Ok(last_change.1);
        }
        fleet.check_running()?;
        if now >= deadline {
            return Err(format!(
                "the group did not settle within {:.1} s after the kill: {}",
                limit.as_secs_f64(),
                progress.describe()
            )
            .into());
        }
    }
}

/// How many partitions have a different owner (or none) in `b` than in `a`.
fn differing(a: &HashMap<String, String>, b: &HashMap<String, String>) -> usize {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).count()
}

/// One term of a partition, with when it really ended (its release, if any).
#[derive(Debug, Clone)]
struct PartitionTerm {
    term: Term,
    /// Its `released` line (wall µs); `None` while it runs.
    ended_us: Option<u64>,
}

/// Every term of every partition, from the lines: `owned` opens one (per replica,
/// incarnation, partition and fence), its `released` closes it. A planned end
/// entitles the term until the release, a lost one until its last send + the lease.
fn terms(log: &[Logged], lease_us: u64) -> BTreeMap<String, Vec<PartitionTerm>> {
    let mut out: BTreeMap<String, Vec<PartitionTerm>> = BTreeMap::new();
    let mut open: HashMap<(String, u32, String, u64), usize> = HashMap::new();
    for l in log {
        match &l.event {
            PartitionEvent::Owned {
                partition,
                fence,
                at_us,
                ..
            } => {
                let list = out.entry(partition.clone()).or_default();
                open.insert(
                    (l.replica.clone(), l.incarnation, partition.clone(), *fence),
                    list.len(),
                );
                list.push(PartitionTerm {
                    term: Term {
                        holder: format!("{}#{}", l.replica, l.incarnation),
                        fence: *fence,
                        start_us: *at_us,
                        entitled_until_us: None,
                    },
                    ended_us: None,
                });
            }
            PartitionEvent::Released {
                partition,
                fence,
                at_us,
                reason,
                sent_at_us,
                ..
            } => {
                let key = (l.replica.clone(), l.incarnation, partition.clone(), *fence);
                let (Some(i), Some(list)) = (open.remove(&key), out.get_mut(partition)) else {
                    continue;
                };
                let planned = reason.as_deref().is_some_and(planned_end);
                let entitled = match sent_at_us {
                    Some(sent) if !planned => (sent + lease_us).max(*at_us),
                    _ => *at_us,
                };
                list[i].ended_us = Some(*at_us);
                list[i].term.entitled_until_us = Some(entitled);
            }
            _ => {}
        }
    }
    out
}

/// When every partition was owned again after `kill_us`: per partition, the start of
/// the spell of ownership it is in at `end_us` (terms merged where they touch), the
/// latest of them, at least `kill_us`.
///
/// # Errors
/// If a partition is unowned at `end_us`, or some partition never had a term.
fn owned_again(
    terms: &BTreeMap<String, Vec<PartitionTerm>>,
    partitions: usize,
    kill_us: u64,
    end_us: u64,
) -> Result<u64, BoxError> {
    if terms.len() < partitions {
        return Err(format!(
            "only {} of {partitions} partitions were ever owned",
            terms.len()
        )
        .into());
    }
    let mut latest = kill_us;
    for (partition, ts) in terms {
        let mut spans: Vec<(u64, u64)> = ts
            .iter()
            .map(|t| (t.term.start_us, t.ended_us.unwrap_or(u64::MAX)))
            .collect();
        spans.sort_unstable();
        let mut current: Option<(u64, u64)> = None;
        for (s, e) in spans {
            current = match current {
                Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                _ => Some((s, e)),
            };
        }
        match current {
            Some((s, e)) if e >= end_us => latest = latest.max(s),
            _ => return Err(format!("{partition} is unowned at the end").into()),
        }
    }
    Ok(latest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(replica: &str, event: PartitionEvent) -> Logged {
        Logged {
            replica: replica.into(),
            incarnation: 1,
            event,
        }
    }

    fn owned(p: &str, fence: u64, at_us: u64) -> PartitionEvent {
        PartitionEvent::Owned {
            partition: p.into(),
            fence,
            at_us,
            handed_over: None,
            handed_over_bytes: None,
            no_hand_off: None,
            no_hand_off_cause: None,
        }
    }

    fn released(p: &str, fence: u64, at_us: u64, reason: &str, sent: u64) -> PartitionEvent {
        PartitionEvent::Released {
            partition: p.into(),
            fence,
            at_us,
            writes: 0,
            write_errors: 0,
            reason: Some(reason.into()),
            sent_at_us: Some(sent),
            handed_off: None,
            hand_off_error: None,
            successor: None,
        }
    }

    #[test]
    fn a_lost_term_is_entitled_until_its_send_plus_the_lease() {
        let log = [
            line("a", owned("p0", 1, 100)),
            line("b", owned("p1", 2, 100)),
            // p0: handed to b at 200: entitled until the release.
            line("a", released("p0", 1, 200, "handed_off", 150)),
            line("b", owned("p0", 3, 210)),
            // p1: b's renewal refused at 300 (last send 250): entitled until 1250.
            line("b", released("p1", 2, 300, "renewal_refused", 250)),
            line("a", owned("p1", 4, 400)),
        ];
        let t = terms(&log, 1_000);
        let p0: Vec<Term> = t["p0"].iter().map(|t| t.term.clone()).collect();
        let p1: Vec<Term> = t["p1"].iter().map(|t| t.term.clone()).collect();
        assert!(overlap::overlaps(&p0).is_empty());
        let o = overlap::overlaps(&p1);
        assert_eq!(o.len(), 1);
        assert_eq!((o[0].holder.as_str(), o[0].overlap_ms), ("a#1", Some(0.85)));
        // p1 was unowned from 300 to 400; p0 from 200 to 210.
        assert_eq!(owned_again(&t, 2, 150, 500).unwrap(), 400);
        assert_eq!(owned_again(&t, 2, 450, 500).unwrap(), 450);
        assert!(owned_again(&t, 3, 150, 500).is_err(), "p2 never owned");
    }

    #[test]
    fn owners_that_differ() {
        let a = HashMap::from([("p0".into(), "x".into()), ("p1".into(), "y".into())]);
        let b = HashMap::from([("p0".into(), "x".into()), ("p2".into(), "y".into())]);
        assert_eq!(differing(&a, &b), 2);
    }
}
