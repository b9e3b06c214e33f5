//! Synthetic tenant loads for `rebalance-load`: what every partition costs at every
//! instant, derived from a [`Schedule`] alone, so that the bench and its replica
//! processes (which report the loads through `Ownership::report_load`) agree without
//! talking to each other.
//!
//! The loads follow a Zipf law: the partition of rank k carries `scale / k^s`. The
//! ranks start as a seeded shuffle; with [`LoadMode::Shifting`], every `shift_ms` after
//! the epoch the `hot` top ranks go to `hot` partitions drawn afresh (seeded by the
//! shift's index), and the hot partitions they displace take the ranks the newcomers
//! left, so the rest of the tail keeps its loads. With a `noise_percent`, each
//! partition's load is scaled by its own factor in `1 ± noise` drawn anew every second
//! after the epoch (a hash of the seed, the partition and the second).
//! [`LoadMode::Feedback`] keeps the ranks as stationary does: the loads are then the
//! tenants' arrival rates, and what the replicas report follows from how their owners
//! serve them ([`feedback`](crate::group::feedback)).
//!
//! [`max_over_share`] is what the bench measures of a placement: the most any replica
//! carries over its equal share of the total.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::{IteratorRandom, SliceRandom};
use serde::{Deserialize, Serialize};

/// How the loads change over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LoadMode {
    /// The hot tenants change every shift.
    Shifting,
    /// The ranks never change; only the noise moves the loads.
    Stationary,
    /// The loads are arrival rates, stationary as with `Stationary`; each owner serves
    /// a queue and reports what it achieves (or the arrivals, `--report arrival`), so a
    /// catch-up after a move shows in the reports
    /// ([`feedback`](crate::group::feedback)).
    Feedback,
}

impl LoadMode {
    /// Its name in reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::Shifting => "shifting",
            Self::Stationary => "stationary",
            Self::Feedback => "feedback",
        }
    }

    /// Whether the hot ranks change tenant every shift.
    pub fn shifts(self) -> bool {
        self == Self::Shifting
    }
}

/// Everything the loads of a run follow from. Passed to the replica processes as
/// JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Shifting, stationary or feedback.
    pub mode: LoadMode,
    /// The partition count (the tenants are the partitions, by index).
    pub partitions: usize,
    /// Seeds the ranks, the shifts and the noise.
    pub seed: u64,
    /// The Zipf exponent s.
    pub zipf_s: f64,
    /// The load of rank 1.
    pub scale: f64,
    /// How many top ranks change hands at each shift.
    pub hot: usize,
    /// Time between shifts, in milliseconds.
    pub shift_ms: u64,
    /// Each load is scaled by a factor in `1 ± noise_percent / 100`, drawn every second.
    pub noise_percent: u32,
    /// Wall µs at which the schedule starts: shift k happens at `epoch_us + k ×
    /// shift_ms` (k ≥ 1); before the epoch the loads are those of shift 0.
    pub epoch_us: u64,
}

impl Schedule {
    /// The shift in force at wall µs `at_us`: 0 before the first shift (and always with
    /// [`LoadMode::Stationary`] and [`LoadMode::Feedback`]).
    pub fn shift_at(&self, at_us: u64) -> u64 {
        if !self.mode.shifts() {
            return 0;
        }
        at_us.saturating_sub(self.epoch_us) / self.shift_ms.max(1).saturating_mul(1000)
    }

    /// The rank (1-based) of every partition at shift `k`.
    pub fn ranks(&self, k: u64) -> Vec<usize> {
        let n = self.partitions;
        let mut ranks: Vec<usize> = (1..=n).collect();
        ranks.shuffle(&mut StdRng::seed_from_u64(self.seed));
        let hot = self.hot.min(n);
        for shift in 1..=k {
            let mut rng = StdRng::seed_from_u64(mix(self.seed ^ mix(shift)));
            let mut chosen = (0..n).sample(&mut rng, hot);
            chosen.shuffle(&mut rng);
            // The ranks the newcomers leave behind, for the hot partitions they displace.
            let mut freed: Vec<usize> = chosen
                .iter()
                .map(|&p| ranks[p])
                .filter(|&r| r > hot)
                .collect();
            freed.shuffle(&mut rng);
            let mut displaced: Vec<usize> = (0..n)
                .filter(|&p| ranks[p] <= hot && !chosen.contains(&p))
                .collect();
            displaced.sort_unstable_by_key(|&p| ranks[p]);
            for (p, r) in displaced.into_iter().zip(freed) {
                ranks[p] = r;
            }
            for (i, &p) in chosen.iter().enumerate() {
                ranks[p] = i + 1;
            }
        }
        ranks
    }

