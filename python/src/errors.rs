//! Rust errors as the package's typed Python exceptions.
//!
//! The exception classes are defined in Python (`leasehold/errors.py`: they inherit
//! from both `LeaseholdError` and the built-in each one refines, `ValueError` or
//! `ConnectionError`); this module raises them by name.

use leasehold_election::{BuildError, FencedWriteError, StoreError, TermOver};
use leasehold_partitions::{GroupConfigError, HandOffError, LoadError, PartitionsError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The exception classes of `leasehold.errors` this module raises.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A bad argument: a name, a URL, a duration, a configuration.
    Config,
    /// Redis could not be reached or answered with an error.
    Redis,
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
            Self::Redis => "RedisError",
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
    let message = message.into();
    Python::attach(|py| {
        let class = py
            .import("leasehold.errors")
            .and_then(|module| module.getattr(kind.class_name()))
            .and_then(|class| class.cast_into::<PyType>().map_err(PyErr::from));
        match class {
            Ok(class) => PyErr::from_type(class, message),
            // The package's own module is missing: say so rather than panic.
            Err(err) => PyRuntimeError::new_err(format!("{message} (leasehold.errors: {err})")),
        }
    })
}

/// A configuration error.
pub(crate) fn config(err: impl std::fmt::Display) -> PyErr {
    error(Kind::Config, err.to_string())
}

impl From<ErrorOf> for PyErr {
    fn from(err: ErrorOf) -> Self {
        error(err.kind, err.message)
    }
}

/// A Rust error on its way to its Python exception (`?` in the bindings): its class and
/// message only, no Python object, so that the futures on the core runtime make it
/// without the GIL; it becomes the exception (`PyErr::from`) where the GIL is held
/// anyway, on the thread that resolves the awaitable or on the caller's.
#[derive(Debug, Clone)]
pub(crate) struct ErrorOf {
    kind: Kind,
    message: String,
}

impl ErrorOf {
    /// An error of `kind` with `message`.
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    fn config(err: impl std::fmt::Display) -> Self {
        Self::new(Kind::Config, err.to_string())
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
        Self::new(Kind::Redis, err.to_string())
    }
}

impl From<TermOver> for ErrorOf {
    fn from(err: TermOver) -> Self {
        Self::new(Kind::TermOver, err.to_string())
    }
}

impl From<HandOffError> for ErrorOf {
    fn from(err: HandOffError) -> Self {
        Self::new(Kind::HandOff, err.to_string())
    }
}

impl From<LoadError> for ErrorOf {
    fn from(err: LoadError) -> Self {
        Self::new(Kind::Load, err.to_string())
    }
}

impl From<FencedWriteError> for ErrorOf {
    fn from(err: FencedWriteError) -> Self {
        let kind = match err {
            FencedWriteError::Stale { .. } => Kind::FenceRejected,
            FencedWriteError::Store(_) => Kind::Redis,
            _ => Kind::Config,
        };
        Self::new(kind, err.to_string())
    }
}

impl From<PartitionsError> for ErrorOf {
    fn from(err: PartitionsError) -> Self {
        let kind = match &err {
            PartitionsError::Store(_) => Kind::Redis,
            PartitionsError::Config(_) | PartitionsError::InvalidWeight(_) => Kind::Config,
            _ => Kind::Group,
        };
        Self::new(kind, err.to_string())
    }
}
