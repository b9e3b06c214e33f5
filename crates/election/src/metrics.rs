//! Metric names, registered with the `metrics` facade. Install any exporter in the
//! application; the library never installs one.
//!
//! The `group` label is empty for a duty and the group's name for a partition (whose
//! `duty` label is the partition name).

use std::sync::Once;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// Gauge: 1 while this replica leads the duty. Labels: `duty`, `replica`, `group`.
pub const IS_LEADER: &str = "leasehold_is_leader";
/// Gauge: the current leader's fence as this replica last saw it. Labels: `duty`, `group`.
pub const LEADER_FENCE: &str = "leasehold_leader_fence";
/// Counter: terms started. Labels: `duty`, `replica`, `group`.
pub const TERMS_STARTED: &str = "leasehold_terms_started_total";
/// Counter: terms ended. Labels: `duty`, `replica`, `group`, `reason`.
pub const TERMS_ENDED: &str = "leasehold_terms_ended_total";
/// Counter: fenced writes rejected as stale. Labels: `op`.
pub const FENCE_REJECTIONS: &str = "leasehold_fence_rejections_total";
/// Counter: the store's fence counter was behind a fence seen before. Labels: `duty`, `replica`, `group`.
pub const FENCE_REGRESSIONS: &str = "leasehold_fence_regressions_total";
/// Counter: failed Redis calls. Labels: `duty`, `replica`, `group`, `op`, `kind`.
pub const REDIS_ERRORS: &str = "leasehold_redis_errors_total";
/// Counter: duties aborted after outrunning their grace. Labels: `duty`, `replica`, `group`.
pub const GRACE_OVERRUNS: &str = "leasehold_grace_overruns_total";
/// Histogram: renew round-trip time, seconds. Labels: `duty`, `replica`, `group`.
pub const RENEW_RTT: &str = "leasehold_renew_rtt_seconds";
/// Histogram: time from the start of a campaign to leadership, seconds. Labels: `duty`, `replica`, `group`.
pub const TIME_TO_LEADER: &str = "leasehold_time_to_leader_seconds";
/// Gauge: local lease validity left after the last renewal, seconds. Labels: `duty`, `replica`, `group`.
pub const VALIDITY_LEFT: &str = "leasehold_lease_validity_seconds";
/// Histogram: how much later than asked the elector woke up, seconds, for each wake-up
/// late by a tenth of the renew interval or more (at least 20 ms): its runtime or
/// thread was blocked. Labels: `duty`, `replica`, `group`.
pub const ELECTOR_STALL: &str = "leasehold_elector_stall_seconds";

/// Describes every metric once per process.
pub(crate) fn describe() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        describe_gauge!(
            IS_LEADER,
            Unit::Count,
            "1 while this replica leads the duty"
        );
        describe_gauge!(
            LEADER_FENCE,
            Unit::Count,
            "fencing token of the current term"
        );
        describe_counter!(TERMS_STARTED, Unit::Count, "leadership terms started");
        describe_counter!(
            TERMS_ENDED,
            Unit::Count,
            "leadership terms ended, by reason"
        );
        describe_counter!(
            FENCE_REJECTIONS,
            Unit::Count,
            "fenced writes rejected as stale"
        );
        describe_counter!(
            FENCE_REGRESSIONS,
            Unit::Count,
            "fence counter found behind a fence seen before"
        );
        describe_counter!(REDIS_ERRORS, Unit::Count, "failed Redis calls");
        describe_counter!(
            GRACE_OVERRUNS,
            Unit::Count,
            "duties aborted after outrunning their grace"
        );
        describe_histogram!(RENEW_RTT, Unit::Seconds, "renew round-trip time");
        describe_histogram!(
            TIME_TO_LEADER,
            Unit::Seconds,
            "campaign start to leadership"
        );
        describe_histogram!(
            ELECTOR_STALL,
            Unit::Seconds,
            "how much later than asked the elector woke up (a blocked runtime)"
        );
        describe_gauge!(
            VALIDITY_LEFT,
            Unit::Seconds,
            "local lease validity left after the last renewal"
        );
    });
}
