//! Rust futures as asyncio awaitables, and the GIL taken only while Python lives.
//!
//! An awaitable made here is an `asyncio.Future` of the running loop; its Rust future
//! runs on the core runtime, and its result is handed to the loop with
//! `call_soon_threadsafe` from a blocking-pool thread (taking the GIL there never holds
//! up a runtime worker, so a duty that blocks the loop delays no renewal). Cancelling
//! the asyncio future drops the Rust future.
//!
//! Once the interpreter starts to exit (the package's `atexit` hook calls
//! [`finalize`]), nothing here takes the GIL again, and `finalize` waits for those
//! that hold it to let go: a Rust thread taking the GIL while Python finalizes crashes
//! the process. (pyo3-async-runtimes' awaitables did exactly that, about one exit in
//! twelve after an elector's shutdown.)

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::errors::ErrorOf;
use crate::runtime::core;

/// Whether Python is exiting, and how many threads are inside [`with_python`].
static STATE: Mutex<(bool, usize)> = Mutex::new((false, 0));
static LEFT: Condvar = Condvar::new();

/// Runs `f` with the GIL, unless the interpreter is exiting (then `None`).
pub(crate) fn with_python<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    {
        let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
        if state.0 {
            return None;
        }
        state.1 += 1;
    }
    let output = Python::attach(f);
    let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
    state.1 -= 1;
    LEFT.notify_all();
    Some(output)
}

/// Called by the package's `atexit` hook: from now on no Rust thread takes the GIL;
/// waits (at most two seconds, without the GIL) for those that hold it.
#[pyfunction]
pub(crate) fn finalize(py: Python<'_>) {
    py.detach(|| {
        let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = true;
        let _ = LEFT
            .wait_timeout_while(state, Duration::from_secs(2), |state| state.1 > 0)
            .unwrap_or_else(PoisonError::into_inner);
    });
}

/// Cancels the Rust side when its asyncio future is cancelled (a done-callback).
#[pyclass(frozen)]
struct CancelOnDone {
    token: CancellationToken,
}

#[pymethods]
impl CancelOnDone {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            self.token.cancel();
        }
        Ok(())
    }
}

/// Sets an asyncio future's result or exception on its loop, unless it is done.
#[pyclass(frozen)]
struct Resolve {
    future: Py<PyAny>,
    outcome: Mutex<Option<PyResult<Py<PyAny>>>>,
}

#[pymethods]
impl Resolve {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let future = self.future.bind(py);
        let outcome = self
            .outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if future.call_method0("done")?.is_truthy()? {
            return Ok(());
        }
        match outcome {
            Some(Ok(value)) => future.call_method1("set_result", (value,))?,
            Some(Err(err)) => future.call_method1("set_exception", (err.into_value(py),))?,
            None => return Ok(()),
        };
        Ok(())
    }
}

/// An awaitable of the running loop that resolves with `future`'s output; `future`
/// runs on the core runtime. Its error becomes a Python exception only on the thread
/// that resolves the awaitable (a blocking-pool thread, with the GIL), never on a
/// runtime worker; a panic in `future` raises `RuntimeError` instead of leaving the
/// `await` hanging.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, ErrorOf>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let py_future = event_loop.call_method0("create_future")?;
    let token = CancellationToken::new();
    py_future.call_method1(
        "add_done_callback",
        (Py::new(
            py,
            CancelOnDone {
                token: token.clone(),
            },
        )?,),
    )?;
    let event_loop = event_loop.unbind();
    let target = py_future.clone().unbind();
    core()?.spawn(async move {
        let output = tokio::select! {
            output = AssertUnwindSafe(future).catch_unwind() => output,
            () = token.cancelled() => return,
        };
        // The GIL is taken on a blocking-pool thread, never on a runtime worker.
        let _ = tokio::task::spawn_blocking(move || {
            with_python(|py| {
                let outcome = match output {
                    Ok(output) => output
                        .map_err(PyErr::from)
                        .and_then(|value| value.into_py_any(py)),
                    Err(panic) => Err(PyRuntimeError::new_err(format!(
                        "leasehold panicked (a bug: please report it): {}",
                        panic_message(&*panic)
                    ))),
                };
                let resolve = Resolve {
                    future: target,
                    outcome: Mutex::new(Some(outcome)),
                };
                // A closed loop refuses: nobody waits for the answer any more.
                let _ = Py::new(py, resolve).and_then(|resolve| {
                    event_loop
                        .bind(py)
                        .call_method1("call_soon_threadsafe", (resolve,))
                });
            })
        })
        .await;
    });
    Ok(py_future)
}

/// What a panic said, if it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// An awaitable that panics on the core runtime: for the test that a panic raises
/// rather than hangs (`leasehold._leasehold._panic_in_awaitable`).
#[pyfunction]
pub(crate) fn _panic_in_awaitable(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    awaitable(py, async {
        if std::hint::black_box(true) {
            panic!("a test's panic");
        }
        Ok(())
    })
}

/// A serialisable value that becomes Python objects (dicts, lists, strings, numbers)
/// when an awaitable resolves with it.
pub(crate) struct Serialized<T>(pub(crate) T);

impl<'py, T: serde::Serialize> IntoPyObject<'py> for Serialized<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::to_python(py, &self.0)
    }
}
