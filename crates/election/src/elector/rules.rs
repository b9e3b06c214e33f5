//! The elector's decisions, as pure functions of what it knows.
//!
//! No I/O and no clock of their own: the time is an argument. The campaign and the
//! term (`campaign`, `term`) are the thin async drivers that sleep,
//! call the store and apply these rules; each rule is unit-tested here.

use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::config::ElectorConfig;
use crate::grid::RenewGrid;
use crate::status::TermEndReason;

/// A confirmed lease whose provable validity ends sooner than this after the reply is
/// given back rather than led.
pub(super) const MIN_VALIDITY: Duration = Duration::from_millis(1);

/// The local deadline of a lease valid for `validity` counted from `sent` (the send
/// time of the call that took, confirmed or renewed it): `sent + validity - margin`.
/// The replica believes it leads only until then, whatever the store says later.
pub(super) fn deadline(sent: Instant, validity: Duration, margin: Duration) -> Instant {
    sent + validity.saturating_sub(margin)
}

/// Whether a lease the store *confirmed* (an earlier call with the same token took it,
/// and its reply was lost) is worth leading at `now`: its provable validity, counted
/// from this call's send time with `remaining` left, must outlast [`MIN_VALIDITY`].
/// Otherwise it is given back.
pub(super) fn worth_leading(
    sent: Instant,
    remaining: Duration,
    margin: Duration,
    now: Instant,
) -> bool {
    deadline(sent, remaining, margin) > now + MIN_VALIDITY
}

/// When a follower that lost a campaign sent at `sent` asks again: when the holder's
/// lease runs out (`remaining`; `None` when the store could not say), at most one
/// retry interval later, plus `jitter`. A release notification wakes it sooner.
pub(super) fn follower_recheck(
    sent: Instant,
    remaining: Option<Duration>,
    retry: Duration,
    jitter: Duration,
) -> Instant {
    sent + remaining.map_or(retry, |r| r.min(retry)) + jitter
}

/// What the elector does once a term has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterTerm {
    /// Stop campaigning: the elector is shutting down.
    Stop,
    /// Campaign again after this pause (zero: at once).
    Campaign(Duration),
}

/// The pause after a term that ended for `reason`: none after a lost lease (campaign
/// at once: the lease may be free), one retry interval after a step-down (a follower
/// woken by the release takes over first), the first backoff after a duty that
/// returned, the growing backoff after a failure; stop on shutdown.
pub(super) fn after_term(
    reason: &TermEndReason,
    shutting_down: bool,
    config: &ElectorConfig,
    backoff: &mut Backoff,
) -> AfterTerm {
    if shutting_down {
        return AfterTerm::Stop;
    }
    AfterTerm::Campaign(match reason {
        TermEndReason::Shutdown => return AfterTerm::Stop,
        TermEndReason::SteppedDown => config.retry_interval,
        TermEndReason::DutyReturned => config.backoff_initial,
        TermEndReason::DutyFailed(_)
        | TermEndReason::DutyPanicked(_)
        | TermEndReason::BackendError(_) => backoff.next_delay(),
        _ => Duration::ZERO,
    })
}

/// When to renew after a call sent at `sent`: one renew interval later, rounded down
/// onto the renew grid if there is one (never later, so always safe), so that many
/// electors of one process renew together and share a round trip.
pub(super) fn next_renew(
    sent: Instant,
    renew_interval: Duration,
    grid: Option<RenewGrid>,
) -> Instant {
    let due = sent + renew_interval;
    grid.map_or(due, |grid| grid.floor(due))
}

/// When a term's first renewal is due: at once for a lease with less than a whole
/// lease left (a confirmed one), else on the usual schedule.
pub(super) fn first_renew(
    sent: Instant,
    validity: Duration,
    config: &ElectorConfig,
    grid: Option<RenewGrid>,
    now: Instant,
) -> Instant {
    if validity < config.lease {
        now
    } else {
        next_renew(sent, config.renew_interval, grid)
    }
}

/// How long a renewal sent at `sent` may take: the call timeout, never past the
/// deadline (a reply after it could not revive the term anyway).
pub(super) fn renew_limit(call_timeout: Duration, deadline: Instant, sent: Instant) -> Duration {
    call_timeout.min(deadline.saturating_duration_since(sent))
}

/// How soon a renewal that failed with a retryable error is tried again: a quarter of
/// the renew interval (at least 1 ms), so a few tries fit before the deadline.
pub(super) fn renew_retry(renew_interval: Duration) -> Duration {
    (renew_interval / 4).max(Duration::from_millis(1))
}

