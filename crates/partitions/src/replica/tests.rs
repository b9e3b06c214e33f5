//! Scenario tests of the replica state machine: replies fed in by hand, actions checked.

use std::sync::Arc;
use std::time::Duration;

use leasehold_election::Fence;
use leasehold_election::ext::RenewGrid;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::time::Instant;

use super::list::{Configured, SetAnswer, SetOp};
use super::*;
use crate::store::CLAIM_BATCH;
use crate::store::protocol::{
    AddReply, ClaimReply, Conflict, MemberInfo, Origin, RestoreStep, RosterUpdate, SessionReply,
    TickReply,
};

const LEASE: Duration = Duration::from_millis(900);
const RI: Duration = Duration::from_millis(300);

fn settings() -> Settings {
    Settings {
        replica: "a".into(),
        lease: LEASE,
        renew_interval: RI,
        retry_interval: RI,
        settle: LEASE,
        rejoin_grace: None,
        instance: "host 1".into(),
        capacity: 1,
        move_budget: None,
        budget_by_weight: false,
    }
}

fn configured(version: u64) -> Configured {
    Configured {
        names: (0..4).map(|i| format!("p{i}")).collect::<Vec<_>>().into(),
        version,
        digest: "d".into(),
        lease: LEASE,
        gather: LEASE / 3,
    }
}

/// A page of the set at `set_version` and list `version`, holding `names` (weight 1).
fn page<S: Into<String>>(
    set_version: u64,
    version: u64,
    names: impl IntoIterator<Item = S>,
) -> crate::store::protocol::SetPage {
    crate::store::protocol::SetPage {
        life: "life".into(),
        set_version,
        version,
        digest: String::new(),
        lease: LEASE,
        highest_fence: Fence(0),
        weighted: false,
        weights_version: 0,
        drained: Vec::new(),
        names: names.into_iter().map(|n| (n.into(), 1)).collect(),
        // No checksum: every page is read (tests of the checksum set one).
        count: 0,
        checksum: None,
        preferences: Vec::new(),
    }
}

/// A replica machine driven by a test: its clock, its replies, its actions.
struct Driven {
    st: ReplicaMachine,
    now: Instant,
    rng: StdRng,
    p: usize,
}

fn member(r: &str, state: ReplicaState, held: usize) -> MemberInfo {
    MemberInfo {
        replica: r.into(),
        state,
        left: LEASE,
        held,
        load: held as u64,
        capacity: 1,
    }
}

/// A set as a tick reports it, with this replica's copy of it up to date.
fn set(p: usize) -> SetInfo {
    SetInfo {
        life: "life".into(),
        set_version: 1,
        ..SetInfo::plain(p, 0, "d")
    }
}

impl Driven {
    fn new(p: usize) -> Self {
        Self::with(p, settings(), configured(0))
    }

    fn with(p: usize, s: Settings, c: Configured) -> Self {
        let now = Instant::now();
        let mut rng = StdRng::seed_from_u64(1);
        let st = ReplicaMachine::new(s, c, RenewGrid::new(now, RI), now, &mut rng);
        let mut sim = Self { st, now, rng, p };
        sim.copy_the_set();
        sim
    }

    /// This replica reads the set once (as it does at its first tick), so that later
    /// ticks of an unchanged set ask for nothing.
    fn copy_the_set(&mut self) {
        let r = self.reply(SessionReply::Refused(Conflict::DuplicateReplica), vec![], 0);
        let (_, actions) = self.tick(r);
        assert_eq!(actions, vec![Action::Set(SetOp::Read { offset: 0 })]);
        let page = crate::store::protocol::SetPage {
            digest: "d".into(),
            ..page(1, 0, (0..self.p).map(|i| format!("p{i}")))
        };
        assert!(
            self.st
                .on_set(SetAnswer::Page(Some(page)), self.now)
                .is_empty()
        );
        assert_eq!(self.st.set_copy(), Some(("life".into(), 1)));
        // The driver takes in the first page's preferences (none here), indexed.
        assert_eq!(self.st.new_preferences(), Some(Vec::new()));
        assert!(self.st.set_preferences(Vec::new(), self.now).is_empty());
    }

    fn reply(&self, session: SessionReply, members: Vec<MemberInfo>, unowned: usize) -> TickReply {
        let soonest = members
            .iter()
            .filter(|m| m.replica != self.st.s.replica)
            .map(|m| m.left)
            .min();
        TickReply {
            soonest,
            roster_version: String::new(),
            session,
            resumed: None,
            set: Some(set(self.p)),
            roster: RosterUpdate::Full(members),
            unowned,
            grant_wait: Duration::ZERO,
            ending: 0,
            drained: false,
            revoked: Vec::new(),
            expired: 0,
            lifetime: String::new(),
            holdings: None,
            reserved: 0,
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    /// Moves the clock to the next wake-up if that is later.
    fn until_wake(&mut self) {
        let at = self.st.wake_at().expect("something to wake for");
        self.now = self.now.max(at);
    }

    /// Waits for the next tick (if not due yet), polls, answers it.
    fn tick(&mut self, r: TickReply) -> (Renewal, Vec<Action>) {
        self.tick_revoking(r, &[])
    }

    fn tick_revoking(&mut self, r: TickReply, revoked: &[usize]) -> (Renewal, Vec<Action>) {
        self.until_wake();
        let actions = self.st.poll(self.now);
        assert!(
            actions.iter().any(|a| matches!(a, Action::Tick(_))),
            "a tick was due: {actions:?}"
        );
        self.st
            .on_tick(Ok(r), revoked, None, self.now, self.now, &mut self.rng)
    }

    /// The request of the tick due now.
    fn next_request(&mut self) -> TickRequest {
        self.until_wake();
        self.st
            .poll(self.now)
            .into_iter()
            .find_map(|a| match a {
                Action::Tick(req) => Some(req),
                _ => None,
            })
            .expect("a tick was due")
    }

    /// Joins and settles with `others` active, then returns the first decisions.
    fn settled(&mut self, others: &[(&str, usize)], unowned: usize) -> Vec<Action> {
        let mut members = vec![member("a", ReplicaState::Settling, 0)];
        members.extend(
            others
                .iter()
                .map(|(r, h)| member(r, ReplicaState::Active, *h)),
        );
        let r = self.reply(SessionReply::Live, members, unowned);
        self.tick(r);
        self.advance(LEASE);
        let mut members = vec![member("a", ReplicaState::Active, 0)];
        members.extend(
            others
                .iter()
                .map(|(r, h)| member(r, ReplicaState::Active, *h)),
        );
        let r = self.reply(SessionReply::Live, members, unowned);
        self.tick(r).1
    }

    /// The claim in flight is answered with partitions `from..from + n`.
    fn claimed(&mut self, from: usize, n: usize, unowned: usize) -> Vec<Action> {
        let granted: Vec<(usize, Fence, u64)> = (from..from + n)
            .map(|i| (i, Fence(100 + i as u64), 1))
            .collect();
        self.answer(&granted, &[], unowned)
    }

    fn answer(
        &mut self,
        granted: &[(usize, Fence, u64)],
        returned: &[usize],
        unowned: usize,
    ) -> Vec<Action> {
        let reply = ClaimReply::Claimed {
            partitions: Vec::new(),
            returned: Vec::new(),
            unowned,
            moves: Vec::new(),
            fell_back: false,
        };
        let token = self.st.token().to_owned();
        self.st
            .on_claimed(Ok(reply), granted, returned, &token, self.now)
    }
}

fn claims(actions: &[Action]) -> Vec<&Claim> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Claim(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn starts(actions: &[Action]) -> Vec<usize> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { index, .. } => Some(*index),
            _ => None,
        })
        .collect()
}

