//! The one record of what this replica holds and runs: for every partition, the term
//! its session holds in the store (with its fence, weight and what is being done with
//! it), and the runner of an earlier term still ending. The runners the driver runs,
//! the renewals it refuses and the partitions the view shows as owned all derive from
//! it.

use std::collections::{BTreeMap, BTreeSet};

use crate::store::ops::moves::{MoveCause, Predecessor};
use leasehold_election::Fence;
use tokio::time::Instant;

/// What is being done with a term the session holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Granted; its runner starts once the partition's earlier runner has ended.
    Starting,
    /// Its runner runs.
    Serving,
    /// Its runner was told to hand over (and releases the term when done).
    Stopping(MoveCause),
    /// Held in the store with no runner (a resumed session, a claim whose reply was
    /// lost): to be granted again, or given back.
    Unserved,
    /// A regrant of it is in flight.
    Regranting,
}

/// A term the session holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) fence: Fence,
    pub(crate) weight: u64,
    pub(crate) phase: Phase,
    /// When the call that granted it was sent (its runner's deadline is anchored no
    /// earlier).
    pub(crate) sent: Instant,
    /// What the claim that granted it said of the partition's previous term (it decides
    /// what the term is offered of the state the previous one handed off); `None`: it
    /// was regranted to its session.
    pub(crate) previous: Option<Predecessor>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Entry {
    held: Option<Held>,
    /// The fence of an earlier term whose runner is still ending (it holds nothing in
    /// the store any more: its session ended, or it is releasing).
    ending: Option<Fence>,
}

impl Entry {
    /// Whether the view shows the partition as owned: a runner runs or is about to.
    fn owned(&self) -> bool {
        self.ending.is_some()
            || self.held.is_some_and(|h| {
                matches!(
                    h.phase,
                    Phase::Starting | Phase::Serving | Phase::Stopping(_)
                )
            })
    }

    /// Runners running.
    fn runners(&self) -> usize {
        usize::from(self.ending.is_some())
            + usize::from(
                self.held
                    .is_some_and(|h| matches!(h.phase, Phase::Serving | Phase::Stopping(_))),
            )
    }
}

/// What the holdings ask the driver to do after a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Start the runner of this term, granted by a call sent at that instant.
    Start(usize, Fence, Instant),
}

#[derive(Debug, Default)]
pub(crate) struct Holdings {
    entries: BTreeMap<usize, Entry>,
    /// Partitions whose "owned" changed since the view last looked.
    changed: BTreeSet<usize>,
}

impl Holdings {
    fn edit<T>(&mut self, i: usize, f: impl FnOnce(&mut Entry) -> T) -> T {
        let entry = self.entries.entry(i).or_default();
        let before = entry.owned();
        let out = f(entry);
        let after = entry.owned();
        if *entry == Entry::default() {
            self.entries.remove(&i);
        }
        if before != after {
            self.changed.insert(i);
        }
        out
    }

    /// The term of `i` the session holds, if any.
    pub(crate) fn held(&self, i: usize) -> Option<Held> {
        self.entries.get(&i).and_then(|s| s.held)
    }

    /// A claim (or a regrant) granted term `fence` of `i`, the partition's `previous`
    /// term as the claim named it: its runner starts at once, or once the partition's
    /// earlier runner has ended. A regrant of the same term keeps what its claim named.
    pub(crate) fn grant(
        &mut self,
        i: usize,
        fence: Fence,
        weight: u64,
        sent: Instant,
        previous: Option<Predecessor>,
    ) -> Option<Effect> {
        self.edit(i, |s| {
            let previous =
                previous.or(s.held.filter(|h| h.fence == fence).and_then(|h| h.previous));
            // An earlier term of ours whose runner still runs (handing over, its release
            // on its way): the store granted the partition again, so that term is over.
            if let Some(h) = s.held.take()
                && h.fence != fence
                && matches!(h.phase, Phase::Serving | Phase::Stopping(_))
            {
                debug_assert!(s.ending.is_none(), "one runner per partition");
                s.ending = Some(h.fence);
            }
            let starts = s.ending.is_none();
            s.held = Some(Held {
                fence,
                weight,
                phase: if starts {
                    Phase::Serving
                } else {
                    Phase::Starting
                },
                sent,
                previous,
            });
            starts.then_some(Effect::Start(i, fence, sent))
        })
    }

