//! The handle a duty receives while its replica leads.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::fence::Fence;

/// Given to a duty when its replica becomes leader; valid for one term.
///
/// The duty must watch [`Leadership::cancelled`] and stop promptly when it fires, and
/// should attach [`Leadership::fence`] to every write. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Leadership {
    pub(crate) fence: Fence,
    pub(crate) replica_id: Arc<str>,
    pub(crate) duty: Arc<str>,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Arc<Mutex<Instant>>,
}

impl Leadership {
    /// This term's fencing token.
    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    /// The duty (or partition) name.
    pub fn duty(&self) -> &str {
        &self.duty
    }

    /// Completes when the term ends (renewal refused, deadline passed, shutdown, ...).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it and calling again waits for the same event.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Whether the term has ended.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// A token that fires when the term ends (to pass into other tasks).
    pub fn token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The local validity deadline: the instant after which this replica no longer
    /// believes it leads, unless a renewal moves it.
    pub fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Time left until [`Leadership::deadline`]; zero once the term has ended.
    pub fn remaining(&self) -> Duration {
        if self.is_cancelled() {
            return Duration::ZERO;
        }
        self.deadline().saturating_duration_since(Instant::now())
    }

    pub(crate) fn set_deadline(&self, at: Instant) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }
}