#[test]
fn a_replica_joining_a_served_group_claims_its_share_without_settling() {
    // A restart in a rolling deploy: the others hold what the leaver freed and more.
    let mut sim = Driven::new(8);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Active, 3),
            member("c", ReplicaState::Active, 3),
        ],
        2,
    );
    let (_, actions) = sim.tick(r);
    assert!(!sim.st.settling(sim.now));
    assert_eq!(
        claims(&actions).first().map(|c| c.count),
        Some(2),
        "{actions:?}"
    );

    // Replicas started together (nobody serving yet) still settle.
    let mut sim = Driven::new(8);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Settling, 0),
        ],
        8,
    );
    let (_, actions) = sim.tick(r);
    assert!(sim.st.settling(sim.now));
    assert!(claims(&actions).is_empty(), "{actions:?}");
}

#[test]
fn a_settling_replica_claims_nothing_then_claims_its_share_in_batches() {
    // Two replicas, each with a floor of one batch and 100 more.
    let p = 2 * (CLAIM_BATCH + 100);
    let mut sim = Driven::new(p);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Active, 0),
        ],
        p,
    );
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Renewed { .. }));
    assert!(actions.is_empty(), "settling: {actions:?}");
    assert!(sim.st.settling(sim.now));
    sim.advance(LEASE);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Active, 0),
            member("b", ReplicaState::Active, 0),
        ],
        p,
    );
    let (_, actions) = sim.tick(r);
    assert_eq!(
        actions,
        vec![Action::Claim(Claim {
            seq: 1,
            count: CLAIM_BATCH,
            floor: Fence(1),
            room: None,
            fallback: false,
            bound: 0,
            regrant: Vec::new(),
            prefer: Vec::new(),
            only_preferred: false,
            leave_to: Vec::new(),
        })]
    );
    // One batch in flight at a time; the next one as soon as it is back.
    assert!(claims(&sim.st.poll(sim.now)).is_empty());
    let next = sim.claimed(0, CLAIM_BATCH, p - CLAIM_BATCH);
    assert_eq!(
        starts(&next).len(),
        CLAIM_BATCH,
        "an elector per partition won"
    );
    let [c] = claims(&next)[..] else {
        panic!("{next:?}");
    };
    assert_eq!(
        (c.seq, c.count, c.floor),
        (2, CLAIM_BATCH, Fence(100 + CLAIM_BATCH as u64)),
        "up to floor(P/2), with fences above every fence seen"
    );
    let last = sim.claimed(CLAIM_BATCH, 100, p - CLAIM_BATCH - 100);
    assert!(claims(&last).is_empty(), "allowance reached: {last:?}");
}

#[test]
fn a_claim_whose_reply_is_lost_is_sent_again_as_the_same_request() {
    let mut sim = Driven::new(4);
    let actions = sim.settled(&[], 4);
    let [first] = claims(&actions)[..] else {
        panic!("{actions:?}");
    };
    let first = first.clone();
    let token = sim.st.token().to_owned();
    let actions = sim
        .st
        .on_claimed(Err(ClaimFailure::Failed), &[], &[], &token, sim.now);
    assert!(actions.is_empty(), "{actions:?}");
    // Sent again shortly, the same request (the store answers it once).
    let at = sim.st.wake_at().expect("a resend is due");
    assert!(at <= sim.now + RI / 4, "{:?}", at - sim.now);
    sim.now = at;
    let again = sim.st.poll(sim.now);
    assert_eq!(claims(&again), vec![&first]);
    // Its answer starts the electors, anchored at the first send.
    let granted: Vec<_> = (0..4).map(|i| (i, Fence(9), 1)).collect();
    let actions = sim.answer(&granted, &[], 0);
    assert_eq!(starts(&actions), [0, 1, 2, 3]);
}

#[test]
fn nothing_is_claimed_before_the_groups_grant_wait() {
    let mut sim = Driven::new(10);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        10,
    );
    sim.tick(r);
    sim.advance(LEASE);
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0)],
        10,
    );
    r.grant_wait = Duration::from_millis(200);
    let (_, actions) = sim.tick(r);
    assert!(actions.is_empty(), "{actions:?}");
    assert_eq!(sim.st.wake_at(), Some(sim.now + Duration::from_millis(200)));
    sim.advance(Duration::from_millis(200));
    let actions = sim.st.poll(sim.now);
    assert_eq!(claims(&actions).first().map(|c| c.count), Some(10));
}

