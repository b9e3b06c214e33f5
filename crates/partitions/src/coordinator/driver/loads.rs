//! Load reports: the weights they move past the threshold, written once per renew
//! interval, and the step message that tells the group a load jumped.

use std::future::Future;

use leasehold_election::{DutyResult, Fence, StoreError};
use metrics::counter;
use tokio::time::Instant;
use tracing::debug;

use super::Driver;
use crate::metrics as m;
use crate::ownership::Ownership;
use crate::store::GroupStore;

/// The message on the group's channel that says a partition's load stepped (a jump
/// of its damped average): every replica ticks, as on a release notice, holds
/// hand-overs until the step's weights are in, then lets the step stand in for a first
/// ask to hand over. A replica of an older version ignores it (it reads it as a warm
/// move's message it does not know).
pub(super) fn step_notice(notice: &str) -> String {
    format!("{notice}\tstep")
}

/// Whether `message` on the group's channel `notice` is a step's ([`step_notice`]).
pub(super) fn is_step(notice: &str, message: &str) -> bool {
    message.strip_prefix(notice) == Some("\tstep")
}

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
                        store.publish(&keys, &step_notice(&keys.notice)).await
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
                    changed
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::warm::Warm;

    #[test]
    fn a_step_message_is_told_apart_from_notices_and_other_groups_messages() {
        let notice = "lh:{g}";
        assert!(is_step(notice, &step_notice(notice)));
        assert!(!is_step(notice, notice), "a release notice");
        assert!(!is_step("lh:{h}", &step_notice(notice)), "another group's");
        assert!(!is_step(notice, &format!("{notice}\tstep\tmore")));
        let warm = "lh:{g}\twarm\tready\tp\ta\tb\t7\t0";
        assert!(!is_step(notice, warm));
        assert_eq!(
            Warm::decode(notice, &step_notice(notice)),
            None,
            "not a warm move's"
        );
    }
}
