//! The handle a duty receives while its replica leads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::fence::Fence;
use crate::status::TermEndReason;

/// Given to a duty when its replica becomes leader; valid for one term.
///
/// The duty must stop promptly when the term ends, and should attach
/// [`Leadership::fence`] to every write:
///
/// - [`Leadership::cancelled`] completes when the elector ends the term (renewal
///   refused, deadline passed, shutdown, ...): await it in a `select!`;
/// - [`Leadership::check`] is the cheap guard to call right before each side effect:
///   no I/O and no await, it reads the local deadline, so it fails as soon as the
///   deadline has passed even if the elector's task has not run since (a paused
///   process, a blocked runtime).
///
/// Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Leadership {
    fence: Fence,
    replica_id: Arc<str>,
    duty: Arc<str>,
    cancel: CancellationToken,
    deadline: Arc<Deadline>,
    /// Why the term ended, set before `cancel` fires.
    reason: Arc<OnceLock<TermEndReason>>,
}

/// The term is over: returned by [`Leadership::check`]. Stop the duty's work; any write
/// made from now on must be fenced (see [`Leadership::fence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the term with fence {fence} is over: this replica no longer leads")]
#[non_exhaustive]
pub struct TermOver {
    /// The fence of the term that ended.
    pub fence: Fence,
}

/// A local deadline that many threads read (without a lock) and the elector moves.
/// Once passed it stays passed: a renewal that comes back after the deadline does not
/// revive the term.
#[derive(Debug)]
struct Deadline {
    /// Every deadline is stored as nanoseconds after this instant.
    epoch: Instant,
    nanos: AtomicU64,
}

impl Deadline {
    fn new(at: Instant) -> Self {
        Self {
            epoch: at,
            nanos: AtomicU64::new(0),
        }
    }

    fn get(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }

    /// Moves the deadline to `to` unless it has already passed; `false` if it had.
    fn extend(&self, to: Instant) -> bool {
        let to =
            u64::try_from(to.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let mut current = self.nanos.load(Ordering::Acquire);
        loop {
            if Instant::now() >= self.epoch + Duration::from_nanos(current) {
                return false;
            }
            match self.nanos.compare_exchange_weak(
                current,
                to.max(current),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(seen) => current = seen,
            }
        }
    }
}

impl Leadership {
    pub(crate) fn new(
        fence: Fence,
        replica_id: &str,
        duty: &str,
        cancel: CancellationToken,
        deadline: Instant,
    ) -> Self {
        Self {
            fence,
            replica_id: replica_id.into(),
            duty: duty.into(),
            cancel,
            deadline: Arc::new(Deadline::new(deadline)),
            reason: Arc::new(OnceLock::new()),
        }
    }

    /// This term's fencing token.
    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    /// The duty's name.
    pub fn duty(&self) -> &str {
        &self.duty
    }

    /// Completes when the elector ends the term (renewal refused, deadline passed,
    /// shutdown, ...). The elector fires it at the deadline at the latest, *if its task
    /// runs*: on a blocked runtime it fires late (see
    /// [`Elector::spawn_dedicated`](crate::Elector::spawn_dedicated)), so also
    /// [`check`](Self::check) before each side effect.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it and calling again waits for the same event.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Whether the term has ended: the elector ended it, or the local deadline has
    /// passed (whether or not the elector's task has run since).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled() || Instant::now() >= self.deadline.get()
    }

    /// `Ok` while this replica still leads; [`TermOver`] once the term has ended (as
    /// [`is_cancelled`](Self::is_cancelled)). Cheap: no I/O, no await, no lock. Call it
    /// right before each side effect, typically as `lead.check()?`.
    ///
    /// # Errors
    /// [`TermOver`] once the term is over.
    pub fn check(&self) -> Result<(), TermOver> {
        if self.is_cancelled() {
            Err(TermOver { fence: self.fence })
        } else {
            Ok(())
        }
    }

    /// Why the term ended; `None` while it runs. Known before
    /// [`cancelled`](Self::cancelled) completes, so a duty can tell a planned end
    /// ([`TermEndReason::Shutdown`], [`TermEndReason::SteppedDown`]) from a lost lease
    /// ([`TermEndReason::RenewalRefused`], [`TermEndReason::DeadlinePassed`]). A term
    /// whose local deadline passed before the elector ran says `DeadlinePassed`.
    pub fn end_reason(&self) -> Option<TermEndReason> {
        if let Some(r) = self.reason.get() {
            return Some(r.clone());
        }
        (Instant::now() >= self.deadline.get()).then_some(TermEndReason::DeadlinePassed)
    }

    /// Records why the term ended (the first reason wins), before the elector cancels it.
    pub(crate) fn set_end_reason(&self, reason: &TermEndReason) {
        let _ = self.reason.set(reason.clone());
    }

    /// A token that fires when the elector ends the term (to pass into other tasks).
    pub fn token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The local validity deadline: the instant after which this replica no longer
    /// believes it leads, unless a renewal moves it.
    pub fn deadline(&self) -> Instant {
        self.deadline.get()
    }

    /// Time left until [`Leadership::deadline`]; zero once the term has ended.
    pub fn remaining(&self) -> Duration {
        if self.cancel.is_cancelled() {
            return Duration::ZERO;
        }
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// Moves the deadline to `at` after a successful renewal; `false` (and no change)
    /// if the deadline had already passed: the term is over.
    pub(crate) fn extend_deadline(&self, at: Instant) -> bool {
        self.deadline.extend(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(deadline: Instant) -> Leadership {
        Leadership::new(Fence(7), "a", "job", CancellationToken::new(), deadline)
    }

    #[tokio::test(start_paused = true)]
    async fn the_term_is_over_at_the_deadline_without_the_elector() {
        let l = lead(Instant::now() + Duration::from_millis(100));
        assert!(l.check().is_ok() && !l.is_cancelled());
        assert_eq!(l.remaining(), Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(
            l.is_cancelled(),
            "nobody cancelled the token, but the deadline passed"
        );
        assert_eq!(l.check(), Err(TermOver { fence: Fence(7) }));
        assert_eq!(l.remaining(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_moves_the_deadline_but_never_revives_a_passed_one() {
        let start = Instant::now();
        let l = lead(start + Duration::from_millis(100));
        assert!(l.extend_deadline(start + Duration::from_millis(300)));
        assert_eq!(l.deadline(), start + Duration::from_millis(300));
        // Never moved back.
        assert!(l.extend_deadline(start + Duration::from_millis(200)));
        assert_eq!(l.deadline(), start + Duration::from_millis(300));
        tokio::time::advance(Duration::from_millis(300)).await;
        assert!(!l.extend_deadline(start + Duration::from_millis(900)));
        assert!(l.check().is_err(), "stays over");
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_reason_is_known_once_the_term_is_over() {
        let l = lead(Instant::now() + Duration::from_millis(100));
        assert!(l.end_reason().is_none());
        l.set_end_reason(&TermEndReason::SteppedDown);
        l.set_end_reason(&TermEndReason::Shutdown);
        assert!(matches!(l.end_reason(), Some(TermEndReason::SteppedDown)));
        let l = lead(Instant::now() + Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(matches!(
            l.end_reason(),
            Some(TermEndReason::DeadlinePassed)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_ends_the_term_at_once() {
        let l = lead(Instant::now() + Duration::from_secs(1));
        l.token().cancel();
        assert!(l.check().is_err());
        assert_eq!(l.remaining(), Duration::ZERO);
    }
}