#[test]
fn a_group_that_does_not_exist_is_seeded_and_a_newer_list_is_applied_once() {
    let mut sim = Driven::with(4, settings(), configured(3));
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        0,
    );
    r.set = None;
    // (Its copy is of a group since lost: it restores that first; here a fresh one.)
    sim.st.set = SetSync::new(configured(3));
    let (_, actions) = sim.tick(r);
    let [Action::Set(SetOp::Seed { names, .. })] = actions.as_slice() else {
        panic!("{actions:?}");
    };
    assert_eq!(names.len(), 4);
    // While it is seeded, the next tick does not ask again.
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        4,
    );
    let (_, actions) = sim.tick(r);
    assert!(actions.is_empty(), "{actions:?}");
    // The seed is done; the new group takes the list's version.
    let next = sim.st.on_set(SetAnswer::Added(AddReply::Added(4)), sim.now);
    assert_eq!(next, vec![Action::Set(SetOp::Begin { version: 3 })]);
    let next = sim.st.on_set(SetAnswer::Ok(true), sim.now);
    assert_eq!(
        next,
        vec![Action::Set(SetOp::Done {
            version: 3,
            digest: "d".into()
        })]
    );
    assert!(sim.st.on_set(SetAnswer::Ok(true), sim.now).is_empty());
    // Same version, another list: the group's wins (and this replica says so).
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        4,
    );
    r.set = Some(SetInfo {
        digest: "other".into(),
        version: 3,
        ..set(4)
    });
    sim.tick(r);
    assert!(sim.st.list_differs());
}

/// The one step of `actions`, a seed's chunk: its names and the new group's life.
fn seed_step(actions: &[Action]) -> (Vec<String>, String) {
    match actions {
        [Action::Set(SetOp::Seed { names, life, .. })] => (names.clone(), life.clone()),
        other => panic!("expected one seed chunk: {other:?}"),
    }
}

/// Found by the wide bench (200 replicas, 10,000 partitions): a seed chunk that timed
/// out ended the seed, and an unversioned list only seeds, so the group kept half of
/// its set for good. The failed chunk goes again at the next tick, and the seed goes on.
#[test]
fn a_seed_chunk_that_failed_is_sent_again_and_the_seed_goes_on() {
    let many = || Configured {
        names: (0..600).map(|i| format!("p{i}")).collect::<Vec<_>>().into(),
        ..configured(0)
    };
    let mut sim = Driven::with(4, settings(), many());
    sim.st.set = SetSync::new(many());
    let mut lost = sim.reply(SessionReply::Live, Vec::new(), 0);
    lost.set = None;
    let (first, life) = seed_step(&sim.tick(lost.clone()).1);
    let added = |n| SetAnswer::Added(AddReply::Added(n));
    let (second, _) = seed_step(&sim.st.on_set(added(250), sim.now));
    assert_ne!(first, second);
    // The second chunk times out: nothing now, the same chunk at the next tick.
    assert!(sim.st.on_set(SetAnswer::Failed, sim.now).is_empty());
    let (_, actions) = sim.tick(sim.reply(SessionReply::Live, Vec::new(), 250));
    assert_eq!(
        seed_step(&actions),
        (second, life.clone()),
        "the failed chunk goes again"
    );
    // In flight again: the next tick does not send it twice.
    let (_, actions) = sim.tick(sim.reply(SessionReply::Live, Vec::new(), 250));
    assert!(actions.is_empty(), "{actions:?}");
    let (last, _) = seed_step(&sim.st.on_set(added(250), sim.now));
    assert_eq!(last.len(), 100, "the seed goes on, to the last chunk");
    assert!(sim.st.on_set(added(100), sim.now).is_empty());
    // A chunk that failed because Redis lost the group it began: the seed starts over,
    // from the first chunk.
    sim.st.set = SetSync::new(many());
    sim.tick(lost.clone());
    sim.st.on_set(added(250), sim.now);
    assert!(sim.st.on_set(SetAnswer::Failed, sim.now).is_empty());
    let (again, new) = seed_step(&sim.tick(lost).1);
    assert_eq!(again, first, "from the first chunk again");
    assert_ne!(new, life, "a new group");
}

#[test]
fn a_group_redis_lost_is_restored_from_the_copy_and_a_seed_is_overtaken() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    // Redis lost the group: this replica has a copy of it.
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0)],
        0,
    );
    r.set = None;
    let (_, actions) = sim.tick(r);
    let [Action::Set(SetOp::Restore(RestoreStep::Begin { of, names, .. }))] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert_eq!((of.life.as_str(), of.set_version, of.count), ("life", 1, 4));
    assert_eq!(names.len(), 4, "a small set in one step");
    assert!(sim.st.on_set(SetAnswer::Ok(true), sim.now).is_empty());
    // Another replica (without a copy) seeded it first: within the window, the copy
    // wins.
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0)],
        0,
    );
    r.set = Some(SetInfo {
        life: "seeded".into(),
        origin: Origin::Seed,
        ..set(4)
    });
    r.grant_wait = LEASE;
    let (_, actions) = sim.tick(r);
    assert!(
        matches!(
            actions.as_slice(),
            [Action::Set(SetOp::Restore(RestoreStep::Begin { .. }))]
        ),
        "{actions:?}"
    );
}