    /// A grant waiting for its runner to start is not to start (its partition was
    /// revoked, the replica drained): it is unserved again, for a regrant to give back.
    pub(crate) fn unstart(&mut self, i: usize) {
        self.edit(i, |s| {
            if let Some(h) = &mut s.held
                && h.phase == Phase::Starting
            {
                h.phase = Phase::Unserved;
            }
        });
    }

    /// Tells the runner of `i` to hand over; false if none serves it.
    pub(crate) fn stop(&mut self, i: usize, reason: MoveCause) -> bool {
        self.edit(i, |s| match &mut s.held {
            Some(h) if h.phase == Phase::Serving => {
                h.phase = Phase::Stopping(reason);
                true
            }
            _ => false,
        })
    }

    /// The runner of term `fence` of `i` has ended (after its release, if it made one):
    /// a grant that waited for it starts now.
    pub(crate) fn ended(&mut self, i: usize, fence: Fence) -> Option<Effect> {
        self.edit(i, |s| {
            if s.ending == Some(fence) {
                s.ending = None;
                if let Some(h) = &mut s.held
                    && h.phase == Phase::Starting
                {
                    h.phase = Phase::Serving;
                    return Some(Effect::Start(i, h.fence, h.sent));
                }
            } else if s.held.is_some_and(|h| h.fence == fence) {
                s.held = None;
            }
            None
        })
    }

    /// The session is over: every running runner is ending (the store freed its term
    /// with the session); terms without one are gone.
    pub(crate) fn session_lost(&mut self) {
        let all: Vec<usize> = self.entries.keys().copied().collect();
        for i in all {
            self.edit(i, |s| {
                if let Some(h) = s.held.take()
                    && matches!(h.phase, Phase::Serving | Phase::Stopping(_))
                {
                    s.ending = Some(h.fence);
                }
            });
        }
    }

    /// The store says the session holds term `fence` of `i` with no runner of ours
    /// (a resume, or a claim whose reply was lost).
    pub(crate) fn unserved(&mut self, i: usize, fence: Fence, weight: u64, now: Instant) {
        self.edit(i, |s| {
            s.held = Some(Held {
                fence,
                weight,
                phase: Phase::Unserved,
                sent: now,
                previous: None,
            });
        });
    }

    /// Sets the weight of the term `fence` of `i` (a reconcile read it).
    pub(crate) fn weigh(&mut self, i: usize, fence: Fence, weight: u64) {
        if let Some(h) = self.entries.get_mut(&i).and_then(|s| s.held.as_mut())
            && h.fence == fence
        {
            h.weight = weight;
        }
    }

    /// Drops every term that has no runner (leaving: the end of the session frees
    /// them; or a sticky leave: the parked session keeps them).
    pub(crate) fn drop_unstarted(&mut self) {
        let all: Vec<usize> = self.entries.keys().copied().collect();
        for i in all {
            self.edit(i, |s| {
                if s.held
                    .is_some_and(|h| !matches!(h.phase, Phase::Serving | Phase::Stopping(_)))
                {
                    s.held = None;
                }
            });
        }
    }

    /// Moves these terms to `phase` (from Unserved: a regrant or a give-back is sent).
    pub(crate) fn mark(&mut self, terms: &[(usize, Fence)], phase: Phase) {
        for &(i, f) in terms {
            self.edit(i, |s| {
                if let Some(h) = &mut s.held
                    && h.fence == f
                {
                    h.phase = phase;
                }
            });
        }
    }

    /// A regrant or give-back of these terms came back without granting them: they are
    /// no longer this session's (given back, or never were).
    pub(crate) fn drop_terms(&mut self, terms: &[(usize, Fence)]) {
        for &(i, f) in terms {
            self.edit(i, |s| {
                if s.held
                    .is_some_and(|h| h.fence == f && h.phase == Phase::Regranting)
                {
                    s.held = None;
                }
            });
        }
    }

