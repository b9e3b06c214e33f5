use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

/// One replica's partitions (index → weight) and capacity; `None`: settling.
#[derive(Debug, Clone)]
struct Rep {
    id: String,
    capacity: u32,
    held: Option<BTreeMap<usize, u64>>,
}

struct World {
    weights: Vec<u64>,
    reps: Vec<Rep>,
    /// Rounds the last settle took (the last one changed nothing).
    rounds: usize,
}

impl World {
    fn new(weights: Vec<u64>, capacities: &[u32]) -> Self {
        let reps = capacities
            .iter()
            .enumerate()
            .map(|(i, c)| Rep {
                id: format!("r{i:02}"),
                capacity: *c,
                held: Some(BTreeMap::new()),
            })
            .collect();
        Self {
            weights,
            reps,
            rounds: 0,
        }
    }

    fn free(&self) -> Vec<usize> {
        let held: BTreeSet<usize> = self
            .reps
            .iter()
            .filter_map(|r| r.held.as_ref())
            .flat_map(|h| h.keys().copied())
            .collect();
        (0..self.weights.len())
            .filter(|i| !held.contains(i))
            .collect()
    }

    fn load(r: &Rep) -> u64 {
        r.held.as_ref().map_or(0, |h| h.values().sum())
    }

    fn totals(&self) -> Totals {
        Totals {
            weight: self.weights.iter().sum(),
            max_weight: self.weights.iter().copied().max().unwrap_or(1),
            unowned: self.free().len(),
        }
    }

    fn members(&self) -> Vec<Loaded> {
        self.reps
            .iter()
            .map(|r| Loaded {
                replica: r.id.clone(),
                load: r.held.as_ref().map(|h| h.values().sum()),
                held: r.held.as_ref().map_or(0, BTreeMap::len),
                capacity: r.capacity,
            })
            .collect()
    }

    fn plan(&self, k: usize) -> WeightedPlan {
        let r = &self.reps[k];
        let mine: Vec<(usize, u64)> = r
            .held
            .as_ref()
            .map(|h| h.iter().map(|(i, w)| (*i, *w)).collect())
            .unwrap_or_default();
        weighted_plan(
            &r.id,
            Self::load(r),
            &mine,
            r.held.is_none(),
            r.capacity,
            &self.members(),
            self.totals(),
        )
    }

    /// The claim script: oldest free first, those that fit into the room; if none
    /// fit, the first one (with `fallback`).
    fn claim(&mut self, k: usize, room: u64, fallback: bool) -> u64 {
        if room == 0 && !fallback {
            return 0;
        }
        let free = self.free();
        let mut taken = Vec::new();
        let mut acc = 0;
        for &i in &free {
            let w = self.weights[i];
            if acc + w <= room {
                taken.push(i);
                acc += w;
            }
        }
        if taken.is_empty()
            && fallback
            && let Some(&i) = free.first()
        {
            taken.push(i);
            acc = self.weights[i];
        }
        let held = self.reps[k].held.as_mut().unwrap();
        for i in taken {
            held.insert(i, self.weights[i]);
        }
        acc
    }

    /// Every replica plans on the same view in turn (released partitions become
    /// free, claims take from the free set); until a round changes nothing. Returns
    /// the weight moved by hand-offs.
    fn settle(&mut self) -> u64 {
        let mut moved = 0;
        for round in 1..=1_000 {
            self.rounds = round;
            let mut changed = false;
            for k in 0..self.reps.len() {
                if self.reps[k].held.is_none() {
                    continue;
                }
                let plan = self.plan(k);
                let held = self.reps[k].held.as_mut().unwrap();
                for i in &plan.shed {
                    moved += held.remove(i).unwrap();
                    changed = true;
                }
                if plan.shed.is_empty() && self.claim(k, plan.room, plan.fallback) > 0 {
                    changed = true;
                }
            }
            if !changed {
                return moved;
            }
        }
        panic!("no steady state after 1000 rounds: {:?}", self.loads());
    }

