//! `soak`: `--replicas` child processes campaign for one duty for `--seconds`; nobody is
//! killed and Redis stays up, so every term that ends before the final SIGTERM is a
//! spurious failover (the leader was alive and Redis reachable). With `--saturate`
//! every child's application runtime is busy (a CPU-bound task on every worker, and a
//! leader's duty that blocks its worker for two leases every 3 s); with
//! `--dedicated` the electors run on threads of their own.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep};

use crate::clock::now_us;
use crate::duty::event::Event;
use crate::duty::process::{ChildMode, LeaderProcess};
use crate::stats::{Percentiles, round3};
use crate::store::{BoxError, Servers, TargetArgs, Topology};

/// Longest a child may take to exit after SIGTERM.
const EXIT: Duration = Duration::from_secs(10);
/// How often progress is printed.
const PROGRESS: Duration = Duration::from_secs(60);

/// The report of `soak`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakReport {
    /// Always `soak`.
    pub scenario: String,
    /// The Redis set-up.
    pub topology: Topology,
    /// The lease.
    pub lease_ms: u64,
    /// How long the replicas ran.
    pub seconds: u64,
    /// Replica processes.
    pub replicas: usize,
    /// Electors on threads of their own.
    pub dedicated: bool,
    /// Busy application runtimes.
    pub saturate: bool,
    /// Terms started before the final SIGTERM (the first one included).
    pub terms: usize,
    /// Terms that ended before the final SIGTERM: the leader process was alive and
    /// Redis reachable throughout.
    pub spurious_failovers: usize,
    /// Why those terms ended (the elector's reason), with counts.
    pub spurious_reasons: BTreeMap<String, usize>,
    /// Round trip of every renewal of every replica, as the elector measured it (from
    /// sending the renewal to handling its reply: a busy runtime shows here).
    pub renew_latency_ms: Percentiles,
    /// Renewals measured.
    pub renewals: usize,
    /// Time with no replica's duty running, from the first term's start to the final
    /// SIGTERM (the duty's own view: a start or end is when the duty saw it).
    pub leaderless_ms_total: f64,
    /// The longest such gap.
    pub leaderless_ms_max: f64,
}

/// What `soak` runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The lease, in milliseconds.
    pub lease_ms: u64,
    /// How long the replicas run, in seconds.
    pub seconds: u64,
    /// Replica processes campaigning for the one duty.
    pub replicas: usize,
    /// Electors on a thread and runtime of their own.
    pub dedicated: bool,
    /// Keep every application runtime busy.
    pub saturate: bool,
    /// The Redis set-up.
    pub target: TargetArgs,
}

/// Runs the soak and reports.
///
/// # Errors
/// If the servers or a child cannot start, nobody leads within a few leases, or a
/// child does not exit cleanly.
pub async fn run(settings: &Settings) -> Result<SoakReport, BoxError> {
    let lease = Duration::from_millis(settings.lease_ms);
    let servers = Servers::start(&settings.target)?;
    let spec = servers.spec.to_arg()?;
    let exe = std::env::current_exe()?;
    let duty = format!("bench-soak-{}-{}", std::process::id(), now_us() / 1000);
    let mode = ChildMode {
        dedicated: settings.dedicated,
        saturate: settings.saturate,
        soak: true,
        ..ChildMode::default()
    };
    let mut children = (0..settings.replicas)
        .map(|i| LeaderProcess::spawn(&exe, &spec, &duty, &format!("replica-{i}"), lease, mode))
        .collect::<Result<Vec<_>, _>>()?;
    let start = Instant::now();
    let end = start + Duration::from_secs(settings.seconds);
    while Instant::now() < end {
        sleep(PROGRESS.min(end - Instant::now())).await;
        let events: Vec<Event> = children.iter().flat_map(LeaderProcess::events).collect();
        eprintln!(
            "soak {:.0}/{} s: {} terms, {} spurious",
            start.elapsed().as_secs_f64(),
            settings.seconds,
            count(&events, |e| matches!(e, Event::Leading { .. })),
            count(&events, |e| matches!(
                e,
                Event::TermEnded { planned: false, .. }
            )),
        );
    }
    let stop_us = now_us();
    for c in &children {
        c.terminate().await?;
    }
    let mut all = Vec::new();
    for c in &mut children {
        let (status, _) = c.wait(EXIT).await?;
        if !status.success() {
            return Err(format!("a replica exited with {status} after SIGTERM").into());
        }
        all.push(c.events());
    }
    let report = summarise(settings, servers.topology, &all, stop_us)?;
    Ok(report)
}

fn count(events: &[Event], f: impl Fn(&Event) -> bool) -> usize {
    events.iter().filter(|e| f(e)).count()
}

