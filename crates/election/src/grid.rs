//! The renew grid: the instants at which many electors of one process renew together.

use std::time::Duration;

use tokio::time::Instant;

/// Grid points `epoch + k × step` (k ≥ 0) shared by every elector of a partition group,
/// so their renewals fall on the same instants and ride in one group tick.
///
/// Both sides of that agreement use this one type: an elector renews at
/// [`RenewGrid::floor`] of its due time (never later than due, so always safe), and the
/// group's coordinator ticks just after [`RenewGrid::next_after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewGrid {
    epoch: Instant,
    step: Duration,
}

impl RenewGrid {
    /// A grid starting at `epoch` with points every `step` (a zero step is treated as
    /// one nanosecond).
    pub fn new(epoch: Instant, step: Duration) -> Self {
        Self {
            epoch,
            step: step.max(Duration::from_nanos(1)),
        }
    }

    /// The grid's epoch.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// The distance between grid points.
    pub fn step(&self) -> Duration {
        self.step
    }

    /// The last grid point at or before `due`; `due` itself if it is before the epoch.
    pub fn floor(&self, due: Instant) -> Instant {
        if due <= self.epoch {
            return due;
        }
        let since = (due - self.epoch).as_nanos();
        let back = since % self.step.as_nanos();
        due - Duration::from_nanos(u64::try_from(back).unwrap_or(0))
    }

    /// The first grid point strictly after `now`.
    pub fn next_after(&self, now: Instant) -> Instant {
        if now < self.epoch {
            return self.epoch;
        }
        let step = self.step.as_nanos();
        let k = (now - self.epoch).as_nanos() / step + 1;
        let at = u64::try_from(k.saturating_mul(step)).unwrap_or(u64::MAX);
        self.epoch + Duration::from_nanos(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn floor_rounds_down_onto_the_grid_and_never_later() {
        let epoch = Instant::now();
        let grid = RenewGrid::new(epoch, 100 * MS);
        assert_eq!(grid.floor(epoch + 250 * MS), epoch + 200 * MS);
        assert_eq!(grid.floor(epoch + 300 * MS), epoch + 300 * MS);
        assert_eq!(grid.floor(epoch), epoch);
        // Before the epoch there is no grid: the due time stands.
        let early = Instant::now();
        let later = RenewGrid::new(early + 50 * MS, 100 * MS);
        assert_eq!(later.floor(early + 10 * MS), early + 10 * MS);
    }

    #[test]
    fn next_after_is_strictly_later_and_on_the_grid() {
        let epoch = Instant::now();
        let grid = RenewGrid::new(epoch, 100 * MS);
        assert_eq!(grid.next_after(epoch), epoch + 100 * MS);
        assert_eq!(grid.next_after(epoch + 199 * MS), epoch + 200 * MS);
        assert_eq!(grid.next_after(epoch + 200 * MS), epoch + 300 * MS);
        // A renewal due at `floor(d)` is answered by the tick at `next_after` of just
        // before it: the two sides agree on the same points.
        let due = epoch + 345 * MS;
        assert_eq!(grid.next_after(grid.floor(due) - MS), grid.floor(due));
    }

    #[test]
    fn a_zero_step_does_not_divide_by_zero() {
        let epoch = Instant::now();
        let grid = RenewGrid::new(epoch, Duration::ZERO);
        assert!(grid.next_after(epoch + MS) > epoch + MS);
        assert!(grid.floor(epoch + MS) <= epoch + MS);
    }
}
