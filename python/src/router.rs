//! `_Router`: the Rust side of `leasehold.Router`, and `Route`.
//!
//! The router's table lives in Rust (a map its background task on the core runtime
//! keeps current); [`RouterCore::owner`] reads it while holding the GIL, but only for
//! a map lookup: the task that writes the table never takes the GIL, so a lookup
//! never waits for Python and Python never waits for Redis.

use std::sync::Arc;
use std::time::Duration;

use leasehold_partitions::{GroupAdmin, RedisStore, Router, RouterStatus};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::errors::{ErrorOf, Kind, config};
use crate::runtime::{core, on_core};

/// How often a router's own store checks its quiet pub/sub link: a router keeps no
/// lease, so once a minute is enough (a dead link is replaced within a minute, and
/// the router then reads what it missed from the ledger).
const SUBSCRIPTION_PING: Duration = Duration::from_secs(60);

/// Where a partition is served: its owner's replica id, the address the owner
/// advertises (`None` if it advertises none) and the fence of the owner's term.
///
/// A route is a hint: the owner's own check (`Coordinator.owns`) is the truth.
#[pyclass(frozen, eq, hash, module = "leasehold", name = "Route")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyRoute {
    /// The owner's replica id.
    #[pyo3(get)]
    replica: String,
    /// Where the owner serves (`Coordinator(advertise=...)`), or `None`.
    #[pyo3(get)]
    address: Option<String>,
    /// The fence of the owner's term.
    #[pyo3(get)]
    fence: u64,
}

impl From<&leasehold_partitions::Route> for PyRoute {
    fn from(route: &leasehold_partitions::Route) -> Self {
        Self {
            replica: route.replica().to_owned(),
            address: route.address().map(str::to_owned),
            fence: route.fence().get(),
        }
    }
}

#[pymethods]
impl PyRoute {
    #[new]
    #[pyo3(signature = (replica, address, fence))]
    fn new(replica: String, address: Option<String>, fence: u64) -> Self {
        Self {
            replica,
            address,
            fence,
        }
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str) {
        ("replica", "address", "fence")
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let replica = PyString::new(py, &self.replica).repr()?;
        let address = match &self.address {
            Some(address) => PyString::new(py, address).repr()?.to_string(),
            None => "None".to_owned(),
        };
        Ok(format!(
            "Route(replica={replica}, address={address}, fence={})",
            self.fence
        ))
    }
}

/// The Rust side of `leasehold.Router` (use that).
#[pyclass(frozen, module = "leasehold._leasehold", name = "_Router")]
pub struct RouterCore {
    router: Arc<Router>,
    group: String,
    /// Cancelled by `shutdown` (and when this object goes): ends every change stream,
    /// whose channel would otherwise stay open as long as the router lives.
    stopped: CancellationToken,
}

impl Drop for RouterCore {
    fn drop(&mut self) {
        self.stopped.cancel();
    }
}

impl RouterCore {
    /// A router of `admin`'s group (on `admin`'s store), started on the core runtime.
    pub(crate) fn of(admin: &GroupAdmin<RedisStore>, group: &str) -> PyResult<Self> {
        let _runtime = core()?.enter();
        Ok(Self {
            router: Arc::new(admin.router()),
            group: group.to_owned(),
            stopped: CancellationToken::new(),
        })
    }
}

#[pymethods]
impl RouterCore {
    #[new]
    #[pyo3(signature = (url, group, *, key_prefix = None))]
    fn new(url: &str, group: &str, key_prefix: Option<&str>) -> PyResult<Self> {
        let store = {
            let _runtime = core()?.enter();
            RedisStore::builder(url)
                .subscription_ping(SUBSCRIPTION_PING)
                .build()
                .map_err(ErrorOf::from)?
        };
        let mut admin = GroupAdmin::new(store, group).map_err(ErrorOf::from)?;
        if let Some(prefix) = key_prefix {
            admin = admin.with_key_prefix(prefix).map_err(ErrorOf::from)?;
        }
        Self::of(&admin, group)
    }

    /// The group's name.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// The route of `partition`, or `None` if no owner is known. A map read.
    fn owner(&self, partition: &str) -> Option<PyRoute> {
        self.router.owner(partition).as_ref().map(PyRoute::from)
    }

