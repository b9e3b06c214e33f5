//! What the demo measures, as plain data and pure functions: the balance of a sample,
//! partitions moved between two samples, and the ownership timeline the plot draws.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// One poll of the store: who owns each partition (in the configured order), with
/// which fence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Owner of each partition, `None` while unowned.
    pub(crate) owners: Vec<Option<String>>,
    /// Fence of each partition's current (or last) term.
    pub(crate) fences: Vec<u64>,
    /// How many fences (terms) this run has seen per partition: fences are µs-clock
    /// values, too long for the live view, so it shows this ordinal instead.
    pub(crate) terms: Vec<usize>,
    /// Lease left of each partition.
    pub(crate) remaining: Vec<Option<Duration>>,
    /// Replicas in the store's heartbeat set (a crashed one stays until it expires).
    pub(crate) heartbeats: Vec<String>,
}

impl Sample {
    /// An empty sample over `n` partitions.
    pub(crate) fn empty(n: usize) -> Self {
        Self {
            owners: vec![None; n],
            fences: vec![0; n],
            terms: vec![0; n],
            remaining: vec![None; n],
            heartbeats: Vec::new(),
        }
    }

    /// Takes a new poll's fences, counting a term for each partition whose fence
    /// changed since `self`.
    pub(crate) fn count_terms(&self, fences: &[u64]) -> Vec<usize> {
        fences
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let old = self.terms.get(i).copied().unwrap_or(0);
                let changed = *f != 0 && self.fences.get(i) != Some(f);
                old + usize::from(changed)
            })
            .collect()
    }
}

/// How balanced a sample is over the replicas the demo knows to be running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Balance {
    /// Partitions owned by a running replica.
    pub(crate) owned: usize,
    /// All partitions.
    pub(crate) total: usize,
    /// Partitions per running replica, in the order given.
    pub(crate) counts: Vec<(String, usize)>,
    /// max − min of `counts`.
    pub(crate) spread: usize,
}

impl Balance {
    /// Measures `owners` against the running replicas `alive`. A partition still
    /// leased by a crashed replica counts as not owned: nobody serves it.
    pub(crate) fn of(owners: &[Option<String>], alive: &[String]) -> Self {
        let counts: Vec<(String, usize)> = alive
            .iter()
            .map(|r| {
                let n = owners
                    .iter()
                    .filter(|o| o.as_deref() == Some(r.as_str()))
                    .count();
                (r.clone(), n)
            })
            .collect();
        let owned = counts.iter().map(|(_, n)| n).sum();
        let max = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let min = counts.iter().map(|(_, n)| *n).min().unwrap_or(0);
        Self {
            owned,
            total: owners.len(),
            counts,
            spread: max - min,
        }
    }

    /// Every partition owned by a running replica, and spread ≤ 1.
    pub(crate) fn converged(&self) -> bool {
        self.owned == self.total && self.spread <= 1
    }
}

/// Whether every running replica's own view (`owned` partition names) matches what the
/// store says it owns: the owners have noticed, and their callbacks run.
pub(crate) fn views_agree(
    partitions: &[String],
    owners: &[Option<String>],
    views: &[(String, BTreeSet<String>)],
) -> bool {
    let owner_of: HashMap<&str, Option<&str>> = partitions
        .iter()
        .zip(owners)
        .map(|(p, o)| (p.as_str(), o.as_deref()))
        .collect();
    views.iter().all(|(replica, owned)| {
        let stored = owners
            .iter()
            .filter(|o| o.as_deref() == Some(replica.as_str()))
            .count();
        stored == owned.len()
            && owned
                .iter()
                .all(|p| owner_of.get(p.as_str()) == Some(&Some(replica.as_str())))
    })
}

/// Partitions whose owner differs between two samples (an unowned partition that
/// found an owner counts; one that lost its owner too).
pub(crate) fn moved(before: &[Option<String>], after: &[Option<String>]) -> usize {
    before.iter().zip(after).filter(|(a, b)| a != b).count()
}

