//! Hand-off state across planned moves, from the replicas' own lines (`rolling` and
//! `rebalance` with `--hand-off-bytes`): did every new term get exactly the state of
//! the term before it, and how long was its partition without an owner meanwhile?
//!
//! Each partition's terms are its `owned` lines, ordered by fence; the term before a
//! term is the one with the next lower fence the bench saw. A *planned move* is a term
//! whose previous term ended for a planned reason (its `released` line's `reason` is
//! one of [`PLANNED_ENDS`](crate::group::event::PLANNED_ENDS): a hand-off, a drain, a removal, a shutdown, ...) and was
//! held by another replica id: not a first owner, not a crash or an expiry (a killed
//! replica prints no `released` line; a lost lease says `renewal_refused` or
//! `deadline_passed`), and not a regrant to the same replica id (a sticky restart).
//! A new term of the same replica id after a planned end (a restarted process that
//! took a partition of its predecessor back) is no move either, as in the owner
//! changes and the ledger check.
//!
//! The state a term is offered names the term that left it ([`hand_off_state`]): a
//! delivery is good if it names the partition and the fence of the term just before;
//! any other is *stale* ([`Staleness`] says why), whether or not the term is a planned
//! move. `chaos` checks every state offered under faults the same way, from the same
//! [`terms`].
//!
//! [`hand_off_state`]: crate::group::event::hand_off_state

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::clock::span_ms;
use crate::group::event::{PartitionEvent, parse_header, planned_end};
use crate::group::process::Logged;
use crate::stats::Percentiles;

/// How many planned moves without state (or stale deliveries) a report lists.
const SHOWN: usize = 5;

/// Hand-off state over a run's planned moves (see the [module](self)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandOffs {
    /// Planned moves: owner changes whose previous term ended for a planned reason.
    pub moved: u64,
    /// Planned moves whose new term was offered state naming exactly the previous
    /// term (same partition, same fence).
    pub state_delivered: u64,
    /// Planned moves whose new term was offered no state.
    pub state_missing: u64,
    /// Terms offered state that names another term than the one just before (or none
    /// the bench saw): must be 0.
    pub stale: u64,
    /// Per planned move, the previous term's `released` line → the new term's `owned`
    /// line, in ms.
    pub unowned_ms: Percentiles,
    /// Terms offered any state at all (planned moves or not).
    pub offered: u64,
    /// Terms whose state `Ownership::hand_off` accepted (their `released` line's
    /// `handed_off`).
    pub left: u64,
    /// Terms whose `Ownership::hand_off` failed (their `released` line's
    /// `hand_off_error`).
    pub errors: u64,
    /// Good deliveries whose length differs from what the previous term left.
    pub wrong_size: u64,
    /// The planned moves without state, by the new term's `no_hand_off` reason.
    pub missing_why: BTreeMap<String, u64>,
    /// Every term offered no state (planned moves or not: first owners, crashes,
    /// regrants, ...), by its `no_hand_off` reason.
    pub not_offered: BTreeMap<String, u64>,
    /// The first few planned moves without state and stale deliveries, as
    /// `partition from@fence→to@fence: what`.
    pub examples: Vec<String>,
}

/// One term of a partition, as its lines tell it: its `owned` line (the first one the
/// bench read with its fence) and the `released` line of the same process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term<'a> {
    /// The replica id whose `owned` line it is.
    pub replica: &'a str,
    /// Which process of that replica id.
    pub incarnation: u32,
    /// When its callback started (wall µs).
    pub owned_us: u64,
    /// The header of the state it was offered (`partition@fence`).
    pub handed_over: Option<&'a str>,
    /// The length of that state.
    pub handed_over_bytes: Option<u64>,
    /// Why it was offered none.
    pub no_hand_off: Option<&'a str>,
    /// With `no_hand_off`: what more the replica said of it.
    pub no_hand_off_cause: Option<&'a str>,
    /// Its `released` line, if the bench read one.
    pub released: Option<Release<'a>>,
}

/// A term's `released` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release<'a> {
    /// When its callback saw the end (wall µs).
    pub at_us: u64,
    /// Why it ended.
    pub reason: Option<&'a str>,
    /// The bytes of state it left.
    pub left: Option<u64>,
    /// The replica it was handed to, if it named one (`Ownership::successor`).
    pub successor: Option<&'a str>,
}

/// Every partition's terms the bench saw (an `owned` line), by fence: keyed by
/// (partition, fence), never by replica, so that processes of one replica id (a
/// restart, an impostor) keep their terms apart.
pub type Terms<'a> = HashMap<&'a str, BTreeMap<u64, Term<'a>>>;

