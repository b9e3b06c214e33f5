//! Fencing tokens, and the writer that makes a resource check them.
//!
//! - this module: the [`Fence`] of a term;
//! - `writer`: [`FencedWriter`], writes to Redis keys that only a current term makes,
//!   and raises of their guards;
//! - `batch`: [`FencedBatch`], fenced writes to several keys in one script.

mod batch;
mod writer;

use std::fmt;

pub use self::batch::FencedBatch;
pub use self::writer::{FencedWriteError, FencedWriter};

/// A fencing token: strictly increasing across every term of a duty.
///
/// Attach it to every write the duty makes and have the resource reject writes whose
/// fence is lower than the highest it has accepted (see [`crate::FencedWriter`] and
/// `docs/fencing.md`). A deposed leader that wakes from a pause then cannot overwrite
/// its successor's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(transparent))]
pub struct Fence(pub u64);

impl Fence {
    /// The fence as a number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Fence> for u64 {
    fn from(f: Fence) -> u64 {
        f.0
    }
}