    /// As [`World::settle`], but as replicas really run: each round, every replica
    /// plans on the same view (the last tick's), then the hand-offs land, then the
    /// claims, each taking from what is free by then.
    fn settle_together(&mut self) {
        for round in 1..=1_000 {
            self.rounds = round;
            let plans: Vec<WeightedPlan> = (0..self.reps.len()).map(|k| self.plan(k)).collect();
            let mut changed = false;
            for (k, plan) in plans.iter().enumerate() {
                if let Some(held) = self.reps[k].held.as_mut() {
                    for i in &plan.shed {
                        held.remove(i);
                        changed = true;
                    }
                }
            }
            for (k, plan) in plans.iter().enumerate() {
                if self.reps[k].held.is_some()
                    && plan.shed.is_empty()
                    && self.claim(k, plan.room, plan.fallback) > 0
                {
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
        panic!("no steady state after 1000 rounds: {:?}", self.loads());
    }

    fn loads(&self) -> Vec<(String, u64, f64)> {
        let t = self.totals();
        let c: u32 = self.reps.iter().map(|r| r.capacity).sum();
        self.reps
            .iter()
            .map(|r| {
                let share = t.weight as f64 * f64::from(r.capacity) / f64::from(c);
                (r.id.clone(), Self::load(r), share)
            })
            .collect()
    }

    /// Everything owned; every load within plain share + w_max, and, with equal
    /// capacities, above plain share − w_max; every member's within its share (as
    /// the rule computes it) ± w_S.
    fn assert_within_bounds(&self) {
        let t = self.totals();
        assert_eq!(t.unowned, 0, "everything owned: {:?}", self.loads());
        let equal = self.reps.windows(2).all(|r| r[0].capacity == r[1].capacity);
        for (id, load, share) in self.loads() {
            let wmax = t.max_weight as f64;
            assert!(
                load as f64 <= share + wmax + 1e-9,
                "{id}: load {load} > share {share} + w_max {wmax}: {:?}",
                self.loads()
            );
            assert!(
                !equal || load as f64 >= share - wmax - 1e-9,
                "{id}: load {load} < share {share} − w_max {wmax}: {:?}",
                self.loads()
            );
        }
        let shares = self.shares();
        let members: Vec<usize> = (0..self.reps.len()).filter(|&k| !shares[k].0).collect();
        let w_s = members
            .iter()
            .map(|&k| {
                let n = self.reps[k].held.as_ref().map_or(0, BTreeMap::len) as u64;
                (Self::load(&self.reps[k]) + 1).saturating_sub(n.max(1))
            })
            .max()
            .unwrap_or(1)
            .clamp(1, t.max_weight) as f64;
        for k in members {
            let (load, share) = (Self::load(&self.reps[k]) as f64, shares[k].1);
            assert!(
                (load - share).abs() <= w_s + 1e-9,
                "{}: load {load}, share {share}, w_S {w_s}: {:?}",
                self.reps[k].id,
                self.placement()
            );
        }
    }

    /// Partitions held and load per replica, with its capacity.
    fn placement(&self) -> Vec<(String, usize, u64, u32)> {
        self.reps
            .iter()
            .map(|r| {
                let n = r.held.as_ref().map_or(0, BTreeMap::len);
                (r.id.clone(), n, Self::load(r), r.capacity)
            })
            .collect()
    }

    /// The target: no replica holds nothing while another holds two partitions or
    /// more, one of which, moved to the empty one, would lower the larger of their
    /// loads per unit of capacity (with equal capacities: any of them would).
    fn assert_no_idle_replica(&self) -> Result<(), String> {
        for j in self.reps.iter().filter(|r| Self::load(r) == 0) {
            for i in &self.reps {
                let Some(h) = i.held.as_ref().filter(|h| h.len() >= 2) else {
                    continue;
                };
                let li = Self::load(i) as f64 / f64::from(i.capacity);
                if let Some((p, wp)) = h
                    .iter()
                    .find(|(_, wp)| (**wp as f64) / f64::from(j.capacity) < li - 1e-9)
                {
                    return Err(format!(
                        "{} holds nothing while {} could hand it {p} (weight {wp}): {:?}",
                        j.id,
                        i.id,
                        self.placement()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The shares the rule balances to, as each replica computes them: (whether it
    /// is isolated, its share).
    fn shares(&self) -> Vec<(bool, f64)> {
        let (balancing, _, _) = isolate(&self.members(), u128::from(self.totals().weight));
        (0..self.reps.len())
            .map(|k| (!balancing[k], self.plan(k).share))
            .collect()
    }

    /// At rest, against the shares the rule balances to: the member furthest above
    /// its share (ties: the lowest id, as the rule picks it) has no partition
    /// lighter than its gap to the one furthest below.
    fn assert_refined(&self) -> Result<(), String> {
        let shares = self.shares();
        let dev: Vec<(f64, usize)> = (0..self.reps.len())
            .filter(|&k| !shares[k].0 && self.reps[k].held.is_some())
            .map(|k| (Self::load(&self.reps[k]) as f64 - shares[k].1, k))
            .collect();
        let Some(top) = dev.iter().map(|d| d.0).reduce(f64::max) else {
            return Ok(());
        };
        let &(di, i) = dev.iter().find(|d| (d.0 - top).abs() < 1e-9).unwrap();
        let &(dj, j) = dev.iter().min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
        // Every member within 5 % of its share: the group counts as balanced.
        if dev
            .iter()
            .all(|&(d, k)| d.abs() * 20.0 <= shares[k].1 + 1e-9)
        {
            return Ok(());
        }
        let lightest = self.reps[i].held.as_ref().unwrap().values().copied().min();
        match lightest {
            Some(l) if (l as f64) < di - dj - 1e-9 => Err(format!(
                "{} could hand {l} to {} (gap {}): {:?}",
                self.reps[i].id,
                self.reps[j].id,
                di - dj,
                self.placement()
            )),
            _ => Ok(()),
        }
    }
}

/// The case CI's seed found: the member furthest above its share (r02, two
/// tenants of weight 3) cannot help the empty r03, whose gap to it is 2.67; r00,
/// less far above, could (a tenant of weight 1, gap 2.33). The rule used to wait on
/// r02; it now picks r00, whose average partition (1.33) already weighs less than
/// its gap, so everyone knows it can help.
#[test]
fn the_giver_is_one_that_surely_can_help() {
    let weights = vec![1, 2, 177, 576, 36, 3, 1, 3, 3];
    let mut w = World::new(weights.clone(), &[2, 1, 3, 1, 1, 3, 4]);
    for (k, held) in [
        (0, &[0, 1, 6][..]),
        (1, &[8]),
        (2, &[5, 7]),
        (4, &[3]),
        (5, &[2]),
        (6, &[4]),
    ] {
        let h = w.reps[k].held.as_mut().unwrap();
        for &i in held {
            h.insert(i, weights[i]);
        }
    }
    assert!(w.plan(2).shed.is_empty(), "r02 cannot help");
    assert_eq!(w.plan(0).shed.len(), 1, "r00 hands one over");
    w.settle_together();
    w.assert_within_bounds();
    assert!(
        w.assert_no_idle_replica().is_ok(),
        "{:?}",
        w.assert_no_idle_replica()
    );
    assert!(w.assert_refined().is_ok(), "{:?}", w.assert_refined());
}

/// How rare the unequal-capacity gap is: 5,000 random placements of the case
/// above, each settled one replica at a time and all together. Idle endings (a
/// replica holding nothing beside one that could hand it a partition) are counted;
/// the old choice of giver (the member furthest above its share, helpful or not)
/// left 99 of these 10,000 settles so, this one leaves 3.
#[test]
fn idle_endings_with_unequal_capacities_are_rare() {
    let mut seed: u64 = 12_345;
    let mut next = || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as u16
    };
    let (mut idle, mut settles) = (0, 0);
    for _ in 0..5_000 {
        let owners: Vec<u16> = (0..9).map(|_| next()).collect();
        for together in [false, true] {
            let mut w = World::new(vec![1, 2, 177, 576, 36, 3, 1, 3, 3], &[2, 1, 3, 1, 1, 3, 4]);
            scatter(&mut w, &owners);
            if together {
                w.settle_together();
            } else {
                w.settle();
            }
            settles += 1;
            idle += usize::from(w.assert_no_idle_replica().is_err());
        }
    }
    eprintln!("{idle} of {settles} settles left a replica idle");
    assert!(
        idle * 200 <= settles,
        "{idle} of {settles} settles left a replica idle"
    );
}

#[test]
fn a_heavy_tenant_alone_leaves_the_other_33_to_the_other_two() {
    // The case: 34 tenants, one of weight 250, on three replicas; a holds
    // the 33 light ones, b the heavy one, c nothing (it was just undrained).
    let mut weights = vec![1; 34];
    weights[2] = 250;
    let mut w = World::new(weights, &[1, 1, 1]);
    w.reps[0].held = Some((0..34).filter(|&i| i != 2).map(|i| (i, 1)).collect());
    w.reps[1].held = Some([(2, 250)].into_iter().collect());
    let moved = w.settle();
    let placement = w.placement();
    assert_eq!(placement[1], ("r01".into(), 1, 250, 1), "{placement:?}");
    let (a, c) = (placement[0].1, placement[2].1);
    assert_eq!(a + c, 33);
    assert!(a.abs_diff(c) <= 1, "{placement:?}");
    assert_eq!(moved, 16, "only what c takes moves");
    w.assert_within_bounds();
    w.assert_no_idle_replica().unwrap();
    let shares: Vec<f64> = w.shares().iter().map(|s| s.1).collect();
    assert_eq!(shares, vec![16.5, 250.0, 16.5]);
    for k in 0..3 {
        assert!(w.plan(k).shed.is_empty());
    }
}

#[test]
fn under_the_plain_rule_that_case_stayed_put() {
    // The same view with nobody isolated (as the rule was): everyone is within
    // share ± 250, and b cannot give its one tenant to c, so nothing moved.
    let mut weights = vec![1; 34];
    weights[2] = 250;
    let w = World::new(weights, &[1, 1, 1]);
    let members: Vec<Loaded> = vec![
        Loaded {
            replica: "a".into(),
            load: Some(33),
            held: 33,
            capacity: 1,
        },
        Loaded {
            replica: "b".into(),
            load: Some(250),
            held: 1,
            capacity: 1,
        },
        Loaded {
            replica: "c".into(),
            load: Some(0),
            held: 0,
            capacity: 1,
        },
    ];
    let (balancing, ws, cs) = isolate(&members, u128::from(w.totals().weight));
    assert_eq!(balancing, vec![true, false, true]);
    assert_eq!((ws, cs), (33, 2));
    // Two tenants of 250 on b are not isolated: b is above share + w_max and
    // hands one over.
    let members = vec![
        Loaded {
            replica: "a".into(),
            load: Some(33),
            held: 33,
            capacity: 1,
        },
        Loaded {
            replica: "b".into(),
            load: Some(500),
            held: 2,
            capacity: 1,
        },
        Loaded {
            replica: "c".into(),
            load: Some(0),
            held: 0,
            capacity: 1,
        },
    ];
    let (balancing, _, _) = isolate(&members, 533);
    assert_eq!(balancing, vec![true, true, true]);
}

#[test]
fn isolation_repeats_until_it_isolates_nobody() {
    // Shares 100: the 300 is isolated; then the others' shares are 33.3, and the 60
    // on its own is above that; then 20 each, and c and d hold several.
    let members = vec![
        Loaded {
            replica: "a".into(),
            load: Some(300),
            held: 1,
            capacity: 1,
        },
        Loaded {
            replica: "b".into(),
            load: Some(60),
            held: 1,
            capacity: 1,
        },
        Loaded {
            replica: "c".into(),
            load: Some(30),
            held: 10,
            capacity: 1,
        },
        Loaded {
            replica: "d".into(),
            load: Some(10),
            held: 10,
            capacity: 1,
        },
    ];
    let (balancing, w, c) = isolate(&members, 400);
    assert_eq!(balancing, vec![false, false, true, true]);
    assert_eq!((w, c), (40, 2));
}

#[test]
fn equal_weights_and_capacities_claim_up_to_the_share() {
    let mut w = World::new(vec![1; 12], &[1, 1, 1]);
    assert_eq!(w.settle(), 0, "a cold start hands nothing over");
    w.assert_within_bounds();
    assert!(w.loads().iter().all(|(_, l, _)| *l == 4), "{:?}", w.loads());
}

#[test]
fn a_heavy_tenant_counts_for_its_weight() {
    // One tenant as large as all the others together, on two replicas.
    let mut weights = vec![10];
    weights.extend([1; 10]);
    let mut w = World::new(weights, &[1, 1]);
    w.settle();
    w.assert_within_bounds();
    let loads: Vec<u64> = w.loads().iter().map(|(_, l, _)| *l).collect();
    assert_eq!(loads.iter().sum::<u64>(), 20);
    assert!(loads.iter().all(|l| (5..=15).contains(l)), "{loads:?}");
}

#[test]
fn capacities_take_shares_in_proportion() {
    let mut w = World::new(vec![1; 60], &[1, 1, 2, 2]);
    w.settle();
    w.assert_within_bounds();
    let loads: Vec<u64> = w.loads().iter().map(|(_, l, _)| *l).collect();
    assert_eq!(loads, vec![10, 10, 20, 20]);
}

#[test]
fn a_joiner_gets_about_its_share_and_only_that_moves() {
    let weights: Vec<u64> = (1..=40).map(|i| 1 + (i * 7) % 9).collect();
    let mut w = World::new(weights, &[1, 1, 1]);
    w.settle();
    let total: u64 = w.weights.iter().sum();
    w.reps.push(Rep {
        id: "r99".into(),
        capacity: 1,
        held: Some(BTreeMap::new()),
    });
    let moved = w.settle();
    w.assert_within_bounds();
    let share = total as f64 / 4.0;
    let wmax = 9.0;
    assert!(
        (moved as f64) <= share + wmax,
        "moved {moved} for a share of {share}: {:?}",
        w.loads()
    );
}

#[test]
fn a_settling_member_gets_no_hand_offs_yet_but_its_share_is_left_free() {
    let mut w = World::new(vec![1; 12], &[1, 1]);
    w.reps.push(Rep {
        id: "r02".into(),
        capacity: 1,
        held: None,
    });
    w.settle();
    let loads: Vec<u64> = w.loads().iter().map(|(_, l, _)| *l).collect();
    assert_eq!(loads, vec![4, 4, 0], "the settler's share stays free");
    assert_eq!(w.free().len(), 4);
}

/// The what-if test's join of "g" (capacity 2) beside three replicas of 8 (24
/// partitions of weight 1, shares 4.8 and 9.6): "c" handed its 3 over first and
/// sees the others not yet. The deficit left (6.6) is the excess of "a2" and "j"
/// (3.2 each) plus "c"'s 0.2: rounding that 0.2 up to a whole partition made "c"
/// shed one more, below its share, and take one back from "j" later (a move the
/// plan did not have). A donor gives whole units of its excess only.
#[test]
fn a_donor_never_sheds_below_its_share_for_a_fraction_of_a_unit() {
    let mine: Vec<(usize, u64)> = (0..5).map(|i| (i, 1)).collect();
    let mut g = member("g", 3, 3);
    g.capacity = 2;
    let members = [member("a2", 8, 8), member("c", 5, 5), member("j", 8, 8), g];
    let totals = Totals {
        weight: 24,
        max_weight: 1,
        unowned: 0,
    };
    let plan = weighted_plan("c", 5, &mine, false, 1, &members, totals);
    assert!(plan.shed.is_empty(), "{plan:?}");
    // The others still give their whole units: 3 each.
    let theirs: Vec<(usize, u64)> = (0..8).map(|i| (i, 1)).collect();
    for me in ["a2", "j"] {
        let plan = weighted_plan(me, 8, &theirs, false, 1, &members, totals);
        assert_eq!(plan.shed.len(), 3, "{me}: {plan:?}");
    }
}

fn member(id: &str, load: u64, held: usize) -> Loaded {
    Loaded {
        replica: id.into(),
        load: Some(load),
        held,
        capacity: 1,
    }
}

/// Nobody under (w_S is 40), nothing free: the giver (60 against a share of 28)
/// hands both members below their share (12 each, rooms of 16) a partition of 10
/// in the same round, not only the one furthest below; a third would fit no room.
#[test]
fn a_refining_round_hands_every_member_below_its_share_what_fits() {
    let mine: Vec<(usize, u64)> = (0..6).map(|i| (i, 10)).collect();
    let members = [
        member("r00", 60, 6),
        member("r01", 12, 3),
        member("r02", 12, 3),
    ];
    let totals = Totals {
        weight: 84,
        max_weight: 40,
        unowned: 0,
    };
    let plan = weighted_plan("r00", 60, &mine, false, 1, &members, totals);
    assert_eq!(plan.shed, [0, 1]);
    // The takers claim up to their share: each has room for one.
    let taker = weighted_plan("r01", 12, &[], false, 1, &members, totals);
    assert_eq!((taker.room, taker.shed.len()), (16, 0));
}

/// Within 5 % of every share nothing is refined, though a partition of 1 would
/// fit both the giver's excess and the taker's room; 6 % out, it is.
#[test]
fn nothing_is_refined_within_five_percent_of_every_share() {
    let mine: Vec<(usize, u64)> = (0..20).map(|i| (i, 1)).chain([(20, 81)]).collect();
    let totals = Totals {
        weight: 303,
        max_weight: 81,
        unowned: 0,
    };
    let members = [
        member("r00", 101, 21),
        member("r01", 101, 21),
        member("r02", 101, 21),
    ];
    let balanced = |loads: [u64; 3]| {
        let m: Vec<Loaded> = members
            .iter()
            .zip(loads)
            .map(|(m, l)| Loaded {
                load: Some(l),
                ..m.clone()
            })
            .collect();
        weighted_plan("r00", loads[0], &mine, false, 1, &m, totals).shed
    };
    // Shares of 101: 105 is 4 % above, 97 4 % below.
    assert!(balanced([105, 99, 99]).is_empty());
    assert!(balanced([105, 101, 97]).is_empty());
    // 107 is 6 % above: it hands over until it is within 2.5 % of its share (4
    // of its 6 units above), into the others' rooms (3 each, and 2.5 % past).
    assert_eq!(balanced([107, 98, 98]).len(), 4);
}

/// Shares of 500 (w_S 400): the giver, 70 above, hands over the partition of 65
/// that fits the room of 60 below r01's share once the room reaches 2.5 % past it
/// (72), and stops there, 5 above its share: one move. Filling the rooms exactly
/// took three light partitions (30, 25, 15) for the same balance within 5 %.
#[test]
fn a_refining_round_stops_within_half_the_tolerance_instead_of_moving_crumbs() {
    let mine = [
        (0, 400),
        (1, 65),
        (2, 30),
        (3, 25),
        (4, 20),
        (5, 15),
        (6, 15),
    ];
    let members = [
        member("r00", 570, 7),
        member("r01", 440, 9),
        member("r02", 480, 9),
        member("r03", 510, 9),
    ];
    let totals = Totals {
        weight: 2_000,
        max_weight: 400,
        unowned: 0,
    };
    let plan = weighted_plan("r00", 570, &mine, false, 1, &members, totals);
    assert_eq!(plan.shed, [1]);
    assert_eq!(
        plan.to,
        BTreeMap::from([(1, "r01".to_owned())]),
        "into r01's room"
    );
    let mut rooms = vec![(60, "r01"), (20, "r02")];
    assert_eq!(
        pack(&mine, 70, 0, &mut rooms),
        [(2, 0), (3, 0), (5, 1)],
        "rooms filled exactly"
    );
}

/// A shift in the shifting-load benchmark (seed 42): one replica at twice its share
/// (2,384 against 1,198, w_S 1,000), nobody under. Past share + w_S, it used to
/// release just the 186 above the bound (167 and 19), a round of its own before
/// the refining round; now it is that refining round, in one go.
#[test]
fn a_member_over_its_bound_with_nobody_under_refines_in_one_round() {
    let mine: Vec<(usize, u64)> = vec![
        (37, 17),
        (39, 91),
        (40, 1_000),
        (43, 17),
        (44, 59),
        (45, 40),
        (46, 20),
        (47, 19),
        (48, 167),
        (49, 30),
        (50, 26),
        (51, 500),
        (52, 67),
        (53, 24),
        (54, 24),
        (57, 32),
        (58, 18),
        (59, 111),
        (60, 50),
        (61, 53),
        (63, 19),
    ];
    let members = [
        member("replica-1", 304, 11),
        member("replica-2", 1_481, 22),
        member("replica-3", 625, 10),
        member("replica-4", 2_384, 21),
    ];
    let totals = Totals {
        weight: 4_794,
        max_weight: 1_000,
        unowned: 0,
    };
    let plan = weighted_plan("replica-4", 2_384, &mine, false, 1, &members, totals);
    let shed: u64 = mine
        .iter()
        .filter(|(i, _)| plan.shed.contains(i))
        .map(|&(_, w)| w)
        .sum();
    assert!(
        plan.shed.contains(&51) && !plan.shed.contains(&40),
        "{plan:?}"
    );
    // Down to within 2.5 % of its share (1,198 ± 30), not to the bound (2,198).
    assert!(
        (2_384 - 1_198 - 30..=2_384 - 1_198).contains(&shed),
        "{shed}"
    );
    // One giver per round: replica-2, above its share too, waits.
    let other = weighted_plan("replica-2", 1_481, &[(0, 1)], false, 1, &members, totals);
    assert_eq!(other.shed, []);
}

#[test]
fn stable_views_are_left_alone() {
    let mut w = World::new(vec![5, 3, 3, 2, 2, 1, 1, 1], &[1, 1, 1]);
    w.settle();
    for k in 0..3 {
        let plan = w.plan(k);
        assert!(plan.shed.is_empty(), "{:?}", w.loads());
        assert!(plan.room == 0 || w.free().is_empty());
    }
}

#[test]
fn choose_prefers_the_heaviest_that_fit_then_the_lightest() {
    let mine = [(0, 5), (1, 3), (2, 2), (3, 1)];
    assert_eq!(choose(&mine, 4, u64::MAX), vec![1, 3]);
    assert_eq!(choose(&mine, 5, u64::MAX), vec![0]);
    // Nothing fits into 0.5 of a weight unit's need... need 1 takes the 1.
    assert_eq!(choose(&mine, 1, u64::MAX), vec![3]);
    // Everything heavier than the need: the lightest.
    assert_eq!(choose(&[(7, 4), (8, 6)], 2, u64::MAX), vec![7]);
    // Never beyond the limit.
    assert_eq!(choose(&[(7, 4), (8, 6)], 2, 3), Vec::<usize>::new());
}

fn zipf_like() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(1u64..=100, 1..80)
}

/// Skewed: mostly light tenants (1 to 3), and one to three heavy ones (20 to 1000,
/// often more than a replica's share), anywhere in the order.
fn skewed() -> impl Strategy<Value = Vec<u64>> {
    (
        prop::collection::vec(1u64..=3, 1..70),
        prop::collection::vec((20u64..=1000, any::<u16>()), 1..4),
    )
        .prop_map(|(mut light, heavy)| {
            for (w, at) in heavy {
                let at = usize::from(at) % (light.len() + 1);
                light.insert(at, w);
            }
            light
        })
}

/// Rounds within which any case must settle: one per partition and replica, and a
/// few more (a cold start takes 2 or 3; 1024 cases took at most 0.75 × (P + N)).
fn round_bound(w: &World) -> usize {
    w.weights.len() + w.reps.len() + 4
}

/// Every partition with a random owner (or none), as after a drain, a weight
/// change or a crash.
fn scatter(w: &mut World, owners: &[u16]) {
    let n = w.reps.len();
    for (i, o) in owners.iter().enumerate().take(w.weights.len()) {
        let k = usize::from(*o) % (n + 1);
        if k < n {
            let wt = w.weights[i];
            w.reps[k].held.as_mut().unwrap().insert(i, wt);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// From a cold start, any weights and capacities settle within the bounds.
    #[test]
    fn any_cold_start_settles_within_share_plus_the_largest_weight(
        weights in zipf_like(),
        capacities in prop::collection::vec(1u32..=4, 1..8),
    ) {
        let mut w = World::new(weights, &capacities);
        w.settle();
        w.assert_within_bounds();
    }

    /// Once settled, with equal capacities, the most loaded replica (against its
    /// plain share; ties: the lowest id, as the rule picks it) has no partition
    /// lighter than its gap to the least loaded one: no single move of its would
    /// help. (With different capacities, see the next test.)
    #[test]
    fn a_settled_group_has_no_improving_move(
        weights in zipf_like(),
        n in 2usize..7,
        c in 1u32..=3,
    ) {
        let mut w = World::new(weights, &vec![c; n]);
        w.settle();
        let loads = w.loads();
        let dev = |(_, l, s): &(String, u64, f64)| *l as f64 - s;
        let top = loads.iter().map(dev).fold(f64::MIN, f64::max);
        let i = loads.iter().find(|x| (dev(x) - top).abs() < 1e-9).unwrap();
        let j = loads.iter().min_by(|a, b| dev(a).total_cmp(&dev(b))).unwrap();
        let gap = dev(i) - dev(j);
        let k = w.reps.iter().position(|r| r.id == i.0).unwrap();
        let lightest = w.reps[k].held.as_ref().unwrap().values().copied().min();
        let balanced = loads.iter().all(|x| dev(x).abs() * 20.0 <= x.2 + 1e-9);
        prop_assert!(
            balanced || lightest.is_none_or(|l| l as f64 >= gap - 1e-9),
            "{} could hand {lightest:?} to {} (gap {gap}): {loads:?}",
            i.0,
            j.0
        );
    }

    /// Skewed weights, any capacities, from a cold start or from any placement
    /// (replicas deciding one at a time, or together on one view): settled within
    /// the round bound, within share ± w_max, no replica idle while another could
    /// hand it a partition, and refined against the shares the rule balances to.
    #[test]
    fn skewed_weights_settle_quickly_and_leave_no_replica_idle(
        weights in skewed(),
        capacities in prop::collection::vec(1u32..=4, 1..8),
        owners in prop::collection::vec(any::<u16>(), 0..80),
        together in any::<bool>(),
    ) {
        let mut w = World::new(weights, &capacities);
        scatter(&mut w, &owners);
        if together {
            w.settle_together();
        } else {
            w.settle();
        }
        prop_assert!(
            w.rounds <= round_bound(&w),
            "{} rounds: {:?}",
            w.rounds,
            w.placement()
        );
        w.assert_within_bounds();
        // With unequal capacities the rule can still leave a small replica idle
        // beside larger ones holding several tenants: when every member that could
        // hand it one has an average partition no lighter than its gap, and the one
        // furthest above cannot (nobody else knows their lightest): rare, see
        // `idle_endings_with_unequal_capacities_are_rare`; the next test holds it
        // for equal capacities.
        if capacities.iter().all(|c| *c == capacities[0]) {
            prop_assert!(w.assert_no_idle_replica().is_ok(), "{}", w.assert_no_idle_replica().unwrap_err());
        }
        prop_assert!(w.assert_refined().is_ok(), "{}", w.assert_refined().unwrap_err());
        for k in 0..w.reps.len() {
            prop_assert!(w.plan(k).shed.is_empty(), "settled, yet {} sheds", w.reps[k].id);
        }
    }

    /// The same with equal capacities, where no replica may hold nothing while
    /// another holds two partitions or more.
    #[test]
    fn skewed_weights_on_equal_replicas_leave_none_empty(
        weights in skewed(),
        n in 2usize..8,
        owners in prop::collection::vec(any::<u16>(), 0..80),
    ) {
        let mut w = World::new(weights, &vec![1; n]);
        scatter(&mut w, &owners);
        w.settle_together();
        prop_assert!(w.rounds <= round_bound(&w), "{} rounds: {:?}", w.rounds, w.placement());
        w.assert_within_bounds();
        let placement = w.placement();
        let empty = placement.iter().any(|p| p.1 == 0);
        let two = placement.iter().any(|p| p.1 >= 2);
        prop_assert!(!(empty && two), "{placement:?}");
    }

    /// The same when every replica decides on one view at a time, as they do.
    #[test]
    fn replicas_deciding_together_settle_within_the_bounds(
        weights in zipf_like(),
        capacities in prop::collection::vec(1u32..=4, 1..8),
        joiners in 0usize..3,
    ) {
        let mut w = World::new(weights, &capacities);
        w.settle_together();
        w.assert_within_bounds();
        for j in 0..joiners {
            w.reps.push(Rep {
                id: format!("z{j}"),
                capacity: 1,
                held: Some(BTreeMap::new()),
            });
        }
        w.settle_together();
        w.assert_within_bounds();
    }

    /// Joins, leaves and weight changes: after each, the group settles within the
    /// bounds, and a settled group plans nothing more.
    #[test]
    fn membership_and_weight_changes_settle_within_the_bounds(
        weights in zipf_like(),
        capacities in prop::collection::vec(1u32..=3, 2..6),
        events in prop::collection::vec((0u8..3, any::<u16>(), 1u64..=100), 1..8),
    ) {
        let mut w = World::new(weights, &capacities);
        w.settle();
        let mut next = 100;
        for (kind, pick, weight) in events {
            match kind {
                0 => {
                    next += 1;
                    w.reps.push(Rep {
                        id: format!("r{next}"),
                        capacity: 1 + u32::from(pick % 3),
                        held: Some(BTreeMap::new()),
                    });
                }
                1 if w.reps.len() > 1 => {
                    w.reps.remove(usize::from(pick) % w.reps.len());
                }
                _ => {
                    let i = usize::from(pick) % w.weights.len();
                    w.weights[i] = weight;
                    for r in &mut w.reps {
                        if let Some(h) = r.held.as_mut()
                            && let Some(x) = h.get_mut(&i)
                        {
                            *x = weight;
                        }
                    }
                }
            }
            w.settle();
            w.assert_within_bounds();
            for k in 0..w.reps.len() {
                let plan = w.plan(k);
                prop_assert!(plan.shed.is_empty(), "settled, yet {:?} sheds", w.reps[k].id);
            }
        }
    }
}