    /// How many of the `hot` top ranks changed partition at shift `k` (0 for k = 0).
    pub fn hot_changes(&self, k: u64) -> usize {
        if k == 0 {
            return 0;
        }
        let holders = |ranks: &[usize]| {
            let mut by_rank = vec![usize::MAX; self.hot.min(self.partitions)];
            for (p, &r) in ranks.iter().enumerate() {
                if let Some(slot) = by_rank.get_mut(r - 1) {
                    *slot = p;
                }
            }
            by_rank
        };
        let (before, after) = (holders(&self.ranks(k - 1)), holders(&self.ranks(k)));
        before.iter().zip(&after).filter(|(a, b)| a != b).count()
    }

    /// The load of a partition of rank `rank`, without noise.
    pub fn zipf(&self, rank: usize) -> f64 {
        self.scale / (rank as f64).powf(self.zipf_s)
    }

    /// The noise factor of `partition` at wall µs `at_us`: 1 ± noise, the same for the
    /// whole second (counted from the epoch) it falls in.
    pub fn noise(&self, partition: usize, at_us: u64) -> f64 {
        if self.noise_percent == 0 {
            return 1.0;
        }
        // Seconds before the epoch count down from u64::MAX: distinct all the same.
        let second = (at_us.wrapping_sub(self.epoch_us) as i64).div_euclid(1_000_000) as u64;
        let h = mix(self.seed ^ mix(partition as u64 ^ mix(second)));
        // 53 random bits as a uniform draw in [0, 1).
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + f64::from(self.noise_percent) / 100.0 * (2.0 * u - 1.0)
    }

    /// The load of `partition` (by index) at wall µs `at_us`, without noise: its
    /// rank's Zipf load.
    pub fn base_load(&self, partition: usize, at_us: u64) -> f64 {
        self.zipf(self.ranks(self.shift_at(at_us))[partition])
    }

    /// The load of `partition` (by index) at wall µs `at_us`.
    pub fn load(&self, partition: usize, at_us: u64) -> f64 {
        self.base_load(partition, at_us) * self.noise(partition, at_us)
    }

    /// The first instant after `at_us` (wall µs) at which the loads may change: the
    /// next whole second counted from the epoch (noise is drawn per second, and shifts
    /// come at whole seconds after the epoch, `shift_ms` being whole seconds in the
    /// bench). Between two such instants every load is constant.
    pub fn next_change(&self, at_us: u64) -> u64 {
        let offset = i128::from(at_us) - i128::from(self.epoch_us);
        let next = i128::from(self.epoch_us) + (offset.div_euclid(1_000_000) + 1) * 1_000_000;
        u64::try_from(next).unwrap_or(u64::MAX)
    }