    /// Forgets term `fence` of `i`, whose runner was about to start and will not (the
    /// replica is leaving: the end of its session has it).
    pub(crate) fn discard(&mut self, i: usize, fence: Fence) {
        self.edit(i, |s| {
            if s.held.is_some_and(|h| h.fence == fence) {
                s.held = None;
            }
        });
    }

    /// A regrant or give-back failed: its terms are unserved again (to retry).
    pub(crate) fn unsend(&mut self, terms: &[(usize, Fence)]) {
        for &(i, f) in terms {
            self.edit(i, |s| {
                if let Some(h) = &mut s.held
                    && h.fence == f
                    && h.phase == Phase::Regranting
                {
                    h.phase = Phase::Unserved;
                }
            });
        }
    }

    /// The store no longer lists term `fence` of `i` under the session (a reconcile):
    /// forget it; true if its runner runs (its renewals must be refused).
    pub(crate) fn forget(&mut self, i: usize, fence: Fence) -> bool {
        self.edit(i, |s| match s.held {
            Some(h) if h.fence == fence => {
                s.held = None;
                if matches!(h.phase, Phase::Serving | Phase::Stopping(_)) {
                    // Its runner still runs until it hears it is over.
                    s.ending = Some(fence);
                    true
                } else {
                    false
                }
            }
            _ => false,
        })
    }

