//! The elector's state machine on the in-memory store under tokio's paused clock:
//! exact timing without a server. Redis behaviour is tested against real servers in
//! the other test files.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use leasehold_election::ext::{Grant, GrantedTerm, TermCalls, TermConfig, TermHandle};
use leasehold_election::{
    Acquire, BackendWarning, DutyKeys, Elector, ElectorConfig, ElectorHandle, Fence, LeaderInfo,
    Leadership, LeaseStore, MemoryStore, Role, StoreError, TermEndReason,
};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep, timeout};

const LEASE: Duration = Duration::from_millis(300);

fn config(replica: &str) -> ElectorConfig {
    ElectorConfig::builder("job", replica)
        .lease(LEASE)
        .build()
        .unwrap()
}

fn spawn<S: LeaseStore>(store: S, replica: &str) -> ElectorHandle {
    Elector::new(store, config(replica), |lead: Leadership| async move {
        lead.cancelled().await;
        Ok(())
    })
    .spawn()
}

fn leaders(handles: &[ElectorHandle]) -> usize {
    handles.iter().filter(|h| h.status().is_leader()).count()
}

#[tokio::test(start_paused = true)]
async fn exactly_one_of_three_leads_over_time() {
    let store = MemoryStore::new();
    let handles: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|r| spawn(store.clone(), r))
        .collect();
    handles[0].wait_until_leader().await.unwrap();
    for _ in 0..200 {
        sleep(Duration::from_millis(7)).await;
        assert_eq!(leaders(&handles), 1, "exactly one leader at every instant");
    }
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_hands_over_at_once() {
    let store = MemoryStore::new();
    let a = spawn(store.clone(), "a");
    let first = a.wait_until_leader().await.unwrap();
    let b = spawn(store.clone(), "b");
    sleep(Duration::from_millis(50)).await;
    assert!(!b.status().is_leader());
    let start = Instant::now();
    a.shutdown().await;
    let second = b.wait_until_leader().await.unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(5),
        "hand-over took {:?}",
        start.elapsed()
    );
    assert!(second > first, "fence must grow: {first} -> {second}");
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_steps_down_hands_over_and_sits_out_a_retry_interval() {
    let store = MemoryStore::new();
    let a = spawn(store.clone(), "a");
    let first = a.wait_until_leader().await.unwrap();
    let b = spawn(store.clone(), "b");
    sleep(Duration::from_millis(50)).await;
    let start = Instant::now();
    assert!(a.step_down().await.unwrap(), "it was leading");
    let second = b.wait_until_leader().await.unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(5),
        "{:?}",
        start.elapsed()
    );
    assert!(second > first);
    let end = a.status().last_term.expect("a term ended");
    assert!(matches!(end.reason, TermEndReason::SteppedDown));
    assert!(end.released, "released so that b could lead at once");
    assert!(!a.step_down().await.unwrap(), "not leading: nothing to do");
    // Alone again, a leads after sitting out one retry interval.
    b.shutdown().await;
    let retry = config("a").retry_interval();
    let back = Instant::now();
    a.wait_until_leader().await.unwrap();
    assert!(
        back.elapsed() <= retry,
        "led again {:?} after b left",
        back.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_without_waiting_ends_the_term_gracefully() {
    let store = MemoryStore::new();
    let a = spawn(store.clone(), "a");
    a.wait_until_leader().await.unwrap();
    a.stop();
    let mut rx = a.subscribe();
    let s = rx
        .wait_for(|s| s.role == Role::Stopped)
        .await
        .unwrap()
        .clone();
    let end = s.last_term.expect("the term ended");
    assert!(matches!(end.reason, TermEndReason::Shutdown));
    assert!(end.released, "a graceful stop releases");
    assert_eq!(end.reason.label(), "shutdown");
}

#[tokio::test(start_paused = true)]
async fn crashed_leader_is_replaced_right_after_its_lease_expires() {
    let store = MemoryStore::new();
    let keys = DutyKeys::new("leasehold", "job");
    // A "crashed" leader: holds the lease and never renews.
    let Acquire::Won { .. } = store
        .acquire(&keys, "dead:0", LEASE, Fence(1))
        .await
        .unwrap()
    else {
        panic!("lease should be free");
    };
    let taken = Instant::now();
    let b = spawn(store.clone(), "b");
    b.wait_until_leader().await.unwrap();
    let after = taken.elapsed();
    assert!(
        after >= LEASE,
        "took over before the lease expired: {after:?}"
    );
    assert!(
        after <= LEASE + Duration::from_millis(5),
        "overshoot too large: {after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn duty_errors_and_panics_end_the_term_and_never_the_elector() {
    let store = MemoryStore::new();
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let h = Elector::new(store, config("a"), move |_lead: Leadership| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 => Err("boom".into()),
                1 => panic!("duty panicked on purpose"),
                _ => {
                    std::future::pending::<()>().await;
                    Ok(())
                }
            }
        }
    })
    .spawn();
    let mut rx = h.subscribe();
    let s = rx
        .wait_for(|s| s.last_term.is_some())
        .await
        .unwrap()
        .clone();
    assert!(
        matches!(s.last_term.unwrap().reason, TermEndReason::DutyFailed(ref e) if e.contains("boom"))
    );
    let s = rx
        .wait_for(|s| {
            matches!(
                s.last_term.as_ref().map(|t| &t.reason),
                Some(TermEndReason::DutyPanicked(_))
            )
        })
        .await
        .unwrap()
        .clone();
    let TermEndReason::DutyPanicked(msg) = s.last_term.unwrap().reason else {
        unreachable!()
    };
    assert!(msg.contains("on purpose"));
    h.wait_until_leader().await.unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "campaigned again after both failures"
    );
}

