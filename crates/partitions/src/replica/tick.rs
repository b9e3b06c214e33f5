//! Tick intake: a tick's reply taken in (the session, the roster, the group as
//! seen, revocations, a lost session), before the decision step.

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::ext::token_with;
use leasehold_election::{Fence, StoreError};
use rand::Rng;
use tokio::time::Instant;

use super::cadence::QUICK;
use super::holdings::Phase;
use super::leave::Leaving;
use super::session::Admitted;
use super::{Action, Renewal, ReplicaMachine};
use crate::balance::plan::Member;
use crate::balance::weighted::Loaded;
use crate::store::ops::moves::MoveCause;
use crate::store::protocol::{ReplicaState, SessionReply, TickReply};

impl ReplicaMachine {
    /// A tick sent at `sent` came back; `revoked` are the partitions (by index) it says
    /// this session must give up, and `holdings` everything the session holds if the
    /// granting server changed since the last tick (by index, fence and weight): every
    /// other term is revoked (the actions start with it, and the driver applies it
    /// before this tick's renewal reaches the runners).
    /// The actions end with sampling the load reports, if their weights are due.
    pub(crate) fn on_tick(
        &mut self,
        reply: Result<TickReply, StoreError>,
        revoked: &[usize],
        holdings: Option<&[(usize, Fence, u64)]>,
        sent: Instant,
        now: Instant,
        rng: &mut impl Rng,
    ) -> (Renewal, Vec<Action>) {
        let (renewal, mut actions) = self.take_tick(reply, revoked, holdings, sent, now, rng);
        actions.extend(self.sample_loads(now));
        (renewal, actions)
    }

