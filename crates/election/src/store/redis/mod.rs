//! The Redis lease store: [`RedisStore`] and its builder, connections, release
//! subscription, scripts and reply parser.

mod builder;
mod conn;
mod lease;
mod parse;
mod pubsub;
pub(crate) mod replies;
pub(crate) mod scripts;

pub use self::builder::RedisStoreBuilder;
pub use self::parse::Parse;
pub use self::replies::DutyKeysRead;
pub use self::scripts::{FENCE_LUA, LIFETIME_LUA, LuaScript};

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool::Runtime;
use deadpool::managed::{Object, Pool, PoolConfig, Timeouts};
use futures::future::BoxFuture;
use redis::{AsyncConnectionConfig, Value};
use tokio::sync::{OnceCell, mpsc};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::debug;

use self::conn::{Conn, Manager, Target};
use self::lease::Unanswered;
use self::pubsub::{Timing, subscriber_loop};
use super::BackendWarning;
use super::notify::Notifiers;
use crate::error::{BuildError, StoreError};

/// A [`LeaseStore`](super::LeaseStore) on Redis: one server (or a proxy in front of
/// one), the primary of a Sentinel-managed group, or a Redis Cluster.
///
/// ```no_run
/// # fn demo() -> Result<(), leasehold_election::BuildError> {
/// use leasehold_election::RedisStore;
///
/// // One server; `rediss://` for TLS, `user:password@` for an ACL user.
/// let single = RedisStore::connect("redis://leasehold:secret@127.0.0.1:6379/")?;
/// // The primary named `leasehold` by these Sentinels, followed across failovers.
/// let sentinel = RedisStore::sentinel_builder(
///     "leasehold",
///     ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/", "redis://10.0.0.3:26379/"],
/// )
/// .primary_url("redis://leasehold:secret@primary/")
/// .build()?;
/// // A Redis Cluster, from any of its nodes.
/// let cluster = RedisStore::cluster_builder(["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"])
///     .build()?;
/// # Ok(()) }
/// ```
///
/// Cheap to clone; clones share the connection, the pool and one pub/sub subscription,
/// so create one store per process and hand clones to every elector.
///
/// Calls are multiplexed over one connection. After a timeout or a connection error
/// that connection goes back to the pool, which health-checks it (PING) before handing
/// it out again and replaces it if it is dead; so a black-holed or restarted server
/// never leaves the store stuck on a dead socket. A connection to a node that answers
/// `READONLY` (a demoted primary) is discarded with every idle one, so the next call
/// asks Sentinel again. A cluster connection is discarded after any fault and rebuilt
/// from the seed nodes.
#[derive(Debug, Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
    /// Replica acknowledgements this copy waits for after its writes, instead of the
    /// builder's `wait_for_replicas` ([`LeaseStore::with_replica_acks`]).
    acks: Option<(usize, Duration)>,
}

/// What a store is built from, kept to build a copy with connections of its own
/// ([`LeaseStore::detached`](super::LeaseStore::detached)).
#[derive(Clone)]
struct Settings {
    target: Arc<Target>,
    config: AsyncConnectionConfig,
    pool_size: usize,
    call_timeout: Duration,
    wait_for_replicas: Option<(usize, Duration)>,
    /// What every connection is named (`CLIENT SETNAME`), if anything.
    client_name: Option<Arc<str>>,
    /// How often the pub/sub connection is PINGed while quiet.
    subscription_ping: Duration,
}

struct Inner {
    settings: Settings,
    pool: Pool<Manager>,
    cluster: bool,
    call_timeout: Duration,
    wait_for_replicas: Option<(usize, Duration)>,
    // The cached connection and its generation; a std mutex never held across awaits.
    conn: Mutex<Option<(u64, Object<Manager>)>>,
    generation: AtomicU64,
    notifiers: Arc<Notifiers>,
    subscriber: Subscriber,
    // The self-check runs once per store (and its detached copies), however many
    // electors share it.
    checked: Arc<OnceCell<Vec<BackendWarning>>>,
    unanswered: Unanswered,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("pool", &self.pool.status())
            .field("cluster", &self.cluster)
            .field("call_timeout", &self.call_timeout)
            .field("wait_for_replicas", &self.wait_for_replicas)
            .finish_non_exhaustive()
    }
}

