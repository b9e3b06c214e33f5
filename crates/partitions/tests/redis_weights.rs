//! Weighted partitions and replica capacities against a real redis-server started for
//! each test: loads within share ± the largest weight after a cold start, a join, a
//! weight change and a crash; the loads Redis keeps match the weights of what each
//! replica holds; nothing moves at stable membership and weights.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupStatus, ReplicaState};
use leasehold_testkit::RedisServer;
use support::Fleet;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(30);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// Zipf-like sizes (1.1): the i-th largest tenant weighs about 100 / i^1.1.
fn zipf(n: usize) -> Vec<u64> {
    (1..=n)
        .map(|i| ((100.0 / (i as f64).powf(1.1)).round() as u64).max(1))
        .collect()
}

/// A group of `weights.len()` partitions given those weights before any of the
/// fleet's replicas starts.
async fn weighted_group(
    redis: &RedisServer,
    weights: &[u64],
) -> (Fleet<RedisStore>, GroupAdmin<RedisStore>) {
    let fleet = Fleet::new(store(redis), weights.len(), LEASE);
    fleet.create_group().await;
    let admin = GroupAdmin::new(store(redis), "leasehold", "g").unwrap();
    for (p, w) in fleet.partitions.iter().zip(weights) {
        admin.set_weight(p, *w).await.unwrap();
    }
    (fleet, admin)
}

/// Loads per replica counted from the partitions (owner → weights summed), and whether
/// every replica taking part is within share ± the largest weight, every partition
/// owned, and the loads Redis keeps per session agree.
fn judge(status: &GroupStatus) -> (BTreeMap<String, u64>, Result<(), String>) {
    let mut loads: BTreeMap<String, u64> = BTreeMap::new();
    let mut wmax = 1;
    for p in &status.partitions {
        wmax = wmax.max(p.weight);
        if let Some(o) = &p.owner {
            *loads.entry(o.clone()).or_default() += p.weight;
        }
    }
    let taking: Vec<_> = status
        .members
        .iter()
        .filter(|m| !m.drained && matches!(m.state, ReplicaState::Active | ReplicaState::Away))
        .collect();
    let check = || {
        if status.partitions.iter().any(|p| p.owner.is_none()) {
            return Err("some partition has no owner".to_owned());
        }
        if status
            .members
            .iter()
            .any(|m| m.state == ReplicaState::Settling)
        {
            return Err("a replica is settling".to_owned());
        }
        let caps: u64 = taking.iter().map(|m| u64::from(m.capacity)).sum();
        for m in &taking {
            let load = loads.get(&m.replica).copied().unwrap_or(0);
            if m.load != load {
                return Err(format!(
                    "{}: Redis keeps load {} for {load}",
                    m.replica, m.load
                ));
            }
            let share = status.total_weight as f64 * f64::from(m.capacity) / caps as f64;
            if (load as f64 - share).abs() > wmax as f64 {
                return Err(format!(
                    "{}: load {load}, share {share:.1}, largest weight {wmax}",
                    m.replica
                ));
            }
        }
        Ok(())
    };
    let verdict = check();
    (loads, verdict)
}

