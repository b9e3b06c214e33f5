//! The lease store the partition electors use: acquire and release go straight to the
//! backend; renewals are queued and sent together in the replica's next group tick.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use leasehold_election::keys::DutyKeys;
use leasehold_election::{Acquire, BackendWarning, Fence, LeaderInfo, LeaseStore, StoreError};
use tokio::sync::{Notify, broadcast, oneshot};

use crate::backend::GroupBackend;

pub(crate) struct PendingRenew {
    pub(crate) index: usize,
    pub(crate) token: String,
    pub(crate) reply: oneshot::Sender<Result<bool, StoreError>>,
}

/// Renewals waiting for the next tick.
#[derive(Default)]
pub(crate) struct Batch {
    pending: Mutex<Vec<PendingRenew>>,
    /// Wakes the coordinator when the first renewal of a batch arrives.
    pub(crate) arrived: Notify,
    index: HashMap<String, usize>,
}

impl Batch {
    pub(crate) fn new(lease_keys: impl IntoIterator<Item = String>) -> Self {
        Self {
            index: lease_keys
                .into_iter()
                .enumerate()
                .map(|(i, k)| (k, i))
                .collect(),
            ..Self::default()
        }
    }

    pub(crate) fn take(&self) -> Vec<PendingRenew> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The electors' view of the backend, sharing one batch per coordinator.
#[derive(Clone)]
pub(crate) struct GroupStore<B> {
    pub(crate) backend: B,
    pub(crate) batch: Arc<Batch>,
}

impl<B: GroupBackend> LeaseStore for GroupStore<B> {
    async fn acquire(
        &self,
        k: &DutyKeys,
        t: &str,
        l: Duration,
        f: Fence,
    ) -> Result<Acquire, StoreError> {
        self.backend.acquire(k, t, l, f).await
    }

    async fn renew(&self, k: &DutyKeys, token: &str, _lease: Duration) -> Result<bool, StoreError> {
        let Some(&index) = self.batch.index.get(&k.lease) else {
            return Err(StoreError::Protocol(format!(
                "{} is not a partition of this group",
                k.lease
            )));
        };
        let (reply, rx) = oneshot::channel();
        self.batch
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(PendingRenew {
                index,
                token: token.to_owned(),
                reply,
            });
        self.batch.arrived.notify_one();
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Connection(
                "the partition coordinator has stopped".into(),
            ))
        })
    }

    async fn release(&self, k: &DutyKeys, t: &str) -> Result<bool, StoreError> {
        self.backend.release(k, t).await
    }

    async fn leader(&self, k: &DutyKeys) -> Result<Option<LeaderInfo>, StoreError> {
        self.backend.leader(k).await
    }

    fn release_notifier(&self, k: &DutyKeys) -> Arc<Notify> {
        self.backend.release_notifier(k)
    }

    fn release_events(&self, k: &DutyKeys) -> broadcast::Receiver<String> {
        self.backend.release_events(k)
    }

    async fn self_check(&self) -> Result<Vec<BackendWarning>, StoreError> {
        self.backend.self_check().await
    }
}
