//! `_Elector`: the Rust side of `leasehold.Elector`.
//!
//! The elector runs on a thread of its own (or on the core runtime); each term it
//! wins is handed to Python as a [`Lease`] through a channel, and the term's duty
//! future waits for Python to say how the duty ended (`Lease._finish`). Python runs
//! `lead(lease)` as an asyncio task and cancels it when `lease.lost()` completes
//! (`leasehold/_elector.py`).

use std::sync::{Arc, Mutex};

use leasehold_election::{
    Elector, ElectorConfig, ElectorHandle, Leadership, RedisStore, Role, Status,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::watch;

use crate::errors::{ErrorOf, Kind, config, error};
use crate::lease::{Lease, reason_label};
use crate::runtime::{core, on_core};
use crate::seconds;
use crate::terms::{Terms, poisoned, run_term};

/// The Rust side of `leasehold.Elector` (use that: it runs the duty as an asyncio
/// task and cancels it when the term ends).
#[pyclass(frozen, module = "leasehold._leasehold", name = "_Elector")]
pub struct ElectorCore {
    /// Until `start`: what it starts with.
    pending: Mutex<Option<(RedisStore, ElectorConfig)>>,
    dedicated: bool,
    handle: Arc<tokio::sync::Mutex<Option<ElectorHandle>>>,
    /// The elector's status, once started (kept after it stops).
    status: Mutex<Option<watch::Receiver<Status>>>,
    terms: Terms,
    duty: String,
    replica: String,
}

#[pymethods]
impl ElectorCore {
    #[new]
    #[pyo3(signature = (url, duty, replica, *, lease = None, renew_interval = None, grace = None, key_prefix = None, dedicated = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: &str,
        duty: &str,
        replica: &str,
        lease: Option<f64>,
        renew_interval: Option<f64>,
        grace: Option<f64>,
        key_prefix: Option<String>,
        dedicated: bool,
    ) -> PyResult<Self> {
        let mut builder = ElectorConfig::builder(duty, replica);
        if let Some(lease) = lease {
            builder = builder.lease(seconds("lease", lease)?);
        }
        if let Some(renew) = renew_interval {
            builder = builder.renew_interval(seconds("renew_interval", renew)?);
        }
        if let Some(grace) = grace {
            builder = builder.grace(seconds("grace", grace)?);
        }
        if let Some(prefix) = key_prefix {
            builder = builder.key_prefix(prefix);
        }
        let config = builder.build().map_err(config)?;
        let store = {
            let _runtime = core()?.enter();
            RedisStore::connect(url).map_err(ErrorOf::from)?
        };
        Ok(Self {
            pending: Mutex::new(Some((store, config))),
            dedicated,
            handle: Arc::new(tokio::sync::Mutex::new(None)),
            status: Mutex::new(None),
            terms: Terms::new(),
            duty: duty.to_owned(),
            replica: replica.to_owned(),
        })
    }

    /// The duty's name.
    #[getter]
    fn duty(&self) -> &str {
        &self.duty
    }

    /// This replica's id.
    #[getter]
    fn replica(&self) -> &str {
        &self.replica
    }

    /// Starts campaigning (once): terms won arrive through `next_term()`.
    fn start(&self) -> PyResult<()> {
        let pending = self.pending.lock().map_err(|_| poisoned())?.take();
        let Some((store, config)) = pending else {
            return Err(error(
                Kind::Stopped,
                format!("elector {:?} was already started", self.duty),
            ));
        };
        let sender = self.terms.sender()?;
        let duty = move |lead: Leadership| {
            let sender = sender.clone();
            run_term(|done| Lease::for_duty(lead, done), sender)
        };
        let elector = Elector::new(store, config, duty);
        let _runtime = core()?.enter();
        let handle = if self.dedicated {
            elector.spawn_dedicated().map_err(|err| {
                error(
                    Kind::Stopped,
                    format!("the elector's thread did not start: {err}"),
                )
            })?
        } else {
            elector.spawn()
        };
        *self.status.lock().map_err(|_| poisoned())? = Some(handle.subscribe());
        *self
            .handle
            .try_lock()
            .map_err(|_| error(Kind::Stopped, "the elector is being stopped"))? = Some(handle);
        Ok(())
    }

    /// An awaitable of the next term won: a `Lease`, or `None` once the elector has
    /// stopped.
    fn next_term<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.terms.next(py)
    }

    /// An awaitable that stops the elector: cancels the duty, releases the lease (the
    /// next leader takes over at once), and completes when it has. Idempotent.
    fn shutdown<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // Never started: nothing will, and nothing is held.
        self.pending.lock().map_err(|_| poisoned())?.take();
        let handle = Arc::clone(&self.handle);
        on_core(py, async move {
            let handle = handle.lock().await.take();
            if let Some(handle) = handle {
                handle.shutdown().await;
            }
            Ok(())
        })
    }

    /// An awaitable that resolves to the fence once this elector leads (raises
    /// `Stopped` if it stops first).
    fn wait_until_leader<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let status = self.subscribe()?;
        on_core(py, async move {
            let mut status = status;
            let fence = status
                .wait_for(|status| status.is_leader() || matches!(status.role, Role::Stopped))
                .await
                .ok()
                .and_then(|status| status.fence());
            fence
                .map(|fence| fence.get())
                .ok_or_else(|| ErrorOf::new(Kind::Stopped, "the elector stopped before it led"))
        })
    }

    /// An awaitable: if this elector leads, ends the term and releases the lease so
    /// that another replica leads; resolves to whether it led.
    fn step_down<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = Arc::clone(&self.handle);
        on_core(py, async move {
            let guard = handle.lock().await;
            let Some(handle) = guard.as_ref() else {
                return Err(ErrorOf::new(Kind::Stopped, "the elector is not running"));
            };
            handle
                .step_down()
                .await
                .map_err(|err| ErrorOf::new(Kind::Stopped, err.to_string()))
        })
    }

    /// The elector's state now, as a dict: `role` (`"starting"`, `"follower"`,
    /// `"leader"`, `"stopped"`), `fence` (this term's, when leading), `leader` (the
    /// holder a follower saw), `highest_fence`, `last_error`, `last_term` (`fence`,
    /// `reason`, `detail`, `released`) and `stalls`.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let status = match self.status.lock().map_err(|_| poisoned())?.as_ref() {
            Some(status) => status.borrow().clone(),
            None => {
                // Every field, as a started elector reports them: the package reads
                // them all and a missing one is an error there.
                let dict = PyDict::new(py);
                let stopped = self.pending.lock().map_err(|_| poisoned())?.is_none();
                dict.set_item("role", if stopped { "stopped" } else { "starting" })?;
                dict.set_item("leader", py.None())?;
                dict.set_item("fence", py.None())?;
                dict.set_item("highest_fence", 0u64)?;
                dict.set_item("last_error", py.None())?;
                dict.set_item("last_term", py.None())?;
                dict.set_item("stalls", 0u64)?;
                return Ok(dict);
            }
        };
        let dict = PyDict::new(py);
        let (role, leader) = match &status.role {
            Role::Starting => ("starting", None),
            Role::Follower { leader } => ("follower", leader.clone()),
            Role::Leader { .. } => ("leader", Some(self.replica.clone())),
            Role::Stopped => ("stopped", None),
            _ => ("unknown", None),
        };
        dict.set_item("role", role)?;
        dict.set_item("leader", leader)?;
        dict.set_item("fence", status.fence().map(|fence| fence.get()))?;
        dict.set_item("highest_fence", status.highest_fence.get())?;
        dict.set_item(
            "last_error",
            status.last_error.as_ref().map(|e| crate::errors::chain(e)),
        )?;
        let last_term = match &status.last_term {
            Some(end) => {
                let term = PyDict::new(py);
                term.set_item("fence", end.fence.get())?;
                term.set_item("reason", reason_label(&end.reason))?;
                term.set_item("detail", end.reason.to_string())?;
                term.set_item("released", end.released)?;
                Some(term)
            }
            None => None,
        };
        dict.set_item("last_term", last_term)?;
        dict.set_item("stalls", status.stalls)?;
        Ok(dict)
    }
}

impl ElectorCore {
    fn subscribe(&self) -> PyResult<watch::Receiver<Status>> {
        self.status
            .lock()
            .map_err(|_| poisoned())?
            .clone()
            .ok_or_else(|| error(Kind::Stopped, "the elector is not running: start it first"))
    }
}
