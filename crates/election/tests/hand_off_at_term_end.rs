//! `Leadership::hand_off` as a term ends, through the elector on the in-memory store
//! under tokio's paused clock: a term ended on purpose hands its state off within its
//! grace; a term whose lease is lost is told so instead of an `Ok` that nothing follows.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_election::{
    Acquire, DutyKeys, Elector, ElectorConfig, ElectorHandle, Fence, HandOffError, LeaderInfo,
    Leadership, LeaseStore, MemoryStore, StoreError, TermEndReason,
};
use tokio::sync::{Notify, mpsc};
use tokio::time::timeout;

const LEASE: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(10);

/// The in-memory store, as a partition group's: it keeps hand-off state (here: records
/// what each release carried), and refuses renewals once told to (the lease was taken).
#[derive(Clone, Default)]
struct KeepsState {
    inner: MemoryStore,
    refuse_renewals: Arc<Mutex<bool>>,
    handed: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl LeaseStore for KeepsState {
    async fn acquire(
        &self,
        k: &DutyKeys,
        t: &str,
        l: Duration,
        f: Fence,
    ) -> Result<Acquire, StoreError> {
        self.inner.acquire(k, t, l, f).await
    }
    async fn renew(&self, k: &DutyKeys, t: &str, l: Duration) -> Result<bool, StoreError> {
        if *self.refuse_renewals.lock().unwrap() {
            return Ok(false);
        }
        self.inner.renew(k, t, l).await
    }
    async fn release(&self, k: &DutyKeys, t: &str) -> Result<bool, StoreError> {
        self.inner.release(k, t).await
    }
    fn keeps_hand_offs(&self) -> bool {
        true
    }
    async fn release_handing_off(
        &self,
        k: &DutyKeys,
        t: &str,
        state: Vec<u8>,
    ) -> Result<bool, StoreError> {
        self.handed.lock().unwrap().push(state);
        self.inner.release(k, t).await
    }
    async fn leader(&self, k: &DutyKeys) -> Result<Option<LeaderInfo>, StoreError> {
        self.inner.leader(k).await
    }
    fn release_notifier(&self, k: &DutyKeys) -> Arc<Notify> {
        self.inner.release_notifier(k)
    }
    fn release_events(&self, k: &DutyKeys) -> tokio::sync::broadcast::Receiver<String> {
        self.inner.release_events(k)
    }
}

/// What a term's `hand_off` answered, with the term's `Leadership`.
type Answer = (Result<(), HandOffError>, Leadership);

/// An elector whose duty, once its term is cancelled, hands off `offset=42` and sends
/// the answer (and its `Leadership`, for later calls) on the returned channel. The call
/// is made by a task of the duty's (a consumer holding a clone, say), which the
/// elector does not abort: a duty whose lease may be lost gets no grace and is aborted
/// at once, so its own call might never run.
fn elector(store: KeepsState) -> (ElectorHandle, mpsc::UnboundedReceiver<Answer>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = ElectorConfig::builder("p1", "a")
        .lease(LEASE)
        .grace(Duration::from_millis(100))
        .build()
        .unwrap();
    let handle = Elector::new(store, config, move |lead: Leadership| {
        let tx = tx.clone();
        let worker = tokio::spawn(async move {
            lead.cancelled().await;
            let _ = tx.send((lead.hand_off(b"offset=42".to_vec()), lead.clone()));
        });
        async move {
            // Returns once the worker has handed off (within the grace, when there is one).
            let _ = worker.await;
            Ok(())
        }
    })
    .spawn();
    (handle, rx)
}

#[tokio::test(start_paused = true)]
async fn a_term_ended_on_purpose_hands_its_state_off_within_its_grace() {
    let store = KeepsState::default();
    let (handle, mut answers) = elector(store.clone());
    handle.wait_until_leader().await.unwrap();
    handle.shutdown().await;
    let (answer, lead) = timeout(WAIT, answers.recv())
        .await
        .expect("the duty answered")
        .unwrap();
    assert_eq!(
        answer,
        Ok(()),
        "cancelled for a shutdown: the lease is not gone"
    );
    assert!(matches!(lead.end_reason(), Some(TermEndReason::Shutdown)));
    assert_eq!(
        *store.handed.lock().unwrap(),
        [b"offset=42".to_vec()],
        "the release carried the state"
    );
}

#[tokio::test(start_paused = true)]
async fn a_term_whose_renewal_is_refused_is_told_its_lease_is_lost() {
    let store = KeepsState::default();
    let (handle, mut answers) = elector(store.clone());
    handle.wait_until_leader().await.unwrap();
    *store.refuse_renewals.lock().unwrap() = true;
    let mut status = handle.subscribe();
    let ended = timeout(WAIT, status.wait_for(|s| s.last_term.is_some()))
        .await
        .expect("the term ends")
        .unwrap()
        .last_term
        .clone()
        .unwrap();
    assert!(
        matches!(ended.reason, TermEndReason::RenewalRefused),
        "{ended:?}"
    );
    drop(status);
    let (answer, lead) = timeout(WAIT, answers.recv())
        .await
        .expect("the worker answered")
        .unwrap();
    assert_eq!(answer, Err(HandOffError::LeaseLost));
    assert_eq!(
        lead.hand_off(b"again".to_vec()),
        Err(HandOffError::LeaseLost),
        "a call after the term's end says the same, not TooLate"
    );
    assert!(
        store.handed.lock().unwrap().is_empty(),
        "nothing was released with state"
    );
    handle.shutdown().await;
}
