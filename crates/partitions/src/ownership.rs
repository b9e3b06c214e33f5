//! What a partition's callback holds while its replica owns the partition: the
//! [`Ownership`] of one term, the duty's [`Leadership`] (fence, deadline, cancellation)
//! plus what only a partition term has: state handed from term to term, its load, the
//! member a planned move hands it to, and why it ended.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use leasehold_election::{Fence, Leadership, StoreError, TermEndReason, TermOver};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::store::ops::moves::MoveCause;

/// The most bytes a term may hand off (1 MiB): the payload travels in the release
/// script and is kept in Redis until the next owner takes it.
pub const MAX_HAND_OFF_BYTES: usize = 1 << 20;

/// Why [`Ownership::hand_off`] refused the state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandOffError {
    /// The state is larger than [`MAX_HAND_OFF_BYTES`].
    #[error("hand-off state of {len} bytes is over the limit of {max} bytes")]
    TooLarge {
        /// The state's length.
        len: usize,
        /// The limit ([`MAX_HAND_OFF_BYTES`]).
        max: usize,
    },
    /// The term's lease was already given back: the state can no longer travel with it.
    #[error("the term has already given its lease back: too late to hand state off")]
    TooLate,
    /// The term's lease is lost, or may be: a renewal was refused, the local deadline
    /// has passed, or the lease key holds someone else's data. Such a term gives
    /// nothing back that the next owner could take the state from, so it is not kept.
    /// A term ended on purpose (a hand-over, a drain, a removal, a shutdown) is not
    /// lost while its deadline has not passed: it hands off as usual.
    #[error(
        "the term's lease is lost (or its local deadline has passed): no state can be handed off"
    )]
    LeaseLost,
}

/// Why a term was offered no hand-off state by the term before it
/// ([`Ownership::handed_over`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NoHandOff {
    /// No earlier term of this partition is known to its group: its first owner (also
    /// after Redis lost the group and it was made again).
    #[error("no earlier term of this partition is known: this is its first owner")]
    FirstOwner,
    /// The same session holds the partition on, in a new term (a resume after a sticky
    /// restart, or a claim whose reply was lost): nothing was handed from one owner to
    /// another.
    #[error("the same session holds the partition on: nothing was handed over")]
    Regranted,
    /// The previous term's session expired (its replica crashed, hung or lost Redis for
    /// a lease): after a crash nothing is handed over, so no state can be stale.
    #[error("the previous owner's session expired: nothing is handed over after a crash")]
    Crashed,
    /// The previous term ended (for the cause named, as in the ledger of moves) without
    /// leaving state.
    #[error("the previous term ended ({cause}) without leaving state")]
    NothingLeft {
        /// Why the previous term ended.
        cause: MoveCause,
    },
    /// The previous term left state, but it is gone: its time to live passed, or Redis
    /// lost it.
    #[error(
        "the previous term left state, but it is gone (its time to live passed, or Redis lost it)"
    )]
    Gone,
    /// The previous term left state before Redis restarted or failed over (in another
    /// server lifetime): the restart or failover may have lost a later term of the
    /// partition with its writes, so the state is never offered.
    #[error(
        "the state was left before a Redis restart or failover, which may have lost a later term: not offered"
    )]
    ServerChanged,
    /// The state found was not left by the immediately preceding term (an older term's,
    /// never taken): it is never offered.
    #[error("the state found was left by another term than the previous one: not offered")]
    Stale,
    /// The state could not be read in time; the term runs without it.
    #[error("the hand-off state could not be read")]
    Unavailable(#[source] StoreError),
}

/// Why [`Ownership::report_load`] refused a load.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The load is negative, infinite or not a number.
    #[error("a load must be a finite number >= 0, not {0}")]
    Invalid(f64),
    /// The group was built without
    /// [`GroupConfigBuilder::weights_from_loads`](crate::GroupConfigBuilder::weights_from_loads):
    /// its weights do not follow loads, so a report goes nowhere.
    #[error("this group's weights do not follow loads (built without weights_from_loads)")]
    NotTaken,
}

