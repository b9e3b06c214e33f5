//! Tenant sizes for weighted runs: weights drawn from a Zipf law, seeded, and the load
//! each replica ends with against its capacity share.

use std::collections::{BTreeMap, HashMap};

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::group::ownership::Loads;
use crate::stats::round3;

/// The weight of the largest tenant; the k-th largest weighs `SCALE / k^s`, at least 1.
pub const SCALE: f64 = 1000.0;

/// Zipf(`s`) weights for `names`: the ranks 1..=n shuffled by `seed`, so that the large
/// tenants land on random partitions, the same ones for the same seed.
pub fn zipf(names: &[String], s: f64, seed: u64) -> HashMap<String, u64> {
    let mut ranks: Vec<usize> = (1..=names.len()).collect();
    ranks.shuffle(&mut StdRng::seed_from_u64(seed));
    names
        .iter()
        .zip(ranks)
        .map(|(n, k)| {
            (
                n.clone(),
                ((SCALE / (k as f64).powf(s)).round() as u64).max(1),
            )
        })
        .collect()
}

/// What `loads` (the setup) say of the loads each replica ends with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadReport {
    /// The largest replica load divided by its capacity share of the total weight.
    pub max_over_share: f64,
    /// The largest weight divided by the smallest share: the bound on
    /// `max_over_share` is 1 + this.
    pub max_weight_over_share: f64,
    /// Every replica within its share ± the largest weight.
    pub within_bound: bool,
    /// The weights, summed.
    pub total_weight: u64,
    /// The largest weight.
    pub max_weight: u64,
    /// Per replica: its load, capacity and share.
    pub replicas: BTreeMap<String, ReplicaLoad>,
}

/// One replica's load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaLoad {
    /// The weights of its partitions, summed.
    pub load: u64,
    /// Its capacity.
    pub capacity: u32,
    /// Its share of the total: total × capacity / the capacities summed.
    pub share: f64,
}

/// The report of `owners` (partition → replica) under `loads`, among `live`.
pub fn report(loads: &Loads, owners: &BTreeMap<String, String>, live: &[String]) -> LoadReport {
    let mut per: BTreeMap<String, u64> = live.iter().map(|r| (r.clone(), 0)).collect();
    for (p, r) in owners {
        if let Some(l) = per.get_mut(r) {
            *l += loads.weight(p);
        }
    }
    let shares = loads.shares(per.keys().map(String::as_str));
    let min_share = shares.values().copied().fold(f64::INFINITY, f64::min);
    let max_over_share = per
        .iter()
        .map(|(r, l)| *l as f64 / shares[r].max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max);
    LoadReport {
        max_over_share: round3(max_over_share),
        max_weight_over_share: round3(loads.max_weight as f64 / min_share.max(f64::MIN_POSITIVE)),
        within_bound: loads.within(&per),
        total_weight: loads.total,
        max_weight: loads.max_weight,
        replicas: per
            .iter()
            .map(|(r, l)| {
                let load = ReplicaLoad {
                    load: *l,
                    capacity: loads.capacity(r),
                    share: round3(shares[r]),
                };
                (r.clone(), load)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("p{i:04}")).collect()
    }

    #[test]
    fn zipf_weights_are_seeded_and_follow_the_ranks() {
        let a = zipf(&names(64), 1.1, 7);
        assert_eq!(a, zipf(&names(64), 1.1, 7), "same seed, same weights");
        assert_ne!(a, zipf(&names(64), 1.1, 8));
        let mut w: Vec<u64> = a.values().copied().collect();
        w.sort_unstable_by(|x, y| y.cmp(x));
        assert_eq!(w[0], 1000);
        assert_eq!(w[1], (1000.0 / 2f64.powf(1.1)).round() as u64);
        assert!(w.iter().all(|x| *x >= 1));
    }

    #[test]
    fn the_report_divides_each_load_by_its_capacity_share() {
        let loads = Loads {
            weights: HashMap::from([("p0".into(), 6), ("p1".into(), 3)]),
            capacities: HashMap::from([("b".into(), 2)]),
            total: 12,
            max_weight: 6,
        };
        let owners: BTreeMap<String, String> = [
            ("p0", "b"),
            ("p1", "a"),
            ("p2", "b"),
            ("p3", "b"),
            ("p4", "a"),
        ]
        .into_iter()
        .map(|(p, r)| (p.to_owned(), r.to_owned()))
        .collect();
        let r = report(&loads, &owners, &["a".into(), "b".into()]);
        // a: 3 + 1 = 4 of a share of 4; b: 6 + 1 + 1 = 8 of a share of 8.
        assert_eq!(r.replicas["a"].load, 4);
        assert_eq!(r.replicas["b"].share, 8.0);
        assert_eq!(r.max_over_share, 1.0);
        assert_eq!(r.max_weight_over_share, 1.5);
        assert!(r.within_bound);
    }
}