/// Wraps a store; while `hang` is set, renew calls never return.
#[derive(Clone)]
struct HangingRenew {
    inner: MemoryStore,
    hang: Arc<AtomicBool>,
}

impl LeaseStore for HangingRenew {
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
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.renew(k, t, l).await
    }
    async fn release(&self, k: &DutyKeys, t: &str) -> Result<bool, StoreError> {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
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

#[tokio::test(start_paused = true)]
async fn hung_renewal_steps_down_at_the_local_deadline_before_the_lease_expires() {
    let inner = MemoryStore::new();
    let hang = Arc::new(AtomicBool::new(false));
    let store = HangingRenew {
        inner: inner.clone(),
        hang: hang.clone(),
    };
    let term = Arc::new(std::sync::Mutex::new(None));
    let t = term.clone();
    let h = Elector::new(store, config("a"), move |lead: Leadership| {
        t.lock().unwrap().get_or_insert_with(|| lead.clone());
        async move {
            lead.cancelled().await;
            Ok(())
        }
    })
    .spawn();
    h.wait_until_leader().await.unwrap();
    sleep(Duration::from_millis(150)).await;
    hang.store(true, Ordering::SeqCst);
    let mut rx = h.subscribe();
    rx.wait_for(|s| !s.is_leader()).await.unwrap();
    let stepped_down = Instant::now();
    let info = inner
        .leader(&DutyKeys::new("leasehold", "job"))
        .await
        .unwrap()
        .expect("key still in store");
    let left = info.remaining.unwrap();
    assert!(
        left > Duration::ZERO,
        "stepped down before the store expired the key (left {left:?})"
    );
    let cfg = config("a");
    assert!(
        left >= cfg.safety_margin() - Duration::from_millis(1),
        "left {left:?}"
    );
    let s = rx
        .wait_for(|s| s.last_term.is_some())
        .await
        .unwrap()
        .clone();
    assert!(matches!(
        s.last_term.unwrap().reason,
        TermEndReason::DeadlinePassed
    ));
    let lead = term.lock().unwrap().clone().expect("the duty ran");
    assert!(lead.is_cancelled(), "the duty's token fired");
    assert_eq!(lead.remaining(), Duration::ZERO);
    assert!(lead.deadline() <= stepped_down);
}

/// A granted term's calls: the in-memory store with one duty's keys, whose renewals
/// and releases hang while `hang` is set.
struct HangingCalls {
    inner: MemoryStore,
    keys: DutyKeys,
    hang: Arc<AtomicBool>,
}

impl TermCalls for HangingCalls {
    async fn renew(&self, token: &str, lease: Duration) -> Result<bool, StoreError> {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.renew(&self.keys, token, lease).await
    }
    async fn release(&self, token: &str) -> Result<bool, StoreError> {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.release(&self.keys, token).await
    }
    async fn self_check(&self) -> Result<Vec<BackendWarning>, StoreError> {
        Ok(Vec::new())
    }
}

/// A lease taken on a term's behalf with token `a:granted`.
async fn grant(inner: &MemoryStore, keys: &DutyKeys) -> Grant {
    let sent = Instant::now();
    let Acquire::Won { fence, .. } = inner
        .acquire(keys, "a:granted", LEASE, Fence(1))
        .await
        .unwrap()
    else {
        panic!("the lease was free");
    };
    Grant {
        fence,
        sent,
        token: "a:granted".into(),
    }
}

/// The fence and instant of each time a duty saw its term start or end.
type Seen = Arc<std::sync::Mutex<Vec<(Fence, Instant)>>>;

/// A granted term on `calls`: its handle, its future, and when its duty saw the term
/// start and end.
fn granted_term(
    calls: HangingCalls,
    grant: Grant,
) -> (TermHandle, impl std::future::Future<Output = ()>, Seen) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let terms = TermConfig::new(config("a"), "tenants", Instant::now()).unwrap();
    let (handle, run) = GrantedTerm::new(&terms, "p1", grant, calls, move |lead: Leadership| {
        let record = record.clone();
        async move {
            record.lock().unwrap().push((lead.fence(), Instant::now()));
            // Seen by a task of its own: a duty whose lease may be lost is aborted at
            // once, with no grace to record anything.
            let (fence, token) = (lead.fence(), lead.token());
            tokio::spawn(async move {
                token.cancelled().await;
                record.lock().unwrap().push((fence, Instant::now()));
            });
            std::future::pending::<()>().await;
            Ok(())
        }
    })
    .pair();
    (handle, run, seen)
}

