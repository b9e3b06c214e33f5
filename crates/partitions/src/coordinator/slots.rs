//! The partition electors of one coordinator, supervised in a `JoinSet`: at most one
//! per partition, a panic named after its partition, every one aborted on drop.

use std::collections::HashMap;
use std::future::Future;

use leasehold_election::{ElectorHandle, Grant, TermEndReason};
use tokio::task::{Id, JoinError, JoinSet};
use tracing::Instrument;

/// An elector that has ended.
#[derive(Debug)]
pub(crate) struct Ended {
    pub(crate) index: usize,
    /// Why its term ended (`None` if it panicked or never led).
    pub(crate) reason: Option<TermEndReason>,
    /// The panic, if its task panicked.
    pub(crate) panic: Option<JoinError>,
    /// A grant for the same partition that waited for this elector to end.
    pub(crate) next: Option<Grant>,
}

#[derive(Debug, Default)]
pub(crate) struct Slots {
    tasks: JoinSet<usize>,
    running: HashMap<usize, ElectorHandle>,
    by_task: HashMap<Id, usize>,
    /// Grants whose partition still has an elector ending (released, then re-claimed
    /// before its task was joined).
    waiting: HashMap<usize, Grant>,
}

impl Slots {
    /// Whether partition `index` has an elector now.
    pub(crate) fn busy(&self, index: usize) -> bool {
        self.running.contains_key(&index)
    }

    /// Keeps `grant` until the elector of `index` has ended.
    pub(crate) fn wait(&mut self, index: usize, grant: Grant) {
        self.waiting.insert(index, grant);
    }

    /// Runs an elector for partition `index` (which must not be busy).
    pub(crate) fn start(
        &mut self,
        index: usize,
        handle: ElectorHandle,
        run: impl Future<Output = ()> + Send + 'static,
        span: tracing::Span,
    ) {
        let task = self.tasks.spawn(
            async move {
                run.await;
                index
            }
            .instrument(span),
        );
        self.by_task.insert(task.id(), index);
        self.running.insert(index, handle);
    }

    /// Asks the elector of `index` to step down gracefully, the term ending with
    /// `reason`.
    pub(crate) fn stop_because(&self, index: usize, reason: TermEndReason) {
        if let Some(h) = self.running.get(&index) {
            h.stop_because(reason);
        }
    }

    /// Asks every elector to step down gracefully.
    pub(crate) fn stop_all(&self) {
        for h in self.running.values() {
            h.shutdown_token().cancel();
        }
    }

    /// Electors running.
    pub(crate) fn len(&self) -> usize {
        self.running.len()
    }

    /// The next elector to end; pending forever while none runs.
    pub(crate) async fn next(&mut self) -> Ended {
        loop {
            let Some(joined) = self.tasks.join_next_with_id().await else {
                std::future::pending::<()>().await;
                continue;
            };
            let (id, panic) = match joined {
                Ok((id, _)) => (id, None),
                Err(e) => (e.id(), Some(e)),
            };
            let Some(index) = self.by_task.remove(&id) else {
                continue;
            };
            let handle = self.running.remove(&index);
            let reason = handle.and_then(|h| h.status().last_term.map(|t| t.reason));
            return Ended {
                index,
                reason,
                panic,
                next: self.waiting.remove(&index),
            };
        }
    }
}
