//! Load reports: the number a partition's owner says its partition costs now
//! ([`Leadership::report_load`](crate::Leadership::report_load)), read by the
//! partition coordinator, which damps it into the partition's weight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Why [`Leadership::report_load`](crate::Leadership::report_load) refused a load.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The load is negative, infinite or not a number.
    #[error("a load must be a finite number >= 0, not {0}")]
    Invalid(f64),
    /// This term's loads go nowhere: a duty's own elector, or a partition group whose
    /// config does not take loads (`GroupConfigBuilder::weights_from_loads` in
    /// `leasehold-partitions`).
    #[error(
        "this term's loads go nowhere: only partition terms of a group built with weights_from_loads take them"
    )]
    Unsupported,
}

/// The last load a term reported, shared between its [`Leadership`](crate::Leadership)
/// clones and the coordinator that reads it. For Leasehold's own crates.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct LoadCell {
    /// The load's bits; `u64::MAX` (a NaN no report can store) while none was reported.
    bits: AtomicU64,
}

const NONE: u64 = u64::MAX;

impl LoadCell {
    /// A cell with no load reported.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            bits: AtomicU64::new(NONE),
        })
    }

    /// The last load reported, if any.
    pub fn latest(&self) -> Option<f64> {
        let bits = self.bits.load(Ordering::Acquire);
        (bits != NONE).then(|| f64::from_bits(bits))
    }

    fn store(&self, load: f64) {
        self.bits.store(load.to_bits(), Ordering::Release);
    }
}

/// Where a term's load reports go: nowhere until the coordinator attaches a cell.
#[derive(Debug, Default)]
pub(crate) struct LoadSlot(OnceLock<Arc<LoadCell>>);

impl LoadSlot {
    pub(crate) fn attach(&self, cell: Arc<LoadCell>) {
        let _ = self.0.set(cell);
    }

    pub(crate) fn report(&self, load: f64) -> Result<(), LoadError> {
        if !load.is_finite() || load < 0.0 {
            return Err(LoadError::Invalid(load));
        }
        let cell = self.0.get().ok_or(LoadError::Unsupported)?;
        // -0.0 is stored as a plain 0.0.
        cell.store(load + 0.0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_takes_loads_once_a_cell_is_attached_and_refuses_bad_ones() {
        let slot = LoadSlot::default();
        assert_eq!(slot.report(3.0), Err(LoadError::Unsupported));
        let cell = LoadCell::new();
        assert_eq!(cell.latest(), None);
        slot.attach(cell.clone());
        slot.report(3.5).unwrap();
        assert_eq!(cell.latest(), Some(3.5));
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            assert!(matches!(slot.report(bad), Err(LoadError::Invalid(_))));
        }
        assert_eq!(cell.latest(), Some(3.5), "a refused load changes nothing");
        slot.report(-0.0).unwrap();
        assert_eq!(cell.latest().map(f64::to_bits), Some(0.0f64.to_bits()));
    }
}
