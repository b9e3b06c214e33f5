//! `Lease`: what a duty or a partition handler gets for its term.

use std::sync::Mutex;

use leasehold_election::{Leadership, TermEndReason};
use leasehold_partitions::{NoHandOff, Ownership};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio::sync::oneshot;

use crate::errors::{ErrorOf, Kind, error};

/// How the Python side ended a term: `None` if the duty returned (or was cancelled
/// because the term was over), the exception's text if it raised.
pub(crate) type Outcome = Option<String>;

/// One term of a duty or of a partition, held by this replica.
///
/// A `Lease` is what `lead(lease)` and `handle(partition, lease)` get. Its fence only
/// grows from term to term: attach it to every write the term makes
/// (`FencedWriter`), so a deposed owner's writes are refused. Call `check()` before
/// each side effect: it raises `TermOver` once the local deadline has passed, even
/// while Redis cannot be asked. `await lease.lost()` returns when the term is over;
/// the library then cancels the task running the duty or the handler.
#[pyclass(frozen, subclass, module = "leasehold")]
pub struct Lease {
    lead: Leadership,
    ownership: Option<Ownership>,
    done: Mutex<Option<oneshot::Sender<Outcome>>>,
}

impl Lease {
    /// A duty's term; `done` hears how the Python side ended it.
    pub(crate) fn for_duty(lead: Leadership, done: oneshot::Sender<Outcome>) -> Self {
        Self {
            lead,
            ownership: None,
            done: Mutex::new(Some(done)),
        }
    }

    /// A partition's term.
    pub(crate) fn for_partition(ownership: Ownership, done: oneshot::Sender<Outcome>) -> Self {
        Self {
            lead: ownership.leadership().clone(),
            ownership: Some(ownership),
            done: Mutex::new(Some(done)),
        }
    }

    fn ownership(&self) -> PyResult<&Ownership> {
        self.ownership.as_ref().ok_or_else(|| {
            error(
                Kind::Config,
                "a duty's lease has no partition: this is for partition handlers",
            )
        })
    }

    /// As Python gets it: a `Lease` for a duty, a `PartitionLease` for a partition.
    pub(crate) fn into_python(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        if self.ownership.is_some() {
            Ok(Bound::new(
                py,
                PyClassInitializer::from(self).add_subclass(PartitionLease),
            )?
            .into_any())
        } else {
            Ok(Bound::new(py, self)?.into_any())
        }
    }
}

#[pymethods]
impl Lease {
    /// This term's fencing token: above every fence issued before it.
    #[getter]
    fn fence(&self) -> u64 {
        self.lead.fence().get()
    }

    /// This replica's id.
    #[getter]
    fn replica(&self) -> &str {
        self.lead.replica_id()
    }

    /// The duty's name (for a partition: the partition's elector duty).
    #[getter]
    fn duty(&self) -> &str {
        self.lead.duty()
    }

    /// Seconds until the local deadline (0.0 once it has passed). The deadline is
    /// renewed while the term lasts.
    fn remaining(&self) -> f64 {
        self.lead.remaining().as_secs_f64()
    }

    /// Raises `TermOver` if the term is over or its local deadline has passed. No I/O:
    /// call it before each side effect.
    fn check(&self) -> Result<(), ErrorOf> {
        Ok(self.lead.check()?)
    }

    /// Whether the term is over (the library is cancelling the duty or handler).
    #[getter]
    fn is_lost(&self) -> bool {
        self.lead.is_cancelled()
    }