#[tokio::test(start_paused = true)]
async fn a_granted_term_leads_at_once_and_steps_down_at_the_local_deadline_of_the_grant() {
    let inner = MemoryStore::new();
    let keys = DutyKeys::new("leasehold", "job");
    // A batch claim taken on the term's behalf, sent 100 ms before the term starts.
    let grant = grant(&inner, &keys).await;
    let (fence, sent) = (grant.fence, grant.sent);
    sleep(Duration::from_millis(100)).await;
    let calls = HangingCalls {
        inner: inner.clone(),
        keys: keys.clone(),
        hang: Arc::new(AtomicBool::new(true)),
    };
    let (handle, run, seen) = granted_term(calls, grant);
    let started = Instant::now();
    run.await;
    // Renewals hang: the deadline is the grant's send time + lease - margin, not the
    // term's start + lease.
    let margin = config("a").safety_margin();
    assert_eq!(
        *seen.lock().unwrap(),
        [(fence, started), (fence, sent + LEASE - margin)],
        "led at once (no campaign), cancelled at the local deadline"
    );
    let end = handle.ended().expect("the term ended");
    assert!(matches!(end.reason, TermEndReason::DeadlinePassed));
    assert!(!end.released, "its release hung, and was given up");
    sleep(LEASE).await;
    assert_eq!(
        inner.leader(&keys).await.unwrap(),
        None,
        "after its one term the runner never campaigned again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stopped_granted_term_releases_its_lease_once_its_duty_has_ended() {
    let inner = MemoryStore::new();
    let keys = DutyKeys::new("leasehold", "job");
    let grant = grant(&inner, &keys).await;
    let fence = grant.fence;
    let calls = HangingCalls {
        inner: inner.clone(),
        keys: keys.clone(),
        hang: Arc::new(AtomicBool::new(false)),
    };
    let (handle, run, seen) = granted_term(calls, grant);
    let run = tokio::spawn(run);
    // Renewed past the first lease.
    sleep(LEASE * 2).await;
    assert_eq!(inner.leader(&keys).await.unwrap().unwrap().fence, fence);
    assert!(handle.ended().is_none(), "still running");
    handle.stop();
    timeout(LEASE, run)
        .await
        .expect("the term ends at once")
        .unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2, "the duty ended");
    let end = handle.ended().expect("the term ended");
    assert!(matches!(end.reason, TermEndReason::Shutdown));
    assert!(end.released);
    assert_eq!(inner.leader(&keys).await.unwrap(), None, "released");
}