/// The report from every child's events, in order per child.
fn summarise(
    settings: &Settings,
    topology: Topology,
    children: &[Vec<Event>],
    stop_us: u64,
) -> Result<SoakReport, BoxError> {
    let mut terms = Vec::new();
    let mut spurious_reasons = BTreeMap::<String, usize>::new();
    let mut rtts = Vec::new();
    for events in children {
        let mut open: Option<u64> = None;
        for e in events {
            match e {
                Event::Leading { at_us, .. } => open = Some(*at_us),
                Event::TermEnded {
                    at_us,
                    planned,
                    reason,
                    ..
                } => {
                    if let Some(from) = open.take() {
                        terms.push((from, *at_us));
                    }
                    if !planned {
                        *spurious_reasons.entry(reason.clone()).or_default() += 1;
                    }
                }
                Event::RenewRtt { us } => rtts.push(*us as f64 / 1000.0),
                _ => {}
            }
        }
        if let Some(from) = open {
            terms.push((from, stop_us));
        }
    }
    // Only what happened before the final SIGTERM: a follower that wins while the
    // others are being stopped is not part of the soak.
    let terms: Vec<(u64, u64)> = terms
        .into_iter()
        .filter(|t| t.0 < stop_us)
        .map(|(from, to)| (from, to.min(stop_us)))
        .collect();
    if terms.is_empty() {
        return Err("no replica led before the end".into());
    }
    let (total, longest) = leaderless(&terms, stop_us);
    Ok(SoakReport {
        scenario: "soak".to_owned(),
        topology,
        lease_ms: settings.lease_ms,
        seconds: settings.seconds,
        replicas: settings.replicas,
        dedicated: settings.dedicated,
        saturate: settings.saturate,
        terms: terms.len(),
        spurious_failovers: spurious_reasons.values().sum(),
        spurious_reasons,
        renew_latency_ms: Percentiles::of(&rtts),
        renewals: rtts.len(),
        leaderless_ms_total: round3(total as f64 / 1000.0),
        leaderless_ms_max: round3(longest as f64 / 1000.0),
    })
}

/// Total and longest time (µs) covered by no term in `terms` (start, end), from the
/// first start to `stop_us`.
fn leaderless(terms: &[(u64, u64)], stop_us: u64) -> (u64, u64) {
    let mut sorted = terms.to_vec();
    sorted.sort_unstable();
    let (mut total, mut longest) = (0, 0);
    let mut covered_to = sorted[0].0;
    for &(from, to) in &sorted {
        if from > covered_to {
            let gap = from - covered_to;
            total += gap;
            longest = longest.max(gap);
        }
        covered_to = covered_to.max(to);
    }
    if stop_us > covered_to {
        let gap = stop_us - covered_to;
        total += gap;
        longest = longest.max(gap);
    }
    (total, longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            lease_ms: 250,
            seconds: 10,
            replicas: 3,
            dedicated: false,
            saturate: false,
            target: TargetArgs {
                topology: Topology::Single,
                redis_url: None,
            },
        }
    }

    fn leading(at_us: u64) -> Event {
        Event::Leading {
            fence: at_us,
            at_us,
            sent_at_us: at_us,
        }
    }

    fn ended(at_us: u64, planned: bool, reason: &str) -> Event {
        Event::TermEnded {
            fence: 0,
            at_us,
            planned,
            reason: reason.to_owned(),
        }
    }

    #[test]
    fn terms_that_end_before_the_stop_are_spurious() {
        // a leads 0-100 (deadline passed), b takes over at 150 until the stop (planned
        // end after it), a leads again after the stop (not counted).
        let a = vec![
            leading(0),
            ended(100, false, "deadline passed"),
            leading(1_200),
            ended(1_300, true, "shutdown"),
            Event::RenewRtt { us: 500 },
        ];
        let b = vec![leading(150), ended(1_100, true, "shutdown")];
        let r = summarise(&settings(), Topology::Single, &[a, b], 1_000).unwrap();
        assert_eq!(r.terms, 2);
        assert_eq!(r.spurious_failovers, 1);
        assert_eq!(r.spurious_reasons.get("deadline passed"), Some(&1));
        assert_eq!(r.leaderless_ms_total, 0.05);
        assert_eq!(r.renewals, 1);
        assert_eq!(r.renew_latency_ms.max, 0.5);
    }

    #[test]
    fn leaderless_time_is_what_no_term_covers() {
        // Terms 0-10, 5-12 (overlapping views), 20-30; stop at 35: gaps 12-20, 30-35.
        assert_eq!(leaderless(&[(20, 30), (0, 10), (5, 12)], 35), (13, 8));
        assert_eq!(leaderless(&[(0, 35)], 35), (0, 0));
    }
}
