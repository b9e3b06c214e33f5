//! What an elector reports through its `watch` channel.

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;

use crate::error::StoreError;
use crate::fence::Fence;
use crate::store::BackendWarning;

/// The role of an elector right now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// Not campaigned yet.
    Starting,
    /// Campaigning; `leader` is the holder seen at the last attempt, if any.
    Follower {
        /// The current holder's replica id, if the lease is held.
        leader: Option<String>,
    },
    /// This elector leads.
    Leader {
        /// This term's fencing token.
        fence: Fence,
        /// When the term started.
        since: Instant,
    },
    /// The elector has stopped (shutdown).
    Stopped,
}

/// Why a term ended.
///
/// A value, not an error: most terms end as someone asked (a shutdown, a step-down,
/// the duty returning), and the reason is reported in the status, the term's end and
/// the `reason` metric label. So it does not implement [`std::error::Error`]; its
/// `Display` is the text a person reads and, for the two reasons that carry an error,
/// includes that error's whole chain of causes ([`crate::ErrorChain`]). The
/// [`StoreError`] itself stays in [`BackendError`](Self::BackendError) for code that
/// matches on it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TermEndReason {
    /// Redis refused a renewal: the key was gone or held by another token.
    RenewalRefused,
    /// The local validity deadline passed without a successful renewal.
    DeadlinePassed,
    /// A renewal failed with an error that retrying cannot fix (wrong type, ACL).
    /// Displayed as `backend error: ` and the error's chain of causes.
    BackendError(StoreError),
    /// The elector was shut down.
    Shutdown,
    /// The duty returned `Ok(())`.
    DutyReturned,
    /// The duty returned an error: its text and its causes' ([`crate::ErrorChain`]).
    DutyFailed(Arc<str>),
    /// The duty panicked.
    DutyPanicked(Arc<str>),
    /// [`ElectorHandle::step_down`](crate::ElectorHandle::step_down) asked for it:
    /// released so another replica leads.
    SteppedDown,
}

impl TermEndReason {
    /// A short, stable label (used as the `reason` metric label).
    pub fn label(&self) -> &'static str {
        match self {
            Self::RenewalRefused => "renewal_refused",
            Self::DeadlinePassed => "deadline_passed",
            Self::BackendError(_) => "backend_error",
            Self::Shutdown => "shutdown",
            Self::DutyReturned => "duty_returned",
            Self::DutyFailed(_) => "duty_failed",
            Self::DutyPanicked(_) => "duty_panicked",
            Self::SteppedDown => "stepped_down",
        }
    }

    /// Whether the term ended as someone asked (a shutdown, a step-down, the duty
    /// returning): logged as information, where any other end is a warning.
    pub fn is_planned(&self) -> bool {
        matches!(
            self,
            Self::Shutdown | Self::DutyReturned | Self::SteppedDown
        )
    }

    /// Whether someone else may hold the lease already, so the duty must stop at once:
    /// a refused renewal, a passed deadline, or a lease key of the wrong type (someone
    /// else's data).
    ///
    /// ```
    /// use leasehold_election::TermEndReason;
    ///
    /// assert!(TermEndReason::RenewalRefused.lease_may_be_lost());
    /// assert!(!TermEndReason::Shutdown.lease_may_be_lost());
    /// ```
    pub fn lease_may_be_lost(&self) -> bool {
        matches!(
            self,
            Self::RenewalRefused
                | Self::DeadlinePassed
                | Self::BackendError(StoreError::WrongType(_))
        )
    }
}

impl fmt::Display for TermEndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BackendError(e) => write!(f, "backend error: {}", crate::ErrorChain(e)),
            Self::DutyFailed(e) => write!(f, "duty failed: {e}"),
            Self::DutyPanicked(e) => write!(f, "duty panicked: {e}"),
            other => f.write_str(other.label()),
        }
    }
}

/// How a term ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TermEnd {
    /// The term's fence.
    pub fence: Fence,
    /// Why it ended.
    pub reason: TermEndReason,
    /// Whether the duty had to be aborted because it outran its grace.
    pub grace_overrun: bool,
    /// Whether the lease was released (false if it was lost, or the release failed).
    pub released: bool,
}

/// A snapshot of an elector, published on every change.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Status {
    /// The role now.
    pub role: Role,
    /// The last Redis error, cleared by the next successful call.
    pub last_error: Option<StoreError>,
    /// How the previous term ended.
    pub last_term: Option<TermEnd>,
    /// Highest fence this elector has seen for its duty.
    pub highest_fence: Fence,
    /// Times the store's fence counter was found behind `highest_fence` (the store lost
    /// data); each time the issued fence was raised above it.
    pub fence_regressions: u64,
    /// Warnings from the backend self-check at start.
    pub warnings: Vec<BackendWarning>,
    /// Times the elector woke up far later than it asked (its runtime or thread was
    /// blocked); each is also a `leasehold_elector_stall_seconds` sample and a warning.
    pub stalls: u64,
}

impl Status {
    pub(crate) fn new() -> Self {
        Self {
            role: Role::Starting,
            last_error: None,
            last_term: None,
            highest_fence: Fence(0),
            fence_regressions: 0,
            warnings: Vec::new(),
            stalls: 0,
        }
    }

    /// Whether this elector leads right now.
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. })
    }

    /// This term's fence, when leading.
    pub fn fence(&self) -> Option<Fence> {
        match self.role {
            Role::Leader { fence, .. } => Some(fence),
            _ => None,
        }
    }
}
