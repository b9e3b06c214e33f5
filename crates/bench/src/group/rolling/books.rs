//! The pure bookkeeping of `rolling`, from the children's lines: how long partitions
//! sat without an owner, and which replica processes were kept out of the group.
//! (Owner changes are [`OwnerChanges`](crate::group::ownership::OwnerChanges): by replica
//! id, so a partition re-taken by the same id after a sticky restart is no move.)

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::clock::span_ms;
use crate::group::event::PartitionEvent;
use crate::group::process::Logged;

/// A replica process: its id and incarnation.
type Holder<'a> = (&'a str, u32);

/// The unowned spells of some partitions over a window: from a `released` that left a
/// partition without any holder (or the `stopped` of a process that still held it)
/// to its next `owned` line, by anyone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unowned {
    /// Spells that ended (or were still open) in the window.
    pub gaps: u64,
    /// The longest spell, in ms (its part inside the window).
    pub max_ms: f64,
    /// Every spell, summed, in ms.
    pub sum_ms: f64,
    /// The partition of the longest spell, and when that spell began (wall µs).
    pub longest: Option<(String, u64)>,
    /// Partitions still without an owner at the window's end (their spell counts up
    /// to it).
    pub open: Vec<String>,
}

impl Unowned {
    fn add(&mut self, partition: &str, from_us: u64, to_us: u64) {
        let ms = span_ms(from_us, to_us).max(0.0);
        self.gaps += 1;
        self.sum_ms += ms;
        if self.longest.is_none() || ms > self.max_ms {
            self.max_ms = ms;
            self.longest = Some((partition.to_owned(), from_us));
        }
    }

    /// The unowned spells of `partitions` in `log` between `since_us` and `until_us`
    /// (wall µs, the children's clocks). Lines are taken in the order of their `at_us`
    /// (the read order among equals); holders are replica processes (id and
    /// incarnation), so a restarted process never inherits its predecessor's
    /// partitions. A spell that began before `since_us` counts from `since_us`; lines
    /// after `until_us` are ignored. A partition never released is never unowned.
    pub fn of(log: &[Logged], partitions: &[String], since_us: u64, until_us: u64) -> Self {
        let wanted: HashSet<&str> = partitions.iter().map(String::as_str).collect();
        let mut timeline: Vec<(u64, usize)> = log
            .iter()
            .enumerate()
            .filter_map(|(i, l)| match &l.event {
                PartitionEvent::Owned {
                    partition, at_us, ..
                }
                | PartitionEvent::Released {
                    partition, at_us, ..
                } if wanted.contains(partition.as_str()) => Some((*at_us, i)),
                PartitionEvent::Stopped { at_us } => Some((*at_us, i)),
                _ => None,
            })
            .filter(|&(at, _)| at <= until_us)
            .collect();
        timeline.sort_unstable();

        let mut holders: HashMap<&str, HashSet<Holder<'_>>> = HashMap::new();
        let mut held: HashMap<Holder<'_>, HashSet<&str>> = HashMap::new();
        let mut free_since: HashMap<&str, u64> = HashMap::new();
        let mut out = Self::default();
        for (at, i) in timeline {
            let l = &log[i];
            let who = (l.replica.as_str(), l.incarnation);
            match &l.event {
                PartitionEvent::Owned { partition, .. } => {
                    let p = partition.as_str();
                    let set = holders.entry(p).or_default();
                    let was_free = set.is_empty();
                    set.insert(who);
                    held.entry(who).or_default().insert(p);
                    // (The spell ends either way; it counts if it reaches the window.)
                    if was_free
                        && let Some(from) = free_since.remove(p)
                        && at >= since_us
                    {
                        out.add(p, from.max(since_us), at);
                    }
                }
                PartitionEvent::Released { partition, .. } => {
                    let p = partition.as_str();
                    if let Some(set) = held.get_mut(&who) {
                        set.remove(p);
                    }
                    let_go(&mut holders, &mut free_since, (p, who, at));
                }
                PartitionEvent::Stopped { .. } => {
                    for p in held.remove(&who).unwrap_or_default() {
                        let_go(&mut holders, &mut free_since, (p, who, at));
                    }
                }
                _ => {}
            }
        }
        let mut open: Vec<(&str, u64)> = free_since.into_iter().collect();
        open.sort_unstable();
        for (p, from) in open {
            out.add(p, from.max(since_us), until_us);
            out.open.push(p.to_owned());
        }
        out
    }
}

