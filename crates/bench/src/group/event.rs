//! The JSON lines a `partition-child` prints on stdout, and the partition names every
//! process of a group derives from the partition count.

use std::io::Write;

use leasehold_partitions::NoHandOff;
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
    /// The replica's readiness in the group's sense (`CoordinatorHandle::readiness`)
    /// changed: printed at the first view and at every change.
    Ready {
        /// Ready now.
        ready: bool,
        /// Why not (`NotReady`'s text), when not ready.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
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
        /// What the previous term handed over (`Ownership::handed_over` was `Ok`): the
        /// header of the state, `partition@fence` of the term that left it (see
        /// [`hand_off_state`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        handed_over: Option<String>,
        /// The length of the state handed over, in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        handed_over_bytes: Option<u64>,
        /// Why nothing was handed over (`Ownership::handed_over` was `Err`): the
        /// [`leasehold_partitions::NoHandOff`] variant in snake case (see
        /// [`no_hand_off_label`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        no_hand_off: Option<String>,
        /// With `no_hand_off`: the previous term's end (`nothing_left`), or the error
        /// (`unavailable`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        no_hand_off_cause: Option<String>,
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
        /// Bytes of state the term left for the next owner (`Ownership::hand_off`
        /// accepted them; `--hand-off-bytes`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        handed_off: Option<u64>,
        /// Why `Ownership::hand_off` refused the state, as text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hand_off_error: Option<String>,
        /// The replica the term was handed to (`Ownership::successor`): a hand-over
        /// that evens out the group names the member with room that is to take the
        /// partition next; absent for every other end (and for a warm move whose
        /// receiver did not prepare in time: it goes on unnamed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        successor: Option<String>,
    },
    /// This replica prepared for a warm move (`rebalance --prepare`: its
    /// `Coordinator::on_prepare` callback, a sleep of `--prepare-work-ms`): printed when
    /// the preparation finished, or when the coordinator dropped it unfinished (the
    /// giver's wait was over, or the replica stopped).
    Prepared {
        /// The partition about to be handed to this replica.
        partition: String,
        /// The replica that owned it when it asked (`Prepare::from`).
        from: String,
        /// When the callback started (wall µs).
        start_us: u64,
        /// When it finished, or was dropped (wall µs).
        end_us: u64,
        /// Whether it ran to its end (false: dropped).
        finished: bool,
    },
    /// A term of `rebalance-load --load feedback` started with this backlog in its tenant's
    /// queue ([`feedback`](crate::group::feedback)): printed after its `owned` line.
    Backlog {
        /// The partition.
        partition: String,
        /// The term's fence.
        fence: u64,
        /// The backlog, in milliseconds of the tenant's mean arrivals (entries over its
        /// load without noise), rounded.
        backlog_ms: u64,
        /// Where the queue came from: `handed_over`, `committed` or `origin`
        /// ([`Source`](crate::group::feedback::Source)).
        source: String,
        /// When the term started serving (wall µs).
        at_us: u64,
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

/// The end reasons (a `released` line's `reason`) of a term given up on purpose, its
/// release confirmed: those `TermEndReason::is_planned` says are, and the moves a
/// coordinator makes (`Ownership::end_reason`).
pub const PLANNED_ENDS: [&str; 6] = [
    "shutdown",
    "duty_returned",
    "stepped_down",
    "removed",
    "handed_off",
    "drained",
];

/// Whether a `released` line's `reason` is a planned end ([`PLANNED_ENDS`]).
pub fn planned_end(reason: &str) -> bool {
    PLANNED_ENDS.contains(&reason)
}

/// The state a term of `partition` with fence `fence` hands off with
/// `--hand-off-bytes len`: a header naming the term, `"{partition}@{fence}:"`, padded
/// with `.` to `len` bytes. Only the padding gives way: below the header's length, the
/// state is the header alone.
pub fn hand_off_state(partition: &str, fence: u64, len: usize) -> Vec<u8> {
    let mut state = format!("{partition}@{fence}:").into_bytes();
    if state.len() < len {
        state.resize(len, b'.');
    }
    state
}

/// The longest header [`state_header`] reports of state it cannot read: bytes shown.
const HEADER_SHOWN: usize = 64;

/// The header of hand-off state (see [`hand_off_state`]), without its `:`:
/// `"p0003@17"`. State without one is shown as its first bytes (lossily decoded), so
/// the bench counts it as naming no term it saw.
pub fn state_header(state: &[u8]) -> String {
    let end = state
        .iter()
        .take(HEADER_SHOWN)
        .position(|&b| b == b':')
        .unwrap_or(state.len().min(HEADER_SHOWN));
    String::from_utf8_lossy(&state[..end]).into_owned()
}

/// The term a header names: (partition, fence); `None` if it names none.
pub fn parse_header(header: &str) -> Option<(&str, u64)> {
    let (partition, fence) = header.rsplit_once('@')?;
    Some((partition, fence.parse().ok()?))
}

/// Why nothing was handed over, as the `owned` line's `no_hand_off` says it: the
/// variant's name in snake case (`other` for one this version does not know).
pub fn no_hand_off_label(why: &NoHandOff) -> &'static str {
    match why {
        NoHandOff::FirstOwner => "first_owner",
        NoHandOff::Regranted => "regranted",
        NoHandOff::Crashed => "crashed",
        NoHandOff::NothingLeft { .. } => "nothing_left",
        NoHandOff::Gone => "gone",
        NoHandOff::ServerChanged => "server_changed",
        NoHandOff::Stale => "stale",
        NoHandOff::Unavailable(_) => "unavailable",
        _ => "other",
    }
}

