//! Per-duty release notifiers shared by every elector of one store.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::{Notify, broadcast};

use super::ANY_RELEASE;

/// Lease key → notifier, plus a broadcast of every released key. Guards are never held
/// across an await.
#[derive(Debug)]
pub(crate) struct Notifiers {
    by_key: DashMap<String, Arc<Notify>>,
    events: broadcast::Sender<String>,
}

impl Default for Notifiers {
    fn default() -> Self {
        Self {
            by_key: DashMap::new(),
            events: broadcast::channel(4096).0,
        }
    }
}

impl Notifiers {
    /// A receiver of released keys.
    pub(crate) fn events(&self) -> broadcast::Receiver<String> {
        self.events.subscribe()
    }

    /// The notifier of a lease key, created on first use.
    pub(crate) fn get(&self, lease_key: &str) -> Arc<Notify> {
        if let Some(n) = self.by_key.get(lease_key) {
            return n.clone();
        }
        self.by_key
            .entry(lease_key.to_owned())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone()
    }

    /// Wakes the followers of one lease key.
    pub(crate) fn wake(&self, lease_key: &str) {
        if let Some(n) = self.by_key.get(lease_key) {
            n.notify_waiters();
        }
        let _ = self.events.send(lease_key.to_owned());
    }

    /// Wakes every follower (notifications may have been missed).
    pub(crate) fn wake_all(&self) {
        for n in self.by_key.iter() {
            n.notify_waiters();
        }
        let _ = self.events.send(ANY_RELEASE.to_owned());
    }
}
