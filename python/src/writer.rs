//! `_FencedWriter` and `_FencedBatch`: the Rust side of `leasehold.FencedWriter` and
//! `leasehold.FencedBatch`.

use std::sync::{Mutex, PoisonError};

use leasehold_election::{Fence, FencedBatch, FencedWriter, RedisStore};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::{ErrorOf, config};
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

    /// A batch of fenced writes to several keys, made all or none by one commit.
    fn batch(&self) -> BatchCore {
        BatchCore {
            writer: self.writer.clone(),
            ops: Mutex::new(Vec::new()),
        }
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

/// One operation of a batch, as `FencedBatch` takes it.
#[derive(Debug, Clone)]
enum Op {
    Set(String, String),
    HSet(String, String, String),
    RPush(String, String),
    Raise(String),
}

/// Fenced writes to several keys, all or none (`FencedBatch` of the Rust core): the
/// operations are collected here and sent as one script by `commit`, which checks
/// every key's fence first and raises each to the batch's. Every key of a batch must
/// hash to one Redis Cluster slot (one hash tag: `out:{t}`, `cursor:{t}`).
#[pyclass(frozen, module = "leasehold._leasehold", name = "_FencedBatch")]
pub struct BatchCore {
    writer: FencedWriter,
    ops: Mutex<Vec<Op>>,
}

/// A key, field or value of a batch: a `str`, or `bytes` holding UTF-8; anything else
/// raises `ConfigError` (the Rust core's batch takes text).
fn text(what: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(value) = value.cast::<PyString>() {
        return Ok(value.to_str()?.to_owned());
    }
    if let Ok(value) = value.cast::<PyBytes>() {
        return String::from_utf8(value.as_bytes().to_vec())
            .map_err(|err| config(format!("a batch's {what} must be UTF-8: {err}")));
    }
    let kind = value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |name| name.to_string());
    Err(config(format!(
        "a batch's {what} must be str or bytes, not {kind}"
    )))
}

impl BatchCore {
    fn push(&self, op: Op) {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(op);
    }

    /// The Rust batch of the operations added so far.
    fn build(&self) -> FencedBatch {
        let ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        ops.iter()
            .cloned()
            .fold(self.writer.batch(), |batch, op| match op {
                Op::Set(key, value) => batch.set(key, value),
                Op::HSet(key, field, value) => batch.hset(key, field, value),
                Op::RPush(key, value) => batch.rpush(key, value),
                Op::Raise(key) => batch.raise(key),
            })
    }
}

#[pymethods]
impl BatchCore {
    /// Adds `SET key value`.
    fn set(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.push(Op::Set(text("key", key)?, text("value", value)?));
        Ok(())
    }

    /// Adds `HSET key field value`.
    fn hset(
        &self,
        key: &Bound<'_, PyAny>,
        field: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.push(Op::HSet(
            text("key", key)?,
            text("field", field)?,
            text("value", value)?,
        ));
        Ok(())
    }

    /// Adds `RPUSH key value` (a batch holding one is never sent twice).
    fn rpush(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.push(Op::RPush(text("key", key)?, text("value", value)?));
        Ok(())
    }

    /// Adds a raise of `key`'s fence to the batch's, without writing `key`.
    fn raise_fence(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.push(Op::Raise(text("key", key)?));
        Ok(())
    }

    /// How many operations the batch holds.
    fn __len__(&self) -> usize {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Makes every write of the batch with `fence`, or none: `FenceRejected` if a key
    /// has seen a higher fence; `ConfigError` for an empty batch, an empty key or keys
    /// in different Redis Cluster slots (nothing sent); `RedisError` otherwise.
    fn commit<'py>(&self, py: Python<'py>, fence: u64) -> PyResult<Bound<'py, PyAny>> {
        let batch = self.build();
        on_core(py, async move {
            batch.commit(Fence(fence)).await.map_err(ErrorOf::from)
        })
    }
}
