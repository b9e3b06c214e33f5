//! `_GroupAdmin`: the Rust side of `leasehold.GroupAdmin`.

use std::sync::Arc;

use leasehold_partitions::{GroupAdmin, RedisStore};
use pyo3::prelude::*;

use crate::bridge::Serialized;
use crate::errors::ErrorOf;
use crate::router::RouterCore;
use crate::runtime::{core, on_core};

/// Runs `$call` on the admin on the core runtime and turns its answer into Python.
macro_rules! admin_call {
    ($self:ident, $py:ident, |$admin:ident| $call:expr) => {{
        let $admin = Arc::clone(&$self.admin);
        on_core($py, async move {
            let answer = $call.await.map_err(ErrorOf::from)?;
            Ok(Serialized(answer))
        })
    }};
}

/// Administers a group from anywhere: its partition set, drains, weights,
/// preferences, its status and its ledger of moves. Every method returns an
/// awaitable.
#[pyclass(frozen, module = "leasehold._leasehold", name = "_GroupAdmin")]
pub struct AdminCore {
    admin: Arc<GroupAdmin<RedisStore>>,
    group: String,
}

impl AdminCore {
    /// An admin of `group` on its own connections to `url`.
    pub(crate) fn open(url: &str, group: &str, key_prefix: Option<&str>) -> PyResult<Self> {
        let _runtime = core()?.enter();
        let store = RedisStore::connect(url).map_err(ErrorOf::from)?;
        let mut admin = GroupAdmin::new(store, group).map_err(ErrorOf::from)?;
        if let Some(prefix) = key_prefix {
            admin = admin.with_key_prefix(prefix).map_err(ErrorOf::from)?;
        }
        Ok(Self {
            admin: Arc::new(admin),
            group: group.to_owned(),
        })
    }
}

#[pymethods]
impl AdminCore {
    #[new]
    #[pyo3(signature = (url, group, *, key_prefix = None))]
    fn new(url: &str, group: &str, key_prefix: Option<&str>) -> PyResult<Self> {
        Self::open(url, group, key_prefix)
    }

    /// A `Router` of this group on this admin's store.
    fn router(&self) -> PyResult<RouterCore> {
        RouterCore::of(&self.admin, &self.group)
    }

    /// Adds partitions to the group's set; resolves to how many were new.
    fn add<'py>(&self, py: Python<'py>, partitions: Vec<String>) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.add(partitions))
    }

    /// Removes partitions from the group's set; resolves to how many were removed.
    fn remove<'py>(&self, py: Python<'py>, partitions: Vec<String>) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.remove(partitions))
    }

    /// The group's partition set.
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.list())
    }

    /// Drains a replica: it hands its partitions over and claims nothing until
    /// undrained.
    fn drain<'py>(&self, py: Python<'py>, replica: String) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.drain(&replica))
    }

    /// Undrains a replica.
    fn undrain<'py>(&self, py: Python<'py>, replica: String) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.undrain(&replica))
    }

    /// Sets a partition's weight (1 to `MAX_WEIGHT`); resolves to the previous one.
    fn set_weight<'py>(
        &self,
        py: Python<'py>,
        partition: String,
        weight: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.set_weight(&partition, weight))
    }

    /// Prefers a partition on a replica; resolves to the previous preference.
    fn prefer<'py>(
        &self,
        py: Python<'py>,
        partition: String,
        replica: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.prefer(&partition, &replica))
    }

    /// Removes a partition's preference; resolves to the one removed.
    fn unprefer<'py>(&self, py: Python<'py>, partition: String) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.unprefer(&partition))
    }

    /// A partition's owner: a dict with `partition`, `owner` (a replica id or `None`), `fence`, `remaining`, `held_for` and `weight`.
    fn owner<'py>(&self, py: Python<'py>, partition: String) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.owner(&partition))
    }

    /// The whole group as a dict (every partition's owner, every replica's state,
    /// count and load), or `None` if no replica ever created it.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.status())
    }

    /// Moves from the ledger, oldest first, after the move id `after` (from the start
    /// if `None`), at most `limit`: dicts with `id`, `partition`, `from`, `to`,
    /// `cause`, both fences and the gap without an owner.
    #[pyo3(signature = (after = None, limit = 100))]
    fn moves<'py>(
        &self,
        py: Python<'py>,
        after: Option<String>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.moves(after.as_deref(), limit))
    }

    /// The newest `limit` moves of the ledger, oldest first (the same dicts as
    /// `moves`).
    #[pyo3(signature = (limit = 100))]
    fn newest_moves<'py>(&self, py: Python<'py>, limit: usize) -> PyResult<Bound<'py, PyAny>> {
        admin_call!(self, py, |admin| admin.newest_moves(limit))
    }
}
