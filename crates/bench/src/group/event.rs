//! The JSON lines a `partition-child` prints on stdout, and the partition names every
//! process of a group derives from the partition count.

use std::io::Write;

use serde::{Deserialize, Serialize};

/// One event of a partition replica, printed as one JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum PartitionEvent {
    /// The replica's first group tick succeeded (it heartbeats in the group).
    Joined {
        /// When the replica saw it (wall µs).
        at_us: u64,
    },
    /// A partition callback started: this replica owns the partition.
    Owned {
        /// The partition.
        partition: String,
        /// The term's fence.
        fence: u64,
        /// When the callback started (wall µs).
        at_us: u64,
    },
    /// A partition callback saw its term end and returns, or was aborted (a lease that
    /// may be lost ends its callback at once): printed when the callback's future is
    /// dropped, so every term that started in a live process gets one.
    Released {
        /// The partition.
        partition: String,
        /// The term's fence.
        fence: u64,
        /// When the callback saw the cancellation (wall µs).
        at_us: u64,
        /// Ledger records the term wrote (and saw accepted); 0 without `--ledger-url`.
        #[serde(default)]
        writes: u64,
        /// Ledger writes that failed with a store error (they may or may not have landed).
        #[serde(default)]
        write_errors: u64,
        /// Why the term ended ([`leasehold_election::TermEndReason`]'s label).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// When the term's last successful claim or renewal was sent (wall µs): the
        /// replica's local deadline was this + lease − safety margin.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_at_us: Option<u64>,
    },
    /// A fenced ledger write was rejected as stale: a later term has written. The
    /// callback writes no more in this term.
    Rejected {
        /// The partition.
        partition: String,
        /// The term's fence.
        fence: u64,
        /// The highest fence the ledger has accepted.
        highest: u64,
        /// When the rejection arrived (wall µs).
        at_us: u64,
    },
    /// The replica's hand-off count (partitions released to rebalance) went up.
    Handoffs {
        /// Hand-offs since the replica started.
        total: u64,
        /// When the replica saw it (wall µs).
        at_us: u64,
    },
    /// The coordinator's `ready()` failed: the group keeps this replica out (a duplicate
    /// replica id, an invalid configuration) or the coordinator stopped.
    Refused {
        /// The error, as text.
        error: String,
        /// When `ready()` returned (wall µs).
        at_us: u64,
    },
    /// The group's partition set, as the replica's last tick saw it, changed size (or
    /// the replica's versioned list started or stopped differing from the group's).
    GroupSet {
        /// Partitions in the group's set.
        partitions: usize,
        /// This replica's versioned list differs from the group's at the same version.
        list_differs: bool,
        /// When the replica saw it (wall µs).
        at_us: u64,
    },
    /// The replica received SIGTERM (printed after the shutdown).
    Sigterm {
        /// When the signal was received (wall µs).
        at_us: u64,
    },
    /// The graceful shutdown finished (left the group, released every lease); the
    /// process exits 0 next.
    Stopped {
        /// When `shutdown().await` returned (wall µs).
        at_us: u64,
    },
    /// Bytes of roster the process's coordinators have received since they started
    /// (`CoordinatorHandle::roster_bytes_received`, summed over the process's
    /// coordinators): printed when it grew, at most every [`ROSTER_EVERY`]. A line of
    /// the process, never tagged with a replica id.
    RosterBytes {
        /// The total so far.
        total: u64,
        /// When the process read it (wall µs).
        at_us: u64,
    },
}

/// How often a `partition-child` looks at its roster byte count (and prints a
/// `roster_bytes` line if it grew): the parent's figure over a window is that much
/// late at either end.
pub const ROSTER_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// One line of a `partition-child`: an event, and the replica id it is of when the
/// process runs several coordinators (`replica`; absent with one, whose id the parent
/// knows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// The coordinator's replica id, in a process of several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub event: PartitionEvent,
}

impl PartitionEvent {
    /// Prints the event as one JSON line on stdout and flushes it. A closed stdout (the
    /// parent is gone) is ignored.
    pub fn emit(&self) {
        self.emit_as(None);
    }

    /// Like [`PartitionEvent::emit`], tagged with `replica` (see [`Line`]) if given.
    pub fn emit_as(&self, replica: Option<&str>) {
        let line = Line {
            replica: replica.map(str::to_owned),
            event: self.clone(),
        };
        let mut out = std::io::stdout().lock();
        if serde_json::to_writer(&mut out, &line).is_ok() {
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
    }
}

/// The partition names of a group of `count` partitions: `p0000`, `p0001`, ...
pub fn partition_names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("p{i:04}")).collect()
}

/// The ledger key of a partition on the resource store. The hash tag keeps it and its
/// fence guard in one Redis Cluster slot.
pub fn ledger_key(partition: &str) -> String {
    format!("ledger:{{{partition}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_use_the_documented_json_shape() {
        let e = PartitionEvent::Owned {
            partition: "p0001".into(),
            fence: 7,
            at_us: 10,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"event":"owned","partition":"p0001","fence":7,"at_us":10}"#
        );
        let back: PartitionEvent = serde_json::from_str(
            r#"{"event":"released","partition":"p0001","fence":7,"at_us":12}"#,
        )
        .unwrap();
        assert_eq!(
            back,
            PartitionEvent::Released {
                partition: "p0001".into(),
                fence: 7,
                at_us: 12,
                writes: 0,
                write_errors: 0,
                reason: None,
                sent_at_us: None,
            }
        );
    }

    #[test]
    fn a_line_of_several_coordinators_names_its_replica() {
        let line = Line {
            replica: Some("replica-7".into()),
            event: PartitionEvent::Joined { at_us: 5 },
        };
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(
            text,
            r#"{"replica":"replica-7","event":"joined","at_us":5}"#
        );
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), line);
        let plain: Line =
            serde_json::from_str(r#"{"event":"owned","partition":"p0001","fence":7,"at_us":10}"#)
                .unwrap();
        assert_eq!(plain.replica, None);
        let bytes = Line {
            replica: None,
            event: PartitionEvent::RosterBytes {
                total: 640,
                at_us: 9,
            },
        };
        assert_eq!(
            serde_json::to_string(&bytes).unwrap(),
            r#"{"event":"roster_bytes","total":640,"at_us":9}"#
        );
    }

    #[test]
    fn refusals_and_set_changes_are_lines_too() {
        let e = PartitionEvent::Refused {
            error: "duplicate".into(),
            at_us: 3,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"event":"refused","error":"duplicate","at_us":3}"#
        );
        let e = PartitionEvent::GroupSet {
            partitions: 72,
            list_differs: false,
            at_us: 4,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"event":"group_set","partitions":72,"list_differs":false,"at_us":4}"#
        );
    }

    #[test]
    fn names_and_ledger_keys() {
        assert_eq!(partition_names(2), ["p0000", "p0001"]);
        assert_eq!(ledger_key("p0003"), "ledger:{p0003}");
    }
}
