//! The checker of a chaos run: reads one partition's ledger (its records in the order
//! the resource store accepted them) and finds what fencing must prevent, and how
//! long the partition went without writes.
//!
//! A record is `partition,replica,fence,seq,sent_at_us`.
//!
//! - **Stale write accepted**: a record whose fence is lower than an earlier record's.
//! - **Interleaved terms**: a fence written by two replicas (records are grouped by
//!   fence in nondecreasing order once no stale write is accepted, so each term's
//!   writes are contiguous exactly when every fence belongs to one replica).
//! - **Gaps**: stretches of the window in which a partition's ledger did not grow,
//!   longer than a threshold, from the bench's samples of its length.
//!
//! Over the replicas' own lines of the whole run (cold start included):
//!
//! - **Stale deliveries** ([`stale_deliveries`]): a term offered hand-off state that
//!   is not its predecessor's. The state names the term that left it
//!   (`partition@fence`); it must be a term of the same partition that the bench saw
//!   (an `owned` line with that fence), and no term the bench saw may lie between the
//!   two ([`Staleness`]). A term granted but never seen (its process killed before its
//!   callback started) may: it cannot have left state, as only a callback hands off.

use std::collections::HashMap;

use crate::group::event::PartitionEvent;
use crate::group::handoffs::{Staleness, Terms};
use crate::group::process::Logged;

/// One ledger record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The partition the writer owned.
    pub partition: String,
    /// The writer.
    pub replica: String,
    /// The writer's fence.
    pub fence: u64,
    /// The writer's sequence number within its term (0, 1, ...).
    pub seq: u64,
    /// When the writer sent it (wall µs).
    pub at_us: u64,
}

impl Record {
    /// Parses `partition,replica,fence,seq,sent_at_us`.
    pub fn parse(line: &str) -> Option<Self> {
        let mut it = line.split(',');
        let record = Self {
            partition: it.next()?.to_owned(),
            replica: it.next()?.to_owned(),
            fence: it.next()?.parse().ok()?,
            seq: it.next()?.parse().ok()?,
            at_us: it.next()?.parse().ok()?,
        };
        it.next().is_none().then_some(record)
    }
}

/// A stretch without writes, longer than the threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gap {
    /// When the ledger last grew before it (or the window's start).
    pub start_us: u64,
    /// Its length.
    pub ms: f64,
}

/// How much of a window a partition's ledger kept growing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Uptime {
    /// Fraction of the window not inside a gap.
    pub availability: f64,
    /// The longest stretch without growth inside the window, in ms (gaps of any
    /// length).
    pub longest_gap_ms: f64,
    /// Stretches without growth longer than the threshold.
    pub gaps: Vec<Gap>,
}

/// What one ledger showed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LedgerCheck {
    /// Records in the ledger.
    pub writes: u64,
    /// Everything fencing should have prevented, as sentences with the evidence.
    pub violations: Vec<String>,
    /// Records of one term that landed after a later record of the same term (a write
    /// held in a black-holed connection and delivered after a retry): allowed, counted.
    pub reordered: u64,
    /// Terms that wrote at least one record.
    pub terms: u64,
}

