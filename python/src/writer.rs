//! `_FencedWriter`: the Rust side of `leasehold.FencedWriter`.

use leasehold_election::{Fence, FencedWriter, RedisStore};
use pyo3::prelude::*;

use crate::errors::ErrorOf;
use crate::runtime::{core, on_core};

/// Writes to Redis keys that only the current term may write: each write carries
/// the term's fence, and a write with a fence below the highest the key has accepted
/// raises `FenceRejected` (a deposed owner's write). Every method returns an
/// awaitable.
#[pyclass(frozen, module = "leasehold._leasehold", name = "_FencedWriter")]
pub struct WriterCore {
    writer: FencedWriter,
}

/// Runs a fenced write on the core runtime.
macro_rules! fenced {
    ($self:ident, $py:ident, |$writer:ident| $call:expr) => {{
        let $writer = $self.writer.clone();
        on_core($py, async move {
            $call.await.map_err(|err| ErrorOf::from(err).into())
        })
    }};
}

#[pymethods]
impl WriterCore {
    #[new]
    fn new(url: &str) -> PyResult<Self> {
        let _runtime = core()?.enter();
        let store = RedisStore::connect(url).map_err(ErrorOf::from)?;
        Ok(Self {
            writer: FencedWriter::new(store),
        })
    }

    /// `SET key value`, if `fence` is not below the key's highest.
    fn set<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: String,
        fence: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        fenced!(self, py, |writer| writer.set(&key, &value, Fence(fence)))
    }

    /// `HSET key field value`, if `fence` is not below the key's highest.
    fn hset<'py>(
        &self,
        py: Python<'py>,
        key: String,
        field: String,
        value: String,
        fence: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        fenced!(self, py, |writer| writer.hset(
            &key,
            &field,
            &value,
            Fence(fence)
        ))
    }

    /// `RPUSH key value`, if `fence` is not below the key's highest.
    fn rpush<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: String,
        fence: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        fenced!(self, py, |writer| writer.rpush(&key, &value, Fence(fence)))
    }

    /// Raises the key's fence to `fence` without writing: older terms' writes are
    /// refused from now on.
    fn raise_fence<'py>(
        &self,
        py: Python<'py>,
        key: String,
        fence: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        fenced!(self, py, |writer| writer.raise(&key, Fence(fence)))
    }
}
