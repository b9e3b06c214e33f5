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
//! any other is *stale*, whether or not the term is a planned move.
//!
//! [`hand_off_state`]: crate::group::event::hand_off_state

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::clock::span_ms;
use crate::group::event::{PartitionEvent, parse_header, planned_end};
use crate::group::process::Logged;
use crate::stats::Percentiles;

/// How many planned moves without state (or stale deliveries) a report lists.
const SHOWN: usize = 5;

/// Hand-off state over a run's planned moves (see the [module](self)).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
    /// Terms whose state `Leadership::hand_off` accepted (their `released` line's
    /// `handed_off`).
    pub left: u64,
    /// Terms whose `Leadership::hand_off` failed (their `released` line's
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

/// One term, as its lines tell it.
#[derive(Debug)]
struct Seen<'a> {
    replica: &'a str,
    incarnation: u32,
    owned_us: u64,
    handed_over: Option<&'a str>,
    handed_over_bytes: Option<u64>,
    no_hand_off: Option<&'a str>,
    no_hand_off_cause: Option<&'a str>,
    /// Its `released` line: when, why, the bytes it left.
    released: Option<(u64, Option<&'a str>, Option<u64>)>,
}

impl HandOffs {
    /// Counts the hand-offs of every partition's terms in `log` (all of it: from the
    /// cold start on).
    pub fn of(log: &[Logged]) -> Self {
        let mut terms: HashMap<&str, BTreeMap<u64, Seen<'_>>> = HashMap::new();
        let mut out = Self::default();
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
                    .or_insert(Seen {
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
                if let Some(t) = terms
                    .get_mut(partition.as_str())
                    .and_then(|ts| ts.get_mut(fence))
                    && t.replica == l.replica
                    && t.incarnation == l.incarnation
                    && t.released.is_none()
                {
                    t.released = Some((*at_us, reason.as_deref(), *handed_off));
                }
            }
        }
        let mut unowned = Vec::new();
        let mut partitions: Vec<&&str> = terms.keys().collect();
        partitions.sort();
        for p in partitions {
            let mut prev: Option<(u64, &Seen<'_>)> = None;
            for (&fence, t) in &terms[*p] {
                let names_prev = match t.handed_over {
                    None => {
                        let why = t.no_hand_off.unwrap_or("unknown");
                        *out.not_offered.entry(why.to_owned()).or_default() += 1;
                        false
                    }
                    Some(header) => {
                        out.offered += 1;
                        let good = parse_header(header)
                            .is_some_and(|(hp, hf)| hp == *p && prev.map(|(f, _)| f) == Some(hf));
                        if !good {
                            out.stale += 1;
                            out.example(p, prev, (fence, t), &format!("stale: {header}"));
                        }
                        good
                    }
                };
                if let Some((_, before)) = prev
                    && let Some((released_us, Some(reason), left)) = before.released
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
        prev: Option<(u64, &Seen<'_>)>,
        (fence, t): (u64, &Seen<'_>),
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
mod tests {
    use super::*;

    fn owned(replica: &str, inc: u32, p: &str, fence: u64, at_us: u64, got: Got) -> Logged {
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

    #[derive(Clone, Copy)]
    enum Got {
        State(&'static str, u64),
        Nothing(&'static str),
    }

    fn released(
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