#[test]
fn a_lost_session_refuses_its_electors_and_starts_a_new_one_that_settles_briefly() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 4, 0);
    let old = sim.st.token().to_owned();
    sim.advance(RI);
    let r = sim.reply(SessionReply::Lost, vec![], 4);
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Refused));
    assert_eq!(
        actions,
        vec![Action::Revoke(
            (0..4).map(|i| (i, Fence(100 + i as u64))).collect()
        )],
        "its terms are refused for good: a failover may hand the same session back"
    );
    assert_ne!(sim.st.token(), old, "a lost session is never renewed again");
    assert_eq!(sim.st.wake_at(), Some(sim.now), "rejoin at once");
    let req = sim.next_request();
    assert!(req.join);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        4,
    );
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(sim.st.settling(sim.now + RI - Duration::from_millis(1)));
    assert!(
        !sim.st.settling(sim.now + RI),
        "a rejoin settles one renew interval"
    );
    // The old electors still run until they are refused, but hold nothing.
    assert_eq!(sim.st.ledger().electors(), 4);
    assert_eq!(sim.st.ledger().held_count(), 0);
}

#[test]
fn hand_overs_need_two_ticks_in_a_row_and_then_wait_out_a_cooldown() {
    let mut sim = Driven::new(12);
    sim.settled(&[("b", 6)], 6);
    sim.claimed(0, 6, 0);
    // c joined and finished settling: 6 / 6 / 0, floor 4.
    let view = || {
        vec![
            member("a", ReplicaState::Active, 6),
            member("b", ReplicaState::Active, 6),
            member("c", ReplicaState::Active, 0),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, first) = sim.tick(r);
    assert!(
        first.is_empty(),
        "one tick of imbalance is not enough: {first:?}"
    );
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, second) = sim.tick(r);
    let shed_at = sim.now;
    let [
        Action::Stop {
            indices: chosen,
            reason: MoveCause::HandOff,
            to,
        },
    ] = second.as_slice()
    else {
        panic!("{second:?}");
    };
    assert_eq!(chosen.len(), 2, "a hands over its half of c's floor");
    assert_eq!(
        to.iter().map(|(i, r)| (*i, r.as_str())).collect::<Vec<_>>(),
        chosen.iter().map(|&i| (i, "c")).collect::<Vec<_>>(),
        "both named for c, the member with room"
    );
    assert_eq!(sim.st.handoffs(), 2);
    // Counts lag behind the hand-over: no second one during the cooldown, even with
    // the imbalance seen twice more.
    while sim.st.wake_at().is_some_and(|w| w < shed_at + 2 * RI) {
        let r = sim.reply(SessionReply::Live, view(), 0);
        let (_, actions) = sim.tick(r);
        assert!(actions.is_empty(), "{actions:?}");
    }
}

#[test]
fn with_a_move_budget_a_hand_over_asks_for_it_first_and_makes_only_what_it_grants() {
    let mut sim = Driven::with(
        12,
        Settings {
            move_budget: Some(1),
            ..settings()
        },
        configured(0),
    );
    sim.settled(&[("b", 6)], 6);
    sim.claimed(0, 6, 0);
    let view = || {
        vec![
            member("a", ReplicaState::Active, 6),
            member("b", ReplicaState::Active, 6),
            member("c", ReplicaState::Active, 0),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    sim.tick(r);
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, second) = sim.tick(r);
    let [
        Action::Budget {
            indices,
            want: 2,
            budget: 1,
        },
    ] = second.as_slice()
    else {
        panic!("the hand-over asks the budget first: {second:?}");
    };
    assert_eq!(indices.len(), 2, "for both of its half of c's floor");
    assert_eq!(
        sim.st.handoffs(),
        0,
        "nothing handed over before the answer"
    );
    // The budget grants one: one is handed over, the other waits for a later tick.
    let stops = sim.st.on_budget(indices.clone(), 1);
    let [
        Action::Stop {
            indices: chosen,
            reason: MoveCause::HandOff,
            ..
        },
    ] = stops.as_slice()
    else {
        panic!("{stops:?}");
    };
    assert_eq!(chosen, &indices[..1]);
    assert_eq!(sim.st.handoffs(), 1);
    // A budget used up (or a failed take) hands nothing over, and the rule asks again
    // at the very next tick (the next window), with no cooldown.
    assert!(sim.st.on_budget(indices[1..].to_vec(), 0).is_empty());
    assert_eq!(sim.st.handoffs(), 1);
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, next) = sim.tick(r);
    assert!(
        matches!(next.as_slice(), [Action::Budget { budget: 1, .. }]),
        "asks the budget again at once: {next:?}"
    );
}