    /// Every known route, by partition.
    fn routes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (partition, route) in self.router.routes() {
            dict.set_item(partition, PyRoute::from(&route))?;
        }
        Ok(dict)
    }

    /// The router's status as a dict (see `leasehold.RouterStatus`).
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        status_dict(py, &self.router.status())
    }

    /// An awaitable that completes once the table holds a full read of the group;
    /// raises `Timeout` after `timeout` seconds (`None`: waits on), `Stopped` if the
    /// router is shut down first.
    #[pyo3(signature = (timeout = None))]
    fn ready<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let limit = match timeout {
            None => None,
            Some(t) if t.is_finite() && t >= 0.0 => Some(
                Duration::try_from_secs_f64(t).map_err(|err| config(format!("timeout: {err}")))?,
            ),
            Some(t) => {
                return Err(config(format!(
                    "timeout must be a finite number of seconds, zero or more, got {t}"
                )));
            }
        };
        let router = Arc::clone(&self.router);
        let group = self.group.clone();
        on_core(py, async move {
            let waited = match limit {
                None => {
                    router.wait_until_ready().await;
                    true
                }
                Some(limit) => tokio::time::timeout(limit, router.wait_until_ready())
                    .await
                    .is_ok(),
            };
            let status = router.status();
            if status.ready {
                return Ok(());
            }
            if waited {
                return Err(ErrorOf::new(
                    Kind::Stopped,
                    format!("the router of {group:?} was shut down before it was ready"),
                ));
            }
            let why = if status.full_reads == 0 {
                "no read of the group has succeeded yet (is Redis reachable?)"
            } else if !status.group_exists {
                "the group does not exist (no replica has joined it)"
            } else {
                "its table is not read yet"
            };
            Err(ErrorOf::new(
                Kind::Timeout,
                format!(
                    "the router of {group:?} was not ready within {:.3} s: {why}",
                    limit.unwrap_or_default().as_secs_f64()
                ),
            ))
        })
    }

    /// A stream of the table's changes from now on.
    fn changes(&self) -> RouteChanges {
        RouteChanges {
            changes: Arc::new(tokio::sync::Mutex::new(self.router.changes())),
            stopped: self.stopped.clone(),
        }
    }

    /// An awaitable that stops following the group (idempotent); every change stream
    /// ends.
    fn shutdown<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.stopped.cancel();
        let router = Arc::clone(&self.router);
        on_core(py, async move {
            router.shutdown().await;
            Ok(())
        })
    }
}

/// A router's changes, one per `next()`.
#[pyclass(frozen, module = "leasehold._leasehold", name = "_RouteChanges")]
pub struct RouteChanges {
    changes: Arc<tokio::sync::Mutex<broadcast::Receiver<leasehold_partitions::RouteChange>>>,
    stopped: CancellationToken,
}

/// What `_RouteChanges.next()` resolves with.
enum Next {
    /// A partition's new route (`None`: no owner known).
    Change(String, Option<PyRoute>),
    /// This stream fell behind and skipped that many changes.
    Skipped(u64),
    /// The router was shut down.
    End,
}

impl<'py> IntoPyObject<'py> for Next {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Self::Change(partition, route) => Ok((partition, route).into_pyobject(py)?.into_any()),
            Self::Skipped(n) => Ok(n.into_pyobject(py)?.into_any()),
            Self::End => Ok(py.None().into_bound(py)),
        }
    }
}

#[pymethods]
impl RouteChanges {
    /// An awaitable of the next change: `(partition, route or None)`; an `int` (how
    /// many changes were skipped) if this stream fell behind; `None` once the router
    /// is shut down.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let changes = Arc::clone(&self.changes);
        let stopped = self.stopped.clone();
        on_core(py, async move {
            let mut changes = changes.lock().await;
            let next = tokio::select! {
                () = stopped.cancelled() => return Ok(Next::End),
                next = changes.recv() => next,
            };
            Ok(match next {
                Ok(change) => {
                    Next::Change(change.partition, change.route.as_ref().map(PyRoute::from))
                }
                Err(broadcast::error::RecvError::Lagged(n)) => Next::Skipped(n),
                Err(broadcast::error::RecvError::Closed) => Next::End,
            })
        })
    }
}

/// A router's status as a dict of its fields.
fn status_dict<'py>(py: Python<'py>, status: &RouterStatus) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("ready", status.ready)?;
    dict.set_item("group_exists", status.group_exists)?;
    dict.set_item("incarnation", status.incarnation.as_deref())?;
    dict.set_item("last_move", status.last_move.as_deref())?;
    dict.set_item("routes", status.routes)?;
    dict.set_item("full_reads", status.full_reads)?;
    dict.set_item("catch_ups", status.catch_ups)?;
    dict.set_item("notices", status.notices)?;
    Ok(dict)
}
