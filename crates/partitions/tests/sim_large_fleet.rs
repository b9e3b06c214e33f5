//! 100 replicas × 10,000 partitions on the in-memory store under tokio's paused clock,
//! through random kills, graceful leaves and joins: after every event the fleet
//! converges to every partition owned exactly once with a spread of at most one, and
//! no partition ever had two owners at once.

mod support;

use std::time::Duration;

use leasehold_partitions::MemoryGroupStore;
use rand::{RngExt, SeedableRng};
use support::Fleet;

const LEASE: Duration = Duration::from_millis(1_000);

#[tokio::test(start_paused = true)]
async fn hundred_replicas_ten_thousand_partitions_through_kills_and_joins() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut fleet = Fleet::new(MemoryGroupStore::new(), 10_000, LEASE);
    for i in 0..100 {
        fleet.start(&format!("r{i:03}"));
    }
    let took = fleet.converge(Duration::from_secs(30)).await;
    eprintln!(
        "cold start: balanced after {took:?}, counts {:?}",
        fleet
            .counts()
            .values()
            .collect::<std::collections::BTreeSet<_>>()
    );
    let mut next = 100;
    for event in 0..12 {
        let victim = fleet
            .replicas
            .keys()
            .nth(rng.random_range(0..fleet.replicas.len()))
            .unwrap()
            .clone();
        match event % 3 {
            0 => {
                // A killed replica's partitions are owned again within one lease and
                // one renew interval (the default, lease / 3).
                let orphans = fleet.replicas[&victim].status().owned;
                fleet.replicas.remove(&victim).unwrap().abort();
                let took = fleet.reowned(&orphans, Duration::from_secs(30)).await;
                let bound = LEASE + LEASE / 3;
                assert!(
                    took <= bound,
                    "event {event}: {} partitions of the killed {victim} owned again after \
                     {took:?}, bound {bound:?}",
                    orphans.len()
                );
            }
            1 => fleet.replicas.remove(&victim).unwrap().shutdown().await,
            _ => {
                fleet.start(&format!("r{next:03}"));
                next += 1;
            }
        }
        let took = fleet.converge(Duration::from_secs(30)).await;
        eprintln!(
            "event {event} ({}): balanced after {took:?}",
            ["kill", "leave", "join"][event % 3]
        );
    }
    fleet.ledger.assert_no_double_ownership();
}