struct Subscriber {
    channels: Mutex<HashSet<String>>,
    tx: mpsc::UnboundedSender<String>,
    /// The subscriber task, until it is spawned: on the runtime of the first elector
    /// that asks for notifications, so a store can be built outside a runtime.
    start: Mutex<Option<BoxFuture<'static, ()>>>,
    // Stops the subscriber task when the last store clone is dropped.
    _stop: DropGuard,
}

/// What to do with the cached connection after a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Hand it back to the pool, which health-checks it before reuse.
    Recycle,
    /// Drop it for good (and every idle one): it points at the wrong node.
    Discard,
}

/// Marks a call in flight; if it is dropped before `finish()` (a timeout from outside)
/// or finishes with a connection fault, the connection is handed back for a health check
/// (discarded, on a cluster or after `READONLY`).
struct InFlight<'a> {
    store: &'a RedisStore,
    generation: u64,
    done: bool,
}

impl InFlight<'_> {
    fn finish<T>(mut self, result: Result<T, redis::RedisError>) -> Result<T, StoreError> {
        self.done = true;
        result.map_err(|e| {
            let readonly = is_readonly(&e);
            let err = StoreError::from(e);
            if readonly {
                self.store.invalidate(self.generation, Fault::Discard);
            } else if err.is_retryable() || matches!(err, StoreError::Protocol(_)) {
                self.store.invalidate(self.generation, self.store.fault());
            }
            err
        })
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.store.invalidate(self.generation, self.store.fault());
        }
    }
}

/// The node is no (longer a) writable primary: a demoted primary answers `READONLY`, a
/// primary cut off from its replicas under `min-replicas-to-write` answers `NOREPLICAS`.
/// Its connections are discarded, so the next one is resolved afresh (via Sentinel).
fn is_readonly(e: &redis::RedisError) -> bool {
    matches!(e.code(), Some("READONLY" | "NOREPLICAS"))
}