    fn take_tick(
        &mut self,
        reply: Result<TickReply, StoreError>,
        revoked: &[usize],
        holdings: Option<&[(usize, Fence, u64)]>,
        sent: Instant,
        now: Instant,
        rng: &mut impl Rng,
    ) -> (Renewal, Vec<Action>) {
        self.cadence.answered();
        let mut actions = Vec::new();
        match self.leaving {
            Leaving::Announcing => {
                // Told the group (or could not): now hand everything back.
                self.leaving = Leaving::Stopping;
                actions.extend(self.stop_everything(false, now));
            }
            Leaving::ParkSent => {
                // Marked away (or could not: then it expires within one lease).
                self.leaving = Leaving::Parked;
                actions.push(Action::Exit);
            }
            _ => {}
        }
        let ticked = self.last_tick.sent_as.take();
        self.last_tick.quiet_as = None;
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return (Renewal::Failed(e), actions),
        };
        let changed_nothing = reply.session == SessionReply::Live
            && reply.resumed.is_none()
            && !reply.roster.is_sent()
            && reply.expired == 0
            && reply.ending == 0
            && reply.revoked.is_empty()
            && reply.holdings.is_none();
        if changed_nothing {
            self.last_tick.quiet_as = ticked;
        }
        self.follow_roster(&reply);
        let renewal = match reply.session {
            SessionReply::Live => {
                let served = self.roster.1.iter().any(|m| {
                    m.replica != self.s.replica && m.state == ReplicaState::Active && m.held > 0
                });
                // Settling lets replicas started together see each other before anyone
                // claims. A replica joining a group that is already being served (a
                // restart in a rolling deploy, a scale-up) has nobody to wait for: it
                // takes its share at once, so that nothing freed for it sits unowned
                // while it settles. In a group that grants nothing yet (just created:
                // one renew interval on a server older than a lease, else a lease) the
                // replicas started together gather until it grants, and claim then.
                let settle = if served {
                    Duration::ZERO
                } else if self.session.joined() {
                    self.s.renew_interval
                } else if !reply.grant_wait.is_zero() {
                    self.s.settle.min(reply.grant_wait)
                } else {
                    self.s.settle
                };
                let incarnation = reply.set.as_ref().map_or("", |s| s.incarnation.as_str());
                match self
                    .session
                    .live(reply.resumed.as_deref(), settle, incarnation, now)
                {
                    Admitted::Resumed => {
                        // Back from a sticky restart: this process holds the session,
                        // with every partition it held, each to get a new term.
                        self.renewed_at = Some(sent);
                        self.reconcile(true, &mut actions);
                    }
                    Admitted::Joined => {
                        self.renewed_at = Some(sent);
                        self.cadence.wake(now + settle);
                    }
                    Admitted::Extended => {
                        self.renewed_at = Some(sent);
                        if let Some(held) = holdings {
                            // The server changed: it may have lost claims of ours.
                            actions.extend(self.adopt(held, now));
                        }
                    }
                }
                Renewal::Renewed {
                    token: self.session.token().to_owned(),
                }
            }
            SessionReply::Lost => {
                // Whatever this session held is gone; its runners are refused from now
                // on, also if a join resumes the same session again (a failover may give
                // back a parked copy of it). Start a new session at once.
                let gone = self.session_over(now, rng);
                if !gone.is_empty() {
                    actions.push(Action::Revoke(gone));
                }
                if matches!(
                    self.leaving,
                    Leaving::Parking | Leaving::ParkSent | Leaving::Pausing
                ) {
                    // A sticky leave whose session is gone has nothing to park.
                    self.leaving = Leaving::Pausing;
                    actions.extend(self.end_if_done(now));
                }
                Renewal::Refused
            }
            SessionReply::Refused(c) => {
                self.session.refused(c);
                Renewal::Refused
            }
            // No group to join yet: the set sync seeds or restores it, the next tick
            // joins.
            SessionReply::NoGroup => Renewal::Refused,
        };
        self.lifetime.clone_from(&reply.lifetime);
        self.observe(&reply, now);
        if matches!(self.leaving, Leaving::Stopping | Leaving::Pausing) {
            // The reply may have cleared the last thing a leave waited for.
            actions.extend(self.end_if_done(now));
        }
        if self.leaving == Leaving::No {
            // Also a replica kept out (a duplicate id) keeps its copy of the set and may
            // restore the group: the set is everyone's.
            let set = self.view.set.clone();
            let mut life = || token_with("life", rng);
            if let Some(op) =
                self.set
                    .on_tick(set.as_ref(), reply.grant_wait, &reply.lifetime, &mut life)
            {
                actions.push(Action::Set(op));
            }
        }
        if self.session.member() && self.leaving == Leaving::No {
            actions.extend(self.revoke(revoked));
            actions.extend(self.check_count());
            actions.extend(self.refresh_weights());
            actions.extend(self.decide(now, rng));
        }
        (renewal, actions)
    }

    /// Hands back partitions removed from the set.
    pub(super) fn revoke(&mut self, revoked: &[usize]) -> Vec<Action> {
        let mut stop = Vec::new();
        for &i in revoked {
            match self.holdings.held(i).map(|h| h.phase) {
                Some(Phase::Serving) => {
                    self.holdings.stop(i, MoveCause::Removal);
                    stop.push(i);
                }
                // Not started yet: it is given back by the next regrant.
                Some(Phase::Starting) => self.holdings.unstart(i),
                _ => {}
            }
        }
        if stop.is_empty() {
            return Vec::new();
        }
        vec![Action::Stop {
            indices: stop,
            reason: MoveCause::Removal,
            to: BTreeMap::new(),
            held: BTreeMap::new(),
        }]
    }

    /// Brings the kept roster to the version a tick read: all of it, what changed of
    /// it, or nothing (kept by replica id, so that its order does not depend on when
    /// it was read).
    pub(super) fn follow_roster(&mut self, reply: &TickReply) {
        reply.roster.apply(&mut self.roster.1);
        self.roster.0.clone_from(&reply.roster_version);
    }

    /// Takes in the members, counts and timers of a tick reply.
    pub(super) fn observe(&mut self, reply: &TickReply, now: Instant) {
        let v = &mut self.view;
        v.unowned = reply.unowned;
        v.reserved = reply.reserved;
        v.set.clone_from(&reply.set);
        if let Some(set) = &reply.set {
            self.highest = self.highest.max(set.highest_fence);
        }
        self.drained = reply.drained;
        self.claims.after = (!reply.grant_wait.is_zero()).then(|| now + reply.grant_wait);
        let members = &self.roster.1;
        v.live = members.iter().map(|m| m.replica.clone()).collect();
        v.members = members
            .iter()
            .filter(|m| m.state.counts())
            .map(|m| Member {
                replica: m.replica.clone(),
                owned: (m.state != ReplicaState::Settling).then_some(m.held),
            })
            .collect();
        v.loaded = members
            .iter()
            .filter(|m| m.state.counts())
            .map(|m| Loaded::member(&m.replica, m.state, m.load, m.held, m.capacity))
            .collect();
        let me = members.iter().find(|m| m.replica == self.s.replica);
        v.server_held = me.map_or(0, |m| m.held);
        v.server_load = me.map_or(0, |m| m.load);
        // A member that stops heartbeating ends when its session expires: look again
        // right after the earliest expiry if that comes before the next regular tick,
        // so its partitions move within one lease of its last heartbeat plus a tick.
        if let Some(left) = reply.soonest
            && now + left < self.cadence.next()
        {
            self.cadence.wake(now + left + QUICK);
        }
        // Ended sessions whose partitions are still being freed, chunk by chunk.
        if reply.ending > 0 {
            self.cadence.wake(now + QUICK);
        }
    }

    /// Starts over with a new session (the last one ended).
    /// The session has ended: returns the terms it held (each to be refused).
    pub(super) fn session_over(&mut self, now: Instant, rng: &mut impl Rng) -> Vec<(usize, Fence)> {
        let gone: Vec<(usize, Fence)> = self.holdings.terms().map(|(i, h)| (i, h.fence)).collect();
        self.session.lost(rng);
        self.holdings.session_lost();
        // A claim or a read in flight was for the old session: its answer is ignored.
        self.claims.pending = None;
        self.claims.reconciling = None;
        self.renewed_at = None;
        self.view.server_held = 0;
        self.claims.mismatch = 0;
        self.policy.reset();
        self.plan = None;
        self.cadence.wake(now);
        gone
    }
}