/// Whether the lease of a term that ended for `reason` may already belong to someone
/// else: the duty then gets no grace at all. A refused renewal, a passed deadline, or
/// a lease key of the wrong type (someone else's data).
pub(super) fn lease_may_be_lost(reason: &TermEndReason) -> bool {
    reason.lease_may_be_lost()
}

/// When a cancelled duty is aborted: `grace` after `now`, never past the deadline, and
/// at once when the lease may be lost.
pub(super) fn grace_end(
    now: Instant,
    grace: Duration,
    deadline: Instant,
    lease_lost: bool,
) -> Instant {
    if lease_lost {
        now
    } else {
        (now + grace).min(deadline)
    }
}

/// When a cancelled duty is aborted once a shutdown deadline (`stop_by`) applies: the
/// earlier of its grace's end and that deadline.
pub(super) fn hurried(grace_end: Instant, stop_by: Option<Instant>) -> Instant {
    stop_by.map_or(grace_end, |by| grace_end.min(by))
}

/// Whether the lease is released after a term that ended for `reason`: always, except
/// after a refused renewal (the token holds nothing any more).
pub(super) fn releases(reason: &TermEndReason) -> bool {
    !matches!(reason, TermEndReason::RenewalRefused)
}

/// A wake-up at least this much later than asked is reported as a stall: a tenth of
/// the renew interval, at least 20 ms (less is scheduling noise on a busy machine).
pub(super) fn stall_threshold(renew_interval: Duration) -> Duration {
    (renew_interval / 10).max(Duration::from_millis(20))
}

