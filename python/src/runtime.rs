//! Where the Rust side runs: the leases on a runtime of their own, never on Python's.
//!
//! One tokio runtime of the package's own, so that a blocked Python never delays a
//! renewal:
//!
//! - **the core runtime** (this module's [`core`]: two worker threads named
//!   `leasehold-core`) runs the coordinators, their renewals and every Redis call.
//!   Nothing on it takes the GIL: what it hands to Python goes through channels.
//!   The awaitables Python gets are resolved from its blocking-pool threads
//!   ([`crate::bridge`]): taking the GIL there may wait while a duty blocks the event
//!   loop, and no lease depends on them.
//!
//! An elector made with `dedicated=True` (the default) runs on a thread of its own,
//! away from both ([`Elector::spawn_dedicated`](leasehold_election::Elector::spawn_dedicated)).

use std::future::Future;
use std::sync::OnceLock;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The core runtime, started on first use (an error if its threads cannot start).
pub(crate) fn core() -> PyResult<&'static tokio::runtime::Runtime> {
    static CORE: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    CORE.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("leasehold-core")
            .enable_all()
            .build()
            .map_err(|err| err.to_string())
    })
    .as_ref()
    .map_err(|err| PyRuntimeError::new_err(format!("leasehold's runtime did not start: {err}")))
}

/// An awaitable for Python that runs `future` on the core runtime (where every Redis
/// call runs) and resolves with its output.
pub(crate) fn on_core<'py, F, T>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, crate::errors::ErrorOf>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    crate::bridge::awaitable(py, future)
}
