//! The coordinator: a pure decision state machine
//! ([`GroupState`](crate::balance::state::GroupState)) and the driver that performs its
//! actions ([`driver`]), one granted elector per owned partition inside a `JoinSet`
//! ([`slots`]), and the batch between them and the electors ([`batch`]).

mod batch;
mod driver;
mod slots;

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use leasehold_election::{DutyResult, Leadership};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};

use self::driver::Driver;
use crate::backend::{GroupBackend, GroupStatus, read_status};
use crate::config::GroupConfig;
use crate::error::PartitionsError;
use crate::keys::GroupKeys;
use crate::metrics as m;
use crate::view::GroupView;

/// Spreads a group's partitions over every replica of the group; start it with
/// [`Coordinator::spawn`].
///
/// The callback runs while this replica owns a partition, with the partition name and
/// the same [`Leadership`] an elector gives a duty; it is cancelled (with a grace
/// bounded by the lease) when ownership ends.
pub struct Coordinator<B, F> {
    backend: B,
    config: GroupConfig,
    callback: Arc<F>,
    shutdown: CancellationToken,
}

impl<B, F> std::fmt::Debug for Coordinator<B, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<B, F, Fut> Coordinator<B, F>
where
    B: GroupBackend,
    F: Fn(String, Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// A coordinator for this replica.
    pub fn new(backend: B, config: GroupConfig, callback: F) -> Self {
        Self {
            backend,
            config,
            callback: Arc::new(callback),
            shutdown: CancellationToken::new(),
        }
    }

    /// Also stops gracefully when `token` is cancelled.
    pub fn shutdown_on(mut self, token: &CancellationToken) -> Self {
        self.shutdown = token.child_token();
        self
    }

    /// Spawns the coordinator on the current tokio runtime.
    ///
    /// A configuration whose public fields were changed after
    /// [`GroupConfigBuilder::build`](crate::GroupConfigBuilder::build) to values it
    /// rejects stops the coordinator at once, with the error in its view (and from
    /// [`CoordinatorHandle::ready`]).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(self) -> CoordinatorHandle<B> {
        m::describe();
        let keys = Arc::new(GroupKeys::new(&self.config.key_prefix, &self.config.group));
        let (view_tx, view_rx) = watch::channel(GroupView {
            settling: true,
            ..GroupView::default()
        });
        let span =
            info_span!("partitions", group = %self.config.group, replica = %self.config.replica_id);
        let epoch = Instant::now();
        let task = match self.config.elector(&self.config.partitions[0], epoch) {
            Ok(template) => {
                let driver = Driver::new(
                    self.backend.clone(),
                    self.config,
                    template,
                    self.callback,
                    view_tx,
                    self.shutdown.clone(),
                    epoch,
                );
                tokio::spawn(driver.run().instrument(span))
            }
            Err(e) => {
                warn!(error = %e, "invalid group configuration; not joining");
                view_tx.send_modify(|v| v.error = Some(PartitionsError::Config(e)));
                tokio::spawn(async move { drop(view_tx) })
            }
        };
        CoordinatorHandle {
            view: view_rx,
            shutdown: self.shutdown,
            task: Mutex::new(Some(task)),
            backend: self.backend,
            keys,
        }
    }
}

/// Controls a running coordinator. Dropping it stops the coordinator gracefully in the
/// background; call [`CoordinatorHandle::shutdown`] to wait for that.
#[derive(Debug)]
pub struct CoordinatorHandle<B> {
    view: watch::Receiver<GroupView>,
    shutdown: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    backend: B,
    keys: Arc<GroupKeys>,
}

impl<B: GroupBackend> CoordinatorHandle<B> {
    /// A receiver of view changes.
    pub fn subscribe(&self) -> watch::Receiver<GroupView> {
        self.view.clone()
    }

    /// The view now.
    pub fn view(&self) -> GroupView {
        self.view.borrow().clone()
    }

    /// Waits until this replica has been admitted to its group.
    ///
    /// # Errors
    /// The conflict that keeps this replica out of the group (duplicate replica id,
    /// different partition list), an invalid configuration, or
    /// [`PartitionsError::Stopped`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn ready(&self) -> Result<(), PartitionsError> {
        let mut rx = self.view.clone();
        let v = rx
            .wait_for(|v| v.joined || v.error.as_ref().is_some_and(PartitionsError::keeps_out))
            .await
            .map_err(|_| PartitionsError::Stopped)?;
        match &v.error {
            Some(e) if !v.joined && e.keeps_out() => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// Reads the whole group from the store (every partition's owner, fence and time
    /// left; live replicas and their counts).
    ///
    /// # Errors
    /// The store's error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn group_status(&self) -> Result<Option<GroupStatus>, PartitionsError> {
        Ok(read_status(&self.backend, &self.keys).await?)
    }

    /// The token that stops this coordinator gracefully.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops at once without releasing anything, as a crash would: the callbacks are
    /// aborted, the leases and the heartbeat expire on their own. For simulations and
    /// tests; use [`CoordinatorHandle::shutdown`] in production.
    pub fn abort(self) {
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }

    /// Leaves gracefully: removes this replica from the heartbeat set, cancels every
    /// callback (with its grace), releases every lease, and returns once done.
    ///
    /// # Cancel safety
    /// The coordinator keeps stopping in the background if this future is dropped.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl<B> Drop for CoordinatorHandle<B> {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Reads a group from a backend, without being a member (for operators and tools):
/// `None` if no replica ever created it. A group of more than a thousand partitions is
/// read in pages, each a short script, so it never blocks Redis for long (and is not
/// one atomic snapshot).
///
/// # Errors
/// The store's error.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn group_status<B: GroupBackend>(
    backend: &B,
    prefix: &str,
    group: &str,
) -> Result<Option<GroupStatus>, PartitionsError> {
    Ok(read_status(backend, &GroupKeys::new(prefix, group)).await?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use leasehold_election::{BackendWarning, Leadership, StoreError};
    use tokio::sync::broadcast;

    use super::*;
    use crate::backend::PartitionOwner;
    use crate::backend::protocol::{
        AddReply, Change, ClaimReply, ClaimRequest, Protocol, RemoveReply, StatusHead, TickReply,
        TickRequest, VersionStep, WeightReply,
    };
    use crate::{GroupBackend, MemoryGroupStore};

    /// The in-memory store, losing the replies of its next `lose` claims: the claim
    /// happens, the caller hears a timeout.
    #[derive(Clone, Default)]
    struct LosesClaimReplies {
        inner: MemoryGroupStore,
        lose: Arc<AtomicUsize>,
    }

    impl GroupBackend for LosesClaimReplies {}

    impl Protocol for LosesClaimReplies {
        async fn tick(&self, k: &GroupKeys, r: &TickRequest) -> Result<TickReply, StoreError> {
            self.inner.tick(k, r).await
        }
        async fn claim(&self, k: &GroupKeys, r: &ClaimRequest) -> Result<ClaimReply, StoreError> {
            let reply = self.inner.claim(k, r).await;
            let lost = self
                .lose
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if lost && matches!(reply, Ok(ClaimReply::Claimed { .. })) {
                return Err(StoreError::Timeout(Duration::from_millis(1)));
            }
            reply
        }
        async fn release(
            &self,
            k: &GroupKeys,
            t: &str,
            n: &[String],
        ) -> Result<Vec<bool>, StoreError> {
            self.inner.release(k, t, n).await
        }
        async fn leave(&self, k: &GroupKeys, r: &str, t: &str) -> Result<(), StoreError> {
            self.inner.leave(k, r, t).await
        }
        async fn add(
            &self,
            k: &GroupKeys,
            mode: Change,
            delay: Duration,
            n: &[String],
        ) -> Result<AddReply, StoreError> {
            self.inner.add(k, mode, delay, n).await
        }
        async fn remove(
            &self,
            k: &GroupKeys,
            mode: Change,
            n: &[String],
        ) -> Result<RemoveReply, StoreError> {
            self.inner.remove(k, mode, n).await
        }
        async fn list_page(
            &self,
            k: &GroupKeys,
            o: usize,
            l: usize,
        ) -> Result<Vec<String>, StoreError> {
            self.inner.list_page(k, o, l).await
        }
        async fn set_version(
            &self,
            k: &GroupKeys,
            v: u64,
            step: VersionStep<'_>,
        ) -> Result<bool, StoreError> {
            self.inner.set_version(k, v, step).await
        }
        async fn drain(&self, k: &GroupKeys, r: &str, on: bool) -> Result<bool, StoreError> {
            self.inner.drain(k, r, on).await
        }
        async fn held(&self, k: &GroupKeys, t: &str) -> Result<Vec<(String, u64)>, StoreError> {
            self.inner.held(k, t).await
        }
        async fn set_weight(
            &self,
            k: &GroupKeys,
            p: &str,
            w: u64,
        ) -> Result<WeightReply, StoreError> {
            self.inner.set_weight(k, p, w).await
        }
        async fn owner(
            &self,
            k: &GroupKeys,
            p: &str,
        ) -> Result<Option<PartitionOwner>, StoreError> {
            self.inner.owner(k, p).await
        }
        async fn status_head(&self, k: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
            self.inner.status_head(k).await
        }
        async fn status_page(
            &self,
            k: &GroupKeys,
            o: usize,
            l: usize,
        ) -> Result<Vec<PartitionOwner>, StoreError> {
            self.inner.status_page(k, o, l).await
        }
        fn notices(&self, k: &GroupKeys) -> broadcast::Receiver<String> {
            self.inner.notices(k)
        }
        async fn warnings(&self) -> Result<Vec<BackendWarning>, StoreError> {
            self.inner.warnings().await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn partitions_taken_by_a_claim_whose_reply_was_lost_are_never_stranded() {
        let store = LosesClaimReplies::default();
        store.lose.store(1, Ordering::SeqCst);
        let partitions: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
        let config = GroupConfig::builder("g", partitions, "a")
            .lease(Duration::from_millis(900))
            .build()
            .unwrap();
        let handle = Coordinator::new(
            store.clone(),
            config,
            |_: String, l: Leadership| async move {
                l.cancelled().await;
                Ok(())
            },
        )
        .spawn();
        let mut view = handle.subscribe();
        tokio::time::timeout(
            Duration::from_secs(10),
            view.wait_for(|v| v.owned.len() == 8),
        )
        .await
        .expect("every partition is served in the end")
        .unwrap();
        assert_eq!(
            store.lose.load(Ordering::SeqCst),
            0,
            "the first claim's reply was lost"
        );
        let status = handle.group_status().await.unwrap().unwrap();
        assert!(
            status
                .partitions
                .iter()
                .all(|p| p.owner.as_deref() == Some("a")),
            "and the store agrees: {status:?}"
        );
        handle.shutdown().await;
        let status = group_status(&store, "leasehold", "g")
            .await
            .unwrap()
            .unwrap();
        assert!(
            status.partitions.iter().all(|p| p.owner.is_none()),
            "nothing is left held after a graceful leave: {status:?}"
        );
    }
}
