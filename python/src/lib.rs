//! The Rust core of the `leasehold` Python package.
//!
//! Python imports this as `leasehold._leasehold`; the package's own modules
//! (`leasehold/*.py`) build the asyncio API on it: `Elector`, `Coordinator`,
//! `GroupAdmin`, `Router`, `FencedWriter`, `FencedBatch`, `Lease` and the exceptions of
//! `leasehold.errors`.
//!
//! Renewals never run on Python's event loop and never take the GIL: the electors and
//! coordinators run on the core runtime or on threads of their own (module `runtime`);
//! terms reach Python through channels.

mod admin;
mod bridge;
mod coordinator;
mod elector;
mod errors;
mod lease;
mod router;
mod runtime;
mod terms;
mod writer;

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::config;

/// A duration in seconds from Python: finite and above zero.
pub(crate) fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    if !(value.is_finite() && value > 0.0) {
        return Err(config(format!(
            "{what} must be a finite number of seconds above zero, got {value}"
        )));
    }
    Duration::try_from_secs_f64(value).map_err(|err| config(format!("{what}: {err}")))
}

/// A serialisable value as Python objects (dicts, lists, strings, numbers), with
/// every duration (serde's `{"secs", "nanos"}`) as a float of seconds.
pub(crate) fn to_python<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let value = pythonize::pythonize(py, value)
        .map_err(|err| config(format!("cannot convert to Python: {err}")))?;
    seconds_of_durations(value)
}

/// Replaces every `{"secs": s, "nanos": n}` inside `value` with `s + n / 1e9`.
fn seconds_of_durations(value: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    let py = value.py();
    if let Ok(dict) = value.cast::<PyDict>() {
        if dict.len() == 2
            && let (Some(secs), Some(nanos)) = (dict.get_item("secs")?, dict.get_item("nanos")?)
        {
            let seconds = secs.extract::<f64>()? + nanos.extract::<f64>()? / 1e9;
            return Ok(seconds.into_pyobject(py)?.into_any());
        }
        for (key, item) in dict.iter() {
            dict.set_item(key, seconds_of_durations(item)?)?;
        }
    } else if let Ok(list) = value.cast::<PyList>() {
        for (index, item) in list.iter().enumerate() {
            list.set_item(index, seconds_of_durations(item)?)?;
        }
    }
    Ok(value)
}

/// The version of the Rust core.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The script hashes a group's keys are written with (for operators comparing
/// versions across a mixed fleet).
#[pyfunction]
fn protocol<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("version", env!("CARGO_PKG_VERSION"))?;
    Ok(dict)
}

/// The module `leasehold._leasehold`.
#[pymodule]
fn _leasehold(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<elector::ElectorCore>()?;
    module.add_class::<coordinator::CoordinatorCore>()?;
    module.add_class::<coordinator::ViewStream>()?;
    module.add_class::<admin::AdminCore>()?;
    module.add_class::<router::RouterCore>()?;
    module.add_class::<router::RouteChanges>()?;
    module.add_class::<router::PyRoute>()?;
    module.add_class::<writer::WriterCore>()?;
    module.add_class::<writer::BatchCore>()?;
    module.add_class::<lease::Lease>()?;
    module.add_class::<lease::PartitionLease>()?;
    module.add_function(wrap_pyfunction!(version, module)?)?;
    module.add_function(wrap_pyfunction!(bridge::finalize, module)?)?;
    module.add_function(wrap_pyfunction!(bridge::_panic_in_awaitable, module)?)?;
    module.add_function(wrap_pyfunction!(protocol, module)?)?;
    Ok(())
}