/// The last load a term reported, shared between its [`Ownership`] clones and the
/// coordinator, which damps it into the partition's weight.
#[derive(Debug)]
pub(crate) struct LoadCell {
    /// The load's bits; `u64::MAX` (a NaN no report can store) while none was reported.
    bits: AtomicU64,
}

const NO_LOAD: u64 = u64::MAX;

impl LoadCell {
    /// A cell with no load reported.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            bits: AtomicU64::new(NO_LOAD),
        })
    }

    /// The last load reported, if any.
    pub(crate) fn latest(&self) -> Option<f64> {
        let bits = self.bits.load(Ordering::Acquire);
        (bits != NO_LOAD).then(|| f64::from_bits(bits))
    }

    fn store(&self, load: f64) {
        self.bits.store(load.to_bits(), Ordering::Release);
    }
}

/// What one term's [`Ownership`] shares with its coordinator (and with the store its
/// runner releases through, which takes the state the term leaves).
#[derive(Debug)]
pub(crate) struct TermShared {
    /// What the term was offered; set once, before the callback runs.
    offered: OnceLock<Result<Vec<u8>, NoHandOff>>,
    /// What the term leaves; `None` once sealed (the release took it).
    leaving: Mutex<Option<Option<Vec<u8>>>>,
    /// Where its load reports go, if the group takes loads.
    load: Option<Arc<LoadCell>>,
    /// The member a planned move hands the partition to, set before `reason`.
    successor: OnceLock<Arc<str>>,
    /// Why the coordinator ended the term, set before it stops the runner.
    reason: OnceLock<MoveCause>,
    /// The store no longer lists the term under this replica's session: its runner's
    /// next renewal is refused, whatever the tick says of the session.
    revoked: AtomicBool,
}

impl TermShared {
    pub(crate) fn new(load: Option<Arc<LoadCell>>) -> Arc<Self> {
        Arc::new(Self {
            offered: OnceLock::new(),
            leaving: Mutex::new(Some(None)),
            load,
            successor: OnceLock::new(),
            reason: OnceLock::new(),
            revoked: AtomicBool::new(false),
        })
    }

    /// The last load the term reported (`Some(None)`: none yet), if the group takes
    /// loads.
    pub(crate) fn load(&self) -> Option<Option<f64>> {
        self.load.as_ref().map(|c| c.latest())
    }

    /// Refuses every later renewal of the term (the store no longer lists it).
    pub(crate) fn revoke(&self) {
        self.revoked.store(true, Ordering::SeqCst);
    }

    /// Whether the term's renewals are refused.
    pub(crate) fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::SeqCst)
    }

    /// Sets what [`Ownership::handed_over`] says, once, before the callback runs.
    pub(crate) fn offer(&self, offered: Result<Vec<u8>, NoHandOff>) {
        let _ = self.offered.set(offered);
    }

    /// The coordinator ends the term: for `cause`, handing it to `to` if named. Call it
    /// before stopping the term's runner, so the callback knows why when it is
    /// cancelled.
    pub(crate) fn ending(&self, cause: MoveCause, to: Option<&str>) {
        if let Some(to) = to {
            let _ = self.successor.set(to.into());
        }
        let _ = self.reason.set(cause);
    }

    /// Why the coordinator ended the term, if it did.
    pub(crate) fn ended_for(&self) -> Option<MoveCause> {
        self.reason.get().copied()
    }

    /// Takes what the term leaves and refuses any later [`Ownership::hand_off`].
    pub(crate) fn seal(&self) -> Option<Vec<u8>> {
        self.leaving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .flatten()
    }

    fn leave(&self, state: Vec<u8>, lease: LeaseNow) -> Result<(), HandOffError> {
        if state.len() > MAX_HAND_OFF_BYTES {
            return Err(HandOffError::TooLarge {
                len: state.len(),
                max: MAX_HAND_OFF_BYTES,
            });
        }
        // A lost lease is named as such even after the seal (the release of a term
        // whose renewal was refused is never sent: "too late" would mislead); a
        // deadline that passed after the release was sent is too late.
        if lease == LeaseNow::Lost {
            return Err(HandOffError::LeaseLost);
        }
        let mut leaving = self.leaving.lock().unwrap_or_else(PoisonError::into_inner);
        match leaving.as_mut() {
            None => Err(HandOffError::TooLate),
            Some(_) if lease == LeaseNow::PastDeadline => Err(HandOffError::LeaseLost),
            Some(offered) => {
                *offered = Some(state);
                Ok(())
            }
        }
    }
}