    /// An awaitable that completes when the term is over (renewal refused, local
    /// deadline passed, shutdown, hand-over): at the local deadline at the latest.
    fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let token = self.lead.token();
        crate::bridge::awaitable(py, async move {
            token.cancelled_owned().await;
            Ok(())
        })
    }

    /// Why the term ended, once it has, as a `leasehold.EndReason`: for a duty
    /// `RENEWAL_REFUSED`, `DEADLINE_PASSED`, `SHUTDOWN`, ...; for a partition why it
    /// moved: `HANDOFF`, `DRAIN`, `LEAVE`, `EXPIRY` (a lost lease), ... `None` while
    /// the term lasts.
    #[getter]
    fn end_reason<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let label = match &self.ownership {
            Some(ownership) => ownership.end_reason().map(|cause| cause.as_str()),
            None => self.lead.end_reason().map(|reason| reason_label(&reason)),
        };
        let Some(label) = label else {
            return Ok(None);
        };
        // A getter: the caller's thread, which holds the GIL.
        let class = py.import("leasehold.types")?.getattr("EndReason")?;
        Ok(Some(class.call1((label,))?))
    }

    /// Tells the library how the Python side ended the term (the package calls this).
    #[pyo3(name = "_finish", signature = (error = None))]
    fn finish(&self, error: Option<String>) {
        let sender = self.done.lock().ok().and_then(|mut done| done.take());
        if let Some(sender) = sender {
            let _ = sender.send(error);
        }
    }

    fn __repr__(&self) -> String {
        match self.ownership.as_ref().map(Ownership::partition) {
            Some(partition) => format!(
                "Lease(partition={partition:?}, fence={}, replica={:?})",
                self.fence(),
                self.replica()
            ),
            None => format!(
                "Lease(duty={:?}, fence={}, replica={:?})",
                self.duty(),
                self.fence(),
                self.replica()
            ),
        }
    }
}

/// A partition's term: a [`Lease`] with what only a partition has (its name, the
/// state handed from the term before and to the next, load reports). What
/// `handle(partition, lease)` gets.
#[pyclass(frozen, extends = Lease, module = "leasehold")]
pub struct PartitionLease;

impl PartitionLease {
    fn own<'a>(slf: &'a Bound<'_, Self>) -> PyResult<&'a Ownership> {
        slf.as_super().get().ownership()
    }
}

#[pymethods]
impl PartitionLease {
    /// The partition this term owns.
    #[getter]
    fn partition(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(Self::own(slf)?.partition().to_owned())
    }

    /// The replica named to take this partition when this term hands it over, if any.
    #[getter]
    fn successor(slf: &Bound<'_, Self>) -> PyResult<Option<String>> {
        Ok(Self::own(slf)?.successor().map(str::to_owned))
    }

    /// Leaves `state` (bytes, up to 1 MiB) for this partition's next owner, carried by
    /// the release that ends this term. Raises `HandOffError` if it is too large, or
    /// once the lease is lost (a `finally` after a lost lease: nothing is kept) or
    /// already given back.
    fn hand_off(slf: &Bound<'_, Self>, state: &[u8]) -> PyResult<()> {
        Self::own(slf)?
            .hand_off(state.to_vec())
            .map_err(|err| ErrorOf::from(err).into())
    }

    /// The state the previous owner left with `hand_off`, if the term just before this
    /// one left any; `None` otherwise (`no_hand_off` says why).
    fn handed_over<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(Self::own(slf)?
            .handed_over()
            .ok()
            .map(|state| PyBytes::new(py, state)))
    }

    /// Why `handed_over()` returns `None`: `None` if it returns state, otherwise a
    /// sentence (the first term of a partition, the previous term ended without
    /// leaving state, the state expired, ...).
    fn no_hand_off(slf: &Bound<'_, Self>) -> PyResult<Option<String>> {
        Ok(Self::own(slf)?
            .handed_over()
            .err()
            .map(|why: NoHandOff| crate::errors::chain(&why)))
    }

    /// Reports this partition's current load (a finite number ≥ 0) for groups that
    /// take their weights from measured load. Raises `LoadError` for a bad number.
    fn report_load(slf: &Bound<'_, Self>, load: f64) -> PyResult<()> {
        Self::own(slf)?
            .report_load(load)
            .map_err(|err| ErrorOf::from(err).into())
    }
}

/// The stable label of a term's end.
pub(crate) fn reason_label(reason: &TermEndReason) -> &'static str {
    reason.label()
}
