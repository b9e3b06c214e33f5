//! One replica process's connection to the simulated store: the in-memory store
//! behind seeded faults. Every call is one of: delivered (after a small round trip),
//! refused before it is sent, run with its reply lost, run twice (a store's retry on a
//! fresh connection after the first reply was lost), delivered late (after the caller
//! has given up), or held in a black hole and delivered when the hole closes.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use leasehold_election::{BackendWarning, StoreError};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::{broadcast, oneshot};
use tokio::time::{Instant, sleep, timeout};

use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::PartitionOwner;
use crate::store::ops::routes::RouteRead;
use crate::store::protocol::Reported;
use crate::store::protocol::{
    AddReply, Adopt, AdoptReply, Change, ClaimReply, ClaimRequest, DrainReply, GivenBack, Granted,
    Move, PreferReply, Protocol, RemoveReply, RestoreStep, SetPage, StatusHead, Taken, Term,
    TickReply, TickRequest, VersionStep, WeightReply,
};

/// How long a call waits for its reply before it fails as timed out (the store's call
/// timeout).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_millis(250);

/// Whether `LEASEHOLD_SIM_TRACE` asks for every call on stderr.
pub(crate) fn tracing_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LEASEHOLD_SIM_TRACE").is_some())
}

fn ms(epoch: Instant) -> f64 {
    Instant::now().duration_since(epoch).as_secs_f64() * 1e3
}

/// What a link does to the calls sent over it now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    /// Every call delivered.
    Clean,
    /// Each call is faulty with these probabilities: refused before it is sent, run with
    /// its reply lost, run twice, delivered after the caller gave up.
    Lossy {
        fail: f64,
        lose: f64,
        twice: f64,
        late: f64,
    },
    /// Calls are held until this instant, then delivered (a paused process, a
    /// black-holed network): replies after the call timeout are lost.
    Hole { until: Instant },
}

/// What happens to one call.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Deliver,
    Fail,
    Lose,
    Twice,
    Late(Duration),
    /// Held this long, then delivered.
    Hold(Duration),
}

#[derive(Debug)]
struct State {
    mode: Mode,
    rng: StdRng,
}

/// A replica's link to the store. Cheap to clone; clones share the faults.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    store: MemoryGroupStore,
    state: Arc<Mutex<State>>,
    calls: Arc<AtomicU64>,
    /// For traces.
    name: Arc<str>,
    epoch: Instant,
}

impl crate::GroupStore for Link {}

impl Link {
    /// A link to `store` whose faults are drawn from `seed`; `calls` counts every call
    /// of every link.
    pub(crate) fn new(
        name: &str,
        store: MemoryGroupStore,
        seed: u64,
        calls: Arc<AtomicU64>,
    ) -> Self {
        Self {
            name: name.into(),
            epoch: Instant::now(),
            store,
            state: Arc::new(Mutex::new(State {
                mode: Mode::Clean,
                rng: StdRng::seed_from_u64(seed),
            })),
            calls,
        }
    }

    /// The same link as seen by process `pid` (traces name it).
    pub(crate) fn for_process(&self, pid: u64) -> Self {
        Self {
            name: format!("{}#{pid}", self.name).into(),
            ..self.clone()
        }
    }