    /// Every partition's load at wall µs `at_us`, by index.
    pub fn loads(&self, at_us: u64) -> Vec<f64> {
        let ranks = self.ranks(self.shift_at(at_us));
        ranks
            .iter()
            .enumerate()
            .map(|(p, &r)| self.zipf(r) * self.noise(p, at_us))
            .collect()
    }
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The partition index of a partition name (`p0042` → 42; see
/// [`partition_names`](crate::group::event::partition_names)).
pub fn partition_index(name: &str) -> Option<usize> {
    name.strip_prefix('p')?.parse().ok()
}

/// The largest load a replica of `replicas` carries over its share (the total of
/// `loads` over the replica count): `owners` maps a partition index to the replicas
/// that hold it (a partition held by two counts for both; one held by none, for none).
/// 0 without replicas or load.
pub fn max_over_share(
    loads: &[f64],
    owners: &BTreeMap<usize, Vec<String>>,
    replicas: &[String],
) -> f64 {
    let total: f64 = loads.iter().sum();
    if replicas.is_empty() || total <= 0.0 {
        return 0.0;
    }
    let share = total / replicas.len() as f64;
    let mut per: BTreeMap<&str, f64> = replicas.iter().map(|r| (r.as_str(), 0.0)).collect();
    for (p, holders) in owners {
        for h in holders {
            if let (Some(l), Some(x)) = (per.get_mut(h.as_str()), loads.get(*p)) {
                *l += x;
            }
        }
    }
    per.values().copied().fold(0.0, f64::max) / share
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(mode: LoadMode, noise_percent: u32) -> Schedule {
        Schedule {
            mode,
            partitions: 64,
            seed: 7,
            zipf_s: 1.0,
            scale: 1000.0,
            hot: 8,
            shift_ms: 60_000,
            noise_percent,
            epoch_us: 1_000_000_000,
        }
    }

    const SECOND: u64 = 1_000_000;

    #[test]
    fn ranks_stay_a_permutation_and_only_the_hot_ones_and_their_swaps_change() {
        let s = schedule(LoadMode::Shifting, 0);
        for k in 0..6 {
            let mut sorted = s.ranks(k);
            sorted.sort_unstable();
            assert_eq!(sorted, (1..=64).collect::<Vec<_>>(), "shift {k}");
        }
        for k in 1..6 {
            let (before, after) = (s.ranks(k - 1), s.ranks(k));
            for (p, (a, b)) in before.iter().zip(&after).enumerate() {
                // A partition changes rank only into or out of the hot ranks.
                assert!(a == b || *a <= 8 || *b <= 8, "shift {k}, partition {p}");
            }
            assert!(s.hot_changes(k) > 0, "shift {k} changed nothing hot");
            assert!(s.hot_changes(k) <= 8);
        }
        assert_eq!(s.hot_changes(0), 0);
    }

    #[test]
    fn the_schedule_is_the_same_in_every_process_that_reads_it() {
        let s = schedule(LoadMode::Shifting, 20);
        // A child gets the schedule as JSON and computes its partition's load alone.
        let child: Schedule = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        for at in [
            0,
            s.epoch_us,
            s.epoch_us + 59 * SECOND,
            s.epoch_us + 61 * SECOND,
        ] {
            let all = s.loads(at);
            for (p, x) in all.iter().enumerate() {
                assert_eq!(child.load(p, at), *x, "partition {p} at {at}");
            }
        }
        assert_ne!(s.ranks(1), schedule(LoadMode::Shifting, 20).ranks(0));
        let other = Schedule {
            seed: 8,
            ..s.clone()
        };
        assert_ne!(other.ranks(0), s.ranks(0), "another seed, other tenants");
    }

    #[test]
    fn shifts_come_every_shift_ms_after_the_epoch_and_never_when_stationary() {
        let s = schedule(LoadMode::Shifting, 0);
        assert_eq!(s.shift_at(0), 0);
        assert_eq!(s.shift_at(s.epoch_us + 59 * SECOND), 0);
        assert_eq!(s.shift_at(s.epoch_us + 60 * SECOND), 1);
        assert_eq!(s.shift_at(s.epoch_us + 299 * SECOND), 4);
        let before = s.loads(s.epoch_us);
        assert_ne!(before, s.loads(s.epoch_us + 60 * SECOND));
        let mut sorted = before.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        assert_eq!(sorted[0], 1000.0);
        assert_eq!(sorted[63], 1000.0 / 64.0);

        let still = schedule(LoadMode::Stationary, 0);
        assert_eq!(still.shift_at(still.epoch_us + 3600 * SECOND), 0);
        assert_eq!(still.loads(0), still.loads(still.epoch_us + 3600 * SECOND));
    }

    #[test]
    fn noise_stays_within_its_bounds_and_holds_for_a_second() {
        let s = schedule(LoadMode::Stationary, 20);
        let base = schedule(LoadMode::Stationary, 0).loads(0);
        let mut factors = Vec::new();
        for sec in 0..200 {
            let at = s.epoch_us + sec * SECOND;
            let loads = s.loads(at);
            assert_eq!(loads, s.loads(at + SECOND - 1), "second {sec}");
            for (x, b) in loads.iter().zip(&base) {
                let f = x / b;
                assert!((0.8 - 1e-9..=1.2 + 1e-9).contains(&f), "factor {f}");
                factors.push(f);
            }
        }
        let mean = factors.iter().sum::<f64>() / factors.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "mean factor {mean}");
        assert!(factors.iter().any(|f| *f > 1.15) && factors.iter().any(|f| *f < 0.85));
        assert_eq!(schedule(LoadMode::Stationary, 0).noise(3, 12345), 1.0);
    }

    #[test]
    fn max_over_share_is_the_heaviest_replica_over_an_equal_share() {
        let loads = [6.0, 2.0, 2.0, 2.0];
        let replicas = ["a".to_owned(), "b".to_owned()];
        let owners = |pairs: &[(usize, &str)]| {
            let mut m: BTreeMap<usize, Vec<String>> = BTreeMap::new();
            for (p, r) in pairs {
                m.entry(*p).or_default().push((*r).to_owned());
            }
            m
        };
        // a: 6, b: 6 of a share of 6 each.
        let even = owners(&[(0, "a"), (1, "b"), (2, "b"), (3, "b")]);
        assert_eq!(max_over_share(&loads, &even, &replicas), 1.0);
        // a: 8, b: 4.
        let skewed = owners(&[(0, "a"), (1, "a"), (2, "b"), (3, "b")]);
        assert!((max_over_share(&loads, &skewed, &replicas) - 8.0 / 6.0).abs() < 1e-12);
        // An unowned partition still counts in the total; a stranger's holdings do not.
        let partial = owners(&[(0, "a"), (1, "c")]);
        assert_eq!(max_over_share(&loads, &partial, &replicas), 1.0);
        assert_eq!(max_over_share(&loads, &even, &[]), 0.0);
        assert_eq!(partition_index("p0042"), Some(42));
        assert_eq!(partition_index("x"), None);
    }
}
