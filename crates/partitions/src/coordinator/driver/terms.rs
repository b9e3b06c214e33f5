//! Starting a partition's term: its runner, its calls, the state it is offered.

use std::future::Future;
use std::sync::Arc;

use leasehold_election::ext::{Grant, GrantedTerm};
use leasehold_election::{DutyResult, Fence, Leadership};
use tokio::time::Instant;
use tracing::info_span;

use super::{Driver, Running};
use crate::coordinator::batch::BatchedTerm;
use crate::coordinator::handoff;
use crate::ownership::{LoadCell, Ownership, TermShared};
use crate::store::GroupStore;
use crate::store::protocol::Predecessor;

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Starts the runner of term `fence` of partition `i`.
    pub(super) fn start(
        &mut self,
        i: usize,
        fence: Fence,
        sent: Instant,
        previous: Option<&Predecessor>,
    ) {
        let name = self.names.get(i);
        let load = self.config.load_damping.is_some().then(LoadCell::new);
        let term = TermShared::new(load);
        let calls = BatchedTerm {
            store: self.calls.store.clone(),
            shared: self.shared.clone(),
            partition: name.clone(),
            fence,
            term: term.clone(),
        };
        let callback = self.terms.callback.clone();
        let partition = name.clone();
        let grant = Grant {
            fence,
            sent,
            token: self.state.token().to_owned(),
        };
        let inherit = handoff::inherit(previous);
        let (group_store, keys, limit) = (
            self.calls.store.clone(),
            self.calls.keys.clone(),
            self.calls.limit,
        );
        let labels = self.labels.pair();
        let shared = term.clone();
        let running = self.terms.running.clone();
        let duty = move |lead: Leadership| {
            let (callback, partition, inherit) =
                (callback.clone(), partition.clone(), inherit.clone());
            let serving = Serving::start(&running, &partition, &lead);
            let lease = Ownership::new(lead, shared.clone());
            let (store, keys, labels, shared) = (
                group_store.clone(),
                keys.clone(),
                labels.clone(),
                shared.clone(),
            );
            async move {
                // Boxed: the take is rare, and its state would otherwise be part of
                // every partition's duty future.
                Box::pin(handoff::offer(
                    &lease, &shared, inherit, &store, &keys, &partition, limit, labels,
                ))
                .await;
                let out = callback(partition.to_string(), lease).await;
                drop(serving);
                out
            }
        };
        let (handle, run) =
            GrantedTerm::new(&self.terms.template, &name, grant, calls, duty).pair();
        self.runners.start(
            i,
            fence,
            handle,
            term,
            run,
            info_span!("partition", partition = %name),
        );
    }
}

/// A term's entry in the running terms, from its callback's start to its end (also
/// if the callback is aborted: the entry goes when this is dropped).
struct Serving {
    running: Running,
    partition: Arc<str>,
    fence: Fence,
}

impl Serving {
    fn start(running: &Running, partition: &Arc<str>, lead: &Leadership) -> Self {
        running.insert(partition.clone(), lead.clone());
        Self {
            running: running.clone(),
            partition: partition.clone(),
            fence: lead.fence(),
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let fence = self.fence;
        self.running
            .remove_if(&self.partition, |_, lead| lead.fence() == fence);
    }
}
