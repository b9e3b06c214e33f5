//! Hand-off state: bytes a term leaves for the next term of the same partition, and
//! what the next term was offered (see [`Leadership::hand_off`] and
//! [`Leadership::handed_over`]).
//!
//! [`Leadership::hand_off`]: crate::Leadership::hand_off
//! [`Leadership::handed_over`]: crate::Leadership::handed_over

use std::sync::{Mutex, OnceLock, PoisonError};

use crate::error::StoreError;

/// The most bytes a term may hand off (1 MiB): the payload travels in the release
/// script and is kept in Redis until the next owner takes it.
pub const MAX_HAND_OFF_BYTES: usize = 1 << 20;

/// Why [`Leadership::hand_off`](crate::Leadership::hand_off) refused the state.
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
    /// This term's store carries no hand-off state: a duty's own elector (terms of a
    /// partition group carry it).
    #[error("this term's store carries no hand-off state (only partition terms do)")]
    Unsupported,
    /// The term's lease was already given back: the state can no longer travel with it.
    #[error("the term has already given its lease back: too late to hand state off")]
    TooLate,
    /// The term's lease is lost, or may be: a renewal was refused, the local deadline
    /// has passed, or the lease key holds someone else's data. Such a term gives
    /// nothing back that the next owner could take the state from, so it is not kept.
    /// A term ended on purpose (a hand-over, a drain, a shutdown) is not lost while its
    /// deadline has not passed: it hands off as usual.
    #[error(
        "the term's lease is lost (or its local deadline has passed): no state can be handed off"
    )]
    LeaseLost,
}

/// Whether a term can still give its lease back, for [`HandOffSlot::leave`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseNow {
    /// Held: the term runs, or ended on purpose within its deadline.
    Held,
    /// The term ended for a reason that may have lost the lease (a refused renewal,
    /// a passed deadline, a lease key of the wrong type).
    Lost,
    /// The local deadline has passed, whatever the term ended for (if it has).
    PastDeadline,
}

/// Why a term was offered no hand-off state by the term before it
/// ([`Leadership::handed_over`](crate::Leadership::handed_over)).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NoHandOff {
    /// This term's store carries no hand-off state: a duty's own elector.
    #[error("this term's store carries no hand-off state (only partition terms do)")]
    Unsupported,
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
        /// Why the previous term ended (`handoff`, `drain`, `leave`, `removal`,
        /// `released`).
        cause: String,
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
    #[error("the hand-off state could not be read: {0}")]
    Unavailable(StoreError),
}

/// What the previous term handed to this one: its bytes, or why there are none.
pub(crate) type Offered = Result<Vec<u8>, NoHandOff>;

/// The hand-off state of one term: what it was offered, what it leaves.
#[derive(Debug)]
pub(crate) struct HandOffSlot {
    /// Whether the term's store carries state.
    supported: bool,
    /// What the term was offered; set once, before the duty runs (partition terms).
    offered: OnceLock<Offered>,
    /// What the term leaves; `None` once sealed (the release took it).
    leaving: Mutex<Option<Option<Vec<u8>>>>,
}

impl HandOffSlot {
    pub(crate) fn new(supported: bool) -> Self {
        let offered = OnceLock::new();
        if !supported {
            let _ = offered.set(Err(NoHandOff::Unsupported));
        }
        Self {
            supported,
            offered,
            leaving: Mutex::new(Some(None)),
        }
    }

    pub(crate) fn offer(&self, offered: Offered) {
        let _ = self.offered.set(offered);
    }

    pub(crate) fn offered(&self) -> Result<&[u8], NoHandOff> {
        match self.offered.get() {
            Some(Ok(bytes)) => Ok(bytes),
            Some(Err(why)) => Err(why.clone()),
            // A partition term whose coordinator has not offered anything (yet).
            None => Err(NoHandOff::FirstOwner),
        }
    }

