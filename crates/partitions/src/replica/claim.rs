//! Claims: what to ask for (free partitions up to the plan's allowance, or new
//! terms for unserved ones), one batch in flight, sent again if its reply is lost;
//! what came back; reconciling the holdings with what the store says the session holds.

use std::collections::BTreeMap;

use leasehold_election::Fence;
use tokio::time::Instant;

use super::cadence::QUICK;
use super::holdings::{Effect, Phase};
use super::leave::Leaving;
use super::{Action, ClaimFailure, Decline, ReplicaMachine};
use crate::balance::prefer::leave_to;
use crate::balance::step::{self, Standing};
use crate::store::CLAIM_BATCH;
use crate::store::protocol::ClaimReply;

/// A claim for the driver to send: the replica, process, session and ttl are the
/// current ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The request number: the same one again is the same request.
    pub(crate) seq: u64,
    /// Take up to this many free partitions.
    pub(crate) count: usize,
    /// Every fence at least this.
    pub(crate) floor: Fence,
    /// A weighted claim's room, and whether to take the first if none fits.
    pub(crate) room: Option<u64>,
    pub(crate) fallback: bool,
    /// A weighted claim takes the partitions handed to this replica by name up to this
    /// much weight (its bound), whether or not they fit into the room.
    pub(crate) bound: u64,
    /// Instead: new terms for these terms the session holds.
    pub(crate) regrant: Vec<(usize, Fence)>,
    /// Free partitions preferred on this replica, to take first.
    pub(crate) prefer: Vec<usize>,
    /// Take only those (a swap's first half).
    pub(crate) only_preferred: bool,
    /// Members (replica id, room) to leave the free partitions preferred on them to.
    pub(crate) leave_to: Vec<(String, u64)>,
}

/// At most this many partitions preferred on a replica are named in one claim (to be
/// taken first); the others are taken as any free partition.
const PREFER_ARGS: usize = 64;

/// Claims: the one in flight, and what the next ones go by.
#[derive(Debug, Default)]
pub(super) struct Claims {
    pub(super) pending: Option<Pending>,
    /// The last claim's sequence number.
    pub(super) seq: u64,
    /// A reconcile in flight (`Some(resume)`).
    pub(super) reconciling: Option<bool>,
    /// No claim before this instant (the group's grant wait).
    pub(super) after: Option<Instant>,
    /// Consecutive quiet ticks whose count of this session's partitions differed.
    pub(super) mismatch: u32,
    /// A claim since the last weighted plan was allowed a partition past its room (the
    /// plan's `fallback`): the next claims of the same plan are not (the rule allows
    /// one such claim per plan, as its convergence argument assumes).
    pub(super) fallback_spent: bool,
    /// The claims sent one after another since the last one that took nothing (or
    /// since a tick) took something.
    pub(super) streak_took: bool,
}

/// A claim in flight.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub(super) claim: Claim,
    /// When it was first sent (its grants' deadlines are anchored there).
    pub(super) sent: Instant,
    /// Waiting to be sent again (its reply was lost) at this instant.
    pub(super) resend_at: Option<Instant>,
}

