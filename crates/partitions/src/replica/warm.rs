//! Warm moves, the giver's rule (make before break, opt-in:
//! `GroupConfigBuilder::prepare_moves`): a term handed over to a named receiver is held
//! (its runner keeps serving) while the receiver prepares, until the receiver says it
//! is ready or the wait is over, whichever comes first; then it is let go
//! ([`Action::LetGo`](super::Action::LetGo)). A hold ends with its term's runner. The
//! messages and the receiver's side are the driver's (`crate::coordinator::warm`).

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_election::Fence;
use tokio::time::Instant;

use super::{Action, ReplicaMachine};

/// A hand-over held while its receiver prepares: the driver asks the receiver to
/// prepare within `within`, and stops the term when the machine lets it go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hold {
    /// The term held.
    pub(crate) fence: Fence,
    /// How long the receiver has.
    pub(crate) within: Duration,
}

/// A term held back while its receiver prepares.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Waiting {
    fence: Fence,
    to: String,
    until: Instant,
}

/// The giver's side: terms kept running while their receivers prepare, each until its
/// receiver is ready or its wait is over.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    held: BTreeMap<usize, Waiting>,
}

impl Gate {
    /// Holds term `fence` of partition `index` for `to` until `until`.
    pub(crate) fn hold(&mut self, index: usize, fence: Fence, to: String, until: Instant) {
        self.held.insert(index, Waiting { fence, to, until });
    }

    /// `to` is ready for term `fence` of `index`: whether that term was held for it
    /// (it is let go now). Any other answer (a late one, another term's, another
    /// replica's) changes nothing.
    pub(crate) fn ready(&mut self, index: usize, fence: Fence, to: &str) -> bool {
        let ours = self
            .held
            .get(&index)
            .is_some_and(|h| h.fence == fence && h.to == to);
        if ours {
            self.held.remove(&index);
        }
        ours
    }

    /// Term `fence` of `index` has ended: nothing waits for its receiver any more.
    pub(crate) fn forget(&mut self, (index, fence): (usize, Fence)) {
        if self.held.get(&index).is_some_and(|h| h.fence == fence) {
            self.held.remove(&index);
        }
    }

    /// The terms whose wait is over at `now` (index, fence), let go.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<(usize, Fence)> {
        let due: Vec<(usize, Fence)> = self
            .held
            .iter()
            .filter(|(_, h)| h.until <= now)
            .map(|(&i, h)| (i, h.fence))
            .collect();
        for (i, _) in &due {
            self.held.remove(i);
        }
        due
    }

    /// When the next wait is over.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.held.values().map(|h| h.until).min()
    }
}

impl ReplicaMachine {
    /// Holds those of `chosen` (just told to stop, handing over) that have a receiver
    /// in `to`, if moves are warm: each is let go when its receiver is ready
    /// ([`ReplicaMachine::on_ready`]) or its wait is over ([`ReplicaMachine::poll`]).
    pub(super) fn hold(
        &mut self,
        chosen: &[usize],
        to: &BTreeMap<usize, String>,
        now: Instant,
    ) -> BTreeMap<usize, Hold> {
        let mut held = BTreeMap::new();
        let Some(within) = self.s.prepare_moves else {
            return held;
        };
        for &i in chosen {
            if let (Some(r), Some(h)) = (to.get(&i), self.holdings.held(i)) {
                self.warm.hold(i, h.fence, r.clone(), now + within);
                held.insert(
                    i,
                    Hold {
                        fence: h.fence,
                        within,
                    },
                );
            }
        }
        held
    }

    /// `to` says it is ready for term `fence` of partition `i`: the term is let go,
    /// named for it, if it was held for it (a late answer, another term's or another
    /// replica's changes nothing).
    pub(crate) fn on_ready(&mut self, i: usize, fence: Fence, to: &str) -> Vec<Action> {
        if self.warm.ready(i, fence, to) {
            vec![Action::LetGo {
                index: i,
                fence,
                ready: true,
            }]
        } else {
            Vec::new()
        }
    }

    /// The holds whose wait is over at `now`, let go to anyone.
    pub(super) fn holds_due(&mut self, now: Instant) -> impl Iterator<Item = Action> {
        self.warm
            .due(now)
            .into_iter()
            .map(|(index, fence)| Action::LetGo {
                index,
                fence,
                ready: false,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_term_goes_on_when_its_receiver_is_ready_or_its_wait_is_over() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut gate = Gate::default();
        gate.hold(1, Fence(10), "b".into(), t0 + ms(100));
        gate.hold(2, Fence(20), "c".into(), t0 + ms(50));
        assert_eq!(gate.next_due(), Some(t0 + ms(50)));
        assert!(!gate.ready(1, Fence(9), "b"), "another term's answer");
        assert!(!gate.ready(1, Fence(10), "c"), "another replica's answer");
        assert!(gate.ready(1, Fence(10), "b"));
        assert!(!gate.ready(1, Fence(10), "b"), "answered once");
        assert_eq!(gate.due(t0 + ms(49)), []);
        assert_eq!(gate.due(t0 + ms(50)), [(2, Fence(20))]);
        assert!(!gate.ready(2, Fence(20), "c"), "too late: it went on");
        assert_eq!(gate.next_due(), None);
        gate.hold(3, Fence(30), "b".into(), t0 + ms(100));
        gate.forget((3, Fence(29)));
        assert_eq!(gate.next_due(), Some(t0 + ms(100)), "another term's end");
        gate.forget((3, Fence(30)));
        assert_eq!(gate.next_due(), None, "its term ended: nothing waits");
        assert!(!gate.ready(3, Fence(30), "b"), "an answer after the end");
    }
}