/// One script event and what followed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// Since the demo started.
    pub(crate) at: Duration,
    /// What happened, e.g. `kill replica-2 (abort: no release)`.
    pub(crate) label: String,
    /// Where the hand-over stands.
    pub(crate) outcome: Outcome,
}

/// Progress of the hand-over an event started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Not converged yet; the balance last seen.
    Waiting(Balance),
    /// Every partition owned by a running replica with spread ≤ 1, this long after the
    /// event.
    Converged {
        /// Time from the event to convergence.
        after: Duration,
        /// Partitions whose owner changed.
        moved: usize,
        /// Spread at convergence.
        spread: usize,
    },
    /// Gave up waiting; the balance last seen.
    TimedOut(Balance),
}

/// A stretch of time during which one replica held one partition's lease.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Span {
    /// Partition index.
    pub(crate) partition: usize,
    /// The lease holder.
    pub(crate) owner: String,
    /// Since the demo started.
    pub(crate) start: Duration,
    /// Since the demo started.
    pub(crate) end: Duration,
}

/// A script event as the plot shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mark {
    /// Since the demo started.
    pub(crate) at: Duration,
    /// Short label.
    pub(crate) label: String,
    /// The replica this event took out, if any (its later lease time is drawn faded).
    pub(crate) removed: Option<String>,
}

/// Ownership of every partition over time, built from samples.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    /// Partition names, in order.
    pub(crate) partitions: Vec<String>,
    /// Closed spans, in the order they ended.
    pub(crate) spans: Vec<Span>,
    /// Script events.
    pub(crate) marks: Vec<Mark>,
    /// Time of the last sample.
    pub(crate) end: Duration,
    /// The open span of each partition: owner and start.
    open: Vec<Option<(String, Duration)>>,
}

impl Timeline {
    /// An empty timeline over these partitions.
    pub(crate) fn new(partitions: Vec<String>) -> Self {
        let open = vec![None; partitions.len()];
        Self {
            partitions,
            open,
            ..Self::default()
        }
    }

    /// Records the owners seen at `at`.
    pub(crate) fn record(&mut self, at: Duration, owners: &[Option<String>]) {
        for (i, owner) in owners.iter().enumerate().take(self.open.len()) {
            let same = match (&self.open[i], owner) {
                (Some((o, _)), Some(n)) => o == n,
                (None, None) => true,
                _ => false,
            };
            if !same {
                self.close(i, at);
                self.open[i] = owner.clone().map(|o| (o, at));
            }
        }
        self.end = self.end.max(at);
    }

    /// Closes every open span at `at` (the end of the recording).
    pub(crate) fn finish(&mut self, at: Duration) {
        for i in 0..self.open.len() {
            self.close(i, at);
        }
        self.end = self.end.max(at);
    }

    fn close(&mut self, i: usize, at: Duration) {
        if let Some((owner, start)) = self.open[i].take() {
            self.spans.push(Span {
                partition: i,
                owner,
                start,
                end: at,
            });
        }
    }

