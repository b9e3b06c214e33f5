//! When to tick: one heartbeat per renew interval, just after each grid point, and
//! sooner when something changed.

use std::time::Duration;

use leasehold_election::ext::RenewGrid;
use tokio::time::Instant;

/// How soon after something changed (a notice, an expiring member) to look again.
pub(crate) const QUICK: Duration = Duration::from_millis(5);
/// How soon after a release notice to tick: releases come in bursts of a few ms.
pub(crate) const NOTICE_DELAY: Duration = Duration::from_millis(1);

/// Ticks run a twentieth of a renew interval (5–50 ms) after each grid point, so that
/// the electors' renewals, due on the grid points, are all waiting for them: waking a
/// thousand electors takes a few milliseconds, and a renewal that asks after the tick
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
}

impl Cadence {
    pub(crate) fn new(grid: RenewGrid, renew_interval: Duration, now: Instant) -> Self {
        Self {
            grid,
            offset: tick_offset(renew_interval),
            next: now,
            soon: None,
            in_flight: false,
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
        self.next = self.grid.next_after(now) + self.offset;
        self.in_flight = true;
    }

    pub(crate) fn answered(&mut self) {
        self.in_flight = false;
    }

    /// An elector is waiting for a renewal: if the next tick is far (the renewal asked
    /// just after one was sent, or retries after an error), tick one offset from now,
    /// which gathers every straggler into that one extra tick.
    pub(crate) fn renewal_wanted(&mut self, now: Instant) {
        if self.next > now + 2 * self.offset {
            self.wake(now + self.offset);
        }
    }
}
