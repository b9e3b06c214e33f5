//! Both ends of the batch between a coordinator and its partition terms.
//!
//! Each partition term's runner makes its calls through [`BatchedTerm`]. Its renewals
//! wait for the next group tick *sent after they asked* and take its answer: one
//! heartbeat of the replica's session extends every partition it holds, so there is no
//! per-renewal queue at all, only the latest tick's outcome and a `Notify` that wakes
//! every waiting renewal in the order they asked (a `watch` would wake them in an order
//! of its own choosing, which a seeded simulation could not replay). Their releases are
//! queued and sent together, one script per batch. Acquisitions never happen here: the
//! coordinator claims partitions in batches and grants each term its lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use leasehold_election::ext::TermCalls;
use leasehold_election::{BackendWarning, Fence, StoreError};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use tracing::Span;

use crate::ownership::TermShared;
use crate::store::GroupStore;

/// The error renewals and releases get once the coordinator has stopped.
pub(crate) fn stopped() -> StoreError {
    StoreError::Stopped(crate::error::STOPPED)
}

/// The latest tick's outcome, as the terms see it.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// When the tick was sent: it answers renewals asked for at or before then.
    pub(crate) sent: Instant,
    /// The session it extended (`None`: it extended none), or why it failed.
    pub(crate) result: Result<Option<Arc<str>>, StoreError>,
}

/// A release waiting for the next release batch: one term.
#[derive(Debug)]
pub(crate) struct PendingRelease {
    pub(crate) partition: Arc<str>,
    pub(crate) fence: Fence,
    pub(crate) token: String,
    /// The state the term leaves for its successor (`Ownership::hand_off`).
    pub(crate) state: Option<Vec<u8>>,
    pub(crate) reply: oneshot::Sender<Result<bool, StoreError>>,
    /// The term's span, so the batch's work is traced to it.
    pub(crate) span: Span,
}

/// What the coordinator and its terms share.
#[derive(Debug)]
pub(crate) struct Shared {
    outcome: Mutex<Option<Outcome>>,
    /// Woken (all waiters, first asked first) when `outcome` changes or at close.
    answered: Notify,
    /// A term is waiting for a renewal.
    pub(crate) wanted: Notify,
    releases: Mutex<Vec<PendingRelease>>,
    /// A release was queued.
    pub(crate) released: Notify,
    closed: AtomicBool,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            outcome: Mutex::new(None),
            answered: Notify::new(),
            wanted: Notify::new(),
            releases: Mutex::new(Vec::new()),
            released: Notify::new(),
            closed: AtomicBool::new(false),
        }
    }
}

impl Shared {
    /// Answers every renewal asked for at or before `outcome.sent`.
    pub(crate) fn answer(&self, outcome: Outcome) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
        self.answered.notify_waiters();
    }

    /// Takes up to `max` queued releases of one token (the oldest first), carrying at
    /// most `max_bytes` of hand-off state between them (at least one release).
    pub(crate) fn take_releases(&self, max: usize, max_bytes: usize) -> Vec<PendingRelease> {
        let mut queue = self.releases.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(token) = queue.first().map(|p| p.token.clone()) else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        let mut bytes = 0;
        let mut rest = Vec::with_capacity(queue.len());
        for p in queue.drain(..) {
            let size = p.state.as_ref().map_or(0, Vec::len);
            let fits = taken.is_empty() || bytes + size <= max_bytes;
            if p.token == token && taken.len() < max && fits {
                bytes += size;
                taken.push(p);
            } else {
                rest.push(p);
            }
        }
        *queue = rest;
        taken
    }

    /// Whether releases are waiting.
    pub(crate) fn has_releases(&self) -> bool {
        !self
            .releases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// The coordinator has stopped: fail every waiting and later call.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.answered.notify_waiters();
        for p in std::mem::take(&mut *self.releases.lock().unwrap_or_else(PoisonError::into_inner))
        {
            let _ = p.reply.send(Err(stopped()));
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Waits for the first tick sent after this call and answers the renewal of a term
    /// held with `token` (refused if the term is revoked).
    async fn renew(&self, term: &TermShared, token: &str) -> Result<bool, StoreError> {
        let asked = Instant::now();
        self.wanted.notify_one();
        let outcome = loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            if self.is_closed() {
                return Err(stopped());
            }
            let current = self
                .outcome
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(o) = current.filter(|o| o.sent >= asked) {
                break o;
            }
            answered.await;
        };
        match &outcome.result {
            Ok(Some(session)) => Ok(**session == *token && !term.is_revoked()),
            Ok(None) => Ok(false),
            Err(e) => Err(e.clone()),
        }
    }

    /// Queues the release of term `fence` of `partition`, held with `token`, leaving
    /// `state` for the next term; the reply comes with the next release batch.
    pub(crate) fn queue_release(
        &self,
        partition: Arc<str>,
        fence: Fence,
        token: &str,
        state: Option<Vec<u8>>,
    ) -> oneshot::Receiver<Result<bool, StoreError>> {
        let (reply, rx) = oneshot::channel();
        if self.is_closed() {
            let _ = reply.send(Err(stopped()));
            return rx;
        }
        self.releases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(PendingRelease {
                partition,
                fence,
                token: token.to_owned(),
                state,
                reply,
                span: Span::current(),
            });
        self.released.notify_one();
        rx
    }
}

