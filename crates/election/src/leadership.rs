//! The handle a duty receives while its replica leads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::fence::Fence;
use crate::handoff::{HandOffError, HandOffSlot, LeaseNow, NoHandOff};
use crate::load::{LoadCell, LoadError, LoadSlot};
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
    /// The replica a planned move hands the duty to, set before `reason`.
    successor: Arc<OnceLock<Arc<str>>>,
    /// State handed over from the previous term, and left for the next.
    hand_off: Arc<HandOffSlot>,
    /// Where this term's load reports go (nowhere unless a coordinator attached a cell).
    load: Arc<LoadSlot>,
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
        hand_offs: bool,
    ) -> Self {
        Self {
            fence,
            replica_id: replica_id.into(),
            duty: duty.into(),
            cancel,
            deadline: Arc::new(Deadline::new(deadline)),
            reason: Arc::new(OnceLock::new()),
            successor: Arc::new(OnceLock::new()),
            hand_off: Arc::new(HandOffSlot::new(hand_offs)),
            load: Arc::default(),
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

    /// The duty (or partition) name.
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
    /// [`cancelled`](Self::cancelled) completes, so a duty can tell a planned move
    /// ([`TermEndReason::HandedOff`], [`TermEndReason::Drained`],
    /// [`TermEndReason::Removed`], [`TermEndReason::Shutdown`]) from a lost lease
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

    /// The replica this term hands its duty to, for a planned move to a known replica
    /// (in a partition group, a hand-over that evens out the group names the member
    /// with room that is to claim the partition next); `None` while the term runs, and
    /// for every other end. Known as soon as [`end_reason`](Self::end_reason) is, so a
    /// duty can tailor what it [`hand_off`](Self::hand_off)s (or warm its successor
    /// through its own channels).
    ///
    /// It names who the move is *for*: the next term may still go to another replica
    /// (the receiver died, or did not claim in time), and
    /// [`handed_over`](Self::handed_over) on the next owner is what says whether state
    /// arrived.
    pub fn successor(&self) -> Option<&str> {
        self.successor.get().map(|s| &**s)
    }

    /// Records the replica a planned move hands the duty to, before the end reason.
    pub(crate) fn set_successor(&self, successor: Arc<str>) {
        let _ = self.successor.set(successor);
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

    /// Leaves `state` for the next owner of this partition: it travels with this term's
    /// release and is offered to the next term (its
    /// [`handed_over`](Self::handed_over)) only if that term immediately follows this
    /// one. Call it once the term is ending, typically after
    /// [`cancelled`](Self::cancelled) completes and before the duty returns (within
    /// its grace); a later call replaces the state. Partition terms only.
    ///
    /// The state is kept in Redis, tied to this term's fence, until the next owner
    /// takes it or its time to live passes (`GroupConfigBuilder::hand_off_ttl` in
    /// `leasehold-partitions`). It is handed over only if the lease is given back: a
    /// term that lost its lease (a refused renewal, a passed deadline with the lease
    /// taken by then) hands nothing over, and its successor is told why. A call once
    /// the lease is lost, or may be (the renewal was refused, the local deadline has
    /// passed: see [`end_reason`](Self::end_reason)), says so
    /// ([`HandOffError::LeaseLost`]) and keeps nothing. A term ended on purpose (a
    /// hand-over, a drain, a shutdown) still hands off during its grace.
    ///
    /// # Errors
    /// [`HandOffError::TooLarge`] over [`MAX_HAND_OFF_BYTES`](crate::MAX_HAND_OFF_BYTES),
    /// [`HandOffError::Unsupported`] for a duty's own elector,
    /// [`HandOffError::LeaseLost`] once the lease is lost or the local deadline has
    /// passed, [`HandOffError::TooLate`] once the release has been sent.
    pub fn hand_off(&self, state: impl Into<Vec<u8>>) -> Result<(), HandOffError> {
        let lease = if self
            .reason
            .get()
            .is_some_and(TermEndReason::lease_may_be_lost)
        {
            LeaseNow::Lost
        } else if Instant::now() >= self.deadline.get() {
            LeaseNow::PastDeadline
        } else {
            LeaseNow::Held
        };
        self.hand_off.leave(state.into(), lease)
    }

    /// The state the previous term of this partition left for this one
    /// ([`hand_off`](Self::hand_off)), known before the duty starts; or why there is
    /// none: a first owner, a crash in between, state that was not the immediately
    /// preceding term's, a read that failed ([`NoHandOff`]). A duty that gets `Err`
    /// starts cold.
    ///
    /// # Errors
    /// [`NoHandOff`], saying why nothing was handed over.
    pub fn handed_over(&self) -> Result<&[u8], NoHandOff> {
        self.hand_off.offered()
    }

    /// Sets what [`handed_over`](Self::handed_over) returns, once, before the duty
    /// starts. For Leasehold's own crates (the partition coordinator).
    #[doc(hidden)]
    pub fn offer_hand_off(&self, offered: Result<Vec<u8>, NoHandOff>) {
        self.hand_off.offer(offered);
    }

    /// Reports this partition's load now: what the tenant brings (entries appended or
    /// requests received per second, bytes stored, CPU seconds), any number that grows
    /// with what the partition costs its owner; not what this owner got through
    /// (entries processed per second, lag), which jumps while a new owner catches up
    /// with a backlog. Call it as often as you like
    /// (each call replaces the last); the group samples the last value once per renew
    /// interval, damps it (an average with a half-life) and makes it the partition's
    /// weight when it moved by more than a threshold, so the group balances by measured
    /// load. A weight is a whole number of at least 1: report in units where 1 is the
    /// smallest load worth telling apart. Partition terms of a group built with
    /// `GroupConfigBuilder::weights_from_loads` (`leasehold-partitions`) only.
    ///
    /// # Errors
    /// [`LoadError::Invalid`] for a negative, infinite or NaN load (nothing is
    /// recorded), [`LoadError::Unsupported`] where loads go nowhere.
    pub fn report_load(&self, load: f64) -> Result<(), LoadError> {
        self.load.report(load)
    }

    /// Sends this term's load reports to `cell`, once, before the duty starts. For
    /// Leasehold's own crates (the partition coordinator).
    #[doc(hidden)]
    pub fn attach_load(&self, cell: Arc<LoadCell>) {
        self.load.attach(cell);
    }

    /// Takes the state this term leaves (for its release), and refuses any later
    /// [`hand_off`](Self::hand_off).
    pub(crate) fn seal_hand_off(&self) -> Option<Vec<u8>> {
        self.hand_off.seal()
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
        Leadership::new(
            Fence(7),
            "a",
            "job",
            CancellationToken::new(),
            deadline,
            false,
        )
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
        l.set_end_reason(&TermEndReason::HandedOff);
        l.set_end_reason(&TermEndReason::Shutdown);
        assert!(matches!(l.end_reason(), Some(TermEndReason::HandedOff)));
        let l = lead(Instant::now() + Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(matches!(
            l.end_reason(),
            Some(TermEndReason::DeadlinePassed)
        ));
    }

    fn partition_term(deadline: Instant) -> Leadership {
        Leadership::new(
            Fence(7),
            "a",
            "p1",
            CancellationToken::new(),
            deadline,
            true,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_ended_on_purpose_hands_off_during_its_grace() {
        let l = partition_term(Instant::now() + Duration::from_secs(1));
        for planned in [
            TermEndReason::HandedOff,
            TermEndReason::Drained,
            TermEndReason::Shutdown,
        ] {
            let l = partition_term(Instant::now() + Duration::from_secs(1));
            l.set_end_reason(&planned);
            l.token().cancel();
            assert!(l.is_cancelled());
            assert_eq!(l.hand_off(b"offset=42".to_vec()), Ok(()), "{planned}");
            assert_eq!(l.seal_hand_off().as_deref(), Some(&b"offset=42"[..]));
        }
        // While the term runs, too.
        assert_eq!(l.hand_off(b"early".to_vec()), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_whose_lease_is_gone_says_so_when_it_hands_off() {
        // The elector saw the lease lost (the duty then runs only until it is aborted).
        for lost in [
            TermEndReason::RenewalRefused,
            TermEndReason::DeadlinePassed,
            TermEndReason::BackendError(crate::StoreError::WrongType(std::sync::Arc::new(
                redis::RedisError::from((
                    redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
                    "WRONGTYPE",
                    "Operation against a key holding the wrong kind of value".to_owned(),
                )),
            ))),
        ] {
            let l = partition_term(Instant::now() + Duration::from_secs(1));
            l.set_end_reason(&lost);
            l.token().cancel();
            assert_eq!(
                l.hand_off(b"x".to_vec()),
                Err(HandOffError::LeaseLost),
                "{lost}"
            );
            assert_eq!(l.seal_hand_off(), None, "nothing kept");
            assert_eq!(
                l.hand_off(b"x".to_vec()),
                Err(HandOffError::LeaseLost),
                "{lost}: still lost after the seal, not too late"
            );
        }
        // The local deadline passed and the elector has not run since (a pause, a
        // blocked runtime): no reason yet, nothing cancelled.
        let l = partition_term(Instant::now() + Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(!l.token().is_cancelled());
        assert_eq!(l.hand_off(b"x".to_vec()), Err(HandOffError::LeaseLost));
        // A planned end whose grace ran into the deadline: past it, nothing is kept.
        let l = partition_term(Instant::now() + Duration::from_millis(100));
        l.set_end_reason(&TermEndReason::HandedOff);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(l.hand_off(b"x".to_vec()), Err(HandOffError::LeaseLost));
        // Once the release was sent, a passed deadline is "too late".
        let l = partition_term(Instant::now() + Duration::from_millis(100));
        l.set_end_reason(&TermEndReason::HandedOff);
        assert_eq!(l.seal_hand_off(), None);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(l.hand_off(b"x".to_vec()), Err(HandOffError::TooLate));
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_ends_the_term_at_once() {
        let l = lead(Instant::now() + Duration::from_secs(1));
        l.token().cancel();
        assert!(l.check().is_err());
        assert_eq!(l.remaining(), Duration::ZERO);
    }
}
