//! Ending terms and giving their partitions back: hand-overs (named or warm), and
//! the releases the runners queue, sent in batches.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use leasehold_election::{DutyResult, Fence, StoreError};
use metrics::counter;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::Driver;
use crate::coordinator::batch::PendingRelease;
use crate::coordinator::warm::Warm;
use crate::metrics as m;
use crate::ownership::Ownership;
use crate::replica::warm::Hold;
use crate::store::ops;
use crate::store::protocol::{GivenBack, MoveCause};
use crate::store::{GroupStore, RELEASE_BATCH, RELEASE_STATE_BYTES};

/// How long a queued release waits for others to share its batch.
pub(super) const BATCH_WINDOW: Duration = Duration::from_millis(1);

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    pub(super) fn stop(
        &mut self,
        indices: Vec<usize>,
        cause: MoveCause,
        to: &BTreeMap<usize, String>,
        held: &BTreeMap<usize, Hold>,
    ) {
        let counted = cause == MoveCause::HandOff;
        for i in indices {
            let receiver = to.get(&i);
            if let (Some(&Hold { fence, within }), Some(r)) = (held.get(&i), receiver) {
                // A warm move: the receiver prepares first; the term ends at its
                // `LetGo`, when the receiver is ready or when the wait is over.
                self.runners.end_for(i, fence, cause, Some(r));
                counter!(m::HANDOFFS, &self.labels.pair()).increment(1);
                let partition = self.names.get(i).to_string();
                debug!(%partition, to = %r, "asking the receiver to prepare");
                self.send(Warm::Prepare {
                    partition,
                    from: self.config.replica_id.clone(),
                    to: r.clone(),
                    fence,
                    within,
                });
                continue;
            }
            if let Some(fence) = self.runners.fence(i) {
                self.runners
                    .end_for(i, fence, cause, receiver.map(String::as_str));
            }
            debug!(partition = %self.names.get(i), reason = cause.as_str(), to = receiver.map(String::as_str), "handing a partition over");
            if counted {
                counter!(m::HANDOFFS, &self.labels.pair()).increment(1);
            }
            self.runners.stop(i, cause, receiver.map(String::as_str));
        }
        let handoffs = self.state.handoffs();
        self.view.send_if_modified(|v| {
            let changed = v.handoffs != handoffs;
            v.handoffs = handoffs;
            changed
        });
    }

    /// Ends a term a warm move held, if it still runs: named for its receiver once it
    /// is `ready`, else to anyone (a plain move).
    pub(super) fn let_go(&mut self, i: usize, fence: Fence, ready: bool) {
        if ready {
            counter!(m::WARM_MOVES, &self.labels.with("outcome", "prepared")).increment(1);
            debug!(partition = %self.names.get(i), "the receiver is ready");
        } else {
            counter!(m::WARM_MOVES, &self.labels.with("outcome", "timed_out")).increment(1);
            debug!(partition = %self.names.get(i), "the receiver did not prepare in time; handing the partition to anyone");
        }
        if self.runners.fence(i) != Some(fence) {
            return;
        }
        if !ready {
            // A plain move: its release reserves nothing.
            self.runners.unname(i, fence);
        }
        let to = self.runners.cause(i, fence).and_then(|(_, to)| to);
        self.runners.stop(i, MoveCause::HandOff, to.as_deref());
    }

    pub(super) fn flush_releases(&mut self) {
        if self.lanes.release.is_some() {
            return;
        }
        if self.state.keeps_leases() {
            // A sticky restart keeps every partition for its return, and sends nothing:
            // the state its terms handed off is not kept (its return regrants them).
            let mut dropped = 0;
            for p in self.shared.take_releases(usize::MAX, usize::MAX) {
                dropped += usize::from(p.state.is_some());
                let _ = p.reply.send(Ok(false));
            }
            if dropped > 0 && !self.logs.warned_sticky_state {
                self.logs.warned_sticky_state = true;
                warn!(
                    terms = dropped,
                    "a sticky shutdown keeps its partitions, not the state their terms handed \
                     off: persist what the restarted process needs yourself"
                );
            }
            return;
        }
        let mut batch = self
            .shared
            .take_releases(RELEASE_BATCH, RELEASE_STATE_BYTES);
        let Some(first) = batch.first() else {
            return;
        };
        let token = first.token.clone();
        // Named once for the batch, before its first attempt: a retry after a failover
        // still names the server the decision was made on.
        let lifetime = self.state.lifetime().to_owned();
        let terms: Vec<GivenBack> = batch
            .iter_mut()
            .map(|p| {
                let i = self.names.intern(&p.partition);
                let (cause, to) = self.runners.cause(i, p.fence).unwrap_or((
                    if self.leave.stopped_all {
                        MoveCause::Leave
                    } else {
                        MoveCause::Released
                    },
                    None,
                ));
                GivenBack {
                    term: (p.partition.to_string(), p.fence),
                    cause,
                    state: p.state.take(),
                    to,
                    lifetime: lifetime.clone(),
                }
            })
            .collect();
        let (state_ttl, hold) = (self.config.hand_off_ttl, self.config.renew_interval);
        let call = self.calls.call(|store, keys| async move {
            store
                .run(&keys, &ops::Release::new(&token, &terms, state_ttl, hold))
                .await
        });
        self.lanes.release = Some(Box::pin(async move { (batch, call.await) }));
    }

    pub(super) fn on_release(
        &mut self,
        batch: Vec<PendingRelease>,
        reply: Result<Vec<bool>, StoreError>,
    ) -> bool {
        match reply {
            Ok(flags) => {
                let flags = flags.into_iter().chain(std::iter::repeat(false));
                for (p, ok) in batch.into_iter().zip(flags) {
                    p.span
                        .in_scope(|| debug!(released = ok, "release batch answered"));
                    let _ = p.reply.send(Ok(ok));
                }
            }
            Err(e) => {
                warn!(error = %crate::ErrorChain(&e), "a release batch failed; its partitions free when the session ends");
                for p in batch {
                    p.span.in_scope(
                        || debug!(error = %crate::ErrorChain(&e), "release batch failed"),
                    );
                    let _ = p.reply.send(Err(e.clone()));
                }
            }
        }
        if self.shared.has_releases() {
            self.lanes.release_due = Some(Instant::now());
        }
        false
    }
}