/// Whether a term can still give its lease back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaseNow {
    /// Held: the term runs, or ended on purpose within its deadline.
    Held,
    /// The term ended for a reason that may have lost the lease.
    Lost,
    /// The local deadline has passed, whatever the term ended for (if it has).
    PastDeadline,
}

/// One term of this replica's ownership of a partition: what the callback given to
/// [`Coordinator::new`](crate::Coordinator::new) receives.
///
/// What every term has: [`fence`](Self::fence) for every write,
/// [`cancelled`](Self::cancelled) to stop when the term ends, [`check`](Self::check)
/// before each side effect (the duty's [`Leadership`] is
/// [`leadership`](Self::leadership), for code written for duties). Beside it, what only a
/// partition term has: the state the previous owner [`hand_off`](Self::hand_off)ed
/// ([`handed_over`](Self::handed_over)), the partition's load
/// ([`report_load`](Self::report_load)), and, once the term ends, why
/// ([`end_reason`](Self::end_reason)) and to whom ([`successor`](Self::successor)).
///
/// ```no_run
/// use leasehold_partitions::{Coordinator, GroupConfig, MemoryGroupStore, MoveCause, Ownership};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1").build()?;
/// let coordinator = Coordinator::new(MemoryGroupStore::new(), config, |tenant, lease: Ownership| async move {
///     // Resume where the previous owner stopped, if it said.
///     let cursor = lease.handed_over().map(<[u8]>::to_vec).unwrap_or_default();
///     println!("serving {tenant} from {cursor:?} with fence {}", lease.fence());
///     lease.cancelled().await; // after a lost lease, the callback may end here
///     if lease.end_reason() == Some(MoveCause::HandOff) {
///         // For the next owner; `LeaseLost` if the grace outran the lease.
///         let _ = lease.hand_off(cursor);
///     }
///     Ok(())
/// })
/// .spawn();
/// # coordinator.shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Ownership {
    lead: Leadership,
    term: Arc<TermShared>,
}

impl Ownership {
    pub(crate) fn new(lead: Leadership, term: Arc<TermShared>) -> Self {
        Self { lead, term }
    }

    /// The partition's name (the same as [`Leadership::duty`]).
    pub fn partition(&self) -> &str {
        self.lead.duty()
    }

    /// The term as a duty sees it, for code written for duties: its
    /// [`Leadership::end_reason`] says in the elector's terms why the lease ended.
    pub fn leadership(&self) -> &Leadership {
        &self.lead
    }

