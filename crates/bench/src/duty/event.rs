//! The JSON lines a child leader prints on stdout, stamped on the shared wall clock
//! ([`crate::clock`]).

use std::io::Write;

use serde::{Deserialize, Serialize};

/// One event of the child leader, printed as one JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A term ended (`soak` children: the duty saw its cancellation; `--one-term`
    /// children: the elector's status showed the term over).
    TermEnded {
        /// The term's fence.
        fence: u64,
        /// When the duty saw the end (wall µs).
        at_us: u64,
        /// Whether the child had received SIGTERM by then (a planned end).
        planned: bool,
        /// Why the term ended ([`leasehold_election::TermEndReason`]'s label).
        reason: String,
    },
    /// One renewal's round trip, as the elector measured it (`soak` children only,
    /// printed after the shutdown, one line per renewal).
    RenewRtt {
        /// The round trip (µs).
        us: u64,
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
}