impl ReplicaMachine {
    pub(super) fn claim(&mut self, now: Instant) -> Vec<Action> {
        // No claim while reconciling either: the answer must not miss a partition that a
        // claim sent after it grants.
        if !self.session.member()
            || self.leaving != Leaving::No
            || self.claims.pending.is_some()
            || self.claims.reconciling.is_some()
            || self.claims.after.is_some_and(|c| c > now)
        {
            return Vec::new();
        }
        let floor = Fence(self.highest.max(self.set.highest_fence()).get() + 1);
        // Unserved terms first: granted again, or given back by the store (removed,
        // revoked, drained).
        let unserved: Vec<(usize, Fence)> = self
            .holdings
            .in_phase(Phase::Unserved)
            .into_iter()
            .take(CLAIM_BATCH)
            .collect();
        let mut claim = Claim {
            seq: self.claims.seq + 1,
            count: 0,
            floor,
            room: None,
            fallback: false,
            bound: 0,
            regrant: Vec::new(),
            prefer: Vec::new(),
            only_preferred: false,
            leave_to: Vec::new(),
        };
        if !unserved.is_empty() {
            self.holdings.mark(&unserved, Phase::Regranting);
            claim.regrant = unserved;
        } else {
            if self.settling(now) || self.drained {
                let reason = if self.drained {
                    Decline::Draining
                } else {
                    Decline::Settling
                };
                return self.declined(reason);
            }
            // The first claims of this process wait for the set's first page, which
            // says which partitions are preferred on whom, for one renew interval at
            // most (availability first); its answer claims at once.
            if !self.prefs.known {
                let since = *self.prefs.wait.get_or_insert(now);
                if now.saturating_duration_since(since) < self.s.renew_interval {
                    return Vec::new();
                }
            }
            let room = self.room(now);
            // Orphans go to whoever asks; else the plan says who may take one that does
            // not fit.
            let orphans = room == Some(u64::MAX);
            let fallback = orphans
                || !self.claims.fallback_spent
                    && self
                        .wplan
                        .as_ref()
                        .is_some_and(|(p, _)| p.fallback && p.shed.is_empty());
            let mut count = match room {
                Some(0) if !fallback => 0,
                Some(_) => self.view.unowned.min(CLAIM_BATCH),
                None => self.budget(now).min(CLAIM_BATCH),
            };
            // Partitions handed to this replica by name: the giver's rule chose it for
            // them, so it takes them up to its bound (by weight), whatever its room.
            let bound = self.bound(now).unwrap_or(0);
            if self.view.reserved > 0 && bound > 0 {
                count = count.max(self.view.reserved.min(CLAIM_BATCH));
            }
            if count == 0 && room.is_none() && self.swap_wanted() {
                count = 1;
                claim.only_preferred = true;
            }
            if count == 0 {
                return self.declined(Decline::Full);
            }
            claim.count = count;
            claim.room = room;
            claim.fallback = fallback;
            claim.bound = bound;
            if !self.prefs.by_partition.is_empty() {
                let me = self.s.replica.as_str();
                claim.prefer = self
                    .prefs
                    .by_partition
                    .iter()
                    .filter(|(i, r)| r.as_str() == me && self.holdings.held(**i).is_none())
                    .map(|(i, _)| *i)
                    .take(PREFER_ARGS)
                    .collect();
                // Availability before preference: not for orphans, nor once
                // partitions have gone without an owner for a renew interval.
                if !orphans
                    && !self.orphaned(now)
                    && self.policy.may_leave(self.s.renew_interval, now)
                {
                    claim.leave_to = leave_to(me, &self.prefs.standings);
                }
            }
            self.claims.fallback_spent |= fallback && !orphans;
        }
        self.claims.seq = claim.seq;
        self.claims.pending = Some(Pending {
            claim: claim.clone(),
            sent: now,
            resend_at: None,
        });
        vec![Action::Claim(claim)]
    }

    /// No claim now: partitions handed to this replica by name, if any, are declined
    /// (the driver logs and counts why).
    pub(super) fn declined(&self, reason: Decline) -> Vec<Action> {
        if self.view.reserved == 0 {
            return Vec::new();
        }
        vec![Action::Decline {
            count: self.view.reserved,
            reason,
        }]
    }