    /// Whether calls go through unharmed now.
    pub(crate) fn is_clean(&self) -> bool {
        let s = self.lock();
        match s.mode {
            Mode::Clean => true,
            Mode::Hole { until } => until <= Instant::now(),
            Mode::Lossy { .. } => false,
        }
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        self.lock().mode = mode;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fate(&self) -> (Fate, Duration) {
        let now = Instant::now();
        let mut s = self.lock();
        // A round trip of 0.2 to 2 ms.
        let rtt = Duration::from_micros(s.rng.random_range(200..2_000));
        let fate = match s.mode {
            Mode::Clean => Fate::Deliver,
            Mode::Hole { until } if until > now => Fate::Hold(until - now),
            Mode::Hole { .. } => {
                s.mode = Mode::Clean;
                Fate::Deliver
            }
            Mode::Lossy {
                fail,
                lose,
                twice,
                late,
            } => {
                let x: f64 = s.rng.random();
                if x < fail {
                    Fate::Fail
                } else if x < fail + lose {
                    Fate::Lose
                } else if x < fail + lose + twice {
                    Fate::Twice
                } else if x < fail + lose + twice + late {
                    Fate::Late(CALL_TIMEOUT + Duration::from_millis(s.rng.random_range(1..600)))
                } else {
                    Fate::Deliver
                }
            }
        };
        (fate, rtt)
    }

    /// Runs `op` against the store under this link's faults.
    async fn call<T, F, Fut>(&self, what: impl FnOnce() -> String, op: F) -> Result<T, StoreError>
    where
        T: Send + std::fmt::Debug + 'static,
        F: Fn(MemoryGroupStore) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let (fate, rtt) = self.fate();
        let store = self.store.clone();
        let trace = tracing_on();
        let what = if trace {
            let w = format!("{} {}", self.name, what());
            eprintln!("{:>10.3} {w} {fate:?}", ms(self.epoch));
            w
        } else {
            String::new()
        };
        let epoch = self.epoch;
        let op = move |s: MemoryGroupStore| {
            let fut = op(s);
            let what = what.clone();
            async move {
                let r = fut.await;
                if trace {
                    eprintln!("{:>10.3}   ran {what} -> {r:?}", ms(epoch));
                }
                r
            }
        };
        let lost = || StoreError::Timeout(CALL_TIMEOUT);
        match fate {
            Fate::Deliver => {
                sleep(rtt / 2).await;
                let reply = op(store).await;
                sleep(rtt / 2).await;
                reply
            }
            Fate::Fail => Err(StoreError::Connection(std::sync::Arc::new(
                std::io::Error::other("simulated: connection refused before sending"),
            ))),
            Fate::Lose => {
                sleep(rtt / 2).await;
                drop(op(store).await);
                sleep(CALL_TIMEOUT.saturating_sub(rtt / 2)).await;
                Err(lost())
            }
            Fate::Twice => {
                sleep(rtt / 2).await;
                drop(op(store.clone()).await);
                sleep(rtt).await;
                let reply = op(store).await;
                sleep(rtt / 2).await;
                reply
            }
            Fate::Late(after) => {
                tokio::spawn(async move {
                    sleep(after).await;
                    drop(op(store).await);
                });
                sleep(CALL_TIMEOUT).await;
                Err(lost())
            }
            Fate::Hold(held) => {
                let (tx, rx) = oneshot::channel();
                tokio::spawn(async move {
                    sleep(held).await;
                    let _ = tx.send(op(store).await);
                });
                match timeout(CALL_TIMEOUT, rx).await {
                    Ok(Ok(reply)) => reply,
                    _ => Err(lost()),
                }
            }
        }
    }
}