    /// This term's fencing token: pass it with every write
    /// ([`FencedWriter`](crate::FencedWriter)).
    pub fn fence(&self) -> Fence {
        self.lead.fence()
    }

    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        self.lead.replica_id()
    }

    /// Completes when the term ends (a move, a lost lease, a shutdown). It fires at the
    /// local deadline at the latest *if the coordinator's task runs*; on a blocked
    /// runtime it fires late, so also [`check`](Self::check) before each side effect.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it and calling again waits for the same event.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.lead.cancelled()
    }

    /// Whether the term has ended: ended by the coordinator, or past its local
    /// deadline (whether or not the coordinator's task has run since).
    pub fn is_cancelled(&self) -> bool {
        self.lead.is_cancelled()
    }

    /// `Ok` while this replica still owns the partition; [`TermOver`] once the term has
    /// ended (as [`is_cancelled`](Self::is_cancelled)). Cheap: no I/O, no await, no
    /// lock. Call it right before each side effect, typically as `lease.check()?`.
    ///
    /// # Errors
    /// [`TermOver`] once the term is over.
    pub fn check(&self) -> Result<(), TermOver> {
        self.lead.check()
    }

    /// A token that fires when the term ends (to pass into other tasks).
    pub fn token(&self) -> CancellationToken {
        self.lead.token()
    }

    /// The local validity deadline: the instant after which this replica no longer
    /// believes it owns the partition, unless a renewal moves it.
    pub fn deadline(&self) -> Instant {
        self.lead.deadline()
    }

    /// Time left until [`deadline`](Self::deadline); zero once the term has ended.
    pub fn remaining(&self) -> Duration {
        self.lead.remaining()
    }

    /// Why the term ended; `None` while it runs. Known before
    /// [`cancelled`](Leadership::cancelled) completes, so the callback can tell a
    /// planned move ([`MoveCause::HandOff`], [`MoveCause::Drain`],
    /// [`MoveCause::Removal`], [`MoveCause::Leave`]: hand state off, finish cleanly)
    /// from a lost lease ([`MoveCause::Expiry`]: a refused renewal, a passed deadline:
    /// stop at once, someone else may own it already). A term that ended on its own
    /// (the callback returned, failed or panicked, or stepped down) says
    /// [`MoveCause::Released`]. The same causes the ledger of moves records for the
    /// next owner; [`leadership`](Self::leadership)`().end_reason()` has the elector's
    /// detail.
    pub fn end_reason(&self) -> Option<MoveCause> {
        if let Some(cause) = self.term.ended_for() {
            return Some(cause);
        }
        self.lead.end_reason().map(|r| match r {
            r if r.lease_may_be_lost() => MoveCause::Expiry,
            TermEndReason::Shutdown => MoveCause::Leave,
            _ => MoveCause::Released,
        })
    }

    /// The member this term hands the partition to, for a hand-over that evens out
    /// the group (the rule names the member with room that is to claim it next); `None`
    /// while the term runs, and for every other end. Known as soon as
    /// [`end_reason`](Self::end_reason) is, so the callback can tailor what it
    /// [`hand_off`](Self::hand_off)s (or warm its successor through its own channels).
    ///
    /// It names who the move is *for*: the next term may still go to another member
    /// (the receiver died, or did not claim in time), and
    /// [`handed_over`](Self::handed_over) on the next owner is what says whether state
    /// arrived.
    pub fn successor(&self) -> Option<&str> {
        self.term.successor.get().map(|s| &**s)
    }

    /// Leaves `state` for the next owner of this partition: it travels with this term's
    /// release and is offered to the next term (its
    /// [`handed_over`](Self::handed_over)) only if that term immediately follows this
    /// one. Call it once the term is ending, typically after
    /// [`cancelled`](Leadership::cancelled) completes and before the callback returns
    /// (within its grace); a later call replaces the state. A term whose lease is lost
    /// gets no grace: its callback is aborted at once and may never get here (put
    /// cleanup in `Drop`, which runs either way); if it does, this is
    /// [`HandOffError::LeaseLost`], the end of such a term rather than a failure.
    ///
    /// The state is kept in Redis, tied to this term's fence, until the next owner
    /// takes it or its time to live passes
    /// ([`GroupConfigBuilder::hand_off_ttl`](crate::GroupConfigBuilder::hand_off_ttl)).
    /// It is handed over only if the lease is given back: a term that lost its lease
    /// (a refused renewal, a passed deadline with the lease taken by then) hands
    /// nothing over, and its successor is told why.
    ///
    /// # Errors
    /// [`HandOffError::TooLarge`] over [`MAX_HAND_OFF_BYTES`];
    /// [`HandOffError::LeaseLost`] once the lease is lost or may be (a refused renewal,
    /// a passed local deadline: nothing is kept); [`HandOffError::TooLate`] once the
    /// release has been sent. A term ended on purpose (a hand-over, a drain, a
    /// removal, a shutdown) still hands off during its grace.
    pub fn hand_off(&self, state: impl Into<Vec<u8>>) -> Result<(), HandOffError> {
        // A term this replica ended on purpose lost its lease only if its runner saw
        // it lost (a refused renewal) first; its deadline passing is told apart below.
        let planned = self.term.ended_for().is_some();
        let lost = self.lead.end_reason().is_some_and(|r| {
            r.lease_may_be_lost() && !(planned && matches!(r, TermEndReason::DeadlinePassed))
        });
        let lease = if lost {
            LeaseNow::Lost
        } else if Instant::now() >= self.lead.deadline() {
            LeaseNow::PastDeadline
        } else {
            LeaseNow::Held
        };
        self.term.leave(state.into(), lease)
    }

    /// The state the previous term of this partition left for this one
    /// ([`hand_off`](Self::hand_off)), known before the callback starts; or why there
    /// is none: a first owner, a crash in between, state that was not the immediately
    /// preceding term's, a read that failed ([`NoHandOff`]). A callback that gets
    /// `Err` starts cold.
    ///
    /// # Errors
    /// [`NoHandOff`], saying why nothing was handed over.
    pub fn handed_over(&self) -> Result<&[u8], NoHandOff> {
        match self.term.offered.get() {
            Some(Ok(bytes)) => Ok(bytes),
            Some(Err(why)) => Err(why.clone()),
            None => Err(NoHandOff::FirstOwner),
        }
    }

    /// Reports this partition's load now: what the tenant brings (entries appended or
    /// requests received per second, bytes stored, CPU seconds), any number that grows
    /// with what the partition costs its owner; not what this owner got through
    /// (entries processed per second, lag), which jumps while a new owner catches up
    /// with a backlog. Call it as often as you like (each call replaces the last); the
    /// group samples the last value once per renew interval, damps it (an average with
    /// a half-life) and makes it the partition's weight when it moved by more than a
    /// threshold, so the group balances by measured load. A weight is a whole number of
    /// at least 1: report in units where 1 is the smallest load worth telling apart.
    /// A new term's reports count only after its warm-up
    /// ([`LoadDamping::warm_up`](crate::LoadDamping::warm_up)).
    ///
    /// # Errors
    /// [`LoadError::Invalid`] for a negative, infinite or NaN load (nothing is
    /// recorded); [`LoadError::NotTaken`] in a group built without
    /// [`weights_from_loads`](crate::GroupConfigBuilder::weights_from_loads).
    pub fn report_load(&self, load: f64) -> Result<(), LoadError> {
        if !load.is_finite() || load < 0.0 {
            return Err(LoadError::Invalid(load));
        }
        let cell = self.term.load.as_ref().ok_or(LoadError::NotTaken)?;
        // -0.0 is stored as a plain 0.0.
        cell.store(load + 0.0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use leasehold_election::ext::term_for_tests;

    use super::*;

    fn term(deadline: Instant, load: bool) -> (Ownership, Arc<TermShared>) {
        let shared = TermShared::new(load.then(LoadCell::new));
        let lead = term_for_tests("p1", deadline);
        (Ownership::new(lead, shared.clone()), shared)
    }

    #[tokio::test(start_paused = true)]
    async fn state_is_capped_kept_until_sealed_and_refused_after() {
        let (o, t) = term(Instant::now() + Duration::from_secs(1), false);
        assert_eq!(
            o.hand_off(vec![0; MAX_HAND_OFF_BYTES + 1]),
            Err(HandOffError::TooLarge {
                len: MAX_HAND_OFF_BYTES + 1,
                max: MAX_HAND_OFF_BYTES
            })
        );
        o.hand_off(b"first".to_vec()).unwrap();
        o.hand_off(b"offset=42".to_vec()).unwrap();
        assert_eq!(
            t.seal().as_deref(),
            Some(&b"offset=42"[..]),
            "the last wins"
        );
        assert_eq!(o.hand_off(b"late".to_vec()), Err(HandOffError::TooLate));
        assert_eq!(t.seal(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_ended_on_purpose_hands_off_during_its_grace() {
        for cause in [
            MoveCause::HandOff,
            MoveCause::Drain,
            MoveCause::Removal,
            MoveCause::Leave,
        ] {
            let (o, t) = term(Instant::now() + Duration::from_secs(1), false);
            t.ending(cause, Some("b"));
            o.token().cancel();
            assert!(o.is_cancelled());
            assert_eq!(o.end_reason(), Some(cause));
            assert_eq!(o.successor(), Some("b"));
            assert_eq!(o.hand_off(b"offset=42".to_vec()), Ok(()), "{cause}");
            assert_eq!(t.seal().as_deref(), Some(&b"offset=42"[..]));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_whose_lease_is_gone_says_so_when_it_hands_off() {
        // The local deadline passed and the runner has not run since (a pause, a
        // blocked runtime): no reason yet, nothing cancelled.
        let (o, t) = term(Instant::now() + Duration::from_millis(100), false);
        o.hand_off(b"while it ran".to_vec()).unwrap();
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(!o.token().is_cancelled());
        assert_eq!(o.hand_off(b"x".to_vec()), Err(HandOffError::LeaseLost));
        assert_eq!(o.end_reason(), Some(MoveCause::Expiry), "a lost lease");
        assert_eq!(
            t.seal().as_deref(),
            Some(&b"while it ran"[..]),
            "a refused call leaves the earlier state alone"
        );
        // A planned end whose grace ran into the deadline: past it, nothing is kept.
        let (o, t) = term(Instant::now() + Duration::from_millis(100), false);
        t.ending(MoveCause::HandOff, None);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(o.hand_off(b"x".to_vec()), Err(HandOffError::LeaseLost));
        // Once the release was sent, a passed deadline is "too late".
        let (o, t) = term(Instant::now() + Duration::from_millis(100), false);
        t.ending(MoveCause::HandOff, None);
        assert_eq!(t.seal(), None);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(o.hand_off(b"x".to_vec()), Err(HandOffError::TooLate));
    }

    #[tokio::test(start_paused = true)]
    async fn the_offer_is_set_once_and_a_term_offered_nothing_is_a_first_owner() {
        let (o, t) = term(Instant::now() + Duration::from_secs(1), false);
        assert!(matches!(o.handed_over(), Err(NoHandOff::FirstOwner)));
        t.offer(Ok(b"state".to_vec()));
        t.offer(Err(NoHandOff::Gone));
        assert!(matches!(o.handed_over(), Ok(b) if b == b"state"));
    }

    #[tokio::test(start_paused = true)]
    async fn loads_go_to_the_cell_of_a_group_that_takes_them_and_bad_ones_are_refused() {
        let (o, _) = term(Instant::now() + Duration::from_secs(1), false);
        assert_eq!(o.report_load(3.0), Err(LoadError::NotTaken));
        let cell = LoadCell::new();
        let lead = term_for_tests("p1", Instant::now() + Duration::from_secs(1));
        let o = Ownership::new(lead, TermShared::new(Some(cell.clone())));
        assert_eq!(cell.latest(), None);
        o.report_load(3.5).unwrap();
        assert_eq!(cell.latest(), Some(3.5));
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            assert!(matches!(o.report_load(bad), Err(LoadError::Invalid(_))));
        }
        assert_eq!(cell.latest(), Some(3.5), "a refused load changes nothing");
        o.report_load(-0.0).unwrap();
        assert_eq!(cell.latest().map(f64::to_bits), Some(0.0f64.to_bits()));
    }
}