#[tokio::test(start_paused = true)]
async fn duty_outrunning_its_grace_is_aborted_and_counted() {
    let store = MemoryStore::new();
    let cfg = ElectorConfig::builder("job", "a")
        .lease(LEASE)
        .grace(Duration::from_millis(20))
        .build()
        .unwrap();
    let h = Elector::new(store, cfg, |_lead: Leadership| async move {
        // Ignores cancellation.
        std::future::pending::<()>().await;
        Ok(())
    })
    .spawn();
    h.wait_until_leader().await.unwrap();
    let mut rx = h.subscribe();
    let start = Instant::now();
    h.shutdown_token().cancel();
    let s = rx
        .wait_for(|s| s.role == Role::Stopped)
        .await
        .unwrap()
        .clone();
    let end = s.last_term.unwrap();
    assert!(end.grace_overrun);
    assert!(end.released);
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert!(start.elapsed() < Duration::from_millis(25));
}

#[tokio::test(start_paused = true)]
async fn fences_grow_across_terms_and_a_wipe_is_flagged() {
    let store = MemoryStore::new();
    let mut seen = Vec::new();
    let a = spawn(store.clone(), "a");
    seen.push(a.wait_until_leader().await.unwrap());
    a.shutdown().await;
    let b = spawn(store.clone(), "b");
    seen.push(b.wait_until_leader().await.unwrap());
    store.wipe(); // data loss: b's renewal is refused, b campaigns again
    let mut rx = b.subscribe();
    let s = rx
        .wait_for(|s| s.is_leader() && s.fence() > Some(seen[1]))
        .await
        .unwrap()
        .clone();
    seen.push(s.fence().unwrap());
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(s.fence_regressions, 1, "the lost counter is flagged once");
}