#[test]
fn a_budget_by_weight_asks_for_the_weights_and_hands_over_what_fits() {
    let mut sim = Driven::with(
        12,
        Settings {
            move_budget: Some(4),
            budget_by_weight: true,
            ..settings()
        },
        configured(0),
    );
    sim.settled(&[("b", 6)], 6);
    let weights = [5, 1, 1, 1, 3, 1];
    let granted: Vec<(usize, Fence, u64)> = (0..6)
        .map(|i| (i, Fence(100 + i as u64), weights[i]))
        .collect();
    sim.answer(&granted, &[], 0);
    let view = || {
        vec![
            member("a", ReplicaState::Active, 6),
            member("b", ReplicaState::Active, 6),
            member("c", ReplicaState::Active, 0),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    sim.tick(r);
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, second) = sim.tick(r);
    let [
        Action::Budget {
            indices,
            want,
            budget: 4,
        },
    ] = second.as_slice()
    else {
        panic!("the hand-over asks the budget first: {second:?}");
    };
    let asked: u64 = indices.iter().map(|&i| weights[i]).sum();
    assert_eq!(*want as u64, asked, "the weights of {indices:?}");
    let stopped = |actions: Vec<Action>| -> Vec<usize> {
        match actions.as_slice() {
            [] => Vec::new(),
            [Action::Stop { indices, .. }] => indices.clone(),
            other => panic!("{other:?}"),
        }
    };
    // 1 + 1 fit into 2, the third does not.
    assert_eq!(stopped(sim.st.on_budget(vec![1, 2, 3], 2)), [1, 2]);
    // 3 does not fit into 2: nothing moves.
    assert_eq!(
        stopped(sim.st.on_budget(vec![4, 3], 2)),
        Vec::<usize>::new()
    );
    // A partition heavier than the whole budget moves alone once granted all of it.
    assert_eq!(
        stopped(sim.st.on_budget(vec![0, 3], 3)),
        Vec::<usize>::new()
    );
    assert_eq!(stopped(sim.st.on_budget(vec![0, 3], 4)), [0]);
    assert_eq!(sim.st.handoffs(), 3);
}

#[test]
fn unowned_partitions_are_claimed_above_the_cap_after_lease_plus_retry() {
    // b is live and active but never claims its share.
    let mut sim = Driven::new(10);
    sim.settled(&[("b", 0)], 10);
    let since = sim.now;
    sim.claimed(0, 5, 5);
    let view = vec![
        member("a", ReplicaState::Active, 5),
        member("b", ReplicaState::Active, 0),
    ];
    loop {
        let r = sim.reply(SessionReply::Live, view.clone(), 5);
        let (_, actions) = sim.tick(r);
        if let Some(c) = claims(&actions).first() {
            assert_eq!(c.count, 5, "every orphan, above the cap");
            break;
        }
        assert!(
            sim.now - since <= LEASE + 3 * RI,
            "never claimed the orphans"
        );
    }
    let waited = sim.now - since;
    assert!(waited > LEASE + RI, "claimed orphans too early: {waited:?}");
}

#[test]
fn orphan_clocks_stop_while_anyone_settles() {
    let mut sim = Driven::new(10);
    sim.settled(&[("b", 0)], 10);
    sim.claimed(0, 5, 5);
    for _ in 0..20 {
        let r = sim.reply(
            SessionReply::Live,
            vec![
                member("a", ReplicaState::Active, 5),
                member("b", ReplicaState::Settling, 0),
            ],
            5,
        );
        let (_, actions) = sim.tick(r);
        assert!(actions.is_empty(), "{actions:?}");
    }
}

#[test]
fn a_replica_refused_by_the_group_claims_nothing_and_asks_again_each_tick() {
    let mut sim = Driven::new(4);
    let r = sim.reply(
        SessionReply::Refused(Conflict::DuplicateReplica),
        vec![member("a", ReplicaState::Active, 4)],
        0,
    );
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Refused));
    assert!(actions.is_empty());
    assert_eq!(sim.st.conflict(), Some(Conflict::DuplicateReplica));
    assert!(sim.next_request().join);
}

#[test]
fn a_count_mismatch_seen_twice_with_nothing_in_flight_reconciles_by_term() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 2, 0);
    // The store says 3: a claim whose reply was lost took one more.
    for expect in [false, true] {
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", ReplicaState::Active, 3)],
            0,
        );
        let (_, actions) = sim.tick(r);
        assert_eq!(
            actions.contains(&Action::Reconcile { resume: false }),
            expect,
            "{actions:?}"
        );
    }
    // The store holds 0 (this term) and 3, not 1.
    let token = sim.st.token().to_owned();
    let held = vec![(0, Fence(100), 1), (3, Fence(77), 1)];
    let actions = sim.st.on_reconciled(Some(held), &token, sim.now);
    assert_eq!(
        actions,
        vec![
            Action::Revoke(vec![(1, Fence(101))]),
            Action::Claim(Claim {
                seq: 2,
                count: 0,
                floor: Fence(102),
                room: None,
                fallback: false,
                bound: 0,
                regrant: vec![(3, Fence(77))],
                prefer: Vec::new(),
                only_preferred: false,
                leave_to: Vec::new(),
            }),
        ],
        "refuse the term the store no longer lists; take up again what no elector runs"
    );
}

#[test]
fn a_tick_in_another_server_lifetime_keeps_only_the_terms_the_store_lists() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 3, 1);
    let live = |sim: &Driven, lifetime: &str, holdings| TickReply {
        lifetime: lifetime.to_owned(),
        holdings,
        ..sim.reply(
            SessionReply::Live,
            vec![member("a", ReplicaState::Active, 3)],
            1,
        )
    };
    let r = live(&sim, "run1:repl1", None);
    sim.tick(r);
    assert_eq!(sim.next_request().lifetime, "run1:repl1", "ticks name it");
    // A failover: the promoted replica never saw the claim of partition 2.
    let r = live(
        &sim,
        "run2:repl2",
        Some(vec![
            ("p0".into(), Fence(100), 1),
            ("p1".into(), Fence(101), 1),
        ]),
    );
    let held = [(0, Fence(100), 1), (1, Fence(101), 1)];
    let (renewal, actions) =
        sim.st
            .on_tick(Ok(r), &[], Some(&held), sim.now, sim.now, &mut sim.rng);
    assert!(matches!(renewal, Renewal::Renewed { .. }), "{renewal:?}");
    assert_eq!(
        actions.first(),
        Some(&Action::Revoke(vec![(2, Fence(102))])),
        "the lost term is refused before anything else: {actions:?}"
    );
    assert_eq!(sim.next_request().lifetime, "run2:repl2");
}

#[test]
fn no_reconcile_while_a_claim_is_in_flight_whose_answer_it_could_overtake() {
    // Finding 5: a weight change seen with a claim in flight.
    let mut sim = Driven::new(8);
    sim.settled(&[("b", 0)], 8);
    let actions = sim.claimed(0, 2, 6);
    assert_eq!(claims(&actions).len(), 1, "the next claim is in flight");
    let mut r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Active, 2),
            member("b", ReplicaState::Active, 0),
        ],
        6,
    );
    r.set = Some(SetInfo {
        weighted: true,
        total_weight: 9,
        max_weight: 2,
        weights_version: 1,
        ..set(8)
    });
    let (_, actions) = sim.tick(r.clone());
    assert!(
        !actions.contains(&Action::Reconcile { resume: false }),
        "reconciled with a claim in flight: {actions:?}"
    );
    // Once the claim is back (and nothing more to claim), the weights are read.
    sim.claimed(2, 2, 0);
    let (_, actions) = sim.tick(r);
    assert!(
        actions.contains(&Action::Reconcile { resume: false }),
        "{actions:?}"
    );
}