/// Checks the ledger of `partition`: `lines` in ledger order.
pub fn check_ledger(partition: &str, lines: &[String]) -> LedgerCheck {
    let mut out = LedgerCheck {
        writes: lines.len() as u64,
        ..LedgerCheck::default()
    };
    let mut records = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match Record::parse(line) {
            Some(r) if r.partition == partition => records.push(r),
            Some(r) => out.violations.push(format!(
                "{partition}: record {i} ({line:?}) belongs to partition {}",
                r.partition
            )),
            None => out
                .violations
                .push(format!("{partition}: record {i} is malformed: {line:?}")),
        }
    }

    let mut highest: Option<&Record> = None;
    let mut owner: HashMap<u64, &Record> = HashMap::new();
    let mut last_seq: HashMap<u64, u64> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if let Some(h) = highest
            && r.fence < h.fence
        {
            out.violations.push(format!(
                "{partition}: stale write accepted: record {i} from {} with fence {} (seq {}) after fence {} from {}",
                r.replica, r.fence, r.seq, h.fence, h.replica
            ));
        }
        if highest.is_none_or(|h| r.fence > h.fence) {
            highest = Some(r);
        }
        match owner.get(&r.fence) {
            None => {
                owner.insert(r.fence, r);
                out.terms += 1;
            }
            Some(first) if first.replica != r.replica => out.violations.push(format!(
                "{partition}: fence {} written by two replicas: {} (seq {}) and {} (record {i}, seq {})",
                r.fence, first.replica, first.seq, r.replica, r.seq
            )),
            Some(_) => {}
        }
        let seq = last_seq.entry(r.fence).or_insert(r.seq);
        if r.seq < *seq {
            out.reordered += 1;
        }
        *seq = (*seq).max(r.seq);
    }

    out
}

/// Availability over the window `[from_us, to_us]` of a ledger seen growing at
/// `grew_us` (any order): a stretch without growth longer than `threshold_us` counts
/// as unavailable.
pub fn uptime(grew_us: &[u64], (from_us, to_us): (u64, u64), threshold_us: u64) -> Uptime {
    let mut times: Vec<u64> = grew_us
        .iter()
        .copied()
        .filter(|t| (from_us..=to_us).contains(t))
        .collect();
    times.sort_unstable();
    let mut out = Uptime::default();
    let mut prev = from_us;
    let mut unavailable = 0;
    for t in times.into_iter().chain(std::iter::once(to_us)) {
        let gap = t.saturating_sub(prev);
        out.longest_gap_ms = out.longest_gap_ms.max(gap as f64 / 1000.0);
        if gap > threshold_us {
            unavailable += gap;
            out.gaps.push(Gap {
                start_us: prev,
                ms: gap as f64 / 1000.0,
            });
        }
        prev = t;
    }
    let window = to_us.saturating_sub(from_us).max(1);
    out.availability = 1.0 - unavailable as f64 / window as f64;
    out
}

/// A term offered hand-off state that is not its predecessor's: a violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleDelivery<'a> {
    /// The partition.
    pub partition: &'a str,
    /// The receiving term's fence.
    pub fence: u64,
    /// The replica id whose `owned` line it is.
    pub replica: &'a str,
    /// Which process of that replica id.
    pub incarnation: u32,
    /// When the receiving term's callback started (wall µs).
    pub at_us: u64,
    /// The header of the state offered (`partition@fence`).
    pub header: &'a str,
    /// What is wrong with it.
    pub why: Staleness,
}

