//! `_Coordinator`: the Rust side of `leasehold.Coordinator`.
//!
//! The coordinator runs on the core runtime (every renewal and claim there); each
//! partition term it wins is handed to Python as a [`Lease`] through a channel, and
//! the term's callback waits for Python to say how the handler ended.

use std::sync::{Arc, Mutex};

use leasehold_partitions::{
    Coordinator, CoordinatorHandle, GroupAdmin, GroupConfig, GroupView, LoadDamping, NotReady,
    Ownership, RedisStore,
};
use pyo3::prelude::*;
use tokio::sync::watch;

use crate::admin::AdminCore;
use crate::errors::{ErrorOf, Kind, config, error};
use crate::lease::Lease;
use crate::router::RouterCore;
use crate::runtime::{core, on_core};
use crate::terms::{Terms, poisoned, run_term};
use crate::{seconds, to_python};

/// The Rust side of `leasehold.Coordinator` (use that: it runs a handler task per
/// owned partition and cancels it when the partition's term ends).
#[pyclass(frozen, module = "leasehold._leasehold", name = "_Coordinator")]
pub struct CoordinatorCore {
    pending: Mutex<Option<(RedisStore, GroupConfig)>>,
    handle: Mutex<Option<CoordinatorHandle<RedisStore>>>,
    terms: Terms,
    /// The coordinator's store, for its routers (they share its subscription).
    store: RedisStore,
    url: String,
    group: String,
    replica: String,
    key_prefix: Option<String>,
}

#[pymethods]
impl CoordinatorCore {
    #[new]
    #[pyo3(signature = (url, group, partitions, replica, *, lease = None, renew_interval = None, key_prefix = None, capacity = None, rejoin_grace = None, list_version = None, weights_from_loads = false, prepare_moves = None, advertise = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: &str,
        group: &str,
        partitions: Vec<String>,
        replica: &str,
        lease: Option<f64>,
        renew_interval: Option<f64>,
        key_prefix: Option<String>,
        capacity: Option<u32>,
        rejoin_grace: Option<f64>,
        list_version: Option<u64>,
        weights_from_loads: bool,
        prepare_moves: Option<f64>,
        advertise: Option<String>,
    ) -> PyResult<Self> {
        let mut builder = GroupConfig::builder(group, partitions, replica);
        if let Some(lease) = lease {
            builder = builder.lease(seconds("lease", lease)?);
        }
        if let Some(renew) = renew_interval {
            builder = builder.renew_interval(seconds("renew_interval", renew)?);
        }
        if let Some(prefix) = &key_prefix {
            builder = builder.key_prefix(prefix.clone());
        }
        if let Some(capacity) = capacity {
            builder = builder.capacity(capacity);
        }
        if let Some(grace) = rejoin_grace {
            builder = builder.rejoin_grace(seconds("rejoin_grace", grace)?);
        }
        if let Some(version) = list_version {
            builder = builder.list_version(version);
        }
        if weights_from_loads {
            builder = builder.weights_from_loads(LoadDamping::default());
        }
        if let Some(within) = prepare_moves {
            builder = builder.prepare_moves(seconds("prepare_moves", within)?);
        }
        if let Some(address) = advertise {
            builder = builder.advertise(address);
        }
        let config = builder.build().map_err(config)?;
        let store = {
            let _runtime = core()?.enter();
            RedisStore::connect(url).map_err(ErrorOf::from)?
        };
        Ok(Self {
            pending: Mutex::new(Some((store.clone(), config))),
            store,
            handle: Mutex::new(None),
            terms: Terms::new(),
            url: url.to_owned(),
            group: group.to_owned(),
            replica: replica.to_owned(),
            key_prefix,
        })
    }

    /// The group's name.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// This replica's id.
    #[getter]
    fn replica(&self) -> &str {
        &self.replica
    }

    /// Joins the group (once): partition terms won arrive through `next_term()`.
    fn start(&self) -> PyResult<()> {
        let pending = self.pending.lock().map_err(|_| poisoned())?.take();
        let Some((store, config)) = pending else {
            return Err(error(
                Kind::Stopped,
                format!("coordinator of {:?} was already started", self.group),
            ));
        };
        let sender = self.terms.sender()?;
        let callback = move |_partition: String, ownership: Ownership| {
            let sender = sender.clone();
            run_term(|done| Lease::for_partition(ownership, done), sender)
        };
        let _runtime = core()?.enter();
        let handle = Coordinator::new(store, config, callback).spawn();
        *self.handle.lock().map_err(|_| poisoned())? = Some(handle);
        Ok(())
    }

    /// An awaitable of the next partition term won: a `Lease`, or `None` once the
    /// coordinator has stopped.
    fn next_term<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.terms.next(py)
    }

    /// An awaitable that leaves the group gracefully: every handler is cancelled, its
    /// partitions released and handed to the others at once. Idempotent.
    fn shutdown<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.pending.lock().map_err(|_| poisoned())?.take();
        let handle = self.handle.lock().map_err(|_| poisoned())?.clone();
        on_core(py, async move {
            if let Some(handle) = handle {
                handle.shutdown().await;
            }
            Ok(())
        })
    }

    /// This replica's view of its group now (a dict; see `leasehold.View`).
    fn view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let view = self.handle()?.status();
        view_dict(py, &view)
    }

    /// A stream of views: `await stream.next()` returns the next one that differs.
    fn views(&self) -> PyResult<ViewStream> {
        Ok(ViewStream {
            views: Arc::new(tokio::sync::Mutex::new(self.handle()?.subscribe())),
        })
    }

    /// An awaitable that completes once this replica is ready in its group's sense
    /// (joined, settled, granting, not drained, holding at least its floor share: what
    /// `view().ready` says), or raises what keeps it out (a duplicate replica id) or
    /// `Stopped`.
    fn ready<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle()?;
        on_core(py, async move {
            let mut views = handle.subscribe();
            let settled = views
                .wait_for(|view| matches!(view.readiness(), Ok(()) | Err(NotReady::Refused(_))))
                .await
                .map_err(|_| {
                    ErrorOf::new(Kind::Stopped, "the coordinator stopped before it was ready")
                })?
                .readiness();
            match settled {
                Err(NotReady::Refused(err)) => Err(ErrorOf::from(err)),
                _ => Ok(()),
            }
        })
    }

    /// Whether the replica is running (not shut down, not failed).
    #[getter]
    fn is_running(&self) -> PyResult<bool> {
        Ok(self
            .handle
            .lock()
            .map_err(|_| poisoned())?
            .as_ref()
            .is_some_and(CoordinatorHandle::is_running))
    }

    /// The fence of this replica's running term of `partition`, if it owns it now
    /// (`None` too before `start` and after shutdown). A map lookup: no I/O.
    fn owns(&self, partition: &str) -> PyResult<Option<u64>> {
        Ok(self
            .handle
            .lock()
            .map_err(|_| poisoned())?
            .as_ref()
            .and_then(|handle| handle.owns(partition))
            .map(|fence| fence.get()))
    }

    /// Counts a request for `partition` that reached this replica although it does
    /// not own it (nothing to count before `start`).
    fn misrouted(&self, partition: &str) -> PyResult<()> {
        if let Some(handle) = self.handle.lock().map_err(|_| poisoned())?.as_ref() {
            handle.misrouted(partition);
        }
        Ok(())
    }

    /// A `Router` of this group on this coordinator's store.
    fn router(&self) -> PyResult<RouterCore> {
        let mut admin = GroupAdmin::new(self.store.clone(), &self.group).map_err(ErrorOf::from)?;
        if let Some(prefix) = &self.key_prefix {
            admin = admin.with_key_prefix(prefix).map_err(ErrorOf::from)?;
        }
        RouterCore::of(&admin, &self.group)
    }

    /// A `GroupAdmin` of this group on its own connections.
    fn admin(&self) -> PyResult<AdminCore> {
        AdminCore::open(&self.url, &self.group, self.key_prefix.as_deref())
    }
}

