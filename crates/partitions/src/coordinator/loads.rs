//! The driver's side of load reports (`GroupConfigBuilder::weights_from_loads`): a
//! cell per running term that its [`Ownership::report_load`] writes into, sampled
//! once per renew interval through the damping rule ([`Loads`]), whose weights go to
//! the store in one request.
//!
//! [`Ownership::report_load`]: crate::Ownership::report_load

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::LoadDamping;
use crate::ownership::LoadCell;
use crate::replica::ledger::Ledger;
use crate::replica::loads::{Loads, TermKey};

/// The load cells of this replica's running terms and their averages.
#[derive(Debug)]
pub(super) struct LoadReports {
    loads: Loads,
    cells: HashMap<TermKey, Arc<LoadCell>>,
    /// At most one write per this long.
    every: Duration,
    /// When the last write was sent, and whether it is still in flight.
    sent: Option<Instant>,
    in_flight: bool,
    /// The write in flight carries a step in load.
    stepped: bool,
}

impl LoadReports {
    pub(super) fn new(damping: LoadDamping, every: Duration, lease: Duration) -> Self {
        Self {
            loads: Loads::new(damping, lease),
            cells: HashMap::new(),
            every,
            sent: None,
            in_flight: false,
            stepped: false,
        }
    }

    /// Term `key` starts with `weight`: the cell its leadership reports into.
    pub(super) fn start(&mut self, key: TermKey, weight: u64, now: Instant) -> Arc<LoadCell> {
        self.loads.start(key, weight, now);
        let cell = LoadCell::new();
        self.cells.insert(key, cell.clone());
        cell
    }

    pub(super) fn end(&mut self, key: TermKey) {
        self.loads.end(key);
        self.cells.remove(&key);
    }

    /// The weights to write now (none while a write is in flight or was sent less than
    /// one interval ago): every running term's last report, folded into its average.
    pub(super) fn due(&mut self, ledger: &Ledger, now: Instant) -> Vec<(TermKey, u64)> {
        if self.in_flight || self.sent.is_some_and(|at| now < at + self.every) {
            return Vec::new();
        }
        let samples = self.cells.iter().filter_map(|(&(i, fence), cell)| {
            let held = ledger.held(i).filter(|h| h.fence == fence)?;
            Some(((i, fence), cell.latest(), held.weight))
        });
        let due = self.loads.due(samples.collect::<Vec<_>>(), now);
        if !due.is_empty() {
            self.in_flight = true;
            self.sent = Some(now);
            self.stepped = self.loads.stepped();
        }
        due
    }

    /// The write of `weights` came back: those the store took (`Some(flags)`), or none.
    /// Returns whether the store took a weight that carries a step in load: the other
    /// replicas are then told at once (a notice) rather than at their next tick, since
    /// a step is what a rebalance by load waits for.
    pub(super) fn answered(&mut self, weights: &[(TermKey, u64)], flags: Option<&[bool]>) -> bool {
        self.in_flight = false;
        let mut took = false;
        if let Some(flags) = flags {
            for (&(key, w), &ok) in weights.iter().zip(flags) {
                if ok {
                    self.loads.written(key, w);
                    took = true;
                }
            }
        }
        std::mem::take(&mut self.stepped) && took
    }
}
