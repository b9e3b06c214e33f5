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
use crate::store::ops::Op;
use crate::store::protocol::Protocol;

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
    async fn run<O: Op>(&self, keys: &GroupKeys, op: &O) -> Result<O::Reply, StoreError> {
        let (k, o) = (keys.clone(), op.clone());
        self.call(
            || format!("{op:?}"),
            move |s| {
                let (k, o) = (k.clone(), o.clone());
                async move { s.run(&k, &o).await }
            },
        )
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