/// The terms of every partition in `log` (see [`Term`]).
pub fn terms(log: &[Logged]) -> Terms<'_> {
    let mut terms: Terms<'_> = HashMap::new();
    for l in log {
        if let PartitionEvent::Owned {
            partition,
            fence,
            at_us,
            handed_over,
            handed_over_bytes,
            no_hand_off,
            no_hand_off_cause,
        } = &l.event
        {
            terms
                .entry(partition.as_str())
                .or_default()
                .entry(*fence)
                .or_insert(Term {
                    replica: &l.replica,
                    incarnation: l.incarnation,
                    owned_us: *at_us,
                    handed_over: handed_over.as_deref(),
                    handed_over_bytes: *handed_over_bytes,
                    no_hand_off: no_hand_off.as_deref(),
                    no_hand_off_cause: no_hand_off_cause.as_deref(),
                    released: None,
                });
        }
    }
    for l in log {
        if let PartitionEvent::Released {
            partition,
            fence,
            at_us,
            reason,
            handed_off,
            successor,
            ..
        } = &l.event
            && let Some(t) = terms
                .get_mut(partition.as_str())
                .and_then(|ts| ts.get_mut(fence))
            && t.replica == l.replica
            && t.incarnation == l.incarnation
            && t.released.is_none()
        {
            t.released = Some(Release {
                at_us: *at_us,
                reason: reason.as_deref(),
                left: *handed_off,
                successor: successor.as_deref(),
            });
        }
    }
    terms
}

/// Why the state offered to a term is stale: it must name the term of the same
/// partition just before it, the one with the next lower fence among the terms the
/// bench saw (`seen`, by fence). A term granted but never seen (its process killed
/// before its callback started) cannot have left state, so it may lie in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staleness {
    /// The state names no term (no `partition@fence` header).
    NamesNoTerm,
    /// The state names a term of another partition.
    OtherPartition {
        /// The partition it names.
        partition: String,
        /// The fence it names.
        fence: u64,
    },
    /// The state names the receiving term itself or a later one.
    NotEarlier {
        /// The fence it names.
        fence: u64,
    },
    /// The state names a fence of the partition that no `owned` line showed.
    Unseen {
        /// The fence it names.
        fence: u64,
    },
    /// The state names an earlier term the bench saw, but the bench saw another term of
    /// the partition between the two.
    Skipped {
        /// The fence it names.
        fence: u64,
        /// The first term the bench saw after it (the one the state should have gone
        /// to).
        between: u64,
        /// How many terms the bench saw between the two.
        count: usize,
    },
}

impl Staleness {
    /// Whether the state offered (`header`) to term `fence` of `partition` is stale,
    /// given the partition's terms the bench saw by fence (`seen`); `None` if it names
    /// the term just before.
    pub fn of<V>(
        partition: &str,
        fence: u64,
        header: &str,
        seen: &BTreeMap<u64, V>,
    ) -> Option<Self> {
        let Some((named_partition, named)) = parse_header(header) else {
            return Some(Self::NamesNoTerm);
        };
        if named_partition != partition {
            return Some(Self::OtherPartition {
                partition: named_partition.to_owned(),
                fence: named,
            });
        }
        if named >= fence {
            return Some(Self::NotEarlier { fence: named });
        }
        if !seen.contains_key(&named) {
            return Some(Self::Unseen { fence: named });
        }
        let mut between = seen.range(named + 1..fence).map(|(&f, _)| f);
        let first = between.next()?;
        Some(Self::Skipped {
            fence: named,
            between: first,
            count: 1 + between.count(),
        })
    }
}

impl std::fmt::Display for Staleness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NamesNoTerm => write!(f, "it names no term"),
            Self::OtherPartition { partition, fence } => {
                write!(f, "it is partition {partition}'s (term @{fence})")
            }
            Self::NotEarlier { fence } => write!(f, "it names term @{fence}, not an earlier one"),
            Self::Unseen { fence } => {
                write!(f, "it names term @{fence}, which the bench never saw")
            }
            Self::Skipped {
                fence,
                between,
                count,
            } => write!(
                f,
                "it names term @{fence}, but the bench saw {count} term(s) between them, the first @{between}"
            ),
        }
    }
}

impl HandOffs {
    /// Counts the hand-offs of every partition's terms in `log` (all of it: from the
    /// cold start on).
    pub fn of(log: &[Logged]) -> Self {
        Self::of_terms(log, &terms(log))
    }