    /// Every owner that appears, sorted by replica number.
    pub(crate) fn owners(&self) -> Vec<String> {
        let mut owners: Vec<String> = self
            .spans
            .iter()
            .map(|s| s.owner.clone())
            .chain(self.open.iter().flatten().map(|(o, _)| o.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        owners.sort_by_key(|o| (replica_number(o), o.clone()));
        owners
    }
}

/// The number at the end of a replica id (`replica-3` → 3), for colours and order.
pub(crate) fn replica_number(replica: &str) -> usize {
    let digits: String = replica
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(spec: &[Option<&str>]) -> Vec<Option<String>> {
        spec.iter().map(|o| o.map(str::to_owned)).collect()
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("p{i}")).collect()
    }

    #[test]
    fn a_crashed_replicas_leases_do_not_count_as_owned() {
        let o = owners(&[Some("r1"), Some("r2"), Some("r1"), Some("r2")]);
        let all = Balance::of(&o, &["r1".into(), "r2".into()]);
        assert!(all.converged());
        assert_eq!(all.spread, 0);
        let after_crash = Balance::of(&o, &["r1".into()]);
        assert_eq!(after_crash.owned, 2);
        assert!(!after_crash.converged());
    }

    #[test]
    fn spread_counts_idle_replicas() {
        let o = owners(&[Some("r1"), Some("r1"), Some("r1"), Some("r2")]);
        let b = Balance::of(&o, &["r1".into(), "r2".into(), "r3".into()]);
        assert_eq!(b.counts[2], ("r3".into(), 0));
        assert_eq!(b.spread, 3);
        assert!(!b.converged());
        let b = Balance::of(
            &owners(&[Some("a"), Some("a"), Some("b")]),
            &["a".into(), "b".into()],
        );
        assert!(b.converged());
    }

    #[test]
    fn views_must_match_the_store() {
        let p = names(3);
        let o = owners(&[Some("a"), Some("b"), None]);
        let view =
            |r: &str, ps: &[&str]| (r.to_owned(), ps.iter().map(|s| s.to_string()).collect());
        assert!(views_agree(
            &p,
            &o,
            &[view("a", &["p0"]), view("b", &["p1"])]
        ));
        assert!(!views_agree(&p, &o, &[view("a", &[]), view("b", &["p1"])]));
        assert!(!views_agree(
            &p,
            &o,
            &[view("a", &["p2"]), view("b", &["p1"])]
        ));
        assert!(!views_agree(&p, &o, &[view("a", &["p0", "p2"])]));
    }

    #[test]
    fn terms_count_fence_changes() {
        let mut s = Sample::empty(3);
        s.terms = s.count_terms(&[0, 1_000_000, 5]);
        s.fences = vec![0, 1_000_000, 5];
        assert_eq!(s.terms, [0, 1, 1]);
        assert_eq!(s.count_terms(&[0, 1_000_000, 9]), [0, 1, 2]);
    }

    #[test]
    fn moved_counts_changed_owners() {
        let a = owners(&[Some("a"), Some("b"), None, Some("c")]);
        let b = owners(&[Some("a"), Some("c"), Some("a"), Some("c")]);
        assert_eq!(moved(&a, &b), 2);
        assert_eq!(moved(&a, &a), 0);
    }

    #[test]
    fn timeline_keeps_one_span_per_tenure() {
        let ms = Duration::from_millis;
        let mut t = Timeline::new(names(2));
        t.record(ms(0), &owners(&[None, None]));
        t.record(ms(10), &owners(&[Some("r1"), None]));
        t.record(ms(20), &owners(&[Some("r1"), Some("r2")]));
        t.record(ms(30), &owners(&[Some("r2"), Some("r2")]));
        t.record(ms(40), &owners(&[None, Some("r2")]));
        t.finish(ms(50));
        let got: Vec<_> = t
            .spans
            .iter()
            .map(|s| (s.partition, s.owner.as_str(), s.start, s.end))
            .collect();
        assert_eq!(
            got,
            [
                (0, "r1", ms(10), ms(30)),
                (0, "r2", ms(30), ms(40)),
                (1, "r2", ms(20), ms(50)),
            ]
        );
        assert_eq!(t.end, ms(50));
        assert_eq!(t.owners(), ["r1", "r2"]);
    }

    #[test]
    fn replica_numbers_sort_numerically() {
        assert_eq!(replica_number("replica-12"), 12);
        assert_eq!(replica_number("x"), 0);
        let mut t = Timeline::new(names(1));
        t.record(Duration::ZERO, &owners(&[Some("replica-10")]));
        t.record(Duration::from_millis(1), &owners(&[Some("replica-9")]));
        t.finish(Duration::from_millis(2));
        assert_eq!(t.owners(), ["replica-9", "replica-10"]);
    }
}