impl CoordinatorCore {
    fn handle(&self) -> PyResult<CoordinatorHandle<RedisStore>> {
        self.handle
            .lock()
            .map_err(|_| poisoned())?
            .clone()
            .ok_or_else(|| {
                error(
                    Kind::Stopped,
                    "the coordinator is not running: start it first",
                )
            })
    }
}

/// The views of a running coordinator, one per change.
#[pyclass(frozen, module = "leasehold._leasehold", name = "_ViewStream")]
pub struct ViewStream {
    views: Arc<tokio::sync::Mutex<watch::Receiver<GroupView>>>,
}

#[pymethods]
impl ViewStream {
    /// An awaitable of the next view that differs from the last one returned (the
    /// first call returns the current one); `None` once the coordinator has stopped.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let views = Arc::clone(&self.views);
        crate::bridge::awaitable(py, async move {
            let mut views = views.lock().await;
            if views.changed().await.is_err() {
                return Ok(None);
            }
            let view = views.borrow_and_update().clone();
            Ok(Some(ViewOut(view)))
        })
    }
}

/// A view that becomes a dict when an awaitable resolves with it.
struct ViewOut(GroupView);

impl<'py> IntoPyObject<'py> for ViewOut {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        view_dict(py, &self.0)
    }
}

/// A view as a dict: the serialised `GroupView` with `ready` and `not_ready`.
fn view_dict<'py>(py: Python<'py>, view: &GroupView) -> PyResult<Bound<'py, PyAny>> {
    let dict = to_python(py, view)?;
    let readiness = view.readiness();
    dict.set_item("ready", readiness.is_ok())?;
    dict.set_item(
        "not_ready",
        readiness.err().map(|why| crate::errors::chain(&why)),
    )?;
    Ok(dict)
}
