//! The fault schedule of a chaos run: drawn from the seed alone, so the same seed (and
//! settings) always gives the same schedule.
//!
//! Faults come one after another: each starts, lasts its duration, is healed, and the
//! group gets a recovery gap (1–2 leases) before the next. Kinds are dealt from a
//! shuffled deck of all eight, reshuffled when it runs out, so a run long enough for
//! eight faults sees every kind.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// SIGKILL a replica; restart it (same id) when healed.
    Kill,
    /// SIGSTOP a replica for longer than the lease; SIGCONT when healed.
    Pause,
    /// Black-hole both of a replica's links (coordination and resource store).
    Blackhole,
    /// Delay both of a replica's links by 50–500 ms each way.
    Latency,
    /// Reset every connection of both of a replica's links (instant).
    Reset,
    /// Restart the coordination redis-server, losing all its data (instant).
    RedisRestart,
    /// SIGTERM a replica (graceful leave); restart it when healed.
    Term,
    /// Add a new replica; SIGTERM it when healed.
    Join,
}

impl FaultKind {
    /// Every kind, in a fixed order.
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::Blackhole,
        FaultKind::Latency,
        FaultKind::Reset,
        FaultKind::RedisRestart,
        FaultKind::Term,
        FaultKind::Join,
    ];

    /// The snake_case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Blackhole => "blackhole",
            FaultKind::Latency => "latency",
            FaultKind::Reset => "reset",
            FaultKind::RedisRestart => "redis_restart",
            FaultKind::Term => "term",
            FaultKind::Join => "join",
        }
    }
}

/// One planned fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// When it starts, from the start of the chaos window.
    pub at: Duration,
    /// What it is.
    pub kind: FaultKind,
    /// The replica it hits (index into the replicas; unused by `redis_restart` and
    /// `join`).
    pub replica: usize,
    /// How long until it is healed (zero for instant faults).
    pub duration: Duration,
    /// The added one-way delay of a `latency` fault.
    pub latency: Duration,
}

/// The faults of a `seconds`-long window for `replicas` replicas with lease `lease`,
/// drawn from `seed`. Every fault is healed before the window ends.
pub fn schedule(seed: u64, seconds: u64, replicas: usize, lease: Duration) -> Vec<Fault> {
    let mut rng = StdRng::seed_from_u64(seed);
    let window = Duration::from_secs(seconds);
    let mut deck: Vec<FaultKind> = Vec::new();
    let mut faults = Vec::new();
    let mut at = lease / 2;
    loop {
        if deck.is_empty() {
            deck = FaultKind::ALL.to_vec();
            deck.shuffle(&mut rng);
        }
        let kind = deck.pop().expect("refilled above");
        let leases = |rng: &mut StdRng, lo: f64, hi: f64| lease.mul_f64(rng.random_range(lo..hi));
        let duration = match kind {
            FaultKind::Kill => leases(&mut rng, 1.0, 3.0),
            FaultKind::Pause => leases(&mut rng, 1.2, 2.5),
            FaultKind::Blackhole | FaultKind::Latency => leases(&mut rng, 1.0, 3.0),
            FaultKind::Reset | FaultKind::RedisRestart => Duration::ZERO,
            FaultKind::Term => leases(&mut rng, 0.5, 2.0),
            FaultKind::Join => leases(&mut rng, 2.0, 4.0),
        };
        let latency = match kind {
            FaultKind::Latency => Duration::from_millis(rng.random_range(50..=500)),
            _ => Duration::ZERO,
        };
        let replica = rng.random_range(0..replicas);
        let gap = leases(&mut rng, 1.0, 2.0);
        if at + duration + gap > window {
            return faults;
        }
        faults.push(Fault {
            at,
            kind,
            replica,
            duration,
            latency,
        });
        at += duration + gap;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_millis(1000);

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        assert_eq!(schedule(42, 60, 5, LEASE), schedule(42, 60, 5, LEASE));
        assert_ne!(schedule(42, 60, 5, LEASE), schedule(43, 60, 5, LEASE));
    }

    #[test]
    fn faults_do_not_overlap_and_end_inside_the_window() {
        let faults = schedule(7, 60, 5, LEASE);
        assert!(faults.len() >= 8, "{faults:?}");
        for pair in faults.windows(2) {
            assert!(pair[0].at + pair[0].duration + LEASE <= pair[1].at);
        }
        let last = faults.last().unwrap();
        assert!(last.at + last.duration <= Duration::from_secs(60));
        assert!(faults.iter().all(|f| f.replica < 5));
    }

    #[test]
    fn a_long_enough_run_sees_every_kind() {
        for seed in 0..20 {
            let faults = schedule(seed, 60, 5, LEASE);
            for kind in FaultKind::ALL {
                assert!(
                    faults.iter().any(|f| f.kind == kind),
                    "seed {seed}: no {kind:?}"
                );
            }
        }
    }

    #[test]
    fn durations_follow_the_kind() {
        for f in schedule(1, 600, 3, LEASE) {
            match f.kind {
                FaultKind::Pause => assert!(f.duration > LEASE, "a pause outlasts the lease"),
                FaultKind::Reset | FaultKind::RedisRestart => {
                    assert_eq!(f.duration, Duration::ZERO)
                }
                FaultKind::Latency => {
                    assert!((50..=500).contains(&f.latency.as_millis()), "{f:?}")
                }
                _ => {}
            }
        }
    }
}
