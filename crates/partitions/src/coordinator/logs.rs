//! One log line per group event, with counts, instead of one per partition: what a
//! replica holding 10,000 partitions writes during a Redis outage must stay readable.
//! Each partition's detail is logged at debug by its runner.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use leasehold_election::{StoreError, TermEndReason};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::store::ops::moves::MoveCause;

/// How many partition names a summary line shows.
const SAMPLE: usize = 3;

/// Ends of partition terms gathered since the last summary.
#[derive(Debug, Default)]
pub(crate) struct EndsLog {
    /// Count by reason label, unplanned ends (the lease may be lost, Redis failed, the
    /// callback failed) apart from planned ones (hand-overs, drains, removals, leaving).
    unplanned: BTreeMap<&'static str, usize>,
    planned: BTreeMap<&'static str, usize>,
    /// A few of the partitions whose term ended unplanned, in the order they ended.
    sample: Vec<Arc<str>>,
    /// The first store error among them.
    error: Option<String>,
}

/// The label of a partition term's end (the `reason` of the releases metric and of the
/// log lines): why this replica ended it, else the runner's reason.
pub(crate) fn end_label(cause: Option<MoveCause>, reason: Option<&TermEndReason>) -> &'static str {
    match (cause, reason) {
        (Some(MoveCause::HandOff), _) => "handed_off",
        (Some(MoveCause::Drain), _) => "drained",
        (Some(MoveCause::Removal), _) => "removed",
        (Some(_), _) => "shutdown",
        (None, Some(r)) => r.label(),
        (None, None) => "stopped",
    }
}

impl EndsLog {
    /// A partition's term ended: as this replica asked (`cause`), or for the runner's
    /// `reason` (`None` for both: its task panicked, or it never led).
    pub(crate) fn ended(
        &mut self,
        partition: &Arc<str>,
        cause: Option<MoveCause>,
        reason: Option<&TermEndReason>,
    ) {
        let label = end_label(cause, reason);
        if cause.is_some() || reason.is_some_and(TermEndReason::is_planned) {
            *self.planned.entry(label).or_default() += 1;
            return;
        }
        *self.unplanned.entry(label).or_default() += 1;
        if self.sample.len() < SAMPLE {
            self.sample.push(partition.clone());
        }
        if let Some(TermEndReason::BackendError(e)) = reason {
            self.error
                .get_or_insert_with(|| crate::ErrorChain(e).to_string());
        }
    }

    /// Logs what ended since the last call, in one line (a warning if any term ended
    /// unplanned, else at info), and starts afresh.
    pub(crate) fn flush(&mut self) {
        let planned = std::mem::take(&mut self.planned);
        if !self.unplanned.is_empty() {
            let unplanned = std::mem::take(&mut self.unplanned);
            let total: usize = unplanned.values().sum();
            let sample = std::mem::take(&mut self.sample);
            let error = self.error.take();
            let handed_over = (!planned.is_empty()).then(|| counts(&planned));
            warn!(
                partitions = total,
                reasons = %counts(&unplanned),
                handed_over,
                error,
                "stepped down from {total} partition{} ({}{}); per-partition detail at debug",
                plural(total),
                names(&sample),
                if total > sample.len() { ", ..." } else { "" },
            );
        } else if !planned.is_empty() {
            let total: usize = planned.values().sum();
            info!(
                partitions = total,
                reasons = %counts(&planned),
                "handed {total} partition{} over",
                plural(total)
            );
        }
    }
}

fn counts(by: &BTreeMap<&'static str, usize>) -> String {
    let parts: Vec<String> = by.iter().map(|(k, n)| format!("{k}={n}")).collect();
    parts.join(",")
}

fn names(sample: &[Arc<str>]) -> String {
    let parts: Vec<&str> = sample.iter().map(|s| &**s).collect();
    parts.join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The group's own calls to Redis (its ticks): one warning when they start failing,
/// one line when they succeed again.
#[derive(Debug, Default)]
pub(crate) struct TickLog {
    /// Since when, and how many ticks have failed in a row.
    failing: Option<(Instant, u64)>,
}

impl TickLog {
    /// A tick answered (`Ok`) or failed at `now`.
    pub(crate) fn answered(&mut self, result: Result<(), &StoreError>, now: Instant) {
        match (result, &mut self.failing) {
            (Err(e), None) => {
                warn!(
                    error = %crate::ErrorChain(e),
                    "the group's heartbeat to Redis failed; retrying every renew interval \
                     (each partition steps down at its local deadline if Redis stays away)"
                );
                self.failing = Some((now, 1));
            }
            (Err(_), Some((_, n))) => *n += 1,
            (Ok(()), Some((since, n))) => {
                let for_ms = now.saturating_duration_since(*since);
                info!(
                    failed_ticks = *n,
                    for_ms = u64::try_from(for_ms.as_millis()).unwrap_or(u64::MAX),
                    "the group's heartbeat reaches Redis again after {}",
                    human(for_ms)
                );
                self.failing = None;
            }
            (Ok(()), None) => {}
        }
    }
}

fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planned_ends_are_apart_from_failures() {
        let mut log = EndsLog::default();
        let names: Vec<Arc<str>> = (0..5).map(|i| Arc::from(format!("p{i}"))).collect();
        for n in &names[..4] {
            log.ended(n, None, Some(&TermEndReason::DeadlinePassed));
        }
        log.ended(
            &names[4],
            Some(MoveCause::HandOff),
            Some(&TermEndReason::Shutdown),
        );
        assert_eq!(log.unplanned.get("deadline_passed"), Some(&4));
        assert_eq!(log.planned.get("handed_off"), Some(&1));
        assert_eq!(log.sample.len(), SAMPLE);
        assert_eq!(counts(&log.unplanned), "deadline_passed=4");
        log.flush();
        assert!(log.unplanned.is_empty() && log.planned.is_empty() && log.sample.is_empty());
    }
}