    /// Like [`HandOffs::of`], of the `terms` of `log` (see [`terms`]).
    pub fn of_terms(log: &[Logged], terms: &Terms<'_>) -> Self {
        let mut out = Self::default();
        for l in log {
            if let PartitionEvent::Released {
                handed_off,
                hand_off_error,
                ..
            } = &l.event
            {
                if hand_off_error.is_some() {
                    out.errors += 1;
                }
                if handed_off.is_some() {
                    out.left += 1;
                }
            }
        }
        let mut unowned = Vec::new();
        let mut partitions: Vec<&&str> = terms.keys().collect();
        partitions.sort();
        for p in partitions {
            let seen = &terms[*p];
            let mut prev: Option<(u64, &Term<'_>)> = None;
            for (&fence, t) in seen {
                let names_prev = match t.handed_over {
                    None => {
                        let why = t.no_hand_off.unwrap_or("unknown");
                        *out.not_offered.entry(why.to_owned()).or_default() += 1;
                        false
                    }
                    Some(header) => {
                        out.offered += 1;
                        let good = Staleness::of(p, fence, header, seen).is_none();
                        if !good {
                            out.stale += 1;
                            out.example(p, prev, (fence, t), &format!("stale: {header}"));
                        }
                        good
                    }
                };
                if let Some((_, before)) = prev
                    && let Some(Release {
                        at_us: released_us,
                        reason: Some(reason),
                        left,
                        ..
                    }) = before.released
                    && planned_end(reason)
                    && before.replica != t.replica
                {
                    out.moved += 1;
                    unowned.push(span_ms(released_us, t.owned_us));
                    if names_prev {
                        out.state_delivered += 1;
                        if t.handed_over_bytes != left {
                            out.wrong_size += 1;
                        }
                    } else if t.handed_over.is_none() {
                        out.state_missing += 1;
                        let why = t.no_hand_off.unwrap_or("unknown");
                        *out.missing_why.entry(why.to_owned()).or_default() += 1;
                        let what = match t.no_hand_off_cause {
                            Some(cause) => format!("{why} ({cause}) after {reason}"),
                            None => format!("{why} after {reason}"),
                        };
                        out.example(p, prev, (fence, t), &what);
                    }
                }
                prev = Some((fence, t));
            }
        }
        out.unowned_ms = Percentiles::of(&unowned);
        out
    }

    /// Lists one more example, if fewer than [`SHOWN`] are listed.
    fn example(
        &mut self,
        p: &str,
        prev: Option<(u64, &Term<'_>)>,
        (fence, t): (u64, &Term<'_>),
        what: &str,
    ) {
        if self.examples.len() < SHOWN {
            let from = prev.map_or_else(|| "-".to_owned(), |(f, b)| format!("{}@{f}", b.replica));
            self.examples
                .push(format!("{p} {from}→{}@{fence}: {what}", t.replica));
        }
    }

    /// A one-line summary, for the scenario's stderr.
    pub fn describe(&self) -> String {
        let why: Vec<String> = self
            .missing_why
            .iter()
            .map(|(w, n)| format!("{w} ×{n}"))
            .collect();
        format!(
            "{} planned moves, state delivered in {}, missing in {} [{}], {} stale, {} wrong size, {} hand_off errors; unowned p50 {:.1} ms, max {:.1} ms",
            self.moved,
            self.state_delivered,
            self.state_missing,
            why.join(", "),
            self.stale,
            self.wrong_size,
            self.errors,
            self.unowned_ms.p50,
            self.unowned_ms.max
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An `owned` line of `replica`'s process `inc`.
    pub(crate) fn owned(
        replica: &str,
        inc: u32,
        p: &str,
        fence: u64,
        at_us: u64,
        got: Got,
    ) -> Logged {
        let (handed_over, handed_over_bytes, no_hand_off) = match got {
            Got::State(header, bytes) => (Some(header.to_owned()), Some(bytes), None),
            Got::Nothing(why) => (None, None, Some(why.to_owned())),
        };
        Logged {
            replica: replica.into(),
            incarnation: inc,
            event: PartitionEvent::Owned {
                partition: p.into(),
                fence,
                at_us,
                handed_over,
                handed_over_bytes,
                no_hand_off,
                no_hand_off_cause: None,
            },
        }
    }

    /// What an `owned` line says was handed over.
    #[derive(Clone, Copy)]
    pub(crate) enum Got {
        /// State with this header and length.
        State(&'static str, u64),
        /// Nothing, for this reason.
        Nothing(&'static str),
    }

    /// A `released` line of `replica`'s process `inc`.
    pub(crate) fn released(
        replica: &str,
        inc: u32,
        p: &str,
        fence: u64,
        at_us: u64,
        reason: &str,
        left: Option<u64>,
    ) -> Logged {
        Logged {
            replica: replica.into(),
            incarnation: inc,
            event: PartitionEvent::Released {
                partition: p.into(),
                fence,
                at_us,
                writes: 0,
                write_errors: 0,
                reason: Some(reason.into()),
                sent_at_us: None,
                handed_off: left,
                hand_off_error: None,
                successor: None,
            },
        }
    }

    use Got::{Nothing, State};

    #[test]
    fn a_planned_move_delivers_the_previous_terms_state() {
        let lines = [
            owned("a", 1, "p0", 10, 1_000, Nothing("first_owner")),
            released("a", 1, "p0", 10, 5_000, "handed_off", Some(64)),
            owned("b", 1, "p0", 11, 7_500, State("p0@10", 64)),
            released("b", 1, "p0", 11, 9_000, "shutdown", Some(64)),
            owned("c", 1, "p0", 12, 10_000, State("p0@11", 64)),
        ];
        // The first term's lines read last: terms go by fence, not by read order.
        let (first, rest) = lines.split_at(2);
        let log: Vec<Logged> = rest.iter().chain(first).cloned().collect();
        let h = HandOffs::of(&log);
        assert_eq!(
            (h.moved, h.state_delivered, h.state_missing, h.stale),
            (2, 2, 0, 0)
        );
        assert_eq!(h.unowned_ms.p50, 1.0);
        assert_eq!(h.unowned_ms.max, 2.5);
        assert_eq!((h.offered, h.left, h.errors, h.wrong_size), (2, 2, 0, 0));
        assert!(h.examples.is_empty(), "{h:?}");
    }

    #[test]
    fn a_planned_move_without_state_is_missing_and_says_why() {
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            released("a", 1, "p0", 10, 1_000, "drained", None),
            owned("b", 1, "p0", 11, 3_000, Nothing("nothing_left")),
            owned("a", 1, "p1", 20, 0, Nothing("first_owner")),
            released("a", 1, "p1", 20, 1_000, "shutdown", Some(64)),
            owned("c", 1, "p1", 21, 2_000, Nothing("gone")),
        ];
        let h = HandOffs::of(&log);
        assert_eq!(
            (h.moved, h.state_delivered, h.state_missing, h.stale),
            (2, 0, 2, 0)
        );
        assert_eq!(
            h.missing_why,
            BTreeMap::from([("gone".into(), 1), ("nothing_left".into(), 1)])
        );
        assert_eq!(
            h.examples,
            [
                "p0 a@10→b@11: nothing_left after drained",
                "p1 a@20→c@21: gone after shutdown"
            ]
        );
        assert_eq!((h.unowned_ms.p50, h.unowned_ms.max), (1.0, 2.0));
    }

    #[test]
    fn state_naming_another_term_is_stale_even_off_a_move() {
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            released("a", 1, "p0", 10, 1_000, "handed_off", Some(64)),
            owned("b", 1, "p0", 11, 1_500, State("p0@10", 64)),
            released("b", 1, "p0", 11, 2_000, "handed_off", Some(64)),
            // Names the term before the previous one: stale.
            owned("c", 1, "p0", 12, 2_500, State("p0@10", 64)),
            // Another partition's state.
            owned("a", 1, "p1", 20, 0, State("p0@19", 64)),
            // Right term, wrong partition name.
            released("a", 1, "p1", 20, 100, "handed_off", Some(64)),
            owned("b", 1, "p1", 21, 200, State("p2@20", 64)),
            // No header at all.
            owned("a", 1, "p2", 30, 0, State("garbage", 7)),
        ];
        let h = HandOffs::of(&log);
        assert_eq!(h.stale, 4, "{h:?}");
        assert_eq!((h.moved, h.state_delivered, h.state_missing), (3, 1, 0));
        assert_eq!(h.offered, 5);
        assert_eq!(h.examples[0], "p0 b@11→c@12: stale: p0@10");
    }

    #[test]
    fn crashes_first_owners_regrants_and_returns_are_no_planned_moves() {
        let log = vec![
            // A crash: no released line (SIGKILL), or a lost lease.
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            owned("b", 1, "p0", 11, 5_000, Nothing("crashed")),
            released("b", 1, "p0", 11, 6_000, "renewal_refused", None),
            owned("c", 1, "p0", 12, 9_000, Nothing("crashed")),
            // A sticky restart: the same id takes it back in a new process.
            owned("d", 1, "p1", 20, 0, Nothing("first_owner")),
            released("d", 1, "p1", 20, 1_000, "shutdown", None),
            owned("d", 2, "p1", 21, 2_000, Nothing("regranted")),
        ];
        let h = HandOffs::of(&log);
        assert_eq!(
            h,
            HandOffs {
                not_offered: BTreeMap::from([
                    ("crashed".into(), 2),
                    ("first_owner".into(), 2),
                    ("regranted".into(), 1),
                ]),
                ..HandOffs::default()
            }
        );
    }

    #[test]
    fn a_delivery_of_another_size_than_was_left_is_counted() {
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            released("a", 1, "p0", 10, 1_000, "handed_off", Some(4096)),
            owned("b", 1, "p0", 11, 1_200, State("p0@10", 4000)),
        ];
        let h = HandOffs::of(&log);
        assert_eq!((h.moved, h.state_delivered, h.wrong_size), (1, 1, 1));
        assert_eq!(h.unowned_ms.max, 0.2);
    }
}
