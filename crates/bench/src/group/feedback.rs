//! `rebalance-load --load feedback`: tenants whose reported load answers to their moves, as
//! a real consumer's does.
//!
//! Each tenant (partition) has a queue. Entries arrive at the tenant's load of the
//! [`Schedule`] (Zipf rates, stationary, with per-second noise: every move after the
//! fleet settled is then a move for nothing), owned or not. Its owner serves the
//! queue at most `service_factor` times the tenant's mean arrival rate (its rank's
//! Zipf load, without noise): caught up, it processes entries as they arrive; with a
//! backlog, at that cap until the backlog is gone. While the tenant has no owner,
//! the backlog grows at the arrival rate.
//!
//! Every report interval, the owner's callback reports ([`Report`]) either the
//! entries it *processed* per second over the interval (`throughput`, the default:
//! what a naive consumer reports, so a catch-up after a move or a cold start looks
//! like a step of up to `service_factor` times the tenant's load), or the entries that
//! *arrived* per second (`arrival`: what the tenant costs, whoever serves it).
//!
//! The backlog travels with the tenant, as a consumer's cursor would:
//!
//! - when a term ends, its owner serves up to that instant and hands the queue off
//!   (`Ownership::hand_off`: [`hand_off_state`], the term's header then the backlog
//!   and its instant); the next owner, offered it (`Ownership::handed_over`), adds
//!   the arrivals of the gap in between: the tenant's unowned time, whatever it was;
//! - every report interval (and at the end of the term), the owner also commits the
//!   queue to a file of the fleet's ([`commit`], `commit_dir/<partition>`, as a
//!   consumer commits its offset): a new owner offered nothing (the previous owner
//!   crashed, or its callback was aborted before it handed off) starts from the last
//!   commit plus the arrivals since, re-serving what the previous owner processed
//!   after it (at least once);
//! - a first owner (no commit either) finds every entry that arrived since the fleet
//!   was spawned (`origin_us`): the cold start's catch-up.
//!
//! Everything is a function of the schedule and the wall clock every process shares,
//! so the model ([`Queue::advance`]) is exact, not sampled: arrival and service rates
//! are constant between the schedule's changes (whole seconds after its epoch).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::group::event::hand_off_state;
use crate::group::tenants::Schedule;

/// What the callbacks of `--load feedback` report as their partition's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// Entries processed per second over the last report interval, catch-ups
    /// included: what a naive consumer reports.
    Throughput,
    /// Entries that arrived per second over the last report interval, whoever
    /// processed them: what the tenant costs.
    Arrival,
}

impl Report {
    /// Its name in reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::Throughput => "throughput",
            Self::Arrival => "arrival",
        }
    }
}

/// How the tenants of `--load feedback` are served. Passed to the replica processes as
/// JSON (`partition-child --feedback`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feedback {
    /// An owner serves a tenant at most this many times its mean arrival rate.
    pub service_factor: f64,
    /// What the callbacks report.
    pub report: Report,
    /// Wall µs from which entries queue (the fleet's spawn): a tenant's first owner
    /// finds every entry since.
    pub origin_us: u64,
    /// The directory where owners commit their tenants' queues, one file per partition.
    pub commit_dir: PathBuf,
}

/// Where a new term's queue came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The previous term handed it over (`Ownership::handed_over`).
    HandedOver,
    /// Nothing was handed over: the last commit.
    Committed,
    /// Neither: every entry since the fleet was spawned (a first owner).
    Origin,
}

impl Source {
    /// Its name in reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::HandedOver => "handed_over",
            Self::Committed => "committed",
            Self::Origin => "origin",
        }
    }
}

/// What a stretch of time did to a queue.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Served {
    /// Entries that arrived.
    pub arrived: f64,
    /// Entries the owner processed (0 while unowned).
    pub processed: f64,
}

