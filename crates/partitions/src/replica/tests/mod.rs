//! Scenario tests of the replica state machine: replies fed in by hand, actions checked.
//! The harness ([`Driven`]) is here; the tests, in a file per part of the machine they
//! exercise: [`claim`], [`handover`], [`session`], [`leave`], [`list`] and [`loads`]
//! (the holdings, the policy, the cadence, warm moves and the damping rule test themselves
//! in their own files).

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
    AddReply, Adopt, AdoptReply, AdoptStep, ClaimReply, Conflict, MemberInfo, NotAdopted, Origin,
    RestoreStep, RosterUpdate, SessionReply, SetInfo, TickReply,
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
        prepare_moves: None,
        load_damping: None,
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

mod claim;
mod handover;
mod leave;
mod list;
mod loads;
mod session;