/// Every stale delivery in `log`, against `terms` (the terms of the same log, see
/// [`crate::group::handoffs::terms`]): every `owned` line that says it was offered
/// state is checked, of whichever process (a killed one's lines up to its death, a
/// second process of one replica id), each against the terms the bench saw of its
/// partition.
pub fn stale_deliveries<'a>(log: &'a [Logged], terms: &Terms<'_>) -> Vec<StaleDelivery<'a>> {
    log.iter()
        .filter_map(|l| match &l.event {
            PartitionEvent::Owned {
                partition,
                fence,
                at_us,
                handed_over: Some(header),
                ..
            } => {
                let seen = terms.get(partition.as_str())?;
                let why = Staleness::of(partition, *fence, header, seen)?;
                Some(StaleDelivery {
                    partition,
                    fence: *fence,
                    replica: &l.replica,
                    incarnation: l.incarnation,
                    at_us: *at_us,
                    header,
                    why,
                })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::handoffs::terms;
    use crate::group::handoffs::tests::Got::{Nothing, State};
    use crate::group::handoffs::tests::{owned, released};

    /// The stale deliveries of `log`, as (receiving fence, why).
    fn stale(log: &[Logged]) -> Vec<(u64, Staleness)> {
        stale_deliveries(log, &terms(log))
            .into_iter()
            .map(|d| (d.fence, d.why))
            .collect()
    }

    #[test]
    fn a_clean_history_has_no_stale_delivery() {
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            released("a", 1, "p0", 10, 1_000, "handed_off", Some(64)),
            owned("b", 1, "p0", 11, 1_500, State("p0@10", 64)),
            released("b", 1, "p0", 11, 2_000, "shutdown", Some(64)),
            // Term 12 was granted to a process killed before its callback started: never
            // seen, it left nothing, and the next term is rightly offered 11's state.
            owned("c", 1, "p0", 13, 4_000, State("p0@11", 64)),
            // Term 13's process is killed (no released line): the next term, of a
            // restarted process, is offered nothing.
            owned("a", 2, "p0", 14, 9_000, Nothing("crashed")),
            released("a", 2, "p0", 14, 9_500, "drained", Some(64)),
            // A second process of the same replica id takes it next: terms go by fence.
            owned("a", 3, "p0", 15, 9_600, State("p0@14", 64)),
            // Another partition's lines in between change nothing.
            owned("b", 1, "p1", 12, 0, Nothing("first_owner")),
            released("b", 1, "p1", 12, 100, "handed_off", Some(64)),
            owned("c", 1, "p1", 16, 200, State("p1@12", 64)),
        ];
        assert_eq!(stale(&log), []);
    }

    #[test]
    fn an_older_terms_state_past_a_seen_term_is_stale() {
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            released("a", 1, "p0", 10, 1_000, "handed_off", Some(64)),
            // Term 11 runs (and crashes, say): 10's state is no longer for anyone.
            owned("b", 1, "p0", 11, 1_500, State("p0@10", 64)),
            owned("c", 1, "p0", 12, 5_000, Nothing("crashed")),
            owned("d", 1, "p0", 13, 9_000, State("p0@10", 64)),
        ];
        assert_eq!(
            stale(&log),
            [(
                13,
                Staleness::Skipped {
                    fence: 10,
                    between: 11,
                    count: 2
                }
            )]
        );
        let d = &stale_deliveries(&log, &terms(&log))[0];
        assert_eq!(
            (d.partition, d.replica, d.incarnation, d.at_us, d.header),
            ("p0", "d", 1, 9_000, "p0@10")
        );
    }

    #[test]
    fn another_partitions_state_is_stale() {
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            owned("a", 1, "p1", 20, 0, Nothing("first_owner")),
            owned("b", 1, "p1", 21, 0, State("p0@10", 64)),
        ];
        assert_eq!(
            stale(&log),
            [(
                21,
                Staleness::OtherPartition {
                    partition: "p0".into(),
                    fence: 10
                }
            )]
        );
    }

    #[test]
    fn a_fence_never_seen_a_later_one_or_none_is_stale() {
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            owned("b", 1, "p0", 12, 0, State("p0@11", 64)),
            owned("c", 1, "p0", 13, 0, State("p0@13", 64)),
            owned("c", 1, "p0", 14, 0, State("p0@15", 64)),
            owned("d", 1, "p0", 16, 0, State("garbage", 7)),
        ];
        assert_eq!(
            stale(&log),
            [
                (12, Staleness::Unseen { fence: 11 }),
                (13, Staleness::NotEarlier { fence: 13 }),
                (14, Staleness::NotEarlier { fence: 15 }),
                (16, Staleness::NamesNoTerm),
            ]
        );
    }

    #[test]
    fn every_owned_line_of_a_fence_is_checked() {
        // Two processes of one replica id print a term of the same fence: the first
        // line makes the term, the second is checked all the same.
        let log = vec![
            owned("a", 1, "p0", 10, 0, Nothing("first_owner")),
            owned("b", 1, "p0", 11, 0, State("p0@10", 64)),
            owned("c", 1, "p0", 12, 0, State("p0@11", 64)),
            owned("c", 2, "p0", 12, 0, State("p0@10", 64)),
        ];
        assert_eq!(
            stale(&log),
            [(
                12,
                Staleness::Skipped {
                    fence: 10,
                    between: 11,
                    count: 1
                }
            )]
        );
    }

    fn rec(replica: &str, fence: u64, seq: u64, at_ms: u64) -> String {
        format!("p0,{replica},{fence},{seq},{}", at_ms * 1000)
    }

    #[test]
    fn records_parse_strictly() {
        assert_eq!(
            Record::parse("p0001,replica-1,17,3,99"),
            Some(Record {
                partition: "p0001".into(),
                replica: "replica-1".into(),
                fence: 17,
                seq: 3,
                at_us: 99
            })
        );
        assert_eq!(Record::parse("p0001,replica-1,17,3"), None);
        assert_eq!(Record::parse("p0001,replica-1,17,3,99,1"), None);
        assert_eq!(Record::parse("p0001,replica-1,x,3,99"), None);
    }

    #[test]
    fn a_clean_ledger_has_no_violation() {
        let lines = vec![
            rec("a", 5, 0, 0),
            rec("a", 5, 1, 10),
            rec("b", 9, 0, 20),
            rec("b", 9, 1, 30),
        ];
        let c = check_ledger("p0", &lines);
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        assert_eq!((c.writes, c.terms, c.reordered), (4, 2, 0));
    }

    #[test]
    fn a_lower_fence_after_a_higher_one_is_a_stale_write() {
        let lines = vec![rec("a", 5, 0, 0), rec("b", 9, 0, 10), rec("a", 5, 1, 20)];
        let c = check_ledger("p0", &lines);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        assert!(c.violations[0].contains("stale write accepted"));
    }

    #[test]
    fn a_fence_shared_by_two_replicas_is_an_interleaving() {
        let lines = vec![rec("a", 5, 0, 0), rec("b", 5, 0, 10)];
        let c = check_ledger("p0", &lines);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        assert!(c.violations[0].contains("written by two replicas"));
    }

    #[test]
    fn foreign_and_malformed_records_are_violations() {
        let lines = vec!["p1,a,5,0,0".to_owned(), "garbage".to_owned()];
        let c = check_ledger("p0", &lines);
        assert_eq!(c.violations.len(), 2, "{:?}", c.violations);
    }

    #[test]
    fn late_records_of_one_term_are_counted_as_reordered() {
        let lines = vec![rec("a", 5, 0, 0), rec("a", 5, 2, 10), rec("a", 5, 1, 5)];
        let c = check_ledger("p0", &lines);
        assert!(c.violations.is_empty());
        assert_eq!(c.reordered, 1);
    }

    #[test]
    fn gaps_beyond_the_threshold_cost_availability() {
        // Window 0..1000 ms; growth every 10 ms over 0..=100 and 600..=1000.
        let grew: Vec<u64> = (0..=10)
            .map(|i| i * 10_000)
            .chain((0..=40).map(|i| 600_000 + i * 10_000))
            .collect();
        let u = uptime(&grew, (0, 1_000_000), 100_000);
        assert_eq!(u.gaps.len(), 1);
        assert_eq!(u.gaps[0].start_us, 100_000);
        assert_eq!(u.gaps[0].ms, 500.0);
        assert_eq!(u.longest_gap_ms, 500.0);
        assert!((u.availability - 0.5).abs() < 1e-9, "{}", u.availability);
        // Short gaps cost nothing; the longest is still reported.
        let u = uptime(&[0, 50_000, 100_000], (0, 100_000), 100_000);
        assert_eq!((u.availability, u.longest_gap_ms), (1.0, 50.0));
        // Nothing written at all: the whole window is one gap.
        let u = uptime(&[], (0, 1_000_000), 100_000);
        assert_eq!(u.availability, 0.0);
        assert_eq!(u.longest_gap_ms, 1000.0);
    }
}
