//! The channel that carries terms from an elector or coordinator to Python.
//!
//! The Rust side's duty (or partition callback) makes a [`Lease`], sends it, and waits
//! for Python to say how the duty ended ([`Lease`]'s `_finish`); Python takes terms
//! with `next_term()`. The sender lives in the duty: once the elector or coordinator
//! has stopped and dropped it, `next_term()` resolves to `None`.

use std::sync::{Arc, Mutex};

use leasehold_election::DutyResult;
use pyo3::prelude::*;
use tokio::sync::{mpsc, oneshot};

use crate::bridge::awaitable;
use crate::errors::{Kind, error};
use crate::lease::{Lease, Outcome};

/// Terms won and not yet taken by Python.
pub(crate) struct Terms {
    /// Until the duty takes it at start.
    sender: Mutex<Option<mpsc::UnboundedSender<Lease>>>,
    receiver: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Lease>>>,
}

impl Terms {
    pub(crate) fn new() -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        Self {
            sender: Mutex::new(Some(sender)),
            receiver: Arc::new(tokio::sync::Mutex::new(receiver)),
        }
    }

    /// The sender, for the duty (once: an error the second time).
    pub(crate) fn sender(&self) -> PyResult<mpsc::UnboundedSender<Lease>> {
        self.sender
            .lock()
            .map_err(|_| poisoned())?
            .take()
            .ok_or_else(|| error(Kind::Stopped, "already started"))
    }

    /// An awaitable of the next term: a `Lease` (a `PartitionLease` for a partition),
    /// or `None` once the duty is gone.
    pub(crate) fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let receiver = Arc::clone(&self.receiver);
        awaitable(py, async move {
            Ok(receiver.lock().await.recv().await.map(Term))
        })
    }
}

/// One term: hands it to Python (`make` builds its lease around the answer channel)
/// and waits for the duty or handler to end there. The elector cancels the term's
/// token when it ends the term; Python then cancels the task and answers, and the
/// elector releases once this returns (within its grace).
pub(crate) async fn run_term(
    make: impl FnOnce(oneshot::Sender<Outcome>) -> Lease,
    sender: mpsc::UnboundedSender<Lease>,
) -> DutyResult {
    let (done, outcome) = oneshot::channel();
    if sender.send(make(done)).is_err() {
        // Nobody takes terms any more (the Python object is gone): end it.
        return Ok(());
    }
    match outcome.await {
        Ok(Some(failure)) => Err(failure.into()),
        // Returned, cancelled, or the lease was dropped unanswered.
        Ok(None) | Err(_) => Ok(()),
    }
}

/// A lock poisoned by a panic elsewhere (cannot happen: nothing panics under them).
pub(crate) fn poisoned() -> PyErr {
    error(Kind::Stopped, "leasehold's state lock was poisoned")
}

/// A term on its way to Python: becomes a `Lease` or a `PartitionLease`.
pub(crate) struct Term(Lease);

impl<'py> IntoPyObject<'py> for Term {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.0.into_python(py)
    }
}