/// `who` lets go of `p` at `at`: if nobody else holds it, a spell begins.
fn let_go<'a>(
    holders: &mut HashMap<&'a str, HashSet<Holder<'a>>>,
    free_since: &mut HashMap<&'a str, u64>,
    (p, who, at): (&'a str, Holder<'a>, u64),
) {
    let set = holders.entry(p).or_default();
    if set.remove(&who) && set.is_empty() {
        free_since.insert(p, at);
    }
}

/// A replica process the bench started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The replica id.
    pub replica: String,
    /// Which process of that id (1, then 2 after its restart).
    pub incarnation: u32,
    /// When it was started (wall µs).
    pub at_us: u64,
}

/// A replica process that did not take part: it reported a refusal, or did not join
/// in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The replica id.
    pub replica: String,
    /// Which process of that id.
    pub incarnation: u32,
    /// What it said, or how late it joined.
    pub reason: String,
}

/// The processes of `starts` that printed `refused`, or whose `joined` line came more
/// than `within_us` after their start, or never.
pub fn refusals(starts: &[Start], log: &[Logged], within_us: u64) -> Vec<Refusal> {
    starts
        .iter()
        .filter_map(|s| {
            let mine = || {
                log.iter()
                    .filter(|l| l.replica == s.replica && l.incarnation == s.incarnation)
            };
            let reason = if let Some(error) = mine().find_map(|l| match &l.event {
                PartitionEvent::Refused { error, .. } => Some(error.clone()),
                _ => None,
            }) {
                format!("refused: {error}")
            } else {
                match mine().find_map(|l| match l.event {
                    PartitionEvent::Joined { at_us } => Some(at_us),
                    _ => None,
                }) {
                    Some(at) if at.saturating_sub(s.at_us) <= within_us => return None,
                    Some(at) => {
                        format!("joined only {:.1} ms after its start", span_ms(s.at_us, at))
                    }
                    None => "never joined".to_owned(),
                }
            };
            Some(Refusal {
                replica: s.replica.clone(),
                incarnation: s.incarnation,
                reason,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::ownership::OwnerChanges;

    fn line(replica: &str, incarnation: u32, event: PartitionEvent) -> Logged {
        Logged {
            replica: replica.into(),
            incarnation,
            event,
        }
    }

    fn owned(replica: &str, inc: u32, p: &str, at_us: u64) -> Logged {
        line(
            replica,
            inc,
            PartitionEvent::Owned {
                partition: p.into(),
                fence: 1,
                at_us,
                handed_over: None,
                handed_over_bytes: None,
                no_hand_off: None,
                no_hand_off_cause: None,
            },
        )
    }

    fn released(replica: &str, inc: u32, p: &str, at_us: u64) -> Logged {
        line(
            replica,
            inc,
            PartitionEvent::Released {
                partition: p.into(),
                fence: 1,
                at_us,
                writes: 0,
                write_errors: 0,
                reason: None,
                sent_at_us: None,
                handed_off: None,
                hand_off_error: None,
                successor: None,
            },
        )
    }

    fn names(ps: &[&str]) -> Vec<String> {
        ps.iter().map(|&p| p.to_owned()).collect()
    }

    #[test]
    fn a_hand_over_is_unowned_from_the_release_to_the_next_owned_line() {
        let log = vec![
            owned("a", 1, "p0", 1_000),
            owned("b", 1, "p1", 1_000),
            released("a", 1, "p0", 10_000),
            // Read late, dated earlier: order is by the children's clocks.
            owned("b", 1, "p0", 10_500),
            released("b", 1, "p1", 20_000),
            owned("a", 2, "p1", 22_000),
        ];
        let u = Unowned::of(&log, &names(&["p0", "p1"]), 5_000, 30_000);
        assert_eq!(u.gaps, 2);
        assert_eq!(u.max_ms, 2.0);
        assert_eq!(u.sum_ms, 2.5);
        assert_eq!(u.longest, Some(("p1".to_owned(), 20_000)));
        assert!(u.open.is_empty());
    }

    #[test]
    fn the_window_the_list_and_overlaps_bound_what_counts() {
        let log = vec![
            owned("a", 1, "p0", 0),
            released("a", 1, "p0", 1_000),
            owned("b", 1, "p0", 9_000),
            // Owned by c before b lets go: never unowned.
            owned("c", 1, "p0", 19_000),
            released("b", 1, "p0", 20_000),
            // Not in the list.
            owned("a", 1, "p9", 0),
            released("a", 1, "p9", 21_000),
            // Released late in the window, never re-owned: open until its end.
            released("c", 1, "p0", 40_000),
            owned("a", 1, "p0", 60_000),
        ];
        let u = Unowned::of(&log, &names(&["p0"]), 5_000, 50_000);
        // 5 → 9 ms (from the window's start), then 40 → 50 ms (open).
        assert_eq!((u.gaps, u.max_ms, u.sum_ms), (2, 10.0, 14.0));
        assert_eq!(u.open, ["p0"]);
        assert_eq!(
            Unowned::of(&log, &names(&["p1"]), 0, 50_000),
            Unowned::default()
        );
    }

    #[test]
    fn a_process_that_stops_holding_partitions_frees_them_then() {
        let log = vec![
            owned("a", 1, "p0", 0),
            owned("a", 1, "p1", 0),
            released("a", 1, "p1", 3_000),
            line("a", 1, PartitionEvent::Stopped { at_us: 4_000 }),
            // A new process of the same id: its own holder.
            owned("a", 2, "p0", 7_000),
            owned("b", 1, "p1", 3_500),
        ];
        let u = Unowned::of(&log, &names(&["p0", "p1"]), 0, 10_000);
        assert_eq!((u.gaps, u.max_ms, u.sum_ms), (2, 3.0, 3.5));
    }

    #[test]
    fn a_sticky_re_take_is_no_move_a_hand_over_and_back_is_two() {
        let sticky = vec![
            owned("a", 1, "p0", 0),
            owned("b", 1, "p1", 0),
            released("a", 1, "p0", 10),
            owned("a", 2, "p0", 20),
            released("b", 1, "p1", 30),
            owned("b", 2, "p1", 40),
        ];
        assert_eq!(OwnerChanges::count(&sticky, 5, 100).changes, 0);
        let handed = vec![
            owned("a", 1, "p0", 0),
            released("a", 1, "p0", 10),
            owned("b", 1, "p0", 11),
            released("b", 1, "p0", 30),
            owned("a", 2, "p0", 31),
        ];
        let moved = OwnerChanges::count(&handed, 5, 100);
        assert_eq!(moved.changes, 2);
        assert_eq!(moved.describe(), "a→b ×1, b→a ×1");
    }

    #[test]
    fn refusals_are_refused_lines_late_joins_and_no_join() {
        let start = |replica: &str, incarnation, at_us| Start {
            replica: replica.into(),
            incarnation,
            at_us,
        };
        let starts = [
            start("a", 1, 0),
            start("b", 1, 0),
            start("a", 2, 10_000),
            start("c", 1, 0),
            start("d", 1, 0),
        ];
        let log = vec![
            line("a", 1, PartitionEvent::Joined { at_us: 500 }),
            line("b", 1, PartitionEvent::Joined { at_us: 2_500 }),
            line(
                "a",
                2,
                PartitionEvent::Refused {
                    error: "replica id \"a\" is already live".into(),
                    at_us: 10_100,
                },
            ),
            line("a", 2, PartitionEvent::Joined { at_us: 10_200 }),
            line("c", 1, PartitionEvent::Joined { at_us: 2_000 }),
        ];
        let r = refusals(&starts, &log, 2_000);
        let got: Vec<(&str, u32, &str)> = r
            .iter()
            .map(|r| (r.replica.as_str(), r.incarnation, r.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("b", 1, "joined only 2.5 ms after its start"),
                ("a", 2, "refused: replica id \"a\" is already live"),
                ("d", 1, "never joined"),
            ]
        );
    }
}
