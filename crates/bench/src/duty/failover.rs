//! `failover`: SIGKILL the leader and time how long the follower takes to lead.
//!
//! With no release, the follower can only take over once the lease expires in Redis:
//! `lease - since_renew` after the kill, where `since_renew` is the time from the last
//! renewal the child sent to the kill. Whatever the follower takes beyond that is the
//! overshoot: the library's cost of noticing the expiry.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::sleep;

use crate::clock::{micros, now_us, span_ms};
use crate::duty::harness::{Harness, fence_grew, summary};
use crate::duty::process::LeaderProcess;
use crate::stats::{Summary, round3};
use crate::store::{BoxError, Topology};

/// Longest a killed child takes to be reaped.
pub const REAP: Duration = Duration::from_secs(5);
/// A renewal due this soon (or overdue) may be in flight, or done but not yet
/// reported; killing then would make `since_renew` wrong by a whole renew interval.
const RENEW_GUARD_US: u64 = 3_000;

/// One failover.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailoverRun {
    /// Kill → follower's duty starts.
    pub failover_ms: f64,
    /// Last renewal sent → kill.
    pub since_renew_ms: f64,
    /// `failover_ms - (lease_ms - since_renew_ms)`: time beyond the lease's expiry.
    pub overshoot_ms: f64,
    /// The child's fence.
    pub child_fence: u64,
    /// The follower's fence.
    pub follower_fence: u64,
}

/// The final report of `failover`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailoverReport {
    /// Always `failover`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// The lease.
    pub lease_ms: u64,
    /// Whether every elector ran with `Elector::spawn_dedicated` (false in reports
    /// from before the option).
    #[serde(default)]
    pub dedicated: bool,
    /// Every run, in order.
    pub runs: Vec<FailoverRun>,
    /// Summary of `failover_ms`.
    pub failover_ms: Summary,
    /// Summary of `overshoot_ms`.
    pub overshoot_ms: Summary,
    /// Summary of `since_renew_ms`.
    pub since_renew_ms: Summary,
}

/// Runs `runs` failovers one after another.
///
/// # Errors
/// The first run that fails.
pub async fn run(harness: &Harness, runs: usize) -> Result<FailoverReport, BoxError> {
    let all = harness
        .repeat(runs, one, |r: &FailoverRun| {
            format!(
                "failover {:.1} ms, since renew {:.1} ms, overshoot {:.1} ms",
                r.failover_ms, r.since_renew_ms, r.overshoot_ms
            )
        })
        .await?;
    Ok(FailoverReport {
        scenario: "failover".to_owned(),
        topology: harness.topology(),
        lease_ms: harness.lease_ms(),
        dedicated: harness.dedicated(),
        failover_ms: summary(&all, |r| r.failover_ms)?,
        overshoot_ms: summary(&all, |r| r.overshoot_ms)?,
        since_renew_ms: summary(&all, |r| r.since_renew_ms)?,
        runs: all,
    })
}

async fn one(harness: &Harness, run: usize) -> Result<FailoverRun, BoxError> {
    let lease = harness.lease();
    let mut pair = harness.start_pair("failover", run).await?;
    // A random point of the renew cycle, so `since_renew` varies.
    let after = lease.mul_f64(rand::random_range(0.3..1.0));
    let kill_at = pair.leading.at_us + micros(after);
    sleep(Duration::from_micros(kill_at.saturating_sub(now_us()))).await;
    settle_renewal(&pair.leader, harness.renew_interval()).await?;
    let kill_us = now_us();
    pair.leader.kill()?;
    let led = pair.follower.wait_led(lease * 3).await;
    // Every renewal the child reported was sent before the kill; after the reap all
    // of them have been read.
    let (_, state) = pair.leader.wait(REAP).await?;
    pair.follower.shutdown().await;
    let led = led?;
    let renewed_us = state
        .last_extended_us()
        .ok_or("the child reported no lease")?;
    fence_grew(pair.leading.fence, led.fence)?;
    let failover_ms = span_ms(kill_us, led.at_us);
    let since_renew_ms = span_ms(renewed_us, kill_us);
    let overshoot_ms = failover_ms - (lease.as_secs_f64() * 1000.0 - since_renew_ms);
    if overshoot_ms > harness.renew_interval().as_secs_f64() * 500.0 {
        tracing::warn!(
            overshoot_ms,
            "overshoot above half a renew interval: an unreported renewal?"
        );
    }
    Ok(FailoverRun {
        failover_ms: round3(failover_ms),
        since_renew_ms: round3(since_renew_ms),
        overshoot_ms: round3(overshoot_ms),
        child_fence: pair.leading.fence,
        follower_fence: led.fence,
    })
}

/// If a renewal is due within [`RENEW_GUARD_US`] (or overdue), waits until the child
/// reports it, so the kill never lands between a renewal's send and its report.
pub async fn settle_renewal(
    leader: &LeaderProcess,
    renew_interval: Duration,
) -> Result<(), BoxError> {
    let state = leader.state();
    let last = state
        .last_extended_us()
        .ok_or("the child reported no lease")?;
    if now_us() + RENEW_GUARD_US >= last + micros(renew_interval) {
        leader
            .wait_for("the next renewal", renew_interval, |s| {
                s.last_extended_us() > Some(last)
            })
            .await?;
    }
    Ok(())
}
