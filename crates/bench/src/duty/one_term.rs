//! `child --one-term`: a store that lets its elector win one term and never another.
//!
//! It passes every call through to the real store until an acquire wins (or confirms)
//! a term; from then on every acquire answers that someone else holds the lease,
//! without asking the store. Renewals and releases still go through: the elector
//! renews its one term as usual and steps down when a renewal is refused.
//!
//! In a `--lose-writes` failover this stands for an old leader cut off from the new
//! primary: it does not compete for the next term (an elector that steps down
//! campaigns again at once, and would otherwise often win the next term itself), so
//! the next leader is the follower, whose start is compared with the old leader's
//! local deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehold_election::{
    Acquire, BackendWarning, DutyKeys, Fence, LeaderInfo, LeaseStore, StoreError,
};
use tokio::sync::{Notify, broadcast};

/// The holder a spent [`OneTerm`] store reports.
pub const SPENT_HOLDER: &str = "one-term-spent";

/// A store that grants its elector one term (see the module docs).
#[derive(Debug, Clone)]
pub struct OneTerm<S> {
    inner: S,
    /// Set once a term was won or confirmed; shared by [`LeaseStore::detached`] copies.
    spent: Arc<AtomicBool>,
}

impl<S> OneTerm<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            spent: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<S: LeaseStore> LeaseStore for OneTerm<S> {
    async fn acquire(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
        floor: Fence,
    ) -> Result<Acquire, StoreError> {
        if self.spent.load(Ordering::SeqCst) {
            return Ok(Acquire::Lost {
                holder: SPENT_HOLDER.to_owned(),
                remaining: Some(lease),
                fence: floor,
            });
        }
        let reply = self.inner.acquire(keys, token, lease, floor).await?;
        if matches!(reply, Acquire::Won { .. } | Acquire::Confirmed { .. }) {
            self.spent.store(true, Ordering::SeqCst);
        }
        Ok(reply)
    }

    async fn renew(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner.renew(keys, token, lease).await
    }

    async fn release(&self, keys: &DutyKeys, token: &str) -> Result<bool, StoreError> {
        self.inner.release(keys, token).await
    }

    async fn abandon(&self, keys: &DutyKeys, token: &str) -> Result<(), StoreError> {
        self.inner.abandon(keys, token).await
    }

    async fn leader(&self, keys: &DutyKeys) -> Result<Option<LeaderInfo>, StoreError> {
        self.inner.leader(keys).await
    }

    fn release_notifier(&self, keys: &DutyKeys) -> Arc<Notify> {
        self.inner.release_notifier(keys)
    }

    fn release_events(&self, keys: &DutyKeys) -> broadcast::Receiver<String> {
        self.inner.release_events(keys)
    }

    fn detached(&self) -> Self {
        Self {
            inner: self.inner.detached(),
            spent: self.spent.clone(),
        }
    }

    async fn self_check(&self) -> Result<Vec<BackendWarning>, StoreError> {
        self.inner.self_check().await
    }
}

#[cfg(test)]
mod tests {
    use leasehold_election::MemoryStore;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_term_then_never_again() {
        let store = OneTerm::new(MemoryStore::new());
        let keys = DutyKeys::new("leasehold", "job");
        let lease = Duration::from_secs(1);
        let first = store.acquire(&keys, "a:1", lease, Fence(0)).await.unwrap();
        assert!(matches!(first, Acquire::Won { .. }), "{first:?}");
        assert!(store.release(&keys, "a:1").await.unwrap());
        let again = store.acquire(&keys, "a:2", lease, Fence(0)).await.unwrap();
        assert!(
            matches!(&again, Acquire::Lost { holder, .. } if holder == SPENT_HOLDER),
            "{again:?}"
        );
        assert!(
            store.leader(&keys).await.unwrap().is_none(),
            "nothing was taken"
        );
    }
}
