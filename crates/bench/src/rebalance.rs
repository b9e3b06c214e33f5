//! `rebalance`: partition replicas as separate OS processes, watched through
//! `group_status` polls on the bench's clock.
//!
//! 1. Cold start: every replica spawned at once; time from the first spawn until every
//!    partition is owned, and until the group is balanced (every replica heartbeating,
//!    spread ≤ 1); owner changes on the way are the cold start's hand-offs.
//! 2. Kill: SIGKILL one replica; time until the survivors own every partition.
//! 3. Join: start a new replica; time until balanced again, and how many partitions
//!    changed owner.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::RebalanceArgs;
use crate::event::{micros, now_us, span_ms};
use crate::fleet::{self, Fleet};
use crate::group::{OwnerTracker, balanced, counts, describe, owned_by, spread_of};
use crate::partition_event::PartitionEvent;
use crate::setup::BoxError;
use crate::stats::{Summary, round3};
use crate::topology::Topology;

/// How often the bench reads the group.
const POLL: Duration = Duration::from_millis(5);

/// The cold start.
#[derive(Debug, Clone, Serialize)]
pub struct ColdStart {
    /// First spawn → every partition owned.
    pub all_owned_ms: f64,
    /// First spawn → balanced.
    pub balanced_ms: f64,
    /// Partitions that changed owner after first being owned, until one lease after
    /// balance.
    pub handoffs: u64,
    /// The replicas' own hand-off counts (partitions released to rebalance), summed.
    pub reported_handoffs: u64,
}

/// The crash of one replica.
#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    /// The replica killed.
    pub replica: String,
    /// SIGKILL → every partition owned by a survivor.
    pub all_owned_ms: f64,
    /// SIGKILL → balanced among the survivors.
    pub balanced_ms: f64,
    /// SIGKILL → the victim's last lease expires (from the lease time left in a
    /// `group_status` read just before the kill): the least any take-over can take.
    pub expiry_ms: f64,
    /// `all_owned_ms - expiry_ms`: the library's share.
    pub overshoot_ms: f64,
}

/// The arrival of a new replica.
#[derive(Debug, Clone, Serialize)]
pub struct Join {
    /// The new replica.
    pub replica: String,
    /// Spawn → balanced with the newcomer.
    pub balanced_ms: f64,
    /// Owner changes from the spawn until one lease after balance.
    pub moved: u64,
}

/// The final report of `rebalance`.
#[derive(Debug, Clone, Serialize)]
pub struct RebalanceReport {
    /// Always `rebalance`.
    pub scenario: &'static str,
    /// The Redis set-up.
    pub topology: Topology,
    /// Partition count.
    pub partitions: usize,
    /// Replicas at the start.
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// The cold start.
    pub cold_start: ColdStart,
    /// The kill.
    pub kill: Kill,
    /// The join.
    pub join: Join,
    /// Partitions per replica at the end.
    pub final_counts: BTreeMap<String, usize>,
    /// max − min of `final_counts`.
    pub spread: usize,
}

/// Runs the scenario.
///
/// # Errors
/// If a phase does not complete in time, or a replica misbehaves.
pub async fn run(args: &RebalanceArgs) -> Result<RebalanceReport, BoxError> {
    let mut fleet = Fleet::start(
        &args.target,
        "rebalance",
        args.partitions,
        args.lease_ms,
        args.settle_ms,
        POLL,
    )?;
    let result = phases(&mut fleet, args).await;
    let stopped = fleet.shutdown().await;
    let report = result?;
    stopped?;
    Ok(report)
}

