//! The roster a replica keeps between ticks is the roster: a tick that sends none (it
//! has not changed since the version the replica names) must mean that a full read
//! would say the same, and one that sends only the members changed since must bring the
//! kept roster to what a full read says. Redis counts the roster's changes and notes
//! the members each changed, and keeps every member's entry ready (every script that
//! changes a member, its state, capacity, holdings or load does both), so one that
//! forgets would leave every replica deciding on a stale roster. Random operations of
//! every kind, on a real server and on the in-memory store; each replica keeps its own
//! roster (so a tick may catch up over many changes), and after each step one of them
//! ticks with its kept version and is compared with a full tick and with a status read
//! (which counts everything again from the group's keys, not from the kept entries).

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_testkit::RedisServer;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::protocol::{
    Change, ClaimRequest, GivenBack, MemberInfo, MoveCause, Protocol, ReplicaState, RosterUpdate,
    TickReply, TickRequest,
};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::ops;

const TTL: Duration = Duration::from_secs(5);
const REPLICAS: usize = 4;

/// A replica of the run: its current session (if any) and state.
#[derive(Default)]
struct Replica {
    token: Option<String>,
    state: Option<ReplicaState>,
    seq: u64,
    joins: u64,
}

/// What a roster says, without the time left (it changes with every tick).
fn said(members: &[MemberInfo]) -> Vec<(String, ReplicaState, usize, u64, u32)> {
    let mut out: Vec<_> = members
        .iter()
        .map(|m| (m.replica.clone(), m.state, m.held, m.load, m.capacity))
        .collect();
    out.sort();
    out
}

struct Run<'a, B> {
    b: &'a B,
    k: GroupKeys,
    rng: StdRng,
    replicas: Vec<Replica>,
    inc: String,
    lifetime: String,
    /// Each replica's roster: the version it last read, and the members.
    kept: Vec<(String, Vec<MemberInfo>)>,
    /// Ticks whose roster was the kept one.
    unchanged: usize,
    /// Ticks that sent only what changed.
    changes: usize,
}

