//! `add`: partitions added to a running, balanced group through `GroupAdmin`, one at a
//! time; how long until a replica runs each one's callback, against the renew interval
//! and the add call's own round trip.
//!
//! 1. Cold start: N replica processes; wait until balanced by their lines.
//! 2. K times: `GroupAdmin::add` of one new partition (the next name of the
//!    `p0000`… series, so the replicas' counters follow it), then wait for the `owned`
//!    line of that partition; `--gap-ms` between adds.
//! 3. Wait until balanced over P + K.
//!
//! `owned_ms` is measured from the add call's send to the `owned` line (both on this
//! machine's wall clock): the claim, the elector's start and the callback's start
//! included. The target is one renew interval + one round trip (`add_call_ms`, the add
//! script's own round trip, stands for it).

use std::time::Duration;

use leasehold_partitions::GroupAdmin;
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep};

use crate::clock::{now_us, span_ms};
use crate::group::event::{PartitionEvent, partition_names};
use crate::group::harness::{Fleet, convergence_limit};
use crate::group::ownership::Progress;
use crate::group::rebalance::poll_interval;
use crate::group::status::PREFIX;
use crate::stats::Percentiles;
use crate::store::{self, BoxError, TargetArgs, Topology};

/// The last line of `add`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddReport {
    /// Always `add`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// P before the additions.
    pub partitions: usize,
    /// Replica processes.
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// The renew interval (the library default: a third of the lease).
    pub renew_interval_ms: f64,
    /// Partitions added, one at a time.
    pub adds: usize,
    /// Add sent → a replica's callback for it started.
    pub owned_ms: Percentiles,
    /// The add call's round trip.
    pub add_call_ms: Percentiles,
    /// Additions owned within one renew interval + their own round trip.
    pub within_target: usize,
    /// Every partition owned once and spread ≤ 1 after the last one.
    pub balanced: bool,
    /// Counts per replica at the end, by their lines.
    pub final_counts: std::collections::BTreeMap<String, usize>,
}

/// What `add` runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Partitions before the additions.
    pub partitions: usize,
    /// Replicas.
    pub replicas: usize,
    /// The lease of every partition, in milliseconds.
    pub lease_ms: u64,
    /// Partitions to add, one at a time.
    pub adds: usize,
    /// Pause after each addition is owned, in milliseconds.
    pub gap_ms: u64,
    /// Every replica's niceness.
    pub replica_nice: u8,
    /// The Redis set-up.
    pub target: TargetArgs,
}

/// Runs the scenario.
///
/// # Errors
/// If the servers or replicas cannot start, or an addition is not owned within a
/// lease.
pub async fn run(settings: &Settings) -> Result<AddReport, BoxError> {
    let mut fleet = Fleet::start(
        &settings.target,
        "add",
        settings.partitions,
        settings.lease_ms,
        None,
        poll_interval(settings.partitions + settings.adds),
        settings.replica_nice,
    )?;
    let result = phases(&mut fleet, settings).await;
    let stopped = fleet.shutdown().await;
    let report = result?;
    stopped?;
    Ok(report)
}

async fn phases(fleet: &mut Fleet, settings: &Settings) -> Result<AddReport, BoxError> {
    let lease = fleet.lease();
    let since = Instant::now();
    let limit = convergence_limit(settings.partitions, lease);
    for i in 1..=settings.replicas {
        fleet.spawn(&format!("replica-{i}"))?;
    }
    let p = fleet
        .wait_events("cold start: balanced", since, limit, Progress::balanced)
        .await?;
    eprintln!("cold start: balanced: {}", p.describe());
    // One lease more: the group has settled (no hand-off in flight).
    sleep(lease).await;

    let store = store::build_store(&fleet.servers.spec, lease)?;
    let admin = GroupAdmin::new(store, &fleet.spec.group)?.with_key_prefix(PREFIX)?;
    let names = partition_names(settings.partitions + settings.adds);
    let renew = lease / 3;
    let (mut owned_ms, mut call_ms, mut within) = (Vec::new(), Vec::new(), 0);
    for (k, name) in names[settings.partitions..].iter().enumerate() {
        fleet.log.expect_partitions(settings.partitions + k + 1);
        let from = fleet.log.len();
        let sent = now_us();
        admin.add([name.as_str()]).await?;
        let returned = now_us();
        let at = owned_at(fleet, from, name, lease).await?;
        let owned = span_ms(sent, at);
        let call = span_ms(sent, returned);
        if owned <= renew.as_secs_f64() * 1e3 + call {
            within += 1;
        }
        owned_ms.push(owned);
        call_ms.push(call);
        sleep(Duration::from_millis(settings.gap_ms)).await;
    }
    let end = fleet
        .wait_events(
            "after the additions: balanced",
            Instant::now(),
            limit,
            Progress::balanced,
        )
        .await;
    let progress = fleet.log.progress();
    Ok(AddReport {
        scenario: "add".to_owned(),
        topology: settings.target.topology,
        partitions: settings.partitions,
        replicas: settings.replicas,
        lease_ms: settings.lease_ms,
        renew_interval_ms: renew.as_secs_f64() * 1e3,
        adds: settings.adds,
        owned_ms: Percentiles::of(&owned_ms),
        add_call_ms: Percentiles::of(&call_ms),
        within_target: within,
        balanced: end.is_ok(),
        final_counts: progress.counts(),
    })
}

/// When a replica's callback for `partition` started (wall µs), from event `from` on.
async fn owned_at(
    fleet: &mut Fleet,
    from: usize,
    partition: &str,
    lease: Duration,
) -> Result<u64, BoxError> {
    let deadline = Instant::now() + lease;
    loop {
        let found = fleet
            .log
            .since(from)
            .into_iter()
            .find_map(|l| match l.event {
                PartitionEvent::Owned {
                    partition: ref p,
                    at_us,
                    ..
                } if p == partition => Some(at_us),
                _ => None,
            });
        if let Some(at) = found {
            return Ok(at);
        }
        fleet.check_running()?;
        if Instant::now() >= deadline {
            return Err(format!("{partition} was added but not owned within a lease").into());
        }
        sleep(Duration::from_millis(1)).await;
    }
}
