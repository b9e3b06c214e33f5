//! Warm moves on the group's channel: a giver asks its receiver to prepare, the
//! receiver prepares and answers, the giver lets the term go.

use std::future::Future;

use leasehold_election::DutyResult;
use metrics::counter;
use tokio::time::{Instant, timeout};
use tracing::{Instrument, debug};

use super::Driver;
use crate::coordinator::warm::{Prepare, Warm};
use crate::metrics as m;
use crate::notice::{GroupNotice, WarmMove};
use crate::ownership::Ownership;
use crate::store::GroupStore;

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// A message on the prefix's channel: the group's notices are acted on, anything
    /// else (another group's, a duty's) ignored, and an unknown one of the group's
    /// counted.
    pub(super) fn on_notice(&mut self, message: &str) {
        match GroupNotice::decode(&self.calls.keys.notice, message) {
            Some(Ok(GroupNotice::Changed | GroupNotice::Missed)) => {
                self.state.on_notice(Instant::now(), &mut self.rng);
            }
            Some(Ok(GroupNotice::LoadStep)) => self.state.on_step(Instant::now(), &mut self.rng),
            Some(Ok(GroupNotice::WarmMove(WarmMove(warm)))) => self.on_warm(warm),
            Some(Ok(GroupNotice::Moved(_))) | None => {}
            Some(Err(_)) => {
                counter!(m::UNKNOWN_NOTICES, &self.labels.pair()).increment(1);
            }
        }
    }

    /// A warm move's message on the group's channel.
    fn on_warm(&mut self, warm: Warm) {
        let me = self.config.replica_id.as_str();
        match warm {
            Warm::Ready {
                partition,
                from,
                to,
                fence,
            } if from == me => {
                let Some(i) = self.names.find(&partition) else {
                    return;
                };
                let actions = self.state.on_ready(i, fence, &to);
                self.perform(actions);
            }
            Warm::Prepare {
                partition,
                from,
                to,
                fence,
                within,
            } if to == me && !self.leave.stopped_all => {
                let ready = Warm::Ready {
                    partition: partition.clone(),
                    from: from.clone(),
                    to,
                    fence,
                };
                let run = self.background.prepare.clone();
                let calls = self.calls.clone();
                let job = Prepare {
                    partition,
                    from,
                    within,
                };
                self.background.tasks.spawn(
                    async move {
                        // Nothing to prepare: ready at once.
                        if let Some(run) = run
                            && timeout(within, run(job)).await.is_err()
                        {
                            debug!("preparing took longer than the owner waits; not answering");
                            return;
                        }
                        let ready = GroupNotice::WarmMove(WarmMove(ready));
                        if let Some(m) = ready.encode(&calls.keys.notice) {
                            let _ = calls
                                .call(|store, keys| async move { store.publish(&keys, &m).await })
                                .await;
                        }
                    }
                    .in_current_span(),
                );
            }
            _ => {}
        }
    }

    /// Sends a warm-move message, in the background.
    pub(super) fn send(&mut self, warm: Warm) {
        let Some(message) = GroupNotice::WarmMove(WarmMove(warm)).encode(&self.calls.keys.notice)
        else {
            return;
        };
        let call = self
            .calls
            .call(|store, keys| async move { store.publish(&keys, &message).await });
        self.background.tasks.spawn(async move {
            let _ = call.await;
        });
    }
}
