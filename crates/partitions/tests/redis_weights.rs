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
    let admin = GroupAdmin::new(store(redis), "g").unwrap();
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

/// No term started after the first `before` the ledger holds; otherwise the panic
/// lists the ones that did, with how their predecessors ended.
fn assert_nothing_moved_since(fleet: &Fleet<RedisStore>, before: usize) {
    let terms = fleet.ledger.terms();
    let late: Vec<_> = terms[before..]
        .iter()
        .map(|t| {
            let ended = terms[..before]
                .iter()
                .filter(|e| e.partition == t.partition)
                .max_by_key(|e| e.start)
                .map(|e| (e.replica.clone(), e.reason));
            (&t.partition, &t.replica, t.fence, ended)
        })
        .collect();
    assert!(
        late.is_empty(),
        "something moved at steady state: {late:#?}"
    );
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
            .all(|(r, h)| h.status().load == loads.get(r).copied().unwrap_or(0));
        let members_agree = status.members.len() == fleet.replicas.len()
            && status
                .members
                .iter()
                .all(|m| fleet.replicas.contains_key(&m.replica));
        // And quiet: every owned partition's callback runs (a view shows a partition
        // from its claim on, its callback starts a moment later), and no term started
        // for two leases (refining hand-offs are done).
        let terms = fleet.ledger.terms();
        let quiet = fleet.callbacks_agree()
            && terms
                .iter()
                .map(|t| t.start)
                .max()
                .is_some_and(|last| last.elapsed() > LEASE * 2);
        if verdict.is_ok() && views_agree && members_agree && quiet {
            return loads;
        }
        assert!(
            start.elapsed() < LIMIT,
            "not within bounds after {LIMIT:?}: {verdict:?}, loads {loads:?}, views {:?}",
            fleet
                .replicas
                .iter()
                .map(|(r, h)| (r.clone(), h.status().load))
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
    assert!(fleet.replicas.values().all(|h| h.status().weighted));
    // Stable membership and weights: nothing moves.
    let terms = fleet.ledger.terms().len();
    sleep(LEASE * 3).await;
    assert_nothing_moved_since(&fleet, terms);

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
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();
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
            .status()
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

/// Partitions and load per replica taking part, counted from the partitions.
fn placement(status: &GroupStatus) -> BTreeMap<String, (usize, u64)> {
    let mut out: BTreeMap<String, (usize, u64)> = status
        .members
        .iter()
        .filter(|m| !m.drained)
        .map(|m| (m.replica.clone(), (0, 0)))
        .collect();
    for p in &status.partitions {
        if let Some(o) = &p.owner {
            let e = out.entry(o.clone()).or_default();
            e.0 += 1;
            e.1 += p.weight;
        }
    }
    out
}

/// The case: 34 tenants on 3 replicas, c drained, one tenant's weight set to
/// 250, c undrained. The heavy tenant ends up alone on one replica (nothing else fits
/// beside it within its share), and the other 33 are split between the other two
/// within one partition: c does not stay empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heavy_tenant_alone_on_one_replica_leaves_the_other_33_to_the_other_two() {
    let redis = RedisServer::start();
    let mut fleet = Fleet::new(store(&redis), 34, LEASE);
    fleet.create_group().await;
    let admin = GroupAdmin::new(store(&redis), "g").unwrap();
    fleet.start_all(&["a", "b", "c"]);
    settled(&admin, &fleet).await;
    admin.drain("c").await.unwrap();
    settled(&admin, &fleet).await;
    assert_eq!(admin.set_weight("p00002", 250).await.unwrap(), 1);
    settled(&admin, &fleet).await;
    admin.undrain("c").await.unwrap();
    let start = Instant::now();
    let ok = |p: &BTreeMap<String, (usize, u64)>| {
        let heavy = p.values().filter(|(n, l)| *n == 1 && *l == 250).count() == 1;
        let rest: Vec<usize> = p
            .values()
            .filter(|(_, l)| *l != 250)
            .map(|(n, _)| *n)
            .collect();
        heavy
            && rest.len() == 2
            && rest.iter().sum::<usize>() == 33
            && rest[0].abs_diff(rest[1]) <= 1
    };
    let placed = loop {
        let loads = settled(&admin, &fleet).await;
        let status = admin.status().await.unwrap().unwrap();
        let placed = placement(&status);
        // Settled and quiet: this is where the group stays.
        if ok(&placed) || start.elapsed() > LEASE * 20 {
            assert_eq!(loads.values().sum::<u64>(), 283);
            break placed;
        }
        sleep(LEASE).await;
    };
    assert!(
        ok(&placed),
        "the heavy tenant alone, the other 33 split within one: {placed:?}"
    );
    let heavy = admin.owner("p00002").await.unwrap().owner.unwrap();
    for (r, h) in &fleet.replicas {
        let share = h.status().share.unwrap();
        if *r == heavy {
            assert!((share - 250.0).abs() < 1e-9, "{r}: share {share}");
        } else {
            assert!((share - 16.5).abs() < 1e-9, "{r}: share {share}");
        }
    }
    // Stable: nothing moves any more.
    let terms = fleet.ledger.terms().len();
    sleep(LEASE * 3).await;
    assert_nothing_moved_since(&fleet, terms);
    fleet.ledger.assert_no_double_ownership();
}

/// Weights set back to 1 everywhere: the group is unweighted again (status and every
/// replica's view say so, loads are counts, the count rule's cap and floor apply);
/// a weight set once more makes it weighted again, with loads counted afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_set_back_to_one_make_the_group_unweighted_again() {
    let redis = RedisServer::start();
    let mut weights = vec![1; 12];
    weights[0] = 5;
    weights[1] = 3;
    let (mut fleet, admin) = weighted_group(&redis, &weights).await;
    fleet.start_all(&["a", "b", "c"]);
    settled(&admin, &fleet).await;
    assert!(admin.status().await.unwrap().unwrap().weighted);
    assert_eq!(admin.set_weight("p00000", 1).await.unwrap(), 5);
    let status = admin.status().await.unwrap().unwrap();
    assert!(status.weighted, "p00001 still weighs 3");
    assert_eq!(status.total_weight, 14);
    assert_eq!(admin.set_weight("p00001", 1).await.unwrap(), 3);
    let status = admin.status().await.unwrap().unwrap();
    assert!(!status.weighted, "every weight is 1 again");
    assert_eq!(status.total_weight, 12);
    let start = Instant::now();
    loop {
        let status = admin.status().await.unwrap().unwrap();
        let counts = status.owned_counts();
        let views = fleet
            .replicas
            .values()
            .map(|h| h.status())
            .collect::<Vec<_>>();
        let unweighted = views
            .iter()
            .all(|v| !v.weighted && v.share.is_none() && v.cap == 4 && v.floor == 4);
        let balanced = counts.len() == 3 && counts.iter().all(|(_, n)| *n == 4);
        let loads_are_counts = status.members.iter().all(|m| {
            let n = counts
                .iter()
                .find(|(r, _)| *r == m.replica)
                .map_or(0, |(_, n)| *n);
            m.load == n as u64
        });
        if unweighted && balanced && loads_are_counts {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "not unweighted and balanced by count: {counts:?}, views {:?}",
            views
                .iter()
                .map(|v| (v.weighted, v.cap, v.floor, v.share, v.load))
                .collect::<Vec<_>>()
        );
        sleep(Duration::from_millis(20)).await;
    }
    // Weighted again: the loads Redis keeps are counted afresh and match.
    assert_eq!(admin.set_weight("p00002", 2).await.unwrap(), 1);
    let status = admin.status().await.unwrap().unwrap();
    assert!(status.weighted);
    assert_eq!(status.total_weight, 13);
    let loads = settled(&admin, &fleet).await;
    assert_eq!(loads.values().sum::<u64>(), 13);
    assert!(fleet.replicas.values().all(|h| h.status().weighted));
    fleet.ledger.assert_no_double_ownership();
}