/// A tenant's queue: the entries waiting at an instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Queue {
    /// Entries waiting (arrived, not yet processed).
    pub backlog: f64,
    /// When (wall µs).
    pub at_us: u64,
}

impl Queue {
    /// An empty queue at wall µs `at_us`.
    pub fn empty_at(at_us: u64) -> Self {
        Self {
            backlog: 0.0,
            at_us,
        }
    }

    /// Moves the queue on to wall µs `to_us` (nothing if that is not later): entries
    /// arrive at `partition`'s load of `schedule`; if `owned`, the owner processes them
    /// at most `service_factor` times the partition's load without noise, backlog
    /// first. Exact: between the schedule's changes the rates are constant, and over
    /// such a stretch of `dt` s the owner processes min(cap × dt, backlog + arrivals).
    pub fn advance(
        &mut self,
        schedule: &Schedule,
        partition: usize,
        service_factor: f64,
        to_us: u64,
        owned: bool,
    ) -> Served {
        let mut served = Served::default();
        let mut t = self.at_us;
        while t < to_us {
            let next = schedule.next_change(t).min(to_us);
            let dt = (next - t) as f64 / 1e6;
            let base = schedule.base_load(partition, t);
            let arrived = base * schedule.noise(partition, t) * dt;
            let processed = if owned {
                (service_factor * base * dt).min(self.backlog + arrived)
            } else {
                0.0
            };
            self.backlog = (self.backlog + arrived - processed).max(0.0);
            served.arrived += arrived;
            served.processed += processed;
            t = next;
        }
        self.at_us = self.at_us.max(to_us);
        served
    }

    /// The queue as text: `"{backlog}@{at_us}"`.
    pub fn encode(&self) -> String {
        format!("{}@{}", self.backlog, self.at_us)
    }

    /// The queue [`encode`](Self::encode) wrote; `None` for anything else.
    pub fn decode(text: &str) -> Option<Self> {
        let (backlog, at_us) = text.trim().split_once('@')?;
        let backlog: f64 = backlog.parse().ok()?;
        (backlog.is_finite() && backlog >= 0.0).then_some(())?;
        Some(Self {
            backlog,
            at_us: at_us.parse().ok()?,
        })
    }
}

/// The state a term of `partition` with fence `fence` hands off: the header
/// [`hand_off_state`] writes (`"{partition}@{fence}:"`, so the `owned` lines name the
/// term it came from), then the queue ([`Queue::encode`]).
pub fn hand_off_queue(partition: &str, fence: u64, queue: &Queue) -> Vec<u8> {
    let mut state = hand_off_state(partition, fence, 0);
    state.extend_from_slice(queue.encode().as_bytes());
    state
}

/// The queue in state [`hand_off_queue`] wrote; `None` for other state.
pub fn queue_of_state(state: &[u8]) -> Option<Queue> {
    let text = std::str::from_utf8(state).ok()?;
    Queue::decode(text.split_once(':')?.1)
}

/// A new term's queue and where it came from: the one handed over, else the last one
/// committed, else an empty queue at `origin_us` (both then still to be moved on to
/// the term's start, unowned: [`Queue::advance`]).
pub fn starting_queue(
    handed_over: Option<Queue>,
    committed: Option<Queue>,
    origin_us: u64,
) -> (Queue, Source) {
    match (handed_over, committed) {
        (Some(q), _) => (q, Source::HandedOver),
        (None, Some(q)) => (q, Source::Committed),
        (None, None) => (Queue::empty_at(origin_us), Source::Origin),
    }
}

/// The file `partition`'s queue is committed to in `dir`.
fn commit_path(dir: &Path, partition: &str) -> PathBuf {
    dir.join(partition)
}

/// Commits `partition`'s queue to `dir` (written aside, then renamed into place, so a
/// reader never sees half of it); `writer` names the temporary file (the replica id).
///
/// # Errors
/// If the file cannot be written.
pub fn commit(dir: &Path, partition: &str, writer: &str, queue: &Queue) -> std::io::Result<()> {
    let aside = dir.join(format!("{partition}.{writer}.tmp"));
    std::fs::write(&aside, queue.encode())?;
    std::fs::rename(&aside, commit_path(dir, partition))
}