impl RedisStore {
    /// Starts a builder for one server at `url`: `redis://[user:password@]host:port[/db]`,
    /// or `rediss://...` for TLS (feature `tls`).
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder::node(url.into())
    }

    /// Starts a builder for the primary that the Sentinels at `sentinel_urls` name for
    /// `master_name`. The store asks them (in order) on every (re)connect, checks the
    /// answer with `ROLE`, and so follows failovers. Set the primary's credentials and
    /// TLS with [`RedisStoreBuilder::primary_url`].
    pub fn sentinel_builder(
        master_name: impl Into<String>,
        sentinel_urls: impl IntoIterator<Item = impl Into<String>>,
    ) -> RedisStoreBuilder {
        RedisStoreBuilder::sentinel(
            master_name.into(),
            sentinel_urls.into_iter().map(Into::into).collect(),
        )
    }

    /// Starts a builder for a Redis Cluster reachable through any of `node_urls` (give
    /// several: they are the seeds for every reconnect and for the release
    /// subscription). Credentials and TLS come from the URLs, which must agree.
    ///
    /// Every script's keys share one hash tag (a duty's, or a partition group's), so
    /// each call runs on the one node that owns that slot; different duties and groups
    /// spread over the primaries.
    pub fn cluster_builder(
        node_urls: impl IntoIterator<Item = impl Into<String>>,
    ) -> RedisStoreBuilder {
        RedisStoreBuilder::cluster(node_urls.into_iter().map(Into::into).collect())
    }

    /// A store on one server with default settings. Connects lazily, so it works outside
    /// a tokio runtime too (the first call must run inside one).
    ///
    /// # Errors
    /// [`BuildError::Url`] if the URL is malformed, [`BuildError::TlsNotEnabled`] for a
    /// `rediss://` URL without the `tls` feature.
    pub fn connect(url: &str) -> Result<Self, BuildError> {
        Self::builder(url).build()
    }

    fn new(
        settings: Settings,
        checked: Arc<OnceCell<Vec<BackendWarning>>>,
    ) -> Result<Self, BuildError> {
        let Settings {
            target,
            config,
            pool_size,
            call_timeout,
            wait_for_replicas,
            client_name,
            subscription_ping,
        } = settings.clone();
        let manager = Manager {
            target: target.clone(),
            config: config.clone(),
            client_name: client_name.clone(),
        };
        let mut pool_config = PoolConfig::new(pool_size);
        pool_config.timeouts = Timeouts {
            wait: Some(call_timeout),
            create: Some(call_timeout),
            recycle: Some(call_timeout),
        };
        let pool = Pool::builder(manager)
            .config(pool_config)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| BuildError::Pool(Arc::new(e)))?;
        let notifiers = Arc::new(Notifiers::default());
        let stop = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let cluster = target.is_cluster();
        let start = Box::pin(subscriber_loop(
            target,
            config,
            client_name,
            notifiers.clone(),
            rx,
            stop.clone(),
            Timing {
                call_timeout,
                ping_every: subscription_ping,
            },
        ));
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                pool,
                cluster,
                call_timeout,
                wait_for_replicas,
                conn: Mutex::new(None),
                generation: AtomicU64::default(),
                notifiers,
                checked,
                unanswered: Unanswered::default(),
                subscriber: Subscriber {
                    channels: Mutex::new(HashSet::new()),
                    tx,
                    start: Mutex::new(Some(start)),
                    _stop: stop.drop_guard(),
                },
            }),
            acks: None,
        })
    }

    /// A store with the same settings and a pool, subscription and connections of its
    /// own, made on the runtime that first uses them (see
    /// [`LeaseStore::detached`](super::LeaseStore::detached)).
    fn detached_copy(&self) -> Self {
        let mut copy = Self::new(self.inner.settings.clone(), self.inner.checked.clone())
            .unwrap_or_else(|_| self.clone());
        copy.acks = self.acks;
        copy
    }

    /// A copy (same connections) whose writes count only once `replicas` replicas
    /// acknowledge them (`WAIT replicas timeout`), with `timeout` capped at half the
    /// call timeout so that the script and the wait fit in one call. See
    /// [`LeaseStore::with_replica_acks`].
    fn acked_copy(&self, replicas: usize, timeout: Duration) -> Self {
        let mut copy = self.clone();
        copy.acks = (replicas > 0).then(|| (replicas, timeout.min(self.inner.call_timeout / 2)));
        copy
    }

    /// The replica acknowledgements this store waits for after a write, if any.
    fn replication_wait(&self) -> Option<(usize, Duration)> {
        self.acks.or(self.inner.wait_for_replicas)
    }

    /// The per-call timeout this store was built with.
    pub fn call_timeout(&self) -> Duration {
        self.inner.call_timeout
    }

    /// Runs one command of your own under the store's call timeout, on the store's
    /// connection (routed by its first key on a cluster; a command without keys goes
    /// wherever the cluster client sends it).
    ///
    /// # Errors
    /// The [`StoreError`] of the call.
    ///
    /// # Panics
    /// Never; outside a tokio runtime the call fails.
    ///
    /// # Cancel safety
    /// If the future is dropped, the command may or may not have run.
    pub async fn query(&self, cmd: &redis::Cmd) -> Result<Value, StoreError> {
        let timeout = self.inner.call_timeout;
        let call = async {
            let (mut conn, flight) = self.conn().await?;
            let result = cmd.query_async::<Value>(&mut conn).await;
            flight.finish(result)
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(timeout))?
            .map_err(|e| e.timed_out_after(timeout))
    }

    /// Whether the store is on a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.cluster
    }

    /// Runs `cmd` on the `index`-th primary of the cluster (by address, in order), under
    /// the call timeout: its reply (`None` past the last primary) and how many
    /// primaries there are.
    pub(crate) async fn on_primary(
        &self,
        index: usize,
        cmd: &redis::Cmd,
    ) -> Result<(Option<Value>, usize), StoreError> {
        let timeout = self.inner.call_timeout;
        let call = async {
            let (mut conn, flight) = self.conn().await?;
            let result = conn.on_primary(index, cmd).await;
            flight.finish(result)
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(timeout))?
            .map_err(|e| e.timed_out_after(timeout))
    }

    fn fault(&self) -> Fault {
        if self.inner.cluster {
            Fault::Discard
        } else {
            Fault::Recycle
        }
    }

    /// A connection for one call, with its in-flight guard.
    async fn conn(&self) -> Result<(Conn, InFlight<'_>), StoreError> {
        let cached = self
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(g, c)| (*g, (**c).clone()));
        let (generation, conn) = match cached {
            Some(c) => c,
            None => {
                let pooled = tokio::time::timeout(self.inner.call_timeout, self.inner.pool.get())
                    .await
                    .map_err(|_| StoreError::Timeout(self.inner.call_timeout))??;
                let generation = self.inner.generation.fetch_add(1, Ordering::Relaxed) + 1;
                let conn = (*pooled).clone();
                *self
                    .inner
                    .conn
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some((generation, pooled));
                (generation, conn)
            }
        };
        Ok((
            conn,
            InFlight {
                store: self,
                generation,
                done: false,
            },
        ))
    }

    fn invalidate(&self, generation: u64, fault: Fault) {
        let taken = {
            let mut slot = self
                .inner
                .conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if slot.as_ref().is_some_and(|(g, _)| *g == generation) {
                slot.take()
            } else {
                None
            }
        };
        if let Some((_, conn)) = taken {
            match fault {
                Fault::Recycle => debug!("handing the redis connection back after a fault"),
                Fault::Discard => {
                    debug!("discarding the redis connection after a fault");
                    drop(Object::take(conn));
                    if !self.inner.cluster {
                        // Idle connections point at the same demoted node.
                        self.inner.pool.retain(|_, _| false);
                    }
                }
            }
        }
    }

    /// Runs a script under the store's call timeout: `EVALSHA`, then `EVAL` on
    /// `NOSCRIPT`. A call refused by a demoted primary (`READONLY`: it did not run) is
    /// sent again on a fresh connection; so is an [idempotent](LuaScript::idempotent)
    /// script whose connection broke (it may or may not have run). A script that must
    /// [run once](LuaScript::run_once) fails instead: its outcome is unknown. On a
    /// cluster the call goes to the node that owns the slot of the first key; every key
    /// must share its hash tag.
    ///
    /// # Errors
    /// The [`StoreError`] of the call.
    ///
    /// # Panics
    /// Never; outside a tokio runtime the call fails.
    ///
    /// # Cancel safety
    /// Dropping the future hands the connection back for a health check; the script
    /// may or may not have run.
    // Hidden: its script type is plumbing (`ext::LuaScript`) for Leasehold's own
    // crates, not part of the public API.
    #[doc(hidden)]
    pub async fn eval(
        &self,
        script: &LuaScript,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Value, StoreError> {
        self.eval_then_wait(script, keys, args, |_| false, |_| {})
            .await
    }

    /// [`eval`](Self::eval) with arguments that are bytes, not text (state a partition
    /// term hands off): [`crate::ext::eval_bytes`].
    ///
    /// # Errors
    /// The [`StoreError`] of the call.
    pub(crate) async fn eval_bytes(
        &self,
        script: &LuaScript,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value, StoreError> {
        self.eval_then_wait(script, keys, args, |_| false, |_| {})
            .await
    }

    /// [`eval`](Self::eval) of a script that grants or extends a lease (a partition
    /// group's heartbeat or claim), then, if replication waits are on
    /// ([`LeaseStore::with_replica_acks`], `wait_for_replicas`), `WAIT` on the same
    /// connection: fewer acknowledgements than wanted are
    /// [`StoreError::Replication`]: [`crate::ext::eval_acked`].
    pub(crate) async fn eval_acked(
        &self,
        script: &LuaScript,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Value, StoreError> {
        self.eval_then_wait(script, keys, args, |_| true, |_| {})
            .await
    }

    /// [`eval`](Self::eval), then, if replication waits are on and `wrote` says the
    /// reply is a successful write, `WAIT` on the same connection. `on_send` sees each
    /// connection a call goes out on, just before it is sent.
    async fn eval_then_wait(
        &self,
        script: &LuaScript,
        keys: &[&str],
        args: &[impl AsRef<[u8]> + Sync],
        wrote: fn(&Value) -> bool,
        on_send: impl Fn(&Conn),
    ) -> Result<Value, StoreError> {
        let timeout = self.inner.call_timeout;
        let call = async {
            let mut attempt = 0;
            loop {
                let (mut conn, flight) = self.conn().await?;
                on_send(&conn);
                let result = run_script(&mut conn, script, keys, args).await;
                let retry = matches!(&result, Err(e) if is_readonly(e)
                    || (script.is_idempotent() && (e.is_connection_dropped() || e.is_io_error())));
                if let (Ok(reply), Some((replicas, wait)), Some(key)) =
                    (&result, self.replication_wait(), keys.first())
                    && wrote(reply)
                {
                    let acked = conn.wait(key, replicas, wait).await;
                    let acked = flight.finish(acked)?;
                    let acked = Parse::new("wait", acked).next_u64()?;
                    if acked < replicas as u64 {
                        return Err(StoreError::Replication {
                            acked,
                            wanted: replicas as u64,
                        });
                    }
                    return result.map_err(StoreError::from);
                }
                let result = flight.finish(result);
                if retry && attempt == 0 {
                    attempt += 1;
                    continue;
                }
                return result;
            }
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(timeout))?
            .map_err(|e| e.timed_out_after(timeout))
    }

    async fn command(&self, cmd: &redis::Cmd) -> Result<Value, StoreError> {
        let timeout = self.inner.call_timeout;
        let call = async {
            let (mut conn, flight) = self.conn().await?;
            let result = conn.query_one_node(cmd).await;
            flight.finish(result)
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(timeout))?
            .map_err(|e| e.timed_out_after(timeout))
    }

    fn unanswered(&self) -> &Unanswered {
        &self.inner.unanswered
    }

    fn ensure_subscribed(&self, channel: &str) {
        let mut channels = self
            .inner
            .subscriber
            .channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if channels.insert(channel.to_owned()) {
            let _ = self.inner.subscriber.tx.send(channel.to_owned());
        }
        drop(channels);
        let mut start = self
            .inner
            .subscriber
            .start
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if start.is_some() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    if let Some(task) = start.take() {
                        runtime.spawn(task);
                    }
                }
                // Asked outside a runtime: start on the next request from inside one
                // (the channel waits in the queue).
                Err(_) => debug!("release subscription deferred: no tokio runtime here"),
            }
        }
    }
}

/// `EVALSHA`, then `EVAL` of the body if the server answers `NOSCRIPT`.
async fn run_script(
    conn: &mut Conn,
    script: &LuaScript,
    keys: &[&str],
    args: &[impl AsRef<[u8]> + Sync],
) -> redis::RedisResult<Value> {
    let result = script
        .evalsha(keys, args)
        .query_async::<Value>(&mut *conn)
        .await;
    match result {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            debug!("script cache was flushed; sending the script body");
            script.eval(keys, args).query_async::<Value>(conn).await
        }
        other => other,
    }
}