    /// Keeps `state` for the release, if the term can still give its lease back.
    ///
    /// A lost lease is named as such even after the seal (the release of a term whose
    /// renewal was refused is never sent; calling that "too late" would mislead); a
    /// deadline that passed after the release was sent is [`HandOffError::TooLate`].
    pub(crate) fn leave(&self, state: Vec<u8>, lease: LeaseNow) -> Result<(), HandOffError> {
        if !self.supported {
            return Err(HandOffError::Unsupported);
        }
        if state.len() > MAX_HAND_OFF_BYTES {
            return Err(HandOffError::TooLarge {
                len: state.len(),
                max: MAX_HAND_OFF_BYTES,
            });
        }
        if lease == LeaseNow::Lost {
            return Err(HandOffError::LeaseLost);
        }
        let mut leaving = self.leaving.lock().unwrap_or_else(PoisonError::into_inner);
        match leaving.as_mut() {
            None => Err(HandOffError::TooLate),
            Some(_) if lease == LeaseNow::PastDeadline => Err(HandOffError::LeaseLost),
            Some(slot) => {
                *slot = Some(state);
                Ok(())
            }
        }
    }

    /// Takes what the term leaves and refuses any later [`leave`](Self::leave).
    pub(crate) fn seal(&self) -> Option<Vec<u8>> {
        self.leaving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_capped_kept_until_sealed_and_refused_after() {
        let slot = HandOffSlot::new(true);
        assert_eq!(
            slot.leave(vec![0; MAX_HAND_OFF_BYTES + 1], LeaseNow::Held),
            Err(HandOffError::TooLarge {
                len: MAX_HAND_OFF_BYTES + 1,
                max: MAX_HAND_OFF_BYTES
            })
        );
        slot.leave(b"first".to_vec(), LeaseNow::Held).unwrap();
        slot.leave(b"offset=42".to_vec(), LeaseNow::Held).unwrap();
        assert_eq!(
            slot.seal().as_deref(),
            Some(&b"offset=42"[..]),
            "the last wins"
        );
        assert_eq!(
            slot.leave(b"late".to_vec(), LeaseNow::Held),
            Err(HandOffError::TooLate)
        );
        assert_eq!(slot.seal(), None);
    }

    #[test]
    fn a_lost_lease_keeps_no_state_and_says_so() {
        let slot = HandOffSlot::new(true);
        slot.leave(b"while it ran".to_vec(), LeaseNow::Held)
            .unwrap();
        for lease in [LeaseNow::Lost, LeaseNow::PastDeadline] {
            assert_eq!(
                slot.leave(b"late".to_vec(), lease),
                Err(HandOffError::LeaseLost),
                "{lease:?}"
            );
        }
        assert_eq!(
            slot.seal().as_deref(),
            Some(&b"while it ran"[..]),
            "a refused call leaves the earlier state alone"
        );
        // After the seal: a lost lease still says lost; a deadline that passed after
        // the release was sent says too late.
        assert_eq!(
            slot.leave(b"x".to_vec(), LeaseNow::Lost),
            Err(HandOffError::LeaseLost)
        );
        assert_eq!(
            slot.leave(b"x".to_vec(), LeaseNow::PastDeadline),
            Err(HandOffError::TooLate)
        );
    }

    #[test]
    fn a_store_without_hand_offs_refuses_state_and_offers_none() {
        let slot = HandOffSlot::new(false);
        assert_eq!(
            slot.leave(b"x".to_vec(), LeaseNow::Held),
            Err(HandOffError::Unsupported)
        );
        assert!(matches!(slot.offered(), Err(NoHandOff::Unsupported)));
        slot.offer(Ok(b"ignored".to_vec()));
        assert!(
            matches!(slot.offered(), Err(NoHandOff::Unsupported)),
            "set once"
        );
    }

    #[test]
    fn the_offer_is_set_once() {
        let slot = HandOffSlot::new(true);
        slot.offer(Ok(b"state".to_vec()));
        slot.offer(Err(NoHandOff::Gone));
        assert!(matches!(slot.offered(), Ok(b) if b == b"state"));
    }
}
