//! The one path of the driver's store calls: each runs in a lane of its own and under
//! the call limit, applied here once.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

use crate::keys::GroupKeys;
use crate::store::GroupStore;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

use leasehold_election::{Fence, StoreError};
use tokio::time::Instant;

use super::chores::Chore;
use crate::coordinator::batch::PendingRelease;
use crate::replica::Action;
use crate::store::protocol::{ClaimReply, TickReply};

/// The store and the group's keys, with the limit every call of the driver runs
/// under: the one path of its store calls, so the limit is applied once, here.
#[derive(Debug, Clone)]
pub(super) struct Calls<B> {
    pub(super) store: B,
    pub(super) keys: Arc<GroupKeys>,
    /// The renew interval: a call that outlasts it is as good as lost.
    pub(super) limit: Duration,
}

impl<B: GroupStore> Calls<B> {
    /// `call` on the store and keys, or [`StoreError::Timeout`] once the limit has
    /// passed; it runs when the returned future is polled (in a lane, or spawned).
    pub(super) fn call<T, Fut>(
        &self,
        call: impl FnOnce(B, Arc<GroupKeys>) -> Fut,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'static
    where
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        limited(self.limit, call(self.store.clone(), self.keys.clone()))
    }
}

/// `call`, or [`StoreError::Timeout`] once `limit` has passed.
pub(super) async fn limited<T>(
    limit: Duration,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    timeout(limit, call)
        .await
        .unwrap_or(Err(StoreError::Timeout(limit)))
}

/// The store calls in flight, one lane each (a slow claim never delays the tick that
/// carries the renewals), and the chores waiting for theirs.
#[derive(Default)]
pub(super) struct Lanes {
    pub(super) tick: Lane<Ticked>,
    pub(super) claim: Lane<Claimed>,
    pub(super) release: Lane<Released>,
    pub(super) chore: Lane<Chore>,
    pub(super) chores: VecDeque<Action>,
    /// Weights from load reports being written.
    pub(super) report: Lane<Reported>,
    /// When to send the queued releases.
    pub(super) release_due: Option<Instant>,
}

pub(super) type Lane<T> = Option<Pin<Box<dyn Future<Output = T> + Send>>>;
/// A tick's send time and reply.
pub(super) type Ticked = (Instant, Result<TickReply, StoreError>);
/// A claim's session and reply.
pub(super) type Claimed = (String, Result<ClaimReply, StoreError>);
/// A release batch and its reply (one flag per release).
pub(super) type Released = (Vec<PendingRelease>, Result<Vec<bool>, StoreError>);
/// Weights written from load reports (by term) and the reply (one flag per weight).
pub(super) type Reported = (Vec<((usize, Fence), u64)>, Result<Vec<bool>, StoreError>);

/// Waits for the lane's call to finish (pending forever when the lane is idle).
pub(super) async fn next_of<T>(lane: &mut Lane<T>) -> T {
    match lane {
        Some(call) => {
            let out = call.await;
            *lane = None;
            out
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_limit_is_a_timeout_and_one_within_it_answers() {
        let limit = Duration::from_millis(100);
        let slow = limited(limit, async {
            tokio::time::sleep(limit * 2).await;
            Ok::<_, StoreError>(1)
        });
        assert!(matches!(slow.await, Err(StoreError::Timeout(l)) if l == limit));
        let quick = limited(limit, async { Ok::<_, StoreError>(2) });
        assert_eq!(quick.await.unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_lane_never_answers_and_a_busy_one_answers_once() {
        let mut lane: Lane<u32> = None;
        assert!(
            tokio::time::timeout(Duration::from_secs(1), next_of(&mut lane))
                .await
                .is_err()
        );
        lane = Some(Box::pin(async { 7 }));
        assert_eq!(next_of(&mut lane).await, 7);
        assert!(lane.is_none(), "the lane is free again");
    }
}
