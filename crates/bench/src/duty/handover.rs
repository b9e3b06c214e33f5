//! `handover`: SIGTERM the leader (a graceful shutdown that releases the lease and
//! notifies followers) and time how long the follower takes to lead.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::sleep;

use crate::clock::{micros, now_us, span_ms};
use crate::duty::harness::{Harness, fence_grew, summary};
use crate::stats::{Summary, round3};
use crate::store::{BoxError, Topology};

/// Longest a terminated child may take to exit.
const EXIT: Duration = Duration::from_secs(10);

/// One hand-over.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandoverRun {
    /// SIGTERM sent → follower's duty starts.
    pub handover_ms: f64,
    /// SIGTERM sent → the child has it (mostly the fork and exec of `kill`).
    pub signal_ms: f64,
    /// Child has SIGTERM → follower's duty starts: the library's share.
    pub from_sigterm_ms: f64,
    /// Child has SIGTERM → its `shutdown().await` returned.
    pub shutdown_ms: f64,
}

/// The final report of `handover`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandoverReport {
    /// Always `handover`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// The lease.
    pub lease_ms: u64,
    /// Whether every elector ran with `Elector::spawn_dedicated` (false in reports
    /// from before the option).
    #[serde(default)]
    pub dedicated: bool,
    /// Every elector's `min_replicas_acked` (0: off, as in reports from before the
    /// option).
    #[serde(default)]
    pub min_replicas_acked: usize,
    /// Every run, in order.
    pub runs: Vec<HandoverRun>,
    /// Summary of `handover_ms`.
    pub handover_ms: Summary,
    /// Summary of `signal_ms`.
    pub signal_ms: Summary,
    /// Summary of `from_sigterm_ms`.
    pub from_sigterm_ms: Summary,
}

/// Runs `runs` hand-overs one after another.
///
/// # Errors
/// The first run that fails.
pub async fn run(harness: &Harness, runs: usize) -> Result<HandoverReport, BoxError> {
    let all = harness
        .repeat(runs, one, |r: &HandoverRun| {
            format!(
                "handover {:.1} ms (signal delivery {:.1} ms, after SIGTERM {:.1} ms)",
                r.handover_ms, r.signal_ms, r.from_sigterm_ms
            )
        })
        .await?;
    Ok(HandoverReport {
        scenario: "handover".to_owned(),
        topology: harness.topology(),
        lease_ms: harness.lease_ms(),
        dedicated: harness.dedicated(),
        min_replicas_acked: harness.acked(),
        handover_ms: summary(&all, |r| r.handover_ms)?,
        signal_ms: summary(&all, |r| r.signal_ms)?,
        from_sigterm_ms: summary(&all, |r| r.from_sigterm_ms)?,
        runs: all,
    })
}

async fn one(harness: &Harness, run: usize) -> Result<HandoverRun, BoxError> {
    let lease = harness.lease();
    let mut pair = harness.start_pair("handover", run).await?;
    let term_at = pair.leading.at_us + micros(lease / 2);
    sleep(Duration::from_micros(term_at.saturating_sub(now_us()))).await;
    let sent_us = now_us();
    let sent = pair.leader.terminate().await;
    let led = match sent {
        Ok(()) => pair.follower.wait_led(lease * 3).await,
        Err(e) => Err(e),
    };
    let exited = pair.leader.wait(EXIT).await;
    pair.follower.shutdown().await;
    let led = led?;
    let (status, state) = exited?;
    if !status.success() {
        return Err(format!("the child exited with {status} after SIGTERM").into());
    }
    let (Some(sigterm_us), Some(stopped_us)) = (state.sigterm_us, state.stopped_us) else {
        return Err("the child exited without reporting its shutdown".into());
    };
    fence_grew(pair.leading.fence, led.fence)?;
    Ok(HandoverRun {
        handover_ms: round3(span_ms(sent_us, led.at_us)),
        signal_ms: round3(span_ms(sent_us, sigterm_us)),
        from_sigterm_ms: round3(span_ms(sigterm_us, led.at_us)),
        shutdown_ms: round3(span_ms(sigterm_us, stopped_us)),
    })
}