/// What more there is to say of `why` than its label: the previous term's end
/// (`nothing_left`), the error (`unavailable`), the text of a variant this version
/// does not know.
pub fn no_hand_off_cause(why: &NoHandOff) -> Option<String> {
    match why {
        NoHandOff::NothingLeft { cause } => Some(cause.as_str().to_owned()),
        NoHandOff::Unavailable(e) => Some(leasehold_partitions::ErrorChain(e).to_string()),
        NoHandOff::FirstOwner
        | NoHandOff::Regranted
        | NoHandOff::Crashed
        | NoHandOff::Gone
        | NoHandOff::ServerChanged
        | NoHandOff::Stale => None,
        other => Some(other.to_string()),
    }
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
            handed_over: None,
            handed_over_bytes: None,
            no_hand_off: None,
            no_hand_off_cause: None,
        };
        let old = r#"{"event":"owned","partition":"p0001","fence":7,"at_us":10}"#;
        assert_eq!(serde_json::to_string(&e).unwrap(), old);
        assert_eq!(serde_json::from_str::<PartitionEvent>(old).unwrap(), e);
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
                handed_off: None,
                hand_off_error: None,
                successor: None,
            }
        );
    }

    #[test]
    fn owned_and_released_lines_say_what_was_handed_over() {
        let given = PartitionEvent::Owned {
            partition: "p0001".into(),
            fence: 8,
            at_us: 10,
            handed_over: Some("p0001@7".into()),
            handed_over_bytes: Some(4096),
            no_hand_off: None,
            no_hand_off_cause: None,
        };
        let text = serde_json::to_string(&given).unwrap();
        assert_eq!(
            text,
            r#"{"event":"owned","partition":"p0001","fence":8,"at_us":10,"handed_over":"p0001@7","handed_over_bytes":4096}"#
        );
        assert_eq!(
            serde_json::from_str::<PartitionEvent>(&text).unwrap(),
            given
        );
        let cold = PartitionEvent::Owned {
            partition: "p0001".into(),
            fence: 9,
            at_us: 11,
            handed_over: None,
            handed_over_bytes: None,
            no_hand_off: Some("nothing_left".into()),
            no_hand_off_cause: Some("leave".into()),
        };
        assert_eq!(
            serde_json::to_string(&cold).unwrap(),
            r#"{"event":"owned","partition":"p0001","fence":9,"at_us":11,"no_hand_off":"nothing_left","no_hand_off_cause":"leave"}"#
        );
        let left = PartitionEvent::Released {
            partition: "p0001".into(),
            fence: 8,
            at_us: 12,
            writes: 0,
            write_errors: 0,
            reason: Some("handed_off".into()),
            sent_at_us: None,
            handed_off: Some(4096),
            hand_off_error: None,
            successor: None,
        };
        let text = serde_json::to_string(&left).unwrap();
        assert_eq!(
            text,
            r#"{"event":"released","partition":"p0001","fence":8,"at_us":12,"writes":0,"write_errors":0,"reason":"handed_off","handed_off":4096}"#
        );
        assert_eq!(serde_json::from_str::<PartitionEvent>(&text).unwrap(), left);
    }

    #[test]
    fn released_lines_name_the_successor_and_preparations_are_lines() {
        let named = PartitionEvent::Released {
            partition: "p0001".into(),
            fence: 8,
            at_us: 12,
            writes: 0,
            write_errors: 0,
            reason: Some("handed_off".into()),
            sent_at_us: None,
            handed_off: None,
            hand_off_error: None,
            successor: Some("replica-2".into()),
        };
        let text = serde_json::to_string(&named).unwrap();
        assert_eq!(
            text,
            r#"{"event":"released","partition":"p0001","fence":8,"at_us":12,"writes":0,"write_errors":0,"reason":"handed_off","successor":"replica-2"}"#
        );
        assert_eq!(
            serde_json::from_str::<PartitionEvent>(&text).unwrap(),
            named
        );
        let prepared = PartitionEvent::Prepared {
            partition: "p0001".into(),
            from: "replica-1".into(),
            start_us: 100,
            end_us: 120,
            finished: true,
        };
        let text = serde_json::to_string(&prepared).unwrap();
        assert_eq!(
            text,
            r#"{"event":"prepared","partition":"p0001","from":"replica-1","start_us":100,"end_us":120,"finished":true}"#
        );
        assert_eq!(
            serde_json::from_str::<PartitionEvent>(&text).unwrap(),
            prepared
        );
    }

    #[test]
    fn hand_off_state_is_a_header_naming_its_term_padded_to_size() {
        let state = hand_off_state("p0003", 1_733_000_000_123, 64);
        assert_eq!(state.len(), 64);
        assert!(state.starts_with(b"p0003@1733000000123:."));
        assert_eq!(state_header(&state), "p0003@1733000000123");
        assert_eq!(
            parse_header(&state_header(&state)),
            Some(("p0003", 1_733_000_000_123))
        );
        // Too small for the header: the header alone, never cut.
        assert_eq!(hand_off_state("p0003", 42, 4), b"p0003@42:");
        assert_eq!(hand_off_state("p0003", 42, 0), b"p0003@42:");
        // State that names no term.
        assert_eq!(state_header(b"opaque"), "opaque");
        assert_eq!(parse_header("opaque"), None);
        assert_eq!(parse_header("p0003@x"), None);
        assert_eq!(state_header(&[b'x'; 100]).len(), HEADER_SHOWN);
    }

    #[test]
    fn planned_ends_are_the_planned_term_end_reasons() {
        use leasehold_election::TermEndReason as R;
        let every = [
            R::RenewalRefused,
            R::DeadlinePassed,
            R::BackendError(leasehold_election::StoreError::Timeout(
                std::time::Duration::from_millis(1),
            )),
            R::Shutdown,
            R::DutyReturned,
            R::DutyFailed("x".into()),
            R::DutyPanicked("x".into()),
            R::SteppedDown,
        ];
        for r in &every {
            assert_eq!(planned_end(r.label()), r.is_planned(), "{}", r.label());
        }
        // And the coordinator's moves, as the child labels them.
        for moved in ["removed", "handed_off", "drained"] {
            assert!(planned_end(moved), "{moved}");
        }
        let planned = every.iter().filter(|r| r.is_planned()).count();
        assert_eq!(planned + 3, PLANNED_ENDS.len());
    }

    #[test]
    fn reasons_for_no_hand_off_are_variant_names() {
        let cases = [
            (NoHandOff::FirstOwner, "first_owner", None),
            (NoHandOff::Regranted, "regranted", None),
            (NoHandOff::Crashed, "crashed", None),
            (
                NoHandOff::NothingLeft {
                    cause: leasehold_partitions::MoveCause::Drain,
                },
                "nothing_left",
                Some("drain"),
            ),
            (NoHandOff::Gone, "gone", None),
            (NoHandOff::ServerChanged, "server_changed", None),
            (NoHandOff::Stale, "stale", None),
        ];
        for (why, label, cause) in cases {
            assert_eq!(no_hand_off_label(&why), label);
            assert_eq!(no_hand_off_cause(&why).as_deref(), cause);
        }
        let down = NoHandOff::Unavailable(leasehold_election::StoreError::Timeout(
            std::time::Duration::from_millis(5),
        ));
        assert_eq!(no_hand_off_label(&down), "unavailable");
        assert!(no_hand_off_cause(&down).is_some());
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