#[test]
fn a_leave_announces_then_stops_everything_then_ends_the_session() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 4, 0);
    assert!(sim.st.on_shutdown(sim.now).is_empty());
    let req = sim.next_request();
    assert_eq!(req.state, ReplicaState::Leaving);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Leaving, 4)],
        0,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(
        actions,
        vec![Action::StopAll { keep: false }],
        "and no claim while leaving"
    );
    for i in 0..3 {
        assert!(
            sim.st
                .on_stopped(i, Fence(100 + i as u64), sim.now)
                .is_empty()
        );
    }
    assert_eq!(sim.st.on_stopped(3, Fence(103), sim.now), vec![Action::End]);
}

#[test]
fn a_leave_whose_session_is_lost_meanwhile_still_ends() {
    // Found by the simulation (seed 9351): the last elector had ended when the reply
    // saying the session was lost came back.
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 1, 3);
    sim.st.on_shutdown(sim.now);
    sim.next_request();
    let token = sim.st.token().to_owned();
    // The claim in flight fails; the announce tick finds the session lost.
    sim.st
        .on_claimed(Err(ClaimFailure::Failed), &[], &[], &token, sim.now);
    assert!(sim.st.on_stopped(0, Fence(100), sim.now).is_empty());
    let r = sim.reply(SessionReply::Lost, vec![], 4);
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(actions.contains(&Action::End), "{actions:?}");
}

#[test]
fn a_claim_that_comes_back_after_the_leave_began_is_left_to_the_end_of_the_session() {
    let mut sim = Driven::new(4);
    let actions = sim.settled(&[], 4);
    assert_eq!(claims(&actions).len(), 1);
    sim.st.on_shutdown(sim.now);
    sim.next_request();
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Leaving, 0)],
        4,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(actions, vec![Action::StopAll { keep: false }]);
    // The claim sent before the shutdown comes back now: no elector starts, and the
    // leave ends the session (which frees them).
    assert_eq!(sim.claimed(0, 4, 0), vec![Action::End]);
}

fn sticky() -> Driven {
    Driven::with(
        4,
        Settings {
            rejoin_grace: Some(Duration::from_secs(5)),
            ..settings()
        },
        configured(0),
    )
}

#[test]
fn a_sticky_leave_keeps_every_partition_and_parks_the_session_for_the_grace() {
    let mut sim = sticky();
    sim.settled(&[], 4);
    sim.claimed(0, 4, 0);
    assert_eq!(
        sim.st.on_shutdown(sim.now),
        vec![Action::StopAll { keep: true }]
    );
    assert!(sim.st.keeps_leases(), "the electors' releases are refused");
    // Ticks go on (state active) while the electors finish their grace.
    let req = sim.next_request();
    assert_eq!((req.state, req.ttl), (ReplicaState::Active, LEASE));
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 4)],
        0,
    );
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    for i in 0..4 {
        assert!(
            sim.st
                .on_stopped(i, Fence(100 + i as u64), sim.now)
                .is_empty(),
            "no End: the session stays"
        );
    }
    let req = sim.next_request();
    assert_eq!(
        (req.state, req.ttl),
        (ReplicaState::Away, Duration::from_secs(5)),
        "parked for the grace"
    );
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Away, 4)],
        0,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(actions, vec![Action::Exit]);
    assert_eq!(sim.st.wake_at(), None, "nothing left to do");
}

#[test]
fn a_sticky_leave_waits_for_its_own_parking_tick() {
    // Found by the simulation (seed 940): the reply of a tick sent before the electors
    // had ended was taken for the parking tick's, and the session was never parked.
    let mut sim = sticky();
    sim.settled(&[], 4);
    sim.claimed(0, 1, 0);
    sim.st.on_shutdown(sim.now);
    let before = sim.next_request();
    assert_eq!(before.state, ReplicaState::Active);
    // The last elector ends with that tick in flight.
    assert!(sim.st.on_stopped(0, Fence(100), sim.now).is_empty());
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 1)],
        0,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(!actions.contains(&Action::Exit), "{actions:?}");
    assert_eq!(sim.next_request().state, ReplicaState::Away);
}

#[test]
fn a_sticky_leave_whose_session_was_lost_exits_without_parking() {
    // Found by the simulation (seed 2674): shutdown never returned.
    let mut sim = sticky();
    sim.settled(&[], 4);
    sim.claimed(0, 1, 3);
    sim.st.on_shutdown(sim.now);
    sim.next_request();
    let r = sim.reply(SessionReply::Lost, vec![], 4);
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(
        sim.st.on_stopped(0, Fence(100), sim.now),
        vec![Action::Exit]
    );
}

#[test]
fn a_resumed_session_takes_its_token_and_regrants_what_it_holds_by_term() {
    let mut sim = Driven::new(300);
    let old = "a:parked".to_owned();
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Away, 150)],
        0,
    );
    r.resumed = Some(old.clone());
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Renewed { token } if token == old));
    assert_eq!(sim.st.token(), old, "this process holds that session now");
    assert!(
        !sim.st.settling(sim.now),
        "nothing to settle: it holds its share"
    );
    assert_eq!(actions, vec![Action::Reconcile { resume: true }]);
    let held: Vec<_> = (0..150).map(|i| (i, Fence(50 + i as u64), 1)).collect();
    let actions = sim.st.on_reconciled(Some(held), &old, sim.now);
    let [c] = claims(&actions)[..] else {
        panic!("{actions:?}");
    };
    assert_eq!(c.regrant.len(), CLAIM_BATCH);
    assert_eq!(c.regrant[0], (0, Fence(50)), "named by term");
    // The store gave 1 back (removed meanwhile), regranted the rest of the batch.
    let granted: Vec<_> = (0..CLAIM_BATCH)
        .filter(|&i| i != 1)
        .map(|i| (i, Fence(1000), 1))
        .collect();
    let next = sim.answer(&granted, &[1], 0);
    assert_eq!(starts(&next).len(), CLAIM_BATCH - 1);
    assert_eq!(sim.st.ledger().held(1), None, "given back");
    let [c] = claims(&next)[..] else {
        panic!("{next:?}");
    };
    assert_eq!(c.regrant.len(), CLAIM_BATCH, "the next batch at once");
    // A reconcile never runs while regrants are in flight.
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 149)],
        0,
    );
    let (_, actions) = sim.tick(r);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Reconcile { .. })),
        "{actions:?}"
    );
}