/// Waits until the group is within its bounds and quiet; returns the loads.
async fn settled(
    admin: &GroupAdmin<RedisStore>,
    fleet: &Fleet<RedisStore>,
) -> BTreeMap<String, u64> {
    let start = Instant::now();
    loop {
        let Some(status) = admin.status().await.unwrap() else {
            sleep(Duration::from_millis(20)).await;
            continue;
        };
        let (loads, verdict) = judge(&status);
        // The replicas' own views agree with Redis, and Redis has only the fleet's
        // members (a crashed one's session has expired).
        let views_agree = fleet
            .replicas
            .iter()
            .all(|(r, h)| h.view().load == loads.get(r).copied().unwrap_or(0));
        let members_agree = status.members.len() == fleet.replicas.len()
            && status
                .members
                .iter()
                .all(|m| fleet.replicas.contains_key(&m.replica));
        // And quiet: no term started for two leases (refining hand-offs are done).
        let terms = fleet.ledger.terms();
        let quiet = terms
            .iter()
            .map(|t| t.start)
            .max()
            .is_none_or(|last| last.elapsed() > LEASE * 2);
        if verdict.is_ok() && views_agree && members_agree && quiet {
            return loads;
        }
        assert!(
            start.elapsed() < LIMIT,
            "not within bounds after {LIMIT:?}: {verdict:?}, loads {loads:?}, views {:?}",
            fleet
                .replicas
                .iter()
                .map(|(r, h)| (r.clone(), h.view().load))
                .collect::<Vec<_>>()
        );
        sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zipf_tenants_on_four_replicas_stay_within_share_plus_the_largest_weight() {
    let redis = RedisServer::start();
    let weights = zipf(32);
    let (mut fleet, admin) = weighted_group(&redis, &weights).await;
    fleet.start_all(&["a", "b", "c", "d"]);
    let loads = settled(&admin, &fleet).await;
    let total: u64 = weights.iter().sum();
    assert_eq!(loads.values().sum::<u64>(), total);
    assert!(fleet.replicas.values().all(|h| h.view().weighted));
    // Stable membership and weights: nothing moves.
    let terms = fleet.ledger.terms().len();
    sleep(LEASE * 3).await;
    assert_eq!(
        fleet.ledger.terms().len(),
        terms,
        "something moved at steady state"
    );

    // A join takes about its share of the load, and only about that moves.
    let before: BTreeMap<String, String> = admin
        .status()
        .await
        .unwrap()
        .unwrap()
        .partitions
        .iter()
        .map(|p| (p.partition.clone(), p.owner.clone().unwrap()))
        .collect();
    fleet.start("e");
    settled(&admin, &fleet).await;
    let after = admin.status().await.unwrap().unwrap();
    let moved: u64 = after
        .partitions
        .iter()
        .filter(|p| before.get(&p.partition) != p.owner.as_ref())
        .map(|p| p.weight)
        .sum();
    let share = total as f64 / 5.0;
    assert!(
        moved as f64 <= share + 100.0,
        "moved {moved} for a joiner's share of {share:.1} (largest weight 100)"
    );
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacities_one_one_two_two_take_shares_in_proportion() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 60, LEASE);
    for (r, c) in [("a", 1), ("b", 1), ("c", 2), ("d", 2)] {
        let config = fleet.builder(r).capacity(c).build().unwrap();
        fleet.start_with(config);
    }
    let admin = GroupAdmin::new(store(&redis), "leasehold", "g").unwrap();
    let loads = settled(&admin, &fleet).await;
    // Unweighted: a load is a count; shares 10, 10, 20, 20 (± 1).
    for (r, want) in [("a", 10), ("b", 10), ("c", 20), ("d", 20)] {
        let got = loads[r];
        assert!(
            got.abs_diff(want) <= 1,
            "{r}: {got} for a share of {want}: {loads:?}"
        );
    }
    let status = admin.status().await.unwrap().unwrap();
    assert!(status.weighted, "capacities differ: balanced by load");
    assert!(
        fleet.replicas["c"]
            .view()
            .share
            .is_some_and(|s| (s - 20.0).abs() < 1e-9)
    );
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_change_at_runtime_rebalances_and_loads_follow_at_once() {
    let redis = RedisServer::start();
    let (mut fleet, admin) = weighted_group(&redis, &[1; 24]).await;
    fleet.start_all(&["a", "b", "c"]);
    settled(&admin, &fleet).await;
    // One tenant grows to the size of all the others together.
    let owner = admin.owner("p00000").await.unwrap().owner.unwrap();
    assert_eq!(admin.set_weight("p00000", 23).await.unwrap(), 1);
    let status = admin.status().await.unwrap().unwrap();
    let member = status.members.iter().find(|m| m.replica == owner).unwrap();
    assert_eq!(
        member.load,
        8 + 22,
        "the owner's load moved with the weight, at once"
    );
    assert_eq!(status.total_weight, 46);
    let loads = settled(&admin, &fleet).await;
    // Share 46/3 ≈ 15.3, largest weight 23: the heavy tenant's owner keeps little else.
    let heavy = admin.owner("p00000").await.unwrap().owner.unwrap();
    assert!(loads[&heavy] <= 23 + 15, "{loads:?}");
    fleet.ledger.assert_no_double_ownership();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_replicas_load_is_taken_within_the_bounds() {
    let redis = RedisServer::start();
    let (mut fleet, admin) = weighted_group(&redis, &zipf(20)).await;
    fleet.start_all(&["a", "b", "c"]);
    settled(&admin, &fleet).await;
    fleet.replicas.remove("b").unwrap().abort();
    let start = Instant::now();
    let loads = settled(&admin, &fleet).await;
    assert_eq!(loads.len(), 2, "{loads:?}");
    assert!(start.elapsed() < LIMIT);
    fleet.ledger.assert_no_double_ownership();
}