impl Protocol for Link {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        let (k, r) = (keys.clone(), req.clone());
        self.call(
            || format!("tick {req:?}"),
            move |s| {
                let (k, r) = (k.clone(), r.clone());
                async move { s.tick(&k, &r).await }
            },
        )
        .await
    }

    async fn claim(&self, keys: &GroupKeys, req: &ClaimRequest) -> Result<ClaimReply, StoreError> {
        let (k, r) = (keys.clone(), req.clone());
        self.call(
            || format!("claim {req:?}"),
            move |s| {
                let (k, r) = (k.clone(), r.clone());
                async move { s.claim(&k, &r).await }
            },
        )
        .await
    }

    async fn release(
        &self,
        keys: &GroupKeys,
        session: &str,
        terms: &[GivenBack],
        state_ttl: Duration,
        hold: Duration,
    ) -> Result<Vec<bool>, StoreError> {
        let (k, t, n) = (keys.clone(), session.to_owned(), terms.to_vec());
        self.call(
            || format!("release {session} {terms:?}"),
            move |s| {
                let (k, t, n) = (k.clone(), t.clone(), n.clone());
                async move { s.release(&k, &t, &n, state_ttl, hold).await }
            },
        )
        .await
    }

    async fn take_hand_offs(
        &self,
        keys: &GroupKeys,
        terms: &[Term],
    ) -> Result<Vec<Taken>, StoreError> {
        let (k, n) = (keys.clone(), terms.to_vec());
        self.call(
            || format!("take hand-offs {terms:?}"),
            move |s| {
                let (k, n) = (k.clone(), n.clone());
                async move { s.take_hand_offs(&k, &n).await }
            },
        )
        .await
    }

    async fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        process: &str,
        session: &str,
    ) -> Result<(), StoreError> {
        let (k, r, p, t) = (
            keys.clone(),
            replica.to_owned(),
            process.to_owned(),
            session.to_owned(),
        );
        self.call(
            || format!("leave {replica} {process} {session}"),
            move |s| {
                let (k, r, p, t) = (k.clone(), r.clone(), p.clone(), t.clone());
                async move { s.leave(&k, &r, &p, &t).await }
            },
        )
        .await
    }

    async fn add(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> Result<AddReply, StoreError> {
        let (k, m, n) = (keys.clone(), mode.clone(), names.to_vec());
        self.call(
            || format!("add {mode:?} {names:?}"),
            move |s| {
                let (k, m, n) = (k.clone(), m.clone(), n.clone());
                async move { s.add(&k, &m, &n).await }
            },
        )
        .await
    }

    async fn remove(
        &self,
        keys: &GroupKeys,
        mode: &Change,
        names: &[String],
    ) -> Result<RemoveReply, StoreError> {
        let (k, m, n) = (keys.clone(), mode.clone(), names.to_vec());
        self.call(
            || format!("remove {mode:?} {names:?}"),
            move |s| {
                let (k, m, n) = (k.clone(), m.clone(), n.clone());
                async move { s.remove(&k, &m, &n).await }
            },
        )
        .await
    }

    async fn list_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let k = keys.clone();
        self.call(
            || format!("list {offset}"),
            move |s| {
                let k = k.clone();
                async move { s.list_page(&k, offset, limit).await }
            },
        )
        .await
    }

    async fn set_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Option<SetPage>, StoreError> {
        let k = keys.clone();
        self.call(
            || format!("set_page {offset}"),
            move |s| {
                let k = k.clone();
                async move { s.set_page(&k, offset, limit).await }
            },
        )
        .await
    }

    async fn set_version(
        &self,
        keys: &GroupKeys,
        version: u64,
        step: VersionStep<'_>,
    ) -> Result<bool, StoreError> {
        let k = keys.clone();
        let done = match step {
            VersionStep::Begin => None,
            VersionStep::Done(d) => Some(d.to_owned()),
        };
        self.call(
            || format!("version {version} {step:?}"),
            move |s| {
                let (k, done) = (k.clone(), done.clone());
                async move {
                    let step = match &done {
                        None => VersionStep::Begin,
                        Some(d) => VersionStep::Done(d),
                    };
                    s.set_version(&k, version, step).await
                }
            },
        )
        .await
    }

    async fn restore(&self, keys: &GroupKeys, step: &RestoreStep) -> Result<bool, StoreError> {
        let (k, st) = (keys.clone(), step.clone());
        self.call(
            || format!("restore {step:?}"),
            move |s| {
                let (k, st) = (k.clone(), st.clone());
                async move { s.restore(&k, &st).await }
            },
        )
        .await
    }

    async fn adopt(&self, keys: &GroupKeys, adopt: &Adopt) -> Result<AdoptReply, StoreError> {
        let (k, a) = (keys.clone(), adopt.clone());
        self.call(
            || format!("adopt {adopt:?}"),
            move |s| {
                let (k, a) = (k.clone(), a.clone());
                async move { s.adopt(&k, &a).await }
            },
        )
        .await
    }

    async fn drain(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        replica: &str,
        on: bool,
        force: bool,
    ) -> Result<DrainReply, StoreError> {
        let (k, o, r) = (keys.clone(), op.map(str::to_owned), replica.to_owned());
        self.call(
            || format!("drain {replica} {on} {force}"),
            move |s| {
                let (k, o, r) = (k.clone(), o.clone(), r.clone());
                async move { s.drain(&k, o.as_deref(), &r, on, force).await }
            },
        )
        .await
    }

    async fn held(&self, keys: &GroupKeys, session: &str) -> Result<Vec<Granted>, StoreError> {
        let (k, t) = (keys.clone(), session.to_owned());
        self.call(
            || format!("held {session}"),
            move |s| {
                let (k, t) = (k.clone(), t.clone());
                async move { s.held(&k, &t).await }
            },
        )
        .await
    }

    async fn report(
        &self,
        keys: &GroupKeys,
        session: &str,
        weights: &[Reported],
    ) -> Result<Vec<bool>, StoreError> {
        let (k, t, w) = (keys.clone(), session.to_owned(), weights.to_vec());
        self.call(
            || format!("report {session} {} weights", weights.len()),
            move |s| {
                let (k, t, w) = (k.clone(), t.clone(), w.clone());
                async move { s.report(&k, &t, &w).await }
            },
        )
        .await
    }

    async fn set_weight(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        weight: u64,
    ) -> Result<WeightReply, StoreError> {
        let (k, o, p) = (keys.clone(), op.map(str::to_owned), partition.to_owned());
        self.call(
            || format!("set_weight {partition} {weight}"),
            move |s| {
                let (k, o, p) = (k.clone(), o.clone(), p.clone());
                async move { s.set_weight(&k, o.as_deref(), &p, weight).await }
            },
        )
        .await
    }

    async fn prefer(
        &self,
        keys: &GroupKeys,
        op: Option<&str>,
        partition: &str,
        replica: Option<&str>,
    ) -> Result<PreferReply, StoreError> {
        let (k, o, p) = (keys.clone(), op.map(str::to_owned), partition.to_owned());
        let r = replica.map(str::to_owned);
        self.call(
            || format!("prefer {partition} {replica:?}"),
            move |s| {
                let (k, o, p, r) = (k.clone(), o.clone(), p.clone(), r.clone());
                async move { s.prefer(&k, o.as_deref(), &p, r.as_deref()).await }
            },
        )
        .await
    }

    async fn owner(
        &self,
        keys: &GroupKeys,
        partition: &str,
    ) -> Result<Option<PartitionOwner>, StoreError> {
        let (k, p) = (keys.clone(), partition.to_owned());
        self.call(
            || format!("owner {partition}"),
            move |s| {
                let (k, p) = (k.clone(), p.clone());
                async move { s.owner(&k, &p).await }
            },
        )
        .await
    }

    async fn moves(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Move>, StoreError> {
        let (k, a) = (keys.clone(), after.map(str::to_owned));
        self.call(
            || format!("moves after {after:?}"),
            move |s| {
                let (k, a) = (k.clone(), a.clone());
                async move { s.moves(&k, a.as_deref(), limit).await }
            },
        )
        .await
    }

    async fn newest_moves(&self, keys: &GroupKeys, limit: usize) -> Result<Vec<Move>, StoreError> {
        let k = keys.clone();
        self.call(
            || format!("newest {limit} moves"),
            move |s| {
                let k = k.clone();
                async move { s.newest_moves(&k, limit).await }
            },
        )
        .await
    }

    async fn routes(
        &self,
        keys: &GroupKeys,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Option<RouteRead>, StoreError> {
        let (k, a) = (keys.clone(), after.map(str::to_owned));
        self.call(
            || "routes".to_owned(),
            move |s| {
                let (k, a) = (k.clone(), a.clone());
                async move { s.routes(&k, a.as_deref(), limit).await }
            },
        )
        .await
    }

    async fn take_budget(
        &self,
        keys: &GroupKeys,
        want: usize,
        budget: u32,
        window: Duration,
    ) -> Result<usize, StoreError> {
        let k = keys.clone();
        self.call(
            || format!("take_budget {want} of {budget}"),
            move |s| {
                let k = k.clone();
                async move { s.take_budget(&k, want, budget, window).await }
            },
        )
        .await
    }

    async fn status_head(&self, keys: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
        let k = keys.clone();
        self.call(String::new, move |s| {
            let k = k.clone();
            async move { s.status_head(&k).await }
        })
        .await
    }

    async fn status_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PartitionOwner>, StoreError> {
        let k = keys.clone();
        self.call(String::new, move |s| {
            let k = k.clone();
            async move { s.status_page(&k, offset, limit).await }
        })
        .await
    }

    async fn publish(&self, keys: &GroupKeys, message: &str) -> Result<(), StoreError> {
        let (k, m) = (keys.clone(), message.to_owned());
        self.call(
            || format!("publish {message}"),
            move |s| {
                let (k, m) = (k.clone(), m.clone());
                async move { s.publish(&k, &m).await }
            },
        )
        .await
    }

    fn notices(&self, keys: &GroupKeys) -> broadcast::Receiver<String> {
        self.store.notices(keys)
    }

    async fn warnings(&self) -> Result<Vec<BackendWarning>, StoreError> {
        Ok(Vec::new())
    }
}
