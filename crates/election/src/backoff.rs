//! Capped exponential backoff with jitter.

use std::time::Duration;

/// Doubles from `initial` up to `max`; each delay is drawn uniformly from the upper
/// half of the current step, so electors that failed together do not retry together.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            current: initial,
        }
    }

    pub(crate) fn next_delay(&mut self) -> Duration {
        let step = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = step / 2;
        half + half.mul_f64(rand::random::<f64>())
    }

    pub(crate) fn reset(&mut self) {
        self.current = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(80));
        let delays: Vec<_> = (0..6).map(|_| b.next_delay()).collect();
        for (d, step) in delays.iter().zip([10, 20, 40, 80, 80, 80]) {
            assert!(
                *d >= Duration::from_millis(step / 2) && *d <= Duration::from_millis(step),
                "{d:?} vs {step}"
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(10));
    }
}