#[test]
fn a_removed_partition_is_handed_back_and_a_drained_replica_hands_everything_over() {
    let mut sim = Driven::new(6);
    sim.settled(&[("b", 3)], 3);
    sim.claimed(0, 3, 0);
    let view = || {
        vec![
            member("a", ReplicaState::Active, 3),
            member("b", ReplicaState::Active, 3),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, actions) = sim.tick_revoking(r, &[1]);
    assert_eq!(
        actions,
        vec![Action::Stop {
            indices: vec![1],
            reason: MoveCause::Removal,
            to: BTreeMap::new(),
        }]
    );
    let mut r = sim.reply(SessionReply::Live, view(), 0);
    r.drained = true;
    let (_, actions) = sim.tick(r);
    let [
        Action::Stop {
            indices, reason, ..
        },
    ] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert_eq!(*reason, MoveCause::Drain);
    assert_eq!(indices.len(), 2, "the two it still serves");
    assert_eq!(sim.next_request().state, ReplicaState::Draining);
    // Undrained: back to the rule.
    let r = sim.reply(SessionReply::Live, view(), 0);
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(!sim.st.drained());
    assert_eq!(sim.next_request().state, ReplicaState::Active);
}

#[test]
fn a_drained_replica_that_resumes_regrants_nothing_it_would_keep() {
    // Finding 8: the store gives a drained replica's regrants back.
    let mut sim = Driven::new(4);
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Away, 2)],
        0,
    );
    r.resumed = Some("a:parked".into());
    r.drained = true;
    sim.tick(r);
    let held = vec![(0, Fence(5), 1), (1, Fence(6), 1)];
    let actions = sim.st.on_reconciled(Some(held), "a:parked", sim.now);
    let [c] = claims(&actions)[..] else {
        panic!("{actions:?}");
    };
    assert_eq!(c.regrant.len(), 2, "sent for the store to give back");
    let next = sim.answer(&[], &[0, 1], 0);
    assert!(starts(&next).is_empty());
    assert_eq!(sim.st.ledger().held_count(), 0);
    assert!(claims(&next).is_empty(), "a drained replica claims nothing");
}

#[test]
fn a_dying_member_is_looked_at_right_after_its_session_expires() {
    let mut sim = Driven::new(4);
    sim.settled(&[("b", 2)], 2);
    let mut m = member("b", ReplicaState::Active, 2);
    m.left = Duration::from_millis(40);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0), m],
        2,
    );
    sim.tick(r);
    assert_eq!(
        sim.st.wake_at(),
        Some(sim.now + Duration::from_millis(40) + cadence::QUICK)
    );
}

#[test]
fn a_set_read_that_sees_the_set_change_reads_it_again() {
    let mut s = SetSync::new(configured(0));
    let mut r = set(2000);
    r.set_version = 7;
    let op = s.on_tick(Some(&r), Duration::ZERO, "", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 0 }));
    let page =
        |v: u64, from: usize, n: usize| page(v, 0, (from..from + n).map(|i| format!("p{i}")));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(7, 0, 1000))), 4);
    assert_eq!(next, Some(SetOp::Read { offset: 1000 }));
    // The set changed between the pages: from the start.
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(8, 1000, 1000))), 4);
    assert_eq!(next, Some(SetOp::Read { offset: 0 }));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(8, 0, 1000))), 4);
    assert_eq!(next, Some(SetOp::Read { offset: 1000 }));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(8, 1000, 999))), 4);
    assert_eq!(next, None);
    let copy = s.copy().expect("complete");
    assert_eq!((copy.set_version, copy.names.len()), (8, 1999));
    // In a wide group, a page per tick: the next page waits for the next tick (and
    // goes only once), and the last one completes the copy.
    let mut r = r.clone();
    r.set_version = 9;
    let op = s.on_tick(Some(&r), Duration::ZERO, "", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 0 }));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(9, 0, 1000))), 200);
    assert_eq!(next, None, "the next page waits");
    let op = s.on_tick(Some(&r), Duration::ZERO, "", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 1000 }));
    assert_eq!(s.on_tick(Some(&r), Duration::ZERO, "", || "x".into()), None);
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(9, 1000, 10))), 200);
    assert_eq!(next, None);
    assert_eq!(
        s.copy().map(|c| (c.set_version, c.names.len())),
        Some((9, 1010))
    );
    // Not while the group is being created: its set still grows.
    r.set_version = 10;
    assert_eq!(
        s.on_tick(Some(&r), Duration::from_millis(500), "", || "x".into()),
        None
    );
    let names: Arc<[String]> = Arc::from(Vec::<String>::new());
    drop(names);
}

/// A failover that lost a set change (here the removal of p1) promotes a store whose
/// set version is one lower; its next change (a drain, say) brings it back to the
/// same (life, version) as the lost one, with other names. A copy read in another
/// server lifetime is read again, so the replica never keeps (and never restores
/// after a data loss) the lost set as if it were the group's (simulation seed 13173).
#[test]
fn a_copy_read_in_another_server_lifetime_is_read_again() {
    let mut s = SetSync::new(configured(0));
    let mut r = set(3);
    r.set_version = 8;
    let op = s.on_tick(Some(&r), Duration::ZERO, "run-a:x", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 0 }));
    let lost = page(8, 0, ["p0", "p2"].map(String::from));
    assert_eq!(s.on_answer(SetAnswer::Page(Some(lost)), 2).0, None);
    assert_eq!(
        s.on_tick(Some(&r), Duration::ZERO, "run-a:x", || "x".into()),
        None
    );
    // The promoted server's set: p1 is back, and a drain brought the version to 8.
    let op = s.on_tick(Some(&r), Duration::ZERO, "run-b:y", || "x".into());
    assert_eq!(
        op,
        Some(SetOp::Read { offset: 0 }),
        "read again in the new lifetime"
    );
    let kept = page(8, 0, ["p0", "p1", "p2"].map(String::from));
    assert_eq!(s.on_answer(SetAnswer::Page(Some(kept)), 2).0, None);
    assert_eq!(s.copy().map(|c| c.names.len()), Some(3));
    assert_eq!(
        s.on_tick(Some(&r), Duration::ZERO, "run-b:y", || "x".into()),
        None
    );
}

