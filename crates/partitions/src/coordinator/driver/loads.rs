//! Load reports: writing the weights the machine says are due, and taking the answer
//! back to it (when to write and when to tell the group of a step are the machine's:
//! `crate::replica::loads`).

use std::future::Future;

use leasehold_election::{DutyResult, Fence, StoreError};
use metrics::counter;
use tracing::debug;

use super::Driver;
use crate::metrics as m;
use crate::ownership::Ownership;
use crate::store::GroupStore;
use crate::store::ops;

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Writes these weights from load reports, in one request.
    pub(super) fn send_loads(&mut self, weights: Vec<((usize, Fence), u64)>) {
        let named: Vec<(String, Fence, u64)> = weights
            .iter()
            .map(|&((i, fence), w)| (self.names.get(i).to_string(), fence, w))
            .collect();
        let session = self.state.token().to_owned();
        let call = self.calls.call(|store, keys| async move {
            store.run(&keys, &ops::Report::new(&session, &named)).await
        });
        self.lanes.report = Some(Box::pin(async move { (weights, call.await) }));
    }

    /// The weights from load reports were written (those flagged), or not.
    pub(super) fn on_report(
        &mut self,
        weights: &[((usize, Fence), u64)],
        reply: Result<Vec<bool>, StoreError>,
    ) -> bool {
        let flags = match &reply {
            Ok(flags) => Some(flags.as_slice()),
            Err(e) => {
                debug!(error = %crate::ErrorChain(e), "writing weights from load reports failed; tried again at a later tick");
                None
            }
        };
        let actions = self.state.on_reported(weights, flags);
        let done = self.perform(actions);
        if let Some(flags) = flags {
            let written = flags.iter().take(weights.len()).filter(|&&ok| ok).count();
            counter!(m::LOAD_WEIGHTS, &self.labels.pair()).increment(written as u64);
            let load = self.state.load();
            self.view.send_if_modified(|v| {
                let changed = v.load != load;
                v.load = load;
                v.latch_readiness() || changed
            });
        }
        done
    }
}
