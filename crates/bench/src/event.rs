//! The JSON lines a child leader prints on stdout, and the wall clock they use.
//!
//! Both processes run on the same machine, so wall-clock microseconds
//! (`SystemTime`) are the one timeline they share; tokio `Instant`s are converted to
//! it with [`wall_us`].

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// One event of the child leader, printed as one JSON line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The child's duty started.
    Leading {
        /// The term's fence.
        fence: u64,
        /// When the duty started (wall µs).
        at_us: u64,
        /// When the winning acquire was sent (wall µs): the lease runs from about then.
        sent_at_us: u64,
    },
    /// The elector renewed the lease.
    Renewed {
        /// When the successful renewal was sent (wall µs).
        sent_at_us: u64,
    },
    /// The child received SIGTERM (printed after the shutdown, to keep the write off
    /// the hand-over path).
    Sigterm {
        /// When the signal was received (wall µs).
        at_us: u64,
    },
    /// The graceful shutdown finished (lease released); the child exits 0 next.
    Stopped {
        /// When `shutdown().await` returned (wall µs).
        at_us: u64,
    },
}

impl Event {
    /// Prints the event as one JSON line on stdout and flushes it. A closed stdout (the
    /// parent is gone) is ignored: the parent kills its children anyway.
    pub fn emit(&self) {
        let mut out = std::io::stdout().lock();
        if serde_json::to_writer(&mut out, self).is_ok() {
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
    }
}

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
    fn events_use_the_documented_json_shape() {
        let e = Event::Leading {
            fence: 7,
            at_us: 10,
            sent_at_us: 9,
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"event":"leading","fence":7,"at_us":10,"sent_at_us":9}"#
        );
        let back: Event = serde_json::from_str(r#"{"event":"renewed","sent_at_us":5}"#).unwrap();
        assert_eq!(back, Event::Renewed { sent_at_us: 5 });
    }

    #[test]
    fn spans_are_signed_milliseconds() {
        assert_eq!(span_ms(1_000, 2_500), 1.5);
        assert_eq!(span_ms(2_500, 1_000), -1.5);
    }
}