impl<B: Protocol> Run<'_, B> {
    fn name(i: usize) -> String {
        format!("r{i}")
    }

    fn request(&self, i: usize, join: bool, state: ReplicaState, roster: &str) -> TickRequest {
        let r = &self.replicas[i];
        let token = r.token.clone().unwrap_or_default();
        TickRequest {
            capacity: 1 + u32::try_from(i % 2).unwrap(),
            incarnation: self.inc.clone(),
            lifetime: self.lifetime.clone(),
            roster: roster.to_owned(),
            ..TickRequest::of(&Self::name(i), &token, join, state, TTL)
        }
    }

    async fn tick(&mut self, req: &TickRequest) -> TickReply {
        let r = self.b.run(&self.k, req).await.unwrap();
        if let Some(set) = &r.set {
            set.incarnation.clone_into(&mut self.inc);
        }
        r.lifetime.clone_into(&mut self.lifetime);
        r
    }

    /// A member's tick with the kept version, then a full read: the same roster.
    async fn check(&mut self, step: &str) {
        let live: Vec<usize> = (0..REPLICAS)
            .filter(|&i| self.replicas[i].state.is_some())
            .collect();
        if live.is_empty() {
            return;
        }
        let i = live[self.rng.random_range(0..live.len())];
        let state = self.replicas[i].state.unwrap();
        let cached = self.request(i, false, state, &self.kept[i].0.clone());
        let r = self.tick(&cached).await;
        match &r.roster {
            RosterUpdate::Same => {
                self.unchanged += 1;
                assert_eq!(r.roster_version, self.kept[i].0, "{step}");
            }
            RosterUpdate::Changes { .. } => self.changes += 1,
            RosterUpdate::Full(_) => {}
        }
        r.roster.apply(&mut self.kept[i].1);
        self.kept[i].0.clone_from(&r.roster_version);
        let full = self.request(i, false, state, "");
        let f = self.tick(&full).await;
        assert!(
            matches!(f.roster, RosterUpdate::Full(_)),
            "a tick naming no version reads the whole roster"
        );
        assert_eq!(
            said(&self.kept[i].1),
            said(f.roster.members()),
            "after {step}: r{i}'s kept roster differs from a full read"
        );
        let head = self
            .b
            .run(&self.k, &ops::ReadStatusHead)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            said(&self.kept[i].1),
            said(&head.members),
            "after {step}: r{i}'s kept roster differs from the group's keys"
        );
    }

    async fn step(&mut self, n: usize) -> String {
        let i = self.rng.random_range(0..REPLICAS);
        let name = Self::name(i);
        let member = self.replicas[i].state.is_some();
        match self.rng.random_range(0..9) {
            0 | 1 if !member => {
                let r = &mut self.replicas[i];
                r.joins += 1;
                r.token = Some(format!("{name}:{:032x}", r.joins));
                let state = if self.rng.random_bool(0.5) {
                    ReplicaState::Settling
                } else {
                    ReplicaState::Active
                };
                let req = self.request(i, true, state, "");
                self.tick(&req).await;
                self.replicas[i].state = Some(state);
                format!("{name} joins as {state:?}")
            }
            0 => {
                let states = [
                    ReplicaState::Settling,
                    ReplicaState::Active,
                    ReplicaState::Active,
                    ReplicaState::Draining,
                    ReplicaState::Leaving,
                ];
                let state = states[self.rng.random_range(0..states.len())];
                let req = self.request(i, false, state, "");
                self.tick(&req).await;
                self.replicas[i].state = Some(state);
                format!("{name} ticks as {state:?}")
            }
            1 | 2 => {
                let r = &mut self.replicas[i];
                let Some(token) = r.token.clone() else {
                    return format!("{name} has no session to claim with");
                };
                r.seq += 1;
                let count = self.rng.random_range(1..5);
                let req = ClaimRequest::of(&name, &token, r.seq, count, TTL, &self.inc);
                self.b.run(&self.k, &req).await.unwrap();
                format!("{name} claims {count}")
            }
            3 => {
                let Some(token) = self.replicas[i].token.clone() else {
                    return format!("{name} has nothing to release");
                };
                let held = self.b.run(&self.k, &ops::Held::new(&token)).await.unwrap();
                let terms: Vec<_> = held
                    .into_iter()
                    .filter(|_| self.rng.random_bool(0.5))
                    .map(|(p, f, _)| GivenBack::plain((p, f), MoveCause::Released))
                    .collect();
                self.b
                    .run(
                        &self.k,
                        &ops::Release::new(
                            &token,
                            &terms,
                            Duration::from_secs(60),
                            Duration::from_secs(1),
                        ),
                    )
                    .await
                    .unwrap();
                format!("{name} releases {}", terms.len())
            }
            4 if member => {
                let token = self.replicas[i].token.take().unwrap();
                self.b
                    .run(&self.k, &ops::Leave::new(&name, &token, &token))
                    .await
                    .unwrap();
                self.replicas[i].state = None;
                format!("{name} leaves")
            }
            5 if member => {
                // A crash: its session ends at a short expiry, found by the next tick.
                let req = TickRequest {
                    ttl: Duration::from_millis(20),
                    ..self.request(i, false, ReplicaState::Away, "")
                };
                self.tick(&req).await;
                tokio::time::sleep(Duration::from_millis(40)).await;
                self.replicas[i] = Replica {
                    joins: self.replicas[i].joins,
                    ..Replica::default()
                };
                format!("{name} crashes")
            }
            6 => {
                let on = self.rng.random_bool(0.6);
                let op = format!("drain-{n}");
                self.b
                    .run(&self.k, &ops::Drain::new(Some(&op), &name, on, true))
                    .await
                    .unwrap();
                format!("{name} drained: {on}")
            }
            7 => {
                let p = format!("p{}", self.rng.random_range(0..24));
                let w = self.rng.random_range(1..5);
                let op = format!("weight-{n}");
                self.b
                    .run(&self.k, &ops::SetWeight::new(Some(&op), &p, w))
                    .await
                    .unwrap();
                format!("{p} weighs {w}")
            }
            _ => {
                let p = format!("p{}", self.rng.random_range(0..24));
                let op = format!("change-{n}");
                let mode = Change::Strict { op };
                if self.rng.random_bool(0.5) {
                    self.b
                        .run(&self.k, &ops::Remove::new(&mode, std::slice::from_ref(&p)))
                        .await
                        .unwrap();
                    format!("{p} removed")
                } else {
                    self.b
                        .run(&self.k, &ops::Add::new(&mode, std::slice::from_ref(&p)))
                        .await
                        .unwrap();
                    format!("{p} added")
                }
            }
        }
    }
}

/// One run; how many checked ticks found the roster unchanged, and how many sent
/// only what changed.
async fn run<B: Protocol>(b: &B, seed: u64) -> (usize, usize) {
    let k = GroupKeys::new("leasehold", &format!("roster-{seed}"));
    let names: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
    let create = Change::Seed {
        life: format!("life-{seed}"),
        grant_delay: Duration::from_millis(1),
        lease: TTL,
        gather: Duration::from_millis(1),
    };
    b.run(&k, &ops::Add::new(&create, &names)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut run = Run {
        b,
        k,
        rng: StdRng::seed_from_u64(seed),
        replicas: (0..REPLICAS).map(|_| Replica::default()).collect(),
        inc: String::new(),
        lifetime: String::new(),
        kept: vec![(String::new(), Vec::new()); REPLICAS],
        unchanged: 0,
        changes: 0,
    };
    let mut steps = BTreeMap::new();
    for n in 0..150 {
        let step = run.step(n).await;
        run.check(&format!("step {n}: {step}")).await;
        *steps
            .entry(step.split(' ').nth(1).unwrap_or("").to_owned())
            .or_insert(0) += 1;
    }
    assert!(steps.len() >= 8, "every kind of step ran: {steps:?}");
    (run.unchanged, run.changes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_roster_is_always_what_a_full_read_says() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url()).build().unwrap();
    let memory = MemoryGroupStore::new();
    for seed in 1..=4 {
        let on_redis = run(&store, seed).await;
        let in_memory = run(&memory, seed).await;
        // The check compares something: many ticks found the roster unchanged, and
        // many sent only what changed.
        for (store, (unchanged, changes)) in [("Redis", on_redis), ("memory", in_memory)] {
            assert!(
                unchanged > 10 && changes > 20,
                "seed {seed} on {store}: {unchanged} unchanged rosters, {changes} changes"
            );
        }
    }
}