    /// A claim came back (it was sent for session `token`); the granted partitions are
    /// named by index.
    pub(crate) fn on_claimed(
        &mut self,
        reply: Result<ClaimReply, ClaimFailure>,
        granted: &[(usize, Fence, u64)],
        returned: &[usize],
        token: &str,
        now: Instant,
    ) -> Vec<Action> {
        if token != self.session.token() {
            // For a session that has ended: whatever it granted went with the session.
            return Vec::new();
        }
        let Some(pending) = self.claims.pending.take() else {
            return Vec::new();
        };
        let regrant = pending.claim.regrant.clone();
        match reply {
            Ok(ClaimReply::Claimed {
                unowned,
                fell_back,
                moves,
                ..
            }) => {
                self.view.unowned = unowned;
                // A claim takes what is reserved for it first.
                if regrant.is_empty() {
                    self.view.reserved = self.view.reserved.saturating_sub(granted.len());
                }
                let mut actions = Vec::new();
                let sent = self
                    .renewed_at
                    .map_or(pending.sent, |r| r.max(pending.sent));
                let mut won = false;
                // A claim of free partitions names the previous term of each, in order
                // (a regrant names none).
                for (k, &(i, fence, weight)) in granted.iter().enumerate() {
                    self.highest = self.highest.max(fence);
                    won = true;
                    if self.leaving != Leaving::No {
                        // Sent before the leave began: the end of the session (or the
                        // parked session) has it.
                        continue;
                    }
                    if let Some(Effect::Start(i, fence, sent)) =
                        self.holdings
                            .grant(i, fence, weight, sent, moves.get(k).copied())
                    {
                        self.load_starts(i, fence, now);
                        actions.push(Action::Start {
                            index: i,
                            fence,
                            sent,
                            previous: self.holdings.held(i).and_then(|h| h.previous),
                        });
                    }
                }
                // Regranted terms not granted again were given back, or were not the
                // session's any more.
                let kept: std::collections::BTreeSet<usize> =
                    granted.iter().map(|(i, _, _)| *i).collect();
                let gone: Vec<(usize, Fence)> = regrant
                    .iter()
                    .copied()
                    .filter(|(i, _)| !kept.contains(i) || returned.contains(i))
                    .collect();
                self.holdings.drop_terms(&gone);
                if self.leaving != Leaving::No {
                    actions.extend(self.end_if_done(now));
                    return actions;
                }
                // More to take (or regrant), and the last batch was not empty-handed:
                // go on at once.
                let more = if won || !regrant.is_empty() {
                    self.claim(now)
                } else {
                    Vec::new()
                };
                // By weight, partitions still free once this replica's claims are done
                // (or after its fallback took one that fit nowhere) fit nobody's room as
                // every replica planned it: the loads moved since, and so may who is
                // furthest below its share. Every replica plans again now, rather than
                // at its next regular tick (a killed replica's last orphans came back a
                // renew interval after the others). Each round takes at least one.
                self.claims.streak_took |= won;
                if !more.iter().any(|a| matches!(a, Action::Claim(_))) {
                    let took = std::mem::take(&mut self.claims.streak_took);
                    if self.wplan.is_some() && unowned > 0 && (fell_back || took) {
                        actions.push(Action::Notify);
                    }
                } else if self.wplan.is_some() && unowned > 0 && fell_back {
                    actions.push(Action::Notify);
                }
                actions.extend(more);
                actions
            }
            Ok(ClaimReply::Wait(d)) => {
                self.holdings.unsend(&regrant);
                self.claims.after = Some(now + d);
                self.end_if_done(now)
            }
            Ok(ClaimReply::Lost) => {
                // The next tick confirms it and starts a new session.
                self.holdings.unsend(&regrant);
                self.cadence.wake(now);
                self.end_if_done(now)
            }
            Ok(ClaimReply::Stale) => {
                // Overtaken by a later request of this process: ask what it holds.
                self.holdings.unsend(&regrant);
                let mut actions = self.end_if_done(now);
                if self.leaving == Leaving::No {
                    self.reconcile(false, &mut actions);
                }
                actions
            }
            Err(ClaimFailure::Failed) if self.leaving != Leaving::No => {
                // Ending the session frees whatever it may have taken.
                self.holdings.unsend(&regrant);
                self.end_if_done(now)
            }
            Err(ClaimFailure::Failed) => {
                // It may or may not have been applied: send the same request again; the
                // store applies it once and answers it again.
                self.claims.pending = Some(Pending {
                    resend_at: Some(now + (self.s.renew_interval / 4).min(QUICK * 20)),
                    ..pending
                });
                Vec::new()
            }
        }
    }

    /// The store said which terms session `token` holds (by index; `None`: the read
    /// failed).
    pub(crate) fn on_reconciled(
        &mut self,
        held: Option<Vec<(usize, Fence, u64)>>,
        token: &str,
        now: Instant,
    ) -> Vec<Action> {
        if token != self.session.token() {
            return Vec::new();
        }
        let Some(resume) = self.claims.reconciling.take() else {
            return Vec::new();
        };
        let Some(held) = held else {
            if resume {
                // Ask again at once: the resumed partitions wait for it.
                let mut actions = Vec::new();
                self.reconcile(true, &mut actions);
                return actions;
            }
            return self.claim(now);
        };
        let mut actions = self.adopt(&held, now);
        actions.extend(self.claim(now));
        actions
    }

