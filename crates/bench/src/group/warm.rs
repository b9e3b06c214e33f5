//! Named receivers and warm moves, from the replicas' own lines (`rebalance`): did the
//! hand-offs that named a receiver go to it, and (with `--prepare`) did the receiver
//! prepare before the old term ended?
//!
//! A *hand-off* is an owner change whose previous term ended `handed_off` (its
//! `released` line's `reason`) and was held by another replica id, the terms taken by
//! fence as in [`handoffs`](crate::group::handoffs) ([`terms`]). It is *named* when
//! that `released` line names a `successor` (`Ownership::successor`), *taken by the
//! named* replica when the next term the bench saw is that replica's.
//!
//! A preparation (a `prepared` line of the receiver: `Coordinator::on_prepare` ran) is
//! the hand-off's when it is for the same partition, asked by the old term's replica
//! (`from`), and started while the old term ran (between its `owned` and `released`
//! lines; the latest such if several). A hand-off with one was *requested* to prepare,
//! and then either
//! - *prepared*: named, the preparation is the named receiver's, and it finished no
//!   later than the old term's `released` line;
//! - *timed out*: the preparation had not finished by then (still running, dropped, or
//!   finished after it): the giver stopped waiting, and the move went on unnamed;
//! - *other*: it finished in time, but the move is not named for its replica (its
//!   answer came too late to the giver, or the giver named another).
//!
//! A request whose message never reached the receiver shows no `prepared` line: the
//! bench cannot see it (such a move is timed out for the giver, unnamed here).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::clock::span_ms;
use crate::group::event::PartitionEvent;
use crate::group::handoffs::{Release, Term, Terms, terms};
use crate::group::process::Logged;
use crate::stats::Percentiles;

/// Named receivers over a run's hand-offs (see the [module](self)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receivers {
    /// Hand-offs: owner changes whose previous term ended `handed_off`.
    pub moves: u64,
    /// Hand-offs whose old term named a successor.
    pub named: u64,
    /// Named hand-offs whose next term was the named replica's.
    pub taken_by_named: u64,
}

/// Warm moves over a run's hand-offs (`rebalance --prepare`; see the [module](self)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Warm {
    /// How long a giver waited for its receiver (`GroupConfigBuilder::prepare_moves`),
    /// in ms.
    pub within_ms: f64,
    /// How long each preparation took (a sleep), in ms.
    pub work_ms: u64,
    /// Hand-offs observed.
    pub moves: u64,
    /// Hand-offs whose old term named a successor.
    pub named: u64,
    /// Named hand-offs whose next term was the named replica's.
    pub taken_by_named: u64,
    /// Hand-offs whose receiver started a preparation while the old term ran.
    pub requested: u64,
    /// Named hand-offs whose named receiver's preparation finished before the old
    /// term ended.
    pub prepared: u64,
    /// Hand-offs whose preparation had not finished when the old term ended.
    pub timed_out: u64,
    /// Requested hand-offs neither prepared nor timed out: the preparation finished in
    /// time, but the move was not named for its replica.
    pub other: u64,
    /// `prepared` lines in the run (preparations for moves that happened or not).
    pub preparations: u64,
    /// Of those, the ones the coordinator dropped unfinished.
    pub unfinished: u64,
    /// Per requested hand-off, the old term's `released` line → the new term's `owned`
    /// line, in ms (as `hand_offs.unowned_ms`).
    pub unowned_ms: Percentiles,
    /// Per requested hand-off, the start of the preparation → the old term's
    /// `released` line, in ms: how much longer the giver kept the partition.
    pub held_ms: Percentiles,
}

/// One preparation, from a receiver's `prepared` line.
#[derive(Debug, Clone, Copy)]
struct Preparation<'a> {
    replica: &'a str,
    start_us: u64,
    end_us: u64,
    finished: bool,
}

/// One hand-off: the old term, its `released` line, the new term.
struct HandOff<'t, 'a> {
    partition: &'a str,
    before: &'t Term<'a>,
    release: Release<'a>,
    after: &'t Term<'a>,
}

/// Every hand-off among `terms` (see the [module](self)).
fn hand_offs<'t, 'a>(terms: &'t Terms<'a>) -> Vec<HandOff<'t, 'a>> {
    let mut out = Vec::new();
    for (&partition, seen) in terms {
        let mut prev: Option<&Term<'_>> = None;
        for t in seen.values() {
            if let Some(before) = prev
                && let Some(release) = before.released
                && release.reason == Some("handed_off")
                && before.replica != t.replica
            {
                out.push(HandOff {
                    partition,
                    before,
                    release,
                    after: t,
                });
            }
            prev = Some(t);
        }
    }
    out
}