/// The calls of one partition term: renewals and the release through the batch.
#[derive(Debug)]
pub(crate) struct BatchedTerm<B> {
    /// The group store, for the self-check when the term starts.
    pub(crate) store: B,
    pub(crate) shared: Arc<Shared>,
    pub(crate) partition: Arc<str>,
    /// The term's fence: its release names it.
    pub(crate) fence: Fence,
    /// What the term's callback shares: its release takes the state it leaves.
    pub(crate) term: Arc<TermShared>,
}

impl<B: GroupStore> TermCalls for BatchedTerm<B> {
    async fn renew(&self, token: &str, _lease: Duration) -> Result<bool, StoreError> {
        self.shared.renew(&self.term, token).await
    }

    /// Releases the term with the state its callback left for the next one (the
    /// runner releases only once the callback has ended, so the state is final).
    async fn release(&self, token: &str) -> Result<bool, StoreError> {
        let state = self.term.seal();
        self.shared
            .queue_release(self.partition.clone(), self.fence, token, state)
            .await
            .unwrap_or_else(|_| Err(stopped()))
    }

    // Boxed: awaited inline, a Redis call's state would be part of every partition
    // term's future (kilobytes each, times the partitions a replica holds), though it
    // runs once per term.
    async fn self_check(&self) -> Result<Vec<BackendWarning>, StoreError> {
        Box::pin(self.store.warnings()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(sent: Instant, session: Option<&str>) -> Outcome {
        Outcome {
            sent,
            result: Ok(session.map(Arc::from)),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_takes_the_answer_of_the_first_tick_sent_after_it_asked() {
        let shared = Arc::new(Shared::default());
        let before = Instant::now();
        tokio::time::sleep(Duration::from_millis(1)).await;
        // An answer from before the renewal asked does not count.
        shared.answer(outcome(before, Some("a:1")));
        let s = shared.clone();
        let term = TermShared::new(None);
        let renewal = tokio::spawn(async move { s.renew(&term, "a:1").await });
        tokio::task::yield_now().await;
        assert!(!renewal.is_finished());
        shared.answer(outcome(Instant::now(), Some("a:1")));
        assert!(renewal.await.unwrap().unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn another_session_a_revoked_partition_and_a_stop_refuse_renewals() {
        let shared = Arc::new(Shared::default());
        let (revoked, other) = (TermShared::new(None), TermShared::new(None));
        revoked.revoke();
        for (token, term, expect) in [
            ("a:old", &other, false),
            ("a:1", &revoked, false),
            ("a:1", &other, true),
        ] {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let (s, term) = (shared.clone(), term.clone());
            let renewal = tokio::spawn(async move { s.renew(&term, token).await });
            tokio::task::yield_now().await;
            shared.answer(outcome(Instant::now(), Some("a:1")));
            assert_eq!(renewal.await.unwrap().unwrap(), expect, "{token}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        let s = shared.clone();
        let renewal = tokio::spawn(async move { s.renew(&other, "a:1").await });
        let release = shared.queue_release("p1".into(), Fence(1), "a:1", None);
        tokio::task::yield_now().await;
        shared.close();
        assert!(renewal.await.unwrap().is_err());
        assert!(release.await.unwrap().is_err());
        assert!(
            shared
                .queue_release("p1".into(), Fence(1), "a:1", None)
                .await
                .unwrap()
                .is_err(),
            "and every later one"
        );
    }

    #[tokio::test]
    async fn releases_are_taken_one_token_at_a_time_in_batches() {
        let shared = Shared::default();
        let mut rxs = Vec::new();
        for (i, token) in ["a:1", "a:1", "a:0", "a:1"].iter().enumerate() {
            let (reply, rx) = oneshot::channel();
            rxs.push(rx);
            shared.releases.lock().unwrap().push(PendingRelease {
                partition: i.to_string().into(),
                fence: Fence(1),
                token: (*token).into(),
                state: None,
                reply,
                span: Span::none(),
            });
        }
        let take = |max| -> Vec<String> {
            shared
                .take_releases(max, usize::MAX)
                .iter()
                .map(|p| p.partition.to_string())
                .collect()
        };
        assert_eq!(take(2), ["0", "1"]);
        assert_eq!(take(10), ["2"], "then the oldest waiting token's");
        assert_eq!(take(10), ["3"]);
        assert!(!shared.has_releases());
    }

    #[tokio::test]
    async fn a_batch_carries_a_bounded_amount_of_hand_off_state() {
        let shared = Shared::default();
        let mut rxs = Vec::new();
        for (i, size) in [3, 3, 0, 10, 1].into_iter().enumerate() {
            let (reply, rx) = oneshot::channel();
            rxs.push(rx);
            shared.releases.lock().unwrap().push(PendingRelease {
                partition: i.to_string().into(),
                fence: Fence(1),
                token: "a:1".into(),
                state: (size > 0).then(|| vec![0; size]),
                reply,
                span: Span::none(),
            });
        }
        let take = || -> Vec<String> {
            shared
                .take_releases(10, 6)
                .iter()
                .map(|p| p.partition.to_string())
                .collect()
        };
        assert_eq!(take(), ["0", "1", "2"], "6 bytes, and one without state");
        assert_eq!(take(), ["3"], "a state over the limit goes alone");
        assert_eq!(take(), ["4"]);
    }
}
