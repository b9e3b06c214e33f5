//! When to tick: one heartbeat per renew interval, just after each grid point, and
//! sooner when something changed.

use std::time::Duration;

use leasehold_election::ext::RenewGrid;
use tokio::time::Instant;

/// How soon after something changed (a notice, an expiring member) to look again.
pub(crate) const QUICK: Duration = Duration::from_millis(5);
/// How soon after a release notice to tick: releases come in bursts of a few ms.
pub(crate) const NOTICE_DELAY: Duration = Duration::from_millis(1);
/// Per live member, how far the ticks a notice wakes are spread (a random delay up to
/// this times N), so that a release does not bring N ticks to the server at once.
const NOTICE_SPREAD_PER_MEMBER: Duration = Duration::from_micros(250);
/// Per live member, how long after its last tick a replica waits before a notice may
/// wake another: the N replicas then tick on notices at most once per millisecond
/// between them (1,000 ticks a second, whatever N), however often partitions are
/// released.
const NOTICE_GAP_PER_MEMBER: Duration = Duration::from_millis(1);

/// Ticks run a twentieth of a renew interval (5–50 ms) after each grid point, so that
/// the runners' renewals, due on the grid points, are all waiting for them: waking a
/// thousand runners takes a few milliseconds, and a renewal that asks after the tick
/// was sent must wait for another one.
fn tick_offset(renew_interval: Duration) -> Duration {
    (renew_interval / 20).clamp(Duration::from_millis(5), Duration::from_millis(50))
}

#[derive(Debug)]
pub(crate) struct Cadence {
    grid: RenewGrid,
    offset: Duration,
    /// The next regular tick.
    next: Instant,
    /// An earlier one, if something changed.
    soon: Option<Instant>,
    /// A tick is in flight (its reply comes first).
    in_flight: bool,
    /// When the last tick was sent.
    last_sent: Option<Instant>,
    /// The renew interval: no notice waits longer than half of it.
    renew_interval: Duration,
}

impl Cadence {
    pub(crate) fn new(grid: RenewGrid, renew_interval: Duration, now: Instant) -> Self {
        Self {
            grid,
            offset: tick_offset(renew_interval),
            next: now,
            soon: None,
            in_flight: false,
            last_sent: None,
            renew_interval,
        }
    }

    /// When the next tick is due (whether or not one may be sent now).
    pub(crate) fn due_at(&self) -> Instant {
        self.soon.map_or(self.next, |s| s.min(self.next))
    }

    pub(crate) fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// The next regular tick.
    pub(crate) fn next(&self) -> Instant {
        self.next
    }

    /// Look again at `at` (if that is earlier than already planned).
    pub(crate) fn wake(&mut self, at: Instant) {
        self.soon = Some(self.soon.map_or(at, |s| s.min(at)));
    }

    /// A tick is sent at `now`: the next regular one is just after the next grid point.
    pub(crate) fn sent(&mut self, now: Instant) {
        self.soon = None;
        self.last_sent = Some(now);
        self.next = self.grid.next_after(now) + self.offset;
        self.in_flight = true;
    }

    /// Something changed in a group of `members` live members (a notice at `now`):
    /// look again after [`NOTICE_DELAY`] and a random part (`draw`, in 0..1) of the
    /// spread, and no sooner than the gap after the last tick (both grow with N, and
    /// stop at half a renew interval).
    pub(crate) fn notice(&mut self, now: Instant, members: usize, draw: f64) {
        let n = u32::try_from(members.max(1)).unwrap_or(u32::MAX);
        let cap = self.renew_interval / 2;
        let spread = NOTICE_SPREAD_PER_MEMBER.saturating_mul(n).min(cap);
        let gap = NOTICE_GAP_PER_MEMBER.saturating_mul(n).min(cap);
        let mut at = now + NOTICE_DELAY + spread.mul_f64(draw.clamp(0.0, 1.0));
        if let Some(last) = self.last_sent {
            at = at.max(last + gap);
        }
        self.wake(at);
    }

    pub(crate) fn answered(&mut self) {
        self.in_flight = false;
    }

    /// A runner is waiting for a renewal: if the next tick is far (the renewal asked
    /// just after one was sent, or retries after an error), tick one offset from now,
    /// which gathers every straggler into that one extra tick.
    pub(crate) fn renewal_wanted(&mut self, now: Instant) {
        if self.next > now + 2 * self.offset {
            self.wake(now + self.offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENEW: Duration = Duration::from_millis(600);

    fn cadence(now: Instant) -> Cadence {
        Cadence::new(RenewGrid::new(now, RENEW), RENEW, now)
    }

    /// A notice wakes a small group within a few ms, spread by the draw; a wide one
    /// over up to N × 250 µs, and never sooner than N × 1 ms after the last tick (so N
    /// replicas tick on notices at most once per ms between them); both stop at half
    /// a renew interval.
    #[tokio::test(start_paused = true)]
    async fn a_notice_is_spread_and_spaced_by_the_number_of_members() {
        let ms = Duration::from_millis;
        // (members, notice at, draw, tick due at), the last tick sent at 0.
        let cases = [
            // 10 members, a tick 20 ms ago: 1 ms, plus up to 2.5 ms.
            (10, ms(20), 0.0, ms(21)),
            (10, ms(20), 1.0, Duration::from_micros(23_500)),
            // 10 members, a tick 2 ms ago: not before 10 ms after it.
            (10, ms(2), 0.0, ms(10)),
            // 200 members: spread over 50 ms, and 200 ms after the last tick.
            (200, ms(250), 0.5, ms(250 + 1 + 25)),
            (200, ms(5), 0.5, ms(200)),
            // 10,000 members: both stop at half the renew interval.
            (10_000, ms(5), 1.0, ms(5 + 1 + 300)),
        ];
        let t0 = Instant::now();
        for (members, at, draw, due) in cases {
            let mut c = cadence(t0);
            c.sent(t0);
            c.answered();
            c.notice(t0 + at, members, draw);
            assert_eq!(
                c.due_at() - t0,
                due,
                "{members} members, notice at {at:?}, draw {draw}"
            );
        }
    }
}