impl Receivers {
    /// Counts the named receivers of every hand-off in `log`.
    pub fn of(log: &[Logged]) -> Self {
        Self::of_terms(&terms(log))
    }

    /// Like [`Receivers::of`], of the `terms` of a log (see [`terms`]).
    pub fn of_terms(terms: &Terms<'_>) -> Self {
        let mut out = Self::default();
        for h in hand_offs(terms) {
            out.moves += 1;
            if let Some(to) = h.release.successor {
                out.named += 1;
                if h.after.replica == to {
                    out.taken_by_named += 1;
                }
            }
        }
        out
    }

    /// A one-line summary, for the scenario's stderr.
    pub fn describe(&self) -> String {
        format!(
            "{} hand-offs, {} named a receiver, {} taken by it",
            self.moves, self.named, self.taken_by_named
        )
    }
}

impl Warm {
    /// Counts the warm moves of every hand-off in `log`, with a giver's wait of
    /// `within_ms` and preparations of `work_ms`.
    pub fn of(log: &[Logged], within_ms: f64, work_ms: u64) -> Self {
        let terms = terms(log);
        let named = Receivers::of_terms(&terms);
        let mut out = Self {
            within_ms,
            work_ms,
            moves: named.moves,
            named: named.named,
            taken_by_named: named.taken_by_named,
            ..Self::default()
        };
        // Preparations by (partition, giver).
        let mut asked: HashMap<(&str, &str), Vec<Preparation<'_>>> = HashMap::new();
        for l in log {
            if let PartitionEvent::Prepared {
                partition,
                from,
                start_us,
                end_us,
                finished,
            } = &l.event
            {
                out.preparations += 1;
                if !finished {
                    out.unfinished += 1;
                }
                asked
                    .entry((partition.as_str(), from.as_str()))
                    .or_default()
                    .push(Preparation {
                        replica: &l.replica,
                        start_us: *start_us,
                        end_us: *end_us,
                        finished: *finished,
                    });
            }
        }
        let (mut unowned, mut held) = (Vec::new(), Vec::new());
        for h in hand_offs(&terms) {
            let ended_us = h.release.at_us;
            let Some(p) = asked
                .get(&(h.partition, h.before.replica))
                .into_iter()
                .flatten()
                .filter(|p| (h.before.owned_us..=ended_us).contains(&p.start_us))
                .max_by_key(|p| p.start_us)
            else {
                continue;
            };
            out.requested += 1;
            unowned.push(span_ms(ended_us, h.after.owned_us));
            held.push(span_ms(p.start_us, ended_us));
            let in_time = p.finished && p.end_us <= ended_us;
            if !in_time {
                out.timed_out += 1;
            } else if h.release.successor == Some(p.replica) {
                out.prepared += 1;
            } else {
                out.other += 1;
            }
        }
        out.unowned_ms = Percentiles::of(&unowned);
        out.held_ms = Percentiles::of(&held);
        out
    }

