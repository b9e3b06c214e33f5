//! Warm moves (make before break, opt-in: `GroupConfigBuilder::prepare_moves`): before
//! a replica ends a term it hands to a named receiver, it asks the receiver to
//! prepare, and ends the term once the receiver says it is ready or the wait is over,
//! whichever comes first. The switch itself is the plain one (the old term ends and
//! releases, then the receiver claims), so a warm move never makes two owners; a
//! receiver that does not answer in time (slow, dead, an older version, a lost
//! message) costs the move its wait, and the move goes on as a plain one.
//!
//! The two messages travel on the group's notice channel (Redis pub/sub: best
//! effort; their encoding is in `crate::notice`). This module holds the giver's rule
//! ([`Gate`]), pure; the driver sends, receives and runs the receiver's callback.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use leasehold_election::Fence;
use tokio::time::Instant;

/// What a receiver is asked to prepare for: handed to the callback set with
/// [`Coordinator::on_prepare`](crate::Coordinator::on_prepare).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Prepare {
    /// The partition about to be handed to this replica.
    pub partition: String,
    /// The replica that owns it now.
    pub from: String,
    /// How long the owner waits for this preparation: a callback still running then
    /// is dropped, and the move goes on without waiting for it.
    pub within: Duration,
}

/// A receiver's preparation callback ([`Coordinator::on_prepare`](crate::Coordinator::on_prepare)).
pub(crate) type PrepareFn =
    Arc<dyn Fn(Prepare) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A warm-move message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Warm {
    /// `from` asks `to` to prepare for `partition`, whose term `fence` it is about to
    /// end, within `within`.
    Prepare {
        partition: String,
        from: String,
        to: String,
        fence: Fence,
        within: Duration,
    },
    /// `to` is ready for `partition` (term `fence` of `from`).
    Ready {
        partition: String,
        from: String,
        to: String,
        fence: Fence,
    },
}

/// A term held back while its receiver prepares.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    fence: Fence,
    to: String,
    until: Instant,
}

/// The giver's side: terms kept running while their receivers prepare, each until its
/// receiver is ready or its wait is over.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    held: BTreeMap<usize, Held>,
}

impl Gate {
    /// Holds term `fence` of partition `index` for `to` until `until`.
    pub(crate) fn hold(&mut self, index: usize, fence: Fence, to: String, until: Instant) {
        self.held.insert(index, Held { fence, to, until });
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