    /// Every term the session holds: (partition, held).
    pub(crate) fn terms(&self) -> impl Iterator<Item = (usize, Held)> + '_ {
        self.entries
            .iter()
            .filter_map(|(i, s)| s.held.map(|h| (*i, h)))
    }

    /// Partitions whose runner serves (not stopping).
    pub(crate) fn serving(&self) -> Vec<usize> {
        self.terms()
            .filter(|(_, h)| h.phase == Phase::Serving)
            .map(|(i, _)| i)
            .collect()
    }

    /// The partitions whose runners serve, with their weights: what a plan by weight
    /// counts as this replica's.
    pub(crate) fn serving_weights(&self) -> Vec<(usize, u64)> {
        self.terms()
            .filter(|(_, h)| h.phase == Phase::Serving)
            .map(|(i, h)| (i, h.weight))
            .collect()
    }

    /// Terms in `phase`.
    pub(crate) fn in_phase(&self, phase: Phase) -> Vec<(usize, Fence)> {
        self.terms()
            .filter(|(_, h)| h.phase == phase)
            .map(|(i, h)| (i, h.fence))
            .collect()
    }

    /// Whether every term is served and no runner of an earlier term is still ending:
    /// nothing is starting, stopping or being released.
    pub(crate) fn at_rest(&self) -> bool {
        self.entries
            .values()
            .all(|s| s.ending.is_none() && s.held.is_none_or(|h| h.phase == Phase::Serving))
    }

    /// How many terms the session holds (in any phase).
    pub(crate) fn held_count(&self) -> usize {
        self.terms().count()
    }

    /// Their weights, summed.
    pub(crate) fn load(&self) -> u64 {
        self.terms().map(|(_, h)| h.weight).sum()
    }

    /// Runners running, of any term.
    pub(crate) fn runners(&self) -> usize {
        self.entries.values().map(Entry::runners).sum()
    }

    /// Whether a term is on its way out or in: stopping (its release pending), or a
    /// regrant or give-back in flight. A reconcile's answer could miss or overtake it.
    pub(crate) fn busy(&self) -> bool {
        self.terms()
            .any(|(_, h)| matches!(h.phase, Phase::Stopping(_) | Phase::Regranting))
    }

    /// Whether partition `i` is shown as owned.
    pub(crate) fn owned(&self, i: usize) -> bool {
        self.entries.get(&i).is_some_and(Entry::owned)
    }

    /// How many partitions are shown as owned.
    pub(crate) fn owned_count(&self) -> usize {
        self.entries.values().filter(|s| s.owned()).count()
    }

    /// The partitions whose "owned" changed since the last call.
    pub(crate) fn take_changes(&mut self) -> BTreeSet<usize> {
        std::mem::take(&mut self.changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_waits_for_the_partitions_ending_elector() {
        let mut l = Holdings::default();
        let t = Instant::now();
        assert_eq!(
            l.grant(1, Fence(10), 1, t, None),
            Some(Effect::Start(1, Fence(10), t))
        );
        l.session_lost();
        assert!(l.owned(1), "its runner is still ending");
        assert_eq!(l.held(1), None);
        assert_eq!(
            l.grant(1, Fence(20), 1, t, None),
            None,
            "waits for the old runner"
        );
        assert_eq!(l.runners(), 1);
        assert_eq!(l.ended(1, Fence(10)), Some(Effect::Start(1, Fence(20), t)));
        assert_eq!(l.held(1).unwrap().phase, Phase::Serving);
        assert_eq!(l.ended(1, Fence(20)), None);
        assert!(!l.owned(1));
        assert_eq!(l.take_changes(), [1].into());
    }

    #[test]
    fn a_grant_over_a_term_still_handing_over_waits_for_its_elector() {
        let mut l = Holdings::default();
        let t = Instant::now();
        l.grant(1, Fence(10), 1, t, None);
        assert!(l.stop(1, MoveCause::HandOff));
        // Released, and claimed again before the old runner was joined.
        assert_eq!(l.grant(1, Fence(20), 1, t, None), None);
        assert_eq!(l.runners(), 1, "only the old one runs");
        assert_eq!(l.ended(1, Fence(10)), Some(Effect::Start(1, Fence(20), t)));
        assert_eq!(l.held(1).unwrap().fence, Fence(20));
    }

    #[test]
    fn unserved_terms_are_regranted_or_dropped_by_fence() {
        let mut l = Holdings::default();
        let t = Instant::now();
        l.unserved(1, Fence(5), 3, t);
        l.unserved(2, Fence(6), 1, t);
        assert!(!l.owned(1), "no runner yet");
        assert_eq!(l.load(), 4);
        l.mark(&[(1, Fence(5)), (2, Fence(6))], Phase::Regranting);
        // A stale answer about an older term changes nothing.
        l.drop_terms(&[(1, Fence(4))]);
        assert_eq!(l.held_count(), 2);
        assert_eq!(
            l.grant(1, Fence(9), 3, t, None),
            Some(Effect::Start(1, Fence(9), t))
        );
        l.drop_terms(&[(2, Fence(6))]);
        assert_eq!(l.held_count(), 1);
        assert_eq!(l.serving(), [1]);
    }

    #[test]
    fn a_term_the_store_forgot_keeps_its_elector_until_it_ends() {
        let mut l = Holdings::default();
        l.grant(1, Fence(5), 1, Instant::now(), None);
        assert!(l.forget(1, Fence(5)), "its renewals must be refused");
        assert!(l.owned(1));
        assert_eq!(l.held(1), None);
        assert_eq!(l.ended(1, Fence(5)), None);
        assert!(!l.owned(1));
        assert!(!l.forget(1, Fence(5)));
    }

    #[test]
    fn a_term_keeps_what_its_claim_said_of_its_predecessor_until_it_starts() {
        let mut l = Holdings::default();
        let t = Instant::now();
        let p = Predecessor {
            cause: MoveCause::HandOff,
            unowned: None,
            fence: Some(Fence(9)),
            state_bytes: Some(3),
            state_before_server_change: false,
        };
        l.grant(1, Fence(10), 1, t, None);
        l.session_lost();
        // Granted while the old runner ends: it starts later, still knowing.
        assert_eq!(l.grant(1, Fence(20), 1, t, Some(p)), None);
        assert_eq!(l.ended(1, Fence(10)), Some(Effect::Start(1, Fence(20), t)));
        assert_eq!(l.held(1).unwrap().previous, Some(p));
        // A term not started (revoked first) and regranted keeps it; a new term does not.
        l.grant(2, Fence(30), 1, t, Some(p));
        l.unserved(3, Fence(31), 1, t);
        assert_eq!(
            l.held(3).unwrap().previous,
            None,
            "a resumed term names none"
        );
        l.unstart(2);
        l.grant(2, Fence(30), 1, t, None);
        assert_eq!(l.held(2).unwrap().previous, Some(p));
        l.grant(2, Fence(40), 1, t, None);
        assert_eq!(l.held(2).unwrap().previous, None);
    }
}
