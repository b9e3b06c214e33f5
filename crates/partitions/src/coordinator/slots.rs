//! The partition electors of one coordinator, supervised in a `JoinSet`: at most one
//! per partition (the ledger starts a new term's elector only once the last one has
//! ended), a panic named after its partition, every one aborted on drop.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use std::sync::Arc;

use leasehold_election::{ElectorHandle, Fence, TermEndReason};
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use crate::ownership::TermShared;
use crate::store::ops::moves::MoveCause;

/// An elector that has ended.
#[derive(Debug)]
pub(crate) struct Ended {
    pub(crate) index: usize,
    /// Its term's fence.
    pub(crate) fence: Fence,
    /// Why its term ended (`None` if it panicked or never led).
    pub(crate) reason: Option<TermEndReason>,
    /// Why the coordinator ended it, if it did.
    pub(crate) cause: Option<MoveCause>,
    /// The panic, if its task panicked.
    pub(crate) panic: Option<JoinError>,
}

#[derive(Debug, Default)]
pub(crate) struct Slots {
    tasks: JoinSet<usize>,
    // Ordered maps: a stop of all of them goes in partition order, so a seeded
    // simulation replays exactly.
    running: BTreeMap<usize, (Fence, ElectorHandle, Arc<TermShared>)>,
    by_task: HashMap<Id, usize>,
}

impl Slots {
    /// Runs the elector of term `fence` of partition `index` (which must have none: the
    /// ledger starts one only once the last has ended).
    pub(crate) fn start(
        &mut self,
        index: usize,
        fence: Fence,
        handle: ElectorHandle,
        term: Arc<TermShared>,
        run: impl Future<Output = ()> + Send + 'static,
        span: tracing::Span,
    ) {
        debug_assert!(
            !self.running.contains_key(&index),
            "two electors for partition {index}"
        );
        let task = self.tasks.spawn(
            async move {
                run.await;
                index
            }
            .instrument(span),
        );
        self.by_task.insert(task.id(), index);
        self.running.insert(index, (fence, handle, term));
    }

    /// The fence of the term whose elector runs for `index`, if one does.
    pub(crate) fn fence(&self, index: usize) -> Option<Fence> {
        self.running.get(&index).map(|(f, ..)| *f)
    }

    /// Asks the elector of `index` to step down gracefully, the term ending for `cause`
    /// (and handing the partition to `to`, if named): the callback knows both before it
    /// is cancelled.
    pub(crate) fn stop(&self, index: usize, cause: MoveCause, to: Option<&str>) {
        if let Some((_, h, term)) = self.running.get(&index) {
            term.ending(cause, to);
            h.stop();
        }
    }

    /// Asks every elector to step down gracefully (the replica leaves).
    pub(crate) fn stop_all(&self) {
        for (_, h, term) in self.running.values() {
            term.ending(MoveCause::Leave, None);
            h.stop();
        }
    }

    /// Aborts the callbacks of every elector still running at `at` at the latest
    /// (a shutdown with a deadline), if given; they were asked to stop.
    pub(crate) fn stop_all_by(&self, at: Option<Instant>) {
        if let Some(at) = at {
            for (_, h, _) in self.running.values() {
                h.stop_by(at);
            }
        }
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
            let Some((fence, handle, term)) = self.running.remove(&index) else {
                continue;
            };
            let reason = handle.status().last_term.map(|t| t.reason);
            let cause = term.ended_for();
            return Ended {
                index,
                fence,
                reason,
                cause,
                panic,
            };
        }
    }
}
