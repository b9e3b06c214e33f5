//! Warm moves (make before break, opt-in: `GroupConfigBuilder::prepare_moves`): before
//! a replica ends a term it hands to a named receiver, it asks the receiver to
//! prepare, and ends the term once the receiver says it is ready or the wait is over,
//! whichever comes first. The switch itself is the plain one (the old term ends and
//! releases, then the receiver claims), so a warm move never makes two owners; a
//! receiver that does not answer in time (slow, dead, an older version, a lost
//! message) costs the move its wait, and the move goes on as a plain one.
//!
//! The two messages travel on the group's notice channel (Redis pub/sub: best
//! effort; their encoding is in `crate::notice`). The giver's rule (which terms are
//! held, until when) is the replica machine's (`crate::replica::warm`); the driver
//! sends, receives and runs the receiver's callback.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use leasehold_election::Fence;

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