async fn phases(fleet: &mut Fleet, args: &RebalanceArgs) -> Result<RebalanceReport, BoxError> {
    let lease = fleet.lease();
    let limit = Duration::from_secs(10) + lease * 20;
    let n = args.replicas;

    // Cold start.
    let start_us = now_us();
    for i in 1..=n {
        fleet.spawn(&format!("replica-{i}"))?;
    }
    let live = fleet.live();
    let mut tracker = OwnerTracker::default();
    let (_, at) = fleet
        .watch
        .poll_until("cold start: all owned", limit, |s| {
            tracker.observe(s);
            owned_by(s, &live)
        })
        .await?;
    let all_owned_ms = span_ms(start_us, at);
    let (status, at) = fleet
        .watch
        .poll_until("cold start: balanced", limit, |s| {
            tracker.observe(s);
            balanced(s, &live)
        })
        .await?;
    let balanced_ms = span_ms(start_us, at);
    eprintln!(
        "cold start: all owned after {all_owned_ms:.1} ms, balanced after {balanced_ms:.1} ms ({})",
        describe(&status)
    );
    fleet.watch.observe_for(lease, |s| tracker.observe(s)).await;
    let reported_handoffs = reported_handoffs(fleet);
    let cold_start = ColdStart {
        all_owned_ms: round3(all_owned_ms),
        balanced_ms: round3(balanced_ms),
        handoffs: tracker.changes,
        reported_handoffs,
    };
    eprintln!(
        "cold start: {} owner changes [{}], {reported_handoffs} hand-offs reported",
        tracker.changes,
        tracker.describe_moves()
    );

    // Kill.
    let victim = "replica-1".to_owned();
    let mut killed = fleet.take(&victim).ok_or("no replica to kill")?;
    let live = fleet.live();
    let before = fleet.watch.status().await?.ok_or("the group is gone")?;
    let read_us = now_us();
    let left = before
        .partitions
        .iter()
        .filter(|p| p.owner.as_deref() == Some(victim.as_str()))
        .filter_map(|p| p.remaining)
        .max()
        .unwrap_or_default();
    let kill_us = now_us();
    killed.kill()?;
    let expiry_ms = span_ms(kill_us, read_us + micros(left));
    let (_, at) = fleet
        .watch
        .poll_until("kill: all owned by survivors", limit, |s| {
            owned_by(s, &live)
        })
        .await?;
    let kill_owned_ms = span_ms(kill_us, at);
    let (status, at) = fleet
        .watch
        .poll_until("kill: balanced", limit, |s| balanced(s, &live))
        .await?;
    let kill_balanced_ms = span_ms(kill_us, at);
    killed.wait(fleet::EXIT).await?;
    eprintln!(
        "kill {victim}: its leases expire {expiry_ms:.1} ms after the kill; all owned after {kill_owned_ms:.1} ms, balanced after {kill_balanced_ms:.1} ms ({})",
        describe(&status)
    );
    let taken: Vec<f64> = fleet
        .log
        .snapshot()
        .iter()
        .filter_map(|l| match &l.event {
            PartitionEvent::Owned { at_us, .. } if *at_us > kill_us => {
                Some(span_ms(kill_us, *at_us))
            }
            _ => None,
        })
        .collect();
    if let Some(s) = Summary::of(&taken) {
        eprintln!(
            "kill {victim}: {} take-overs, callbacks started {:.1} / {:.1} / {:.1} ms (min / median / max) after the kill",
            taken.len(),
            s.min,
            s.median,
            s.max
        );
    }
    fleet.watch.observe_for(lease, |_| {}).await;

    // Join.
    let joiner = format!("replica-{}", n + 1);
    let before = fleet.watch.status().await?.ok_or("the group is gone")?;
    let mut tracker = OwnerTracker::from_status(&before);
    let join_us = now_us();
    fleet.spawn(&joiner)?;
    let live = fleet.live();
    let (status, at) = fleet
        .watch
        .poll_until("join: balanced", limit, |s| {
            tracker.observe(s);
            balanced(s, &live)
        })
        .await?;
    let join_ms = span_ms(join_us, at);
    eprintln!(
        "join {joiner}: balanced after {join_ms:.1} ms ({})",
        describe(&status)
    );
    fleet.watch.observe_for(lease, |s| tracker.observe(s)).await;
    eprintln!(
        "join {joiner}: {} partitions moved [{}]",
        tracker.changes,
        tracker.describe_moves()
    );

    let status = fleet.watch.status().await?.ok_or("the group is gone")?;
    let final_counts = counts(&status, &live);
    if !balanced(&status, &live) {
        return Err(format!("unbalanced at the end: {}", describe(&status)).into());
    }
    Ok(RebalanceReport {
        scenario: "rebalance",
        topology: fleet.servers.topology,
        partitions: args.partitions,
        replicas: n,
        lease_ms: args.lease_ms,
        cold_start,
        kill: Kill {
            replica: victim,
            all_owned_ms: round3(kill_owned_ms),
            balanced_ms: round3(kill_balanced_ms),
            expiry_ms: round3(expiry_ms),
            overshoot_ms: round3(kill_owned_ms - expiry_ms),
        },
        join: Join {
            replica: joiner,
            balanced_ms: round3(join_ms),
            moved: tracker.changes,
        },
        spread: spread_of(&final_counts),
        final_counts,
    })
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