/// Whether an acquire sent at `sent`, whose outcome is unknown, may still hold the
/// lease at `now`: until two leases after it was sent (its request took less than a
/// lease to arrive, or nothing works).
pub(super) fn may_still_hold(sent: Instant, lease: Duration, now: Instant) -> bool {
    now.saturating_duration_since(sent) < lease * 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StoreError;

    const MS: Duration = Duration::from_millis(1);

    fn config() -> ElectorConfig {
        ElectorConfig::builder("duty", "r1")
            .lease(Duration::from_secs(3))
            .build()
            .unwrap()
    }

    #[test]
    fn the_deadline_counts_from_the_send_time_less_the_margin() {
        let sent = Instant::now();
        assert_eq!(deadline(sent, 3000 * MS, 32 * MS), sent + 2968 * MS);
        assert_eq!(
            deadline(sent, 10 * MS, 32 * MS),
            sent,
            "never before the send"
        );
    }

    #[test]
    fn a_confirmed_lease_is_led_only_for_what_is_provable() {
        let sent = Instant::now();
        let margin = 10 * MS;
        // 100 ms left at send: provable until sent + 90 ms.
        assert!(worth_leading(sent, 100 * MS, margin, sent + 80 * MS));
        assert!(!worth_leading(sent, 100 * MS, margin, sent + 89 * MS));
        assert!(
            !worth_leading(sent, 5 * MS, margin, sent),
            "less than the margin"
        );
    }

    #[test]
    fn a_follower_asks_again_at_the_holders_expiry_capped_by_the_retry_interval() {
        let sent = Instant::now();
        let retry = 1000 * MS;
        let jitter = 2 * MS;
        assert_eq!(
            follower_recheck(sent, Some(300 * MS), retry, jitter),
            sent + 302 * MS
        );
        assert_eq!(
            follower_recheck(sent, Some(5000 * MS), retry, jitter),
            sent + 1002 * MS
        );
        assert_eq!(
            follower_recheck(sent, None, retry, Duration::ZERO),
            sent + retry
        );
    }

    #[test]
    fn the_pause_after_a_term_depends_on_how_it_ended() {
        let c = config();
        let mut backoff = Backoff::new(c.backoff_initial, c.backoff_max);
        let mut after = |r: TermEndReason, stopping| after_term(&r, stopping, &c, &mut backoff);
        assert_eq!(after(TermEndReason::Shutdown, false), AfterTerm::Stop);
        assert_eq!(after(TermEndReason::DeadlinePassed, true), AfterTerm::Stop);
        assert_eq!(
            after(TermEndReason::SteppedDown, false),
            AfterTerm::Campaign(c.retry_interval)
        );
        assert_eq!(
            after(TermEndReason::DutyReturned, false),
            AfterTerm::Campaign(c.backoff_initial)
        );
        for lost in [TermEndReason::DeadlinePassed, TermEndReason::RenewalRefused] {
            assert_eq!(after(lost, false), AfterTerm::Campaign(Duration::ZERO));
        }
        let AfterTerm::Campaign(first) = after(TermEndReason::DutyFailed("x".into()), false) else {
            panic!("a failed duty campaigns again");
        };
        assert!(first <= c.backoff_initial);
        let AfterTerm::Campaign(second) = after(TermEndReason::DutyPanicked("x".into()), false)
        else {
            panic!("a panicked duty campaigns again");
        };
        assert!(second > c.backoff_initial / 2 && second <= c.backoff_initial * 2);
    }

    #[test]
    fn renewals_fall_one_interval_after_the_send_or_earlier_on_the_grid() {
        let c = config();
        let epoch = Instant::now();
        let sent = epoch + 250 * MS;
        assert_eq!(next_renew(sent, 1000 * MS, None), sent + 1000 * MS);
        let grid = RenewGrid::new(epoch, 1000 * MS);
        assert_eq!(next_renew(sent, 1000 * MS, Some(grid)), epoch + 1000 * MS);
        let now = sent + 5 * MS;
        assert_eq!(
            first_renew(sent, 2000 * MS, &c, None, now),
            now,
            "confirmed"
        );
        assert_eq!(
            first_renew(sent, c.lease, &c, None, now),
            sent + c.renew_interval
        );
    }

    #[test]
    fn a_renewal_never_waits_past_the_deadline_and_a_failed_one_is_retried_soon() {
        let sent = Instant::now();
        assert_eq!(renew_limit(500 * MS, sent + 200 * MS, sent), 200 * MS);
        assert_eq!(renew_limit(500 * MS, sent + 900 * MS, sent), 500 * MS);
        assert_eq!(renew_limit(500 * MS, sent, sent + MS), Duration::ZERO);
        assert_eq!(renew_retry(1000 * MS), 250 * MS);
        assert_eq!(renew_retry(2 * MS), MS);
    }

    #[test]
    fn a_lease_that_may_be_lost_gives_the_duty_no_grace() {
        let now = Instant::now();
        for lost in [
            TermEndReason::RenewalRefused,
            TermEndReason::DeadlinePassed,
            TermEndReason::BackendError(StoreError::from(redis::RedisError::from((
                redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value".to_owned(),
            )))),
        ] {
            assert!(lease_may_be_lost(&lost), "{lost}");
        }
        for kept in [
            TermEndReason::Shutdown,
            TermEndReason::DutyReturned,
            TermEndReason::BackendError(StoreError::Timeout(MS)),
        ] {
            assert!(!lease_may_be_lost(&kept), "{kept}");
        }
        let deadline = now + 3000 * MS;
        assert_eq!(grace_end(now, 5000 * MS, deadline, true), now);
        assert_eq!(grace_end(now, 5000 * MS, deadline, false), deadline);
        assert_eq!(grace_end(now, 100 * MS, deadline, false), now + 100 * MS);
    }

    #[test]
    fn a_shutdown_deadline_cuts_the_grace_short_and_never_extends_it() {
        let now = Instant::now();
        let end = now + 5000 * MS;
        assert_eq!(hurried(end, None), end);
        assert_eq!(hurried(end, Some(now + 100 * MS)), now + 100 * MS);
        assert_eq!(hurried(end, Some(now + 9000 * MS)), end);
    }

    #[test]
    fn only_a_refused_renewal_skips_the_release() {
        assert!(!releases(&TermEndReason::RenewalRefused));
        for r in [
            TermEndReason::DeadlinePassed,
            TermEndReason::Shutdown,
            TermEndReason::DutyFailed("x".into()),
        ] {
            assert!(releases(&r), "{r}");
        }
    }

    #[test]
    fn planned_ends_are_the_ones_someone_asked_for() {
        assert!(TermEndReason::SteppedDown.is_planned());
        assert!(TermEndReason::DutyReturned.is_planned());
        assert!(!TermEndReason::DeadlinePassed.is_planned());
        assert!(!TermEndReason::DutyPanicked("x".into()).is_planned());
    }

    #[test]
    fn stalls_are_a_tenth_of_the_renew_interval_and_at_least_20_ms() {
        assert_eq!(stall_threshold(1000 * MS), 100 * MS);
        assert_eq!(stall_threshold(50 * MS), 20 * MS);
    }

    #[test]
    fn an_unanswered_acquire_may_hold_the_lease_for_two_leases() {
        let sent = Instant::now();
        assert!(may_still_hold(sent, 1000 * MS, sent + 1999 * MS));
        assert!(!may_still_hold(sent, 1000 * MS, sent + 2000 * MS));
    }
}
