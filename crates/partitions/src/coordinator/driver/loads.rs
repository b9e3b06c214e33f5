//! Load reports: the weights they move past the threshold, written once per renew
//! interval, and the step message that tells the group a load jumped.

use std::future::Future;

use leasehold_election::{DutyResult, Fence, StoreError};
use metrics::counter;
use tokio::time::Instant;
use tracing::debug;

use super::Driver;
use crate::metrics as m;
use crate::notice::GroupNotice;
use crate::ownership::Ownership;
use crate::store::GroupStore;

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Writes the weights the load reports moved past the threshold, at most once per
    /// renew interval (after a tick), in one request.
    pub(super) fn send_loads(&mut self, now: Instant) {
        let Some(loads) = self.loads.as_mut() else {
            return;
        };
        if !self.state.member() {
            return;
        }
        let weights = loads.due(self.state.ledger(), now);
        if weights.is_empty() {
            return;
        }
        let named: Vec<(String, Fence, u64)> = weights
            .iter()
            .map(|&((i, fence), w)| (self.names.get(i).to_string(), fence, w))
            .collect();
        let session = self.state.token().to_owned();
        let call = self
            .calls
            .call(|store, keys| async move { store.report(&keys, &session, &named).await });
        self.lanes.report = Some(Box::pin(async move { (weights, call.await) }));
    }

    /// The weights from load reports were written (those flagged), or not.
    pub(super) fn on_report(
        &mut self,
        weights: &[((usize, Fence), u64)],
        reply: Result<Vec<bool>, StoreError>,
    ) -> bool {
        let Some(loads) = self.loads.as_mut() else {
            return false;
        };
        match &reply {
            Ok(flags) => {
                if loads.answered(weights, Some(flags)) {
                    // A step in load: every replica ticks now, not at its next tick,
                    // and holds hand-overs until the step's weights are in.
                    let call = self.calls.call(|store, keys| async move {
                        let Some(step) = GroupNotice::LoadStep.encode(&keys.notice) else {
                            return Ok(());
                        };
                        store.publish(&keys, &step).await
                    });
                    self.background.tasks.spawn(async move {
                        let _ = call.await;
                    });
                }
                let mut written = 0u64;
                for (&((i, fence), w), &ok) in weights.iter().zip(flags) {
                    if ok {
                        self.state.weighed(i, fence, w);
                        written += 1;
                    }
                }
                counter!(m::LOAD_WEIGHTS, &self.labels.pair()).increment(written);
                let load = self.state.load();
                self.view.send_if_modified(|v| {
                    let changed = v.load != load;
                    v.load = load;
                    v.latch_readiness() || changed
                });
            }
            Err(e) => {
                loads.answered(weights, None);
                debug!(error = %e, "writing weights from load reports failed; tried again at a later tick");
            }
        }
        false
    }
}
