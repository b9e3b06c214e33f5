//! The term runners of one coordinator, supervised in a `JoinSet`: at most one
//! per partition (the holdings start a new term's runner only once the last one has
//! ended), a panic named after its partition, every one aborted on drop.
//!
//! Each runner's [`Term`] is the driver's one record of that term: its
//! fence, its runner's handle, what it shares with its callback and its store (the
//! state it hands off, its load cell, its revocation, why the coordinator ended it)
//! and why this replica asked it to end, for the ledger of moves. It is recorded when
//! the runner starts and forgotten, all of it, when the runner ends
//! ([`Runners::next`]).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use std::sync::Arc;

use leasehold_election::ext::TermHandle;
use leasehold_election::{Fence, TermEndReason};
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use crate::ownership::TermShared;
use crate::store::ops::moves::MoveCause;

/// A runner that has ended.
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

/// What the driver knows of a running term, from its runner's start to its end.
#[derive(Debug)]
struct Term {
    fence: Fence,
    handle: TermHandle,
    /// What the term shares with its callback and its store.
    shared: Arc<TermShared>,
    /// Why this replica asked the term to end, and whom it named to take it on: what
    /// its release writes in the ledger of moves. `None`: it ended by itself
    /// (`Released`, or `Leave` once every term was asked to stop).
    cause: Option<(MoveCause, Option<String>)>,
}

#[derive(Debug, Default)]
pub(crate) struct Runners {
    tasks: JoinSet<usize>,
    // Ordered maps: a stop of all of them goes in partition order, so a seeded
    // simulation replays exactly.
    running: BTreeMap<usize, Term>,
    by_task: HashMap<Id, usize>,
}

impl Runners {
    /// Runs the runner of term `fence` of partition `index` (which must have none: the
    /// holdings start one only once the last has ended).
    pub(crate) fn start(
        &mut self,
        index: usize,
        fence: Fence,
        handle: TermHandle,
        term: Arc<TermShared>,
        run: impl Future<Output = ()> + Send + 'static,
        span: tracing::Span,
    ) {
        debug_assert!(
            !self.running.contains_key(&index),
            "two runners for partition {index}"
        );
        let task = self.tasks.spawn(
            async move {
                run.await;
                index
            }
            .instrument(span),
        );
        self.by_task.insert(task.id(), index);
        self.running.insert(
            index,
            Term {
                fence,
                handle,
                shared: term,
                cause: None,
            },
        );
    }

    /// The fence of the term whose runner runs for `index`, if one does.
    pub(crate) fn fence(&self, index: usize) -> Option<Fence> {
        self.running.get(&index).map(|t| t.fence)
    }

    /// The running term `fence` of `index`, if its runner still runs.
    fn term(&mut self, index: usize, fence: Fence) -> Option<&mut Term> {
        self.running.get_mut(&index).filter(|t| t.fence == fence)
    }

    /// Records why this replica ends term `fence` of `index` and whom it names (the
    /// first cause recorded stays), if the term still runs.
    pub(crate) fn end_for(
        &mut self,
        index: usize,
        fence: Fence,
        cause: MoveCause,
        to: Option<&str>,
    ) {
        if let Some(t) = self.term(index, fence) {
            t.cause
                .get_or_insert_with(|| (cause, to.map(str::to_owned)));
        }
    }

    /// Names nobody to take term `fence` of `index` on (a warm move whose receiver did
    /// not get ready in time: its release reserves nothing).
    pub(crate) fn unname(&mut self, index: usize, fence: Fence) {
        if let Some((_, to)) = self.term(index, fence).and_then(|t| t.cause.as_mut()) {
            *to = None;
        }
    }

    /// Why this replica ended term `fence` of `index` and whom it named, if it did and
    /// the term still runs.
    pub(crate) fn cause(&self, index: usize, fence: Fence) -> Option<(MoveCause, Option<String>)> {
        self.running
            .get(&index)
            .filter(|t| t.fence == fence)
            .and_then(|t| t.cause.clone())
    }

    /// The last load each running term reported (`None`: none yet), if the group takes
    /// loads.
    pub(crate) fn loads(&self) -> Vec<((usize, Fence), Option<f64>)> {
        self.running
            .iter()
            .filter_map(|(&i, t)| Some(((i, t.fence), t.shared.load()?)))
            .collect()
    }

    /// Refuses every later renewal of these terms (those whose runners still run).
    pub(crate) fn revoke(&mut self, terms: &[(usize, Fence)]) {
        for &(index, fence) in terms {
            if let Some(t) = self.term(index, fence) {
                t.shared.revoke();
            }
        }
    }

    /// Asks the runner of `index` to step down gracefully, the term ending for `cause`
    /// (and handing the partition to `to`, if named): the callback knows both before it
    /// is cancelled.
    pub(crate) fn stop(&self, index: usize, cause: MoveCause, to: Option<&str>) {
        if let Some(t) = self.running.get(&index) {
            t.shared.ending(cause, to);
            t.handle.stop();
        }
    }

    /// Asks every runner to step down gracefully (the replica leaves).
    pub(crate) fn stop_all(&self) {
        for t in self.running.values() {
            t.shared.ending(MoveCause::Leave, None);
            t.handle.stop();
        }
    }

    /// Aborts the callbacks of every runner still running at `at` at the latest
    /// (a shutdown with a deadline), if given; they were asked to stop.
    pub(crate) fn stop_all_by(&self, at: Option<Instant>) {
        if let Some(at) = at {
            for t in self.running.values() {
                t.handle.stop_by(at);
            }
        }
    }

    /// The next runner to end; pending forever while none runs.
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
            let Some(term) = self.running.remove(&index) else {
                continue;
            };
            let reason = term.handle.ended().map(|t| t.reason);
            let cause = term.shared.ended_for();
            return Ended {
                index,
                fence: term.fence,
                reason,
                cause,
                panic,
            };
        }
    }
}
