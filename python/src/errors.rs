//! Rust errors as the package's typed Python exceptions.
//!
//! The exception classes are defined in Python (`leasehold/errors.py`: they inherit
//! from `LeaseholdError` and the built-in each one refines, such as `ValueError` or
//! `ConnectionError`); this module raises them by name, with their attributes
//! (`StoreError.retryable`, `FenceRejected.fence` and `.highest`) as keyword
//! arguments.

use leasehold_election::{BuildError, FencedWriteError, StoreError, TermOver};
use leasehold_partitions::{GroupConfigError, HandOffError, LoadError, PartitionsError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

/// The exception classes of `leasehold.errors` this module raises.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A bad argument: a name, a URL, a duration, a configuration.
    Config,
    /// Redis answered with an error retrying cannot fix (WRONGTYPE, ACL, a bad
    /// reply).
    Store,
    /// Redis could not be reached in time, or cannot serve now: retryable.
    Unavailable,
    /// The term is over (`Lease.check`).
    TermOver,
    /// The elector or coordinator has stopped, or was never started.
    Stopped,
    /// A fenced write was refused: a newer term has written.
    FenceRejected,
    /// Hand-off state refused (too large, or the term is over).
    HandOff,
    /// A load refused (negative, not finite).
    Load,
    /// What a group refused: an unknown group, a partition already present, ...
    Group,
    /// A wait with a timeout ran out (`Router.ready(timeout=...)`).
    Timeout,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Self::Config => "ConfigError",
            Self::Store => "StoreError",
            Self::Unavailable => "StoreUnavailable",
            Self::TermOver => "TermOver",
            Self::Stopped => "Stopped",
            Self::FenceRejected => "FenceRejected",
            Self::HandOff => "HandOffError",
            Self::Load => "LoadError",
            Self::Group => "GroupError",
            Self::Timeout => "Timeout",
        }
    }
}

/// A `leasehold.errors` exception of `kind` with `message`.
pub(crate) fn error(kind: Kind, message: impl Into<String>) -> PyErr {
    ErrorOf::new(kind, message).into()
}

/// The exception `err` describes, with its attributes; the caller holds the GIL.
fn exception(py: Python<'_>, err: &ErrorOf) -> PyResult<PyErr> {
    let class = py
        .import("leasehold.errors")?
        .getattr(err.kind.class_name())?
        .cast_into::<PyType>()
        .map_err(PyErr::from)?;
    let kwargs = PyDict::new(py);
    if let Kind::Store | Kind::Unavailable = err.kind {
        kwargs.set_item("retryable", matches!(err.kind, Kind::Unavailable))?;
    }
    if let Some((fence, highest)) = err.fences {
        kwargs.set_item("fence", fence)?;
        kwargs.set_item("highest", highest)?;
    }
    let value = class.call((err.message.as_str(),), Some(&kwargs))?;
    Ok(PyErr::from_value(value))
}

/// A configuration error.
pub(crate) fn config(err: impl std::fmt::Display) -> PyErr {
    error(Kind::Config, err.to_string())
}

impl From<ErrorOf> for PyErr {
    fn from(err: ErrorOf) -> Self {
        Python::attach(|py| {
            exception(py, &err).unwrap_or_else(|why| {
                // The package's own module is missing or broken: say so rather than
                // panic.
                PyRuntimeError::new_err(format!("{} (leasehold.errors: {why})", err.message))
            })
        })
    }
}

/// A Rust error on its way to its Python exception (`?` in the bindings): its class,
/// message and attributes only, no Python object, so that the futures on the core
/// runtime make it without the GIL; it becomes the exception (`PyErr::from`) where the
/// GIL is held anyway, on the thread that resolves the awaitable or on the caller's.
#[derive(Debug, Clone)]
pub(crate) struct ErrorOf {
    kind: Kind,
    message: String,
    /// A refused fenced write's fence and the highest the resource has seen.
    fences: Option<(u64, u64)>,
}

impl ErrorOf {
    /// An error of `kind` with `message`.
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            fences: None,
        }
    }

    fn config(err: impl std::error::Error + 'static) -> Self {
        Self::new(Kind::Config, chain(&err))
    }

    /// A Redis failure: retryable (`StoreUnavailable`) or not (`StoreError`).
    fn store(err: &StoreError) -> Self {
        let kind = if err.is_retryable() {
            Kind::Unavailable
        } else {
            Kind::Store
        };
        Self::new(kind, chain(err))
    }
}

impl From<BuildError> for ErrorOf {
    fn from(err: BuildError) -> Self {
        Self::config(err)
    }
}

impl From<GroupConfigError> for ErrorOf {
    fn from(err: GroupConfigError) -> Self {
        Self::config(err)
    }
}

impl From<leasehold_election::ConfigError> for ErrorOf {
    fn from(err: leasehold_election::ConfigError) -> Self {
        Self::config(err)
    }
}

impl From<StoreError> for ErrorOf {
    fn from(err: StoreError) -> Self {
        Self::store(&err)
    }
}

impl From<TermOver> for ErrorOf {
    fn from(err: TermOver) -> Self {
        Self::new(Kind::TermOver, chain(&err))
    }
}

impl From<HandOffError> for ErrorOf {
    fn from(err: HandOffError) -> Self {
        Self::new(Kind::HandOff, chain(&err))
    }
}

impl From<LoadError> for ErrorOf {
    fn from(err: LoadError) -> Self {
        Self::new(Kind::Load, chain(&err))
    }
}

impl From<FencedWriteError> for ErrorOf {
    fn from(err: FencedWriteError) -> Self {
        match &err {
            FencedWriteError::Stale { fence, highest } => Self {
                fences: Some((fence.get(), highest.get())),
                ..Self::new(Kind::FenceRejected, chain(&err))
            },
            FencedWriteError::Store(store) => Self {
                message: chain(&err),
                ..Self::store(store)
            },
            _ => Self::config(err),
        }
    }
}

impl From<PartitionsError> for ErrorOf {
    fn from(err: PartitionsError) -> Self {
        let kind = match &err {
            PartitionsError::Store(store) => {
                return Self {
                    message: chain(&err),
                    ..Self::store(store)
                };
            }
            PartitionsError::Config(_) | PartitionsError::InvalidWeight(_) => Kind::Config,
            _ => Kind::Group,
        };
        Self::new(kind, chain(&err))
    }
}

/// An error's message for its Python exception: its text and its causes' (the Redis
/// client's message, for one), which the text alone leaves out.
pub(crate) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    leasehold_election::ErrorChain(err).to_string()
}