    /// Takes the store's word for which terms this session holds (`held`: index, fence,
    /// weight): terms the holdings hold that the store does not are revoked (their
    /// runners refused their next renewal), the store's are weighed, and those no
    /// runner of ours serves wait for a regrant.
    pub(super) fn adopt(&mut self, held: &[(usize, Fence, u64)], now: Instant) -> Vec<Action> {
        let store: BTreeMap<usize, (Fence, u64)> =
            held.iter().map(|(i, f, w)| (*i, (*f, *w))).collect();
        let mut revoke = Vec::new();
        // Terms the holdings holds that the store does not (under this fence).
        let ours: Vec<(usize, Fence, Phase)> = self
            .holdings
            .terms()
            .map(|(i, h)| (i, h.fence, h.phase))
            .collect();
        for (i, fence, phase) in ours {
            if store.get(&i).is_some_and(|(f, _)| *f == fence) {
                continue;
            }
            if matches!(phase, Phase::Stopping(_)) {
                // Handing over already; its release finds it gone.
                continue;
            }
            if self.holdings.forget(i, fence) {
                revoke.push((i, fence));
            }
        }
        // Terms the store holds: weights, and those no runner of ours runs.
        for (&i, &(fence, weight)) in &store {
            match self.holdings.held(i) {
                Some(h) if h.fence == fence => self.holdings.weigh(i, fence, weight),
                Some(_) => {}
                None => self.holdings.unserved(i, fence, weight, now),
            }
        }
        let mut actions = Vec::new();
        if !revoke.is_empty() {
            actions.push(Action::Revoke(revoke));
        }
        actions
    }

    pub(super) fn reconcile(&mut self, resume: bool, actions: &mut Vec<Action>) {
        self.claims.mismatch = 0;
        self.claims.reconciling = Some(resume);
        actions.push(Action::Reconcile { resume });
    }

    /// Two quiet ticks in a row with the store counting this session's partitions
    /// otherwise than the holdings: reconcile.
    pub(super) fn check_count(&mut self) -> Vec<Action> {
        if self.quiet() && self.view.server_held != self.held() {
            self.claims.mismatch += 1;
        } else {
            self.claims.mismatch = 0;
        }
        let mut actions = Vec::new();
        if self.claims.mismatch >= 2 {
            self.reconcile(false, &mut actions);
        }
        actions
    }

    /// A weight changed since this replica last read its partitions' weights: read
    /// them again (the same read as a reconcile), once nothing is in flight.
    pub(super) fn refresh_weights(&mut self) -> Vec<Action> {
        let Some(set) = &self.view.set else {
            return Vec::new();
        };
        if !set.weighted || set.weights_version == self.weights_version || !self.quiet() {
            return Vec::new();
        }
        self.weights_version = set.weights_version;
        let mut actions = Vec::new();
        if self.held() > 0 {
            self.reconcile(false, &mut actions);
        }
        actions
    }

    /// Partitions nobody has claimed for longer than lease + retry interval while
    /// nobody settles.
    pub(super) fn orphaned(&self, now: Instant) -> bool {
        self.policy
            .orphaned(self.s.lease + self.s.retry_interval, now)
    }

    /// Where this replica stands for the decision step ([`step`]): what it and the
    /// store both count (the larger), and whether orphans go to whoever asks.
    pub(super) fn standing(&self, now: Instant) -> Standing {
        Standing {
            held: self.held().max(self.view.server_held),
            load: self.holdings.load().max(self.view.server_load),
            unowned: self.view.unowned,
            orphaned: self.orphaned(now),
        }
    }

    /// In a weighted group: the room left for claims now (`None` in a count group).
    pub(super) fn room(&self, now: Instant) -> Option<u64> {
        let (wplan, base) = self.wplan.as_ref()?;
        Some(step::weighted_room(wplan, *base, self.standing(now)))
    }

    /// In a weighted group: how much weight of the partitions handed to this replica by
    /// name it may take now (up to its bound; `None` in a count group).
    pub(super) fn bound(&self, now: Instant) -> Option<u64> {
        let (wplan, base) = self.wplan.as_ref()?;
        Some(step::weighted_bound(wplan, *base, self.standing(now)))
    }
}