    /// A one-line summary, for the scenario's stderr.
    pub fn describe(&self) -> String {
        format!(
            "{} hand-offs ({} named, {} taken by the named), {} asked to prepare: {} prepared, {} timed out, {} other; {} preparations ({} unfinished); unowned p50 {:.1} ms, max {:.1} ms; held p50 {:.1} ms, max {:.1} ms",
            self.moves,
            self.named,
            self.taken_by_named,
            self.requested,
            self.prepared,
            self.timed_out,
            self.other,
            self.preparations,
            self.unfinished,
            self.unowned_ms.p50,
            self.unowned_ms.max,
            self.held_ms.p50,
            self.held_ms.max
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::handoffs::tests::{
        Got::{Nothing, State},
        owned,
    };

    /// A `released` line of `replica` (process 1) naming `successor`.
    fn released(
        replica: &str,
        p: &str,
        fence: u64,
        at_us: u64,
        reason: &str,
        successor: Option<&str>,
    ) -> Logged {
        Logged {
            replica: replica.into(),
            incarnation: 1,
            event: PartitionEvent::Released {
                partition: p.into(),
                fence,
                at_us,
                writes: 0,
                write_errors: 0,
                reason: Some(reason.into()),
                sent_at_us: None,
                handed_off: Some(64),
                hand_off_error: None,
                successor: successor.map(str::to_owned),
            },
        }
    }

    /// A `prepared` line of `replica` for `p`, asked by `from`.
    fn prepared(
        replica: &str,
        p: &str,
        from: &str,
        start_us: u64,
        end_us: u64,
        finished: bool,
    ) -> Logged {
        Logged {
            replica: replica.into(),
            incarnation: 1,
            event: PartitionEvent::Prepared {
                partition: p.into(),
                from: from.into(),
                start_us,
                end_us,
                finished,
            },
        }
    }

    #[test]
    fn named_hand_offs_and_who_took_them() {
        let log = vec![
            // Named for b, taken by b.
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            released("a", "p0", 10, 1_000, "handed_off", Some("b")),
            owned("b", 1, "p0", 11, 1_500, State("p0@10", 64)),
            // Named for b, taken by c (b had no room by then).
            owned("a", 1, "p1", 20, 0, Nothing("first_owner")),
            released("a", "p1", 20, 1_000, "handed_off", Some("b")),
            owned("c", 1, "p1", 21, 2_000, State("p1@20", 64)),
            // Unnamed.
            owned("a", 1, "p2", 30, 0, Nothing("first_owner")),
            released("a", "p2", 30, 1_000, "handed_off", None),
            owned("c", 1, "p2", 31, 2_000, State("p2@30", 64)),
            // Not hand-offs: a shutdown, a lost lease.
            owned("a", 1, "p3", 40, 0, Nothing("first_owner")),
            released("a", "p3", 40, 1_000, "shutdown", None),
            owned("b", 1, "p3", 41, 2_000, State("p3@40", 64)),
            released("b", "p3", 41, 3_000, "renewal_refused", None),
            owned("c", 1, "p3", 42, 9_000, Nothing("crashed")),
        ];
        let r = Receivers::of(&log);
        assert_eq!(
            r,
            Receivers {
                moves: 3,
                named: 2,
                taken_by_named: 1
            }
        );
        // Without `prepared` lines, nothing was asked.
        let w = Warm::of(&log, 500.0, 20);
        assert_eq!((w.moves, w.named, w.taken_by_named), (3, 2, 1));
        assert_eq!(
            (w.requested, w.prepared, w.timed_out, w.other),
            (0, 0, 0, 0)
        );
        assert_eq!(w.unowned_ms, Percentiles::default());
    }

    #[test]
    fn warm_moves_are_prepared_timed_out_or_other() {
        let log = vec![
            // Prepared in time by the named receiver: 100 µs → 200 µs, released at 300.
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            prepared("b", "p0", "a", 100, 200, true),
            released("a", "p0", 10, 300, "handed_off", Some("b")),
            owned("b", 1, "p0", 11, 1_300, State("p0@10", 64)),
            // Dropped unfinished: the giver stopped waiting, the move went on unnamed.
            owned("a", 1, "p1", 20, 0, Nothing("first_owner")),
            prepared("b", "p1", "a", 100, 600, false),
            released("a", "p1", 20, 500, "handed_off", None),
            owned("c", 1, "p1", 21, 3_500, State("p1@20", 64)),
            // Finished, but after the old term ended: timed out too.
            owned("a", 1, "p2", 30, 0, Nothing("first_owner")),
            prepared("c", "p2", "a", 100, 700, true),
            released("a", "p2", 30, 600, "handed_off", None),
            owned("c", 1, "p2", 31, 2_600, State("p2@30", 64)),
            // Finished in time, yet unnamed (the answer came too late): other.
            owned("a", 1, "p3", 40, 0, Nothing("first_owner")),
            prepared("b", "p3", "a", 100, 400, true),
            released("a", "p3", 40, 500, "handed_off", None),
            owned("b", 1, "p3", 41, 1_500, State("p3@40", 64)),
            // A preparation of an earlier term, and one asked by another replica: not
            // this move's, so it was never asked.
            prepared("b", "p4", "a", 100, 200, true),
            prepared("b", "p4", "z", 1_100, 1_200, true),
            owned("a", 1, "p4", 50, 1_000, Nothing("first_owner")),
            released("a", "p4", 50, 2_000, "handed_off", Some("b")),
            owned("b", 1, "p4", 51, 2_500, State("p4@50", 64)),
        ];
        let w = Warm::of(&log, 666.667, 20);
        assert_eq!((w.moves, w.named, w.taken_by_named), (5, 2, 2));
        assert_eq!(
            (w.requested, w.prepared, w.timed_out, w.other),
            (4, 1, 2, 1)
        );
        assert_eq!((w.preparations, w.unfinished), (6, 1));
        // Unowned: 1.0, 3.0, 2.0, 1.0 ms; held: 0.2, 0.4, 0.5, 0.4 ms.
        assert_eq!((w.unowned_ms.p50, w.unowned_ms.max), (1.0, 3.0));
        assert_eq!((w.held_ms.p50, w.held_ms.max), (0.4, 0.5));
        assert_eq!((w.within_ms, w.work_ms), (666.667, 20));
    }
}