/// The queue last committed for `partition` in `dir`; `None` if none was (or it
/// cannot be read).
pub fn committed(dir: &Path, partition: &str) -> Option<Queue> {
    Queue::decode(&std::fs::read_to_string(commit_path(dir, partition)).ok()?)
}

/// The load a callback reports for an interval of `secs` seconds that `served`
/// describes (0 for an empty interval).
pub fn reported(report: Report, served: Served, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    match report {
        Report::Throughput => served.processed / secs,
        Report::Arrival => served.arrived / secs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::tenants::LoadMode;

    const SECOND: u64 = 1_000_000;
    const EPOCH: u64 = 1_000 * SECOND;

    fn schedule(noise_percent: u32) -> Schedule {
        Schedule {
            mode: LoadMode::Feedback,
            partitions: 8,
            seed: 3,
            zipf_s: 1.0,
            scale: 1000.0,
            hot: 2,
            shift_ms: 60_000,
            noise_percent,
            epoch_us: EPOCH,
        }
    }

    /// The partition of rank 1 (load 1000 without noise).
    fn top(s: &Schedule) -> usize {
        s.ranks(0).iter().position(|&r| r == 1).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn unowned_the_backlog_grows_at_the_arrival_rate() {
        let s = schedule(0);
        let p = top(&s);
        let mut q = Queue::empty_at(EPOCH + SECOND / 4);
        let served = q.advance(&s, p, 4.0, EPOCH + 2 * SECOND + SECOND / 4, false);
        assert!(close(q.backlog, 2000.0), "{q:?}");
        assert!(close(served.arrived, 2000.0));
        assert_eq!(served.processed, 0.0);
        assert_eq!(q.at_us, EPOCH + 2 * SECOND + SECOND / 4);
        // Backwards: nothing happens.
        let before = q;
        assert_eq!(q.advance(&s, p, 4.0, EPOCH, true), Served::default());
        assert_eq!(q, before);
    }

    #[test]
    fn an_owner_catches_up_at_its_cap_then_keeps_up() {
        let s = schedule(0);
        let p = top(&s);
        // 2 s of backlog (2000 entries), served at 4 × 1000 = 4000/s against 1000/s
        // arriving: gone after 2000 / 3000 s.
        let mut q = Queue {
            backlog: 2000.0,
            at_us: EPOCH,
        };
        let first = q.advance(&s, p, 4.0, EPOCH + SECOND / 2, true);
        // Half a second at the cap: 2000 processed, 500 arrived, 500 left.
        assert!(close(first.processed, 2000.0), "{first:?}");
        assert!(close(q.backlog, 500.0), "{q:?}");
        assert!(close(reported(Report::Throughput, first, 0.5), 4000.0));
        assert!(close(reported(Report::Arrival, first, 0.5), 1000.0));
        let second = q.advance(&s, p, 4.0, EPOCH + SECOND, true);
        // The 500 left and the 500 arriving: the backlog is gone within the interval.
        assert!(close(second.processed, 1000.0), "{second:?}");
        assert!(close(q.backlog, 0.0));
        let third = q.advance(&s, p, 4.0, EPOCH + 3 * SECOND / 2, true);
        assert!(close(reported(Report::Throughput, third, 0.5), 1000.0));
        assert!(close(q.backlog, 0.0));
    }

    #[test]
    fn a_short_gap_barely_shows_and_a_long_one_is_a_step() {
        let s = schedule(0);
        let p = top(&s);
        // The previous owner kept up and handed off at `end`; the gap is unowned.
        let first_report = |gap_us: u64| {
            let end = EPOCH + 10 * SECOND;
            let mut q = Queue::empty_at(end);
            q.advance(&s, p, 4.0, end + gap_us, false);
            let served = q.advance(&s, p, 4.0, end + gap_us + SECOND / 2, true);
            reported(Report::Throughput, served, 0.5) / 1000.0
        };
        // 10 ms without an owner: 2 % above the load in the first interval.
        assert!(
            close(first_report(10_000), 1.02),
            "{}",
            first_report(10_000)
        );
        // A whole lease (2 s): the first interval runs at the cap, 4 times the load.
        assert!(close(first_report(2 * SECOND), 4.0));
    }

    #[test]
    fn arrivals_follow_the_noise_second_by_second() {
        let s = schedule(20);
        let p = top(&s);
        let mut q = Queue::empty_at(EPOCH - SECOND / 2);
        let served = q.advance(&s, p, 4.0, EPOCH + 2 * SECOND + SECOND / 4, false);
        let expected = s.load(p, EPOCH - SECOND / 2) * 0.5
            + s.load(p, EPOCH)
            + s.load(p, EPOCH + SECOND)
            + s.load(p, EPOCH + 2 * SECOND) * 0.25;
        assert!(close(served.arrived, expected), "{served:?} vs {expected}");
        // Split anywhere, the same total: the model is exact, not sampled.
        let mut a = Queue::empty_at(EPOCH - SECOND / 2);
        let mut total = 0.0;
        for to in [EPOCH - 7, EPOCH + 333_333, EPOCH + 2 * SECOND + SECOND / 4] {
            total += a.advance(&s, p, 4.0, to, false).arrived;
        }
        assert!(close(total, expected));
        assert_eq!(s.next_change(EPOCH - 1), EPOCH);
        assert_eq!(s.next_change(EPOCH), EPOCH + SECOND);
        assert_eq!(s.next_change(EPOCH - SECOND - 1), EPOCH - SECOND);
    }

    #[test]
    fn the_queue_travels_in_the_hand_off_and_in_commits() {
        let q = Queue {
            backlog: 1234.5,
            at_us: 42,
        };
        let state = hand_off_queue("p0003", 17, &q);
        assert_eq!(
            crate::group::event::state_header(&state),
            "p0003@17",
            "the owned lines name the term"
        );
        assert_eq!(queue_of_state(&state), Some(q));
        assert_eq!(queue_of_state(b"p0003@17:...."), None);
        assert_eq!(Queue::decode("-1@5"), None);
        assert_eq!(Queue::decode("NaN@5"), None);

        let dir = tempfile::tempdir().unwrap();
        assert_eq!(committed(dir.path(), "p0003"), None);
        commit(dir.path(), "p0003", "replica-1", &q).unwrap();
        assert_eq!(committed(dir.path(), "p0003"), Some(q));
        let later = Queue {
            backlog: 0.0,
            at_us: 99,
        };
        commit(dir.path(), "p0003", "replica-2", &later).unwrap();
        assert_eq!(committed(dir.path(), "p0003"), Some(later));
    }

    #[test]
    fn a_new_term_prefers_the_hand_off_then_the_commit_then_the_origin() {
        let handed = Queue {
            backlog: 1.0,
            at_us: 10,
        };
        let commit = Queue {
            backlog: 2.0,
            at_us: 5,
        };
        assert_eq!(
            starting_queue(Some(handed), Some(commit), 0),
            (handed, Source::HandedOver)
        );
        assert_eq!(
            starting_queue(None, Some(commit), 0),
            (commit, Source::Committed)
        );
        assert_eq!(
            starting_queue(None, None, 7),
            (Queue::empty_at(7), Source::Origin)
        );
        // A first owner 3 s after the spawn finds 3 s of arrivals.
        let s = schedule(0);
        let p = top(&s);
        let (mut q, _) = starting_queue(None, None, EPOCH);
        q.advance(&s, p, 4.0, EPOCH + 3 * SECOND, false);
        assert!(close(q.backlog, 3000.0));
    }
}