/// A replica whose configured names are the group's set (the same checksum and count,
/// unweighted) takes them as its copy after the first page; one whose names differ, or
/// a weighted set, reads every page.
#[test]
fn a_set_with_the_configured_names_is_copied_from_the_list_after_one_page() {
    let names: Vec<String> = (0..2500).map(|i| format!("p{i}")).collect();
    let configured = || Configured {
        names: names.clone().into(),
        ..configured(0)
    };
    let sum = crate::store::ops::read::set_checksum(names.iter().map(String::as_str));
    let first = |checksum, weighted| crate::store::protocol::SetPage {
        count: 2500,
        checksum,
        weighted,
        ..page(4, 0, names.iter().take(1000).cloned())
    };
    let read = |checksum, weighted| {
        let mut s = SetSync::new(configured());
        let op = s.on_tick(Some(&set(2500)), Duration::ZERO, "", || "x".into());
        assert_eq!(op, Some(SetOp::Read { offset: 0 }));
        let (next, _) = s.on_answer(SetAnswer::Page(Some(first(checksum, weighted))), 4);
        (s, next)
    };
    let (s, next) = read(Some(sum), false);
    assert_eq!(next, None, "no other page is read");
    let copy = s.copy().expect("complete after one page");
    assert_eq!(copy.names.len(), 2500);
    assert!(
        copy.names
            .iter()
            .zip(&names)
            .all(|((a, w), b)| a == b && *w == 1)
    );
    assert_eq!(copy.set_version, 4);
    assert!(s.difference().is_none());
    for (checksum, weighted, why) in [
        (Some(sum + 1), false, "other names"),
        (None, false, "a group that keeps no checksum"),
        (Some(sum), true, "a weighted set"),
    ] {
        let (s, next) = read(checksum, weighted);
        assert_eq!(next, Some(SetOp::Read { offset: 1000 }), "{why}");
        assert!(s.copy().is_none(), "{why}");
    }
}

#[test]
fn a_configured_list_unlike_the_groups_set_is_reported_with_counts_and_names() {
    let read = |configured: Configured, version: u64, names: &[&str]| {
        let mut s = SetSync::new(configured);
        let op = s.on_tick(Some(&set(names.len())), Duration::ZERO, "", || "x".into());
        assert_eq!(op, Some(SetOp::Read { offset: 0 }));
        assert_eq!(
            s.on_answer(
                SetAnswer::Page(Some(page(1, version, names.iter().copied()))),
                4
            )
            .0,
            None
        );
        s
    };
    // Unversioned, another group's list (p0..p3 against tenant-01..05 and p0).
    let group = [
        "p0",
        "tenant-01",
        "tenant-02",
        "tenant-03",
        "tenant-04",
        "tenant-05",
    ];
    let s = read(configured(0), 0, &group);
    let d = s.difference().expect("the lists differ");
    assert_eq!((d.only_here, d.only_in_group), (3, 5));
    assert_eq!(d.only_here_sample, ["p1", "p2", "p3"]);
    assert_eq!(
        d.only_in_group_sample,
        ["tenant-01", "tenant-02", "tenant-03"]
    );
    assert!(s.list_differs(Some(&set(6))));
    assert_eq!(
        d.to_string(),
        "5 only in the group's set (tenant-01, tenant-02, tenant-03, ...), \
         3 only in this replica's list (p1, p2, p3)"
    );
    // The same names: nothing to report.
    let s = read(configured(0), 0, &["p3", "p2", "p1", "p0"]);
    assert_eq!(s.difference(), None);
    assert!(!s.list_differs(Some(&set(4))));
    // An older versioned list than the group's differs too (it is not applied).
    let s = read(configured(2), 3, &group);
    assert_eq!(s.difference().map(|d| d.group_version), Some(3));
    // A newer one is about to replace the group's set: no difference reported.
    let s = read(configured(4), 3, &group);
    assert_eq!(s.difference(), None);
}

#[test]
fn a_plan_lets_one_claim_take_a_partition_that_does_not_fit_not_every_claim() {
    // Found by the what-if planner's live test: a replica whose weighted plan allows
    // one partition that does not fit into its room kept taking the first free one,
    // claim after claim, until nothing was free (then handed the excess on).
    let mut sim = Driven::new(3);
    let weighted = |mut r: TickReply| {
        r.set = Some(SetInfo {
            weighted: true,
            total_weight: 30,
            max_weight: 10,
            ..set(3)
        });
        r
    };
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Active, 0),
        ],
        3,
    );
    sim.tick(weighted(r));
    sim.advance(LEASE);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Active, 0),
            member("b", ReplicaState::Active, 0),
        ],
        3,
    );
    let (_, actions) = sim.tick(weighted(r));
    let first = claims(&actions);
    assert_eq!(first.len(), 1, "{actions:?}");
    assert!(first[0].fallback, "under its share: {:?}", first[0]);
    assert_eq!(first[0].room, Some(15));
    // It took one of weight 10: 5 of room left, which no free partition fits.
    let actions = sim.answer(&[(0, Fence(100), 10)], &[], 2);
    for c in claims(&actions) {
        assert!(
            !c.fallback,
            "a second claim past the room before the next plan: {c:?}"
        );
        assert_eq!(c.room, Some(5));
    }
}
