//! The wall clock every process of a run shares.
//!
//! The bench and its children run on the same machine, so wall-clock microseconds
//! (`SystemTime`) are the one timeline they share; tokio `Instant`s are converted to
//! it with [`wall_us`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// The wall clock now, in µs since the Unix epoch.
pub fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

/// The wall-clock µs of a tokio `Instant`: `SystemTime::now()` minus the time since it
/// (plus the time until it, for an instant in the future).
pub fn wall_us(at: Instant) -> u64 {
    let (wall, now) = (now_us(), Instant::now());
    if at <= now {
        wall.saturating_sub(micros(now - at))
    } else {
        wall.saturating_add(micros(at - now))
    }
}

/// A duration in whole µs.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The span from `from` to `to` (both wall µs) in milliseconds; negative if `to` is
/// earlier.
pub fn span_ms(from: u64, to: u64) -> f64 {
    // Wall µs fit losslessly in an f64 (below 2^53) for the next few centuries.
    (to as f64 - from as f64) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_signed_milliseconds() {
        assert_eq!(span_ms(1_000, 2_500), 1.5);
        assert_eq!(span_ms(2_500, 1_000), -1.5);
    }
}