#[tokio::test(start_paused = true)]
async fn dropping_the_handle_releases_the_lease() {
    let store = MemoryStore::new();
    let a = spawn(store.clone(), "a");
    a.wait_until_leader().await.unwrap();
    drop(a);
    let keys = DutyKeys::new("leasehold", "job");
    timeout(Duration::from_millis(50), async {
        while store.leader(&keys).await.unwrap().is_some() {
            sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("a dropped handle stops leading and releases");
}

/// Wraps a store; while `hang` is set, an acquire takes effect in the store but its
/// reply never comes back (a slow link: the request arrived, the answer is still on
/// its way).
#[derive(Clone)]
struct UnansweredAcquire {
    inner: MemoryStore,
    hang: Arc<AtomicBool>,
}

impl LeaseStore for UnansweredAcquire {
    async fn acquire(
        &self,
        k: &DutyKeys,
        t: &str,
        l: Duration,
        f: Fence,
    ) -> Result<Acquire, StoreError> {
        let reply = self.inner.acquire(k, t, l, f).await;
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        reply
    }
    async fn renew(&self, k: &DutyKeys, t: &str, l: Duration) -> Result<bool, StoreError> {
        self.inner.renew(k, t, l).await
    }
    async fn release(&self, k: &DutyKeys, t: &str) -> Result<bool, StoreError> {
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

#[tokio::test(start_paused = true)]
async fn an_unanswered_acquire_is_released_at_its_timeout_and_never_extended() {
    let inner = MemoryStore::new();
    let keys = DutyKeys::new("leasehold", "job");
    let sent = Instant::now();
    let a = spawn(
        UnansweredAcquire {
            inner: inner.clone(),
            hang: Arc::new(AtomicBool::new(true)),
        },
        "a",
    );
    sleep(Duration::from_millis(1)).await;
    // a's acquire took the lease; its reply never comes.
    let info = inner.leader(&keys).await.unwrap();
    assert_eq!(info.map(|i| i.replica_id).as_deref(), Some("a"));
    let b = spawn(inner.clone(), "b");
    b.wait_until_leader().await.unwrap();
    let after = sent.elapsed();
    let call_timeout = config("a").call_timeout();
    // b leads once a gives up on its call and releases, long before the lease (300 ms)
    // could have expired, and a never leads.
    assert!(
        after >= call_timeout && after <= call_timeout + Duration::from_millis(5),
        "b led {after:?} after a's unanswered acquire (call timeout {call_timeout:?})"
    );
    for _ in 0..100 {
        sleep(Duration::from_millis(10)).await;
        assert!(
            !a.status().is_leader(),
            "a never hears back, so never leads"
        );
        assert!(
            b.status().is_leader(),
            "a's retries never take or extend b's lease"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_during_an_unanswered_acquire_leaves_no_lease_behind() {
    let inner = MemoryStore::new();
    let keys = DutyKeys::new("leasehold", "job");
    let a = spawn(
        UnansweredAcquire {
            inner: inner.clone(),
            hang: Arc::new(AtomicBool::new(true)),
        },
        "a",
    );
    sleep(Duration::from_millis(10)).await;
    assert!(
        inner.leader(&keys).await.unwrap().is_some(),
        "a's acquire is in flight and took the lease"
    );
    let start = Instant::now();
    a.shutdown().await;
    assert!(
        start.elapsed() < config("a").call_timeout(),
        "shutdown does not wait for the call in flight"
    );
    assert_eq!(
        inner.leader(&keys).await.unwrap(),
        None,
        "shutdown released what the unanswered acquire took"
    );
}

#[tokio::test(start_paused = true)]
async fn a_confirmed_lease_is_led_only_for_what_is_left_and_not_extended() {
    let store = MemoryStore::new();
    let keys = DutyKeys::new("leasehold", "job");
    let Acquire::Won { fence, .. } = store.acquire(&keys, "a:1", LEASE, Fence(1)).await.unwrap()
    else {
        panic!("free");
    };
    sleep(Duration::from_millis(100)).await;
    // The same token again (a store's retry after a lost reply): confirmed, not extended.
    let again = store.acquire(&keys, "a:1", LEASE, Fence(1)).await.unwrap();
    assert_eq!(
        again,
        Acquire::Confirmed {
            fence,
            remaining: LEASE - Duration::from_millis(100)
        }
    );
    let info = store.leader(&keys).await.unwrap().unwrap();
    assert_eq!(info.remaining, Some(LEASE - Duration::from_millis(100)));
}

#[tokio::test(start_paused = true)]
async fn after_a_wipe_nothing_is_granted_for_one_lease() {
    let store = MemoryStore::new();
    let term = Arc::new(std::sync::Mutex::new(None));
    let t = term.clone();
    let a = Elector::new(store.clone(), config("a"), move |lead: Leadership| {
        t.lock().unwrap().get_or_insert_with(|| lead.clone());
        async move {
            lead.cancelled().await;
            Ok(())
        }
    })
    .spawn();
    let first = a.wait_until_leader().await.unwrap();
    let b = spawn(store.clone(), "b");
    sleep(Duration::from_millis(50)).await;
    let wiped = Instant::now();
    store.wipe(); // a restart that lost every key
    let old = term.lock().unwrap().clone().unwrap();
    let mut rx_a = a.subscribe();
    let mut rx_b = b.subscribe();
    let next = tokio::select! {
        s = rx_a.wait_for(|s| s.fence().is_some_and(|f| f > first)) => s.unwrap().fence(),
        s = rx_b.wait_for(|s| s.is_leader()) => s.unwrap().fence(),
    }
    .unwrap();
    assert!(next > first);
    let led = Instant::now();
    assert!(
        led >= wiped + LEASE,
        "granted {:?} after the wipe",
        led - wiped
    );
    assert!(led > old.deadline(), "the old term's deadline had passed");
    assert!(led <= wiped + LEASE + Duration::from_millis(5));
}

/// Wraps a store; its first acquire takes the lease, "loses" the reply, and retries with
/// the same token 100 ms later (as the Redis store does on a dropped connection), so
/// the elector gets `Acquire::Confirmed`.
#[derive(Clone)]
struct RetriedAcquire {
    inner: MemoryStore,
    first: Arc<AtomicBool>,
}

impl LeaseStore for RetriedAcquire {
    async fn acquire(
        &self,
        k: &DutyKeys,
        t: &str,
        l: Duration,
        f: Fence,
    ) -> Result<Acquire, StoreError> {
        if self.first.swap(false, Ordering::SeqCst) {
            self.inner.acquire(k, t, l, f).await?;
            sleep(Duration::from_millis(100)).await;
        }
        self.inner.acquire(k, t, l, f).await
    }
    async fn renew(&self, k: &DutyKeys, t: &str, l: Duration) -> Result<bool, StoreError> {
        self.inner.renew(k, t, l).await
    }
    async fn release(&self, k: &DutyKeys, t: &str) -> Result<bool, StoreError> {
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

#[tokio::test(start_paused = true)]
async fn a_confirmed_lease_is_led_from_its_send_time_and_renewed_at_once() {
    let inner = MemoryStore::new();
    let term = Arc::new(std::sync::Mutex::new(None));
    let t = term.clone();
    let sent = Instant::now();
    let h = Elector::new(
        RetriedAcquire {
            inner: inner.clone(),
            first: Arc::new(AtomicBool::new(true)),
        },
        config("a"),
        move |lead: Leadership| {
            t.lock()
                .unwrap()
                .get_or_insert_with(|| (Instant::now(), lead.clone()));
            async move {
                lead.cancelled().await;
                Ok(())
            }
        },
    )
    .spawn();
    h.wait_until_leader().await.unwrap();
    let (started, lead) = term.lock().unwrap().clone().unwrap();
    assert_eq!(
        started,
        sent + Duration::from_millis(100),
        "led once confirmed"
    );
    // The confirmation said 200 ms were left; counted from the call's send time, the
    // deadline was at most 200 ms - margin after it. The elector renewed at once.
    let margin = config("a").safety_margin();
    assert_eq!(lead.deadline(), started + LEASE - margin, "renewed at once");
    sleep(LEASE).await;
    assert!(h.status().is_leader() && !lead.is_cancelled());
    h.shutdown().await;
}

/// A leader whose duty ignores cancellation, with a long lease and grace.
async fn stubborn_leader(store: MemoryStore) -> ElectorHandle {
    let cfg = ElectorConfig::builder("job", "a")
        .lease(Duration::from_secs(30))
        .grace(Duration::from_secs(10))
        .build()
        .unwrap();
    let h = Elector::new(store, cfg, |_lead: Leadership| async move {
        std::future::pending::<()>().await;
        Ok(())
    })
    .spawn();
    h.wait_until_leader().await.unwrap();
    h
}

#[tokio::test(start_paused = true)]
async fn stop_by_aborts_the_duty_at_its_deadline_and_releases() {
    let store = MemoryStore::new();
    let h = stubborn_leader(store.clone()).await;
    let mut rx = h.subscribe();
    let start = Instant::now();
    h.stop_by(start + Duration::from_millis(50));
    let s = rx
        .wait_for(|s| s.role == Role::Stopped)
        .await
        .unwrap()
        .clone();
    let end = s.last_term.unwrap();
    assert!(end.grace_overrun, "the duty ran to the deadline");
    assert!(end.released, "then the lease was released");
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(50), "{took:?}");
    assert!(
        took < Duration::from_millis(60),
        "not the 10 s grace: {took:?}"
    );
    // Released: another replica leads at once, not after the 30 s lease.
    let b = spawn(store, "b");
    timeout(Duration::from_millis(100), b.wait_until_leader())
        .await
        .expect("b leads without waiting for the lease")
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn stop_by_hurries_a_duty_already_in_its_grace() {
    let h = stubborn_leader(MemoryStore::new()).await;
    let mut rx = h.subscribe();
    let start = Instant::now();
    h.stop();
    sleep(Duration::from_millis(10)).await;
    assert_ne!(h.status().role, Role::Stopped, "still in its 10 s grace");
    h.stop_by(start + Duration::from_millis(40));
    // A later deadline does not extend the earlier one.
    h.stop_by(start + Duration::from_secs(5));
    rx.wait_for(|s| s.role == Role::Stopped).await.unwrap();
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(40), "{took:?}");
    assert!(took < Duration::from_millis(50), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_within_aborts_the_duty_before_the_deadline_and_releases() {
    let store = MemoryStore::new();
    let h = stubborn_leader(store.clone()).await;
    let start = Instant::now();
    let within = Duration::from_millis(500);
    assert!(
        h.shutdown_within(within).await,
        "a 10 s grace is cut to fit 500 ms"
    );
    let took = start.elapsed();
    assert!(took < within, "stopped within its deadline: {took:?}");
    // A fifth of `within` is kept for the release: the duty was aborted at 400 ms.
    assert!(took >= Duration::from_millis(400), "{took:?}");
    let end = h.status().last_term.unwrap();
    assert!(end.grace_overrun, "the duty ran to the cut");
    assert!(end.released, "then the lease was released");
    let b = spawn(store, "b");
    timeout(Duration::from_millis(100), b.wait_until_leader())
        .await
        .expect("b leads without waiting for the lease")
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_takes_the_handle_by_reference_from_every_holder() {
    let h = std::sync::Arc::new(stubborn_leader(MemoryStore::new()).await);
    let other = h.clone();
    let waiter = tokio::spawn(async move { other.shutdown_within(Duration::from_secs(1)).await });
    h.shutdown().await;
    assert_eq!(h.status().role, Role::Stopped);
    assert!(waiter.await.unwrap(), "the second waiter sees the stop too");
}
