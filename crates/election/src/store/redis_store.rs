//! The Redis lease store.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_redis::{Pool, PoolConfig, Runtime, Timeouts};
use futures::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use tokio::sync::{Notify, OnceCell, broadcast, mpsc};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, warn};

use super::notify::Notifiers;
use super::scripts::{ACQUIRE, LEADER, LuaScript, RELEASE, RENEW};
use super::{Acquire, BackendWarning, LeaderInfo, LeaseStore};
use crate::error::StoreError;
use crate::fence::Fence;
use crate::keys::{DutyKeys, replica_of_token};

/// Builder of a [`RedisStore`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing by itself; call .build()"]
pub struct RedisStoreBuilder {
    url: String,
    call_timeout: Duration,
    pool_size: usize,
}

impl RedisStoreBuilder {
    /// Timeout of each Redis call, connection set-up and pool checkout. Default: 1 s.
    /// Electors cap their own calls further by the time left on their lease.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Largest number of pooled connections. Default: 4. The store multiplexes every
    /// call over one connection and takes another from the pool only after a fault.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Creates the pool. Connects lazily: a server that is down now is not an error.
    ///
    /// # Errors
    /// [`StoreError::Connection`] if the URL is malformed.
    pub fn build(self) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(self.url.as_str())
            .map_err(|e| StoreError::Connection(e.to_string()))?;
        let conn_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.call_timeout))
            .set_response_timeout(Some(self.call_timeout));
        let manager = deadpool_redis::Manager::new_with_config(self.url.as_str(), conn_config)
            .map_err(|e| StoreError::Connection(e.to_string()))?;
        let mut pool_config = PoolConfig::new(self.pool_size);
        pool_config.timeouts = Timeouts {
            wait: Some(self.call_timeout),
            create: Some(self.call_timeout),
            recycle: Some(self.call_timeout),
        };
        let pool = Pool::builder(manager)
            .config(pool_config)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Connection(e.to_string()))?;
        Ok(RedisStore::from_parts(pool, client, self.call_timeout))
    }
}

/// A [`LeaseStore`] on one Redis server (or a proxy in front of one).
///
/// Cheap to clone; clones share the connection, the pool and one pub/sub subscription,
/// so create one store per process and hand clones to every elector.
///
/// Calls are multiplexed over one connection. After a timeout or a connection error
/// that connection goes back to the deadpool pool, which health-checks it (PING) before
/// handing it out again and replaces it if it is dead; so a black-holed or restarted
/// server never leaves the store stuck on a dead socket.
#[derive(Debug, Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    call_timeout: Duration,
    // The cached connection and its generation; a std mutex never held across awaits.
    conn: Mutex<Option<(u64, deadpool_redis::Connection)>>,
    generation: std::sync::atomic::AtomicU64,
    notifiers: Arc<Notifiers>,
    subscriber: Subscriber,
    // The self-check runs once per store, however many electors share it.
    checked: OnceCell<Vec<BackendWarning>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("pool", &self.pool.status())
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Subscriber {
    channels: Mutex<HashSet<String>>,
    tx: mpsc::UnboundedSender<String>,
    // Stops the subscriber task when the last store clone is dropped.
    _stop: DropGuard,
}

/// Marks a call in flight; if it is dropped before `done()` (a timeout from outside)
/// or finishes with a connection fault, the connection is handed back for a health check.
struct InFlight<'a> {
    store: &'a RedisStore,
    generation: u64,
    done: bool,
}

impl InFlight<'_> {
    fn finish<T>(mut self, result: Result<T, redis::RedisError>) -> Result<T, StoreError> {
        self.done = true;
        result.map_err(|e| {
            let err = StoreError::from(e);
            if err.is_retryable() || matches!(err, StoreError::Protocol(_)) {
                self.store.invalidate(self.generation);
            }
            err
        })
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.store.invalidate(self.generation);
        }
    }
}

impl RedisStore {
    /// Starts a builder for the server at `url` (`redis://host:port/db`).
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            call_timeout: Duration::from_secs(1),
            pool_size: 4,
        }
    }

    /// A store with default settings.
    ///
    /// # Errors
    /// [`StoreError::Connection`] if the URL is malformed.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).build()
    }

    /// A store on a pool you built (set its `wait`/`create`/`recycle` timeouts: deadpool
    /// leaves them unset, and a checkout could then wait forever). `pubsub` is the
    /// client used for the one release-notification subscription.
    pub fn from_parts(pool: Pool, pubsub: redis::Client, call_timeout: Duration) -> Self {
        let notifiers = Arc::new(Notifiers::default());
        let stop = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(subscriber_loop(
            pubsub,
            notifiers.clone(),
            rx,
            stop.clone(),
            call_timeout,
        ));
        Self {
            inner: Arc::new(Inner {
                pool,
                call_timeout,
                conn: Mutex::new(None),
                generation: Default::default(),
                notifiers,
                checked: OnceCell::new(),
                subscriber: Subscriber {
                    channels: Mutex::new(HashSet::new()),
                    tx,
                    _stop: stop.drop_guard(),
                },
            }),
        }
    }

    /// The pool behind this store (for your own commands, e.g. fenced writes).
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// The per-call timeout this store was built with.
    pub fn call_timeout(&self) -> Duration {
        self.inner.call_timeout
    }

    /// A connection for one call, with its in-flight guard.
    async fn conn(&self) -> Result<(MultiplexedConnection, InFlight<'_>), StoreError> {
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
                let generation = self
                    .inner
                    .generation
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
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

    fn invalidate(&self, generation: u64) {
        let mut slot = self
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_some_and(|(g, _)| *g == generation) {
            debug!("dropping the redis connection after a fault");
            *slot = None;
        }
    }

    /// Runs a script under the store's call timeout: `EVALSHA`, then `EVAL` on
    /// `NOSCRIPT`. A call that fails because the cached connection had dropped is
    /// retried once on a fresh one, so the script must be safe to run twice (every
    /// Leasehold script is idempotent for its token).
    ///
    /// # Errors
    /// The [`StoreError`] of the call.
    ///
    /// # Cancel safety
    /// Dropping the future hands the connection back for a health check; the script
    /// may or may not have run.
    pub async fn eval(
        &self,
        script: &LuaScript,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Value, StoreError> {
        let timeout = self.inner.call_timeout;
        let call = async {
            let mut attempt = 0;
            loop {
                let (mut conn, flight) = self.conn().await?;
                let mut result = script
                    .evalsha(keys, args)
                    .query_async::<Value>(&mut conn)
                    .await;
                if matches!(&result, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
                {
                    debug!("script cache was flushed; sending the script body");
                    result = script
                        .eval(keys, args)
                        .query_async::<Value>(&mut conn)
                        .await;
                }
                let dropped =
                    matches!(&result, Err(e) if e.is_connection_dropped() || e.is_io_error());
                let result = flight.finish(result);
                if dropped && attempt == 0 {
                    attempt += 1;
                    continue;
                }
                return result;
            }
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(timeout))?
    }

    async fn command(&self, cmd: &redis::Cmd) -> Result<Value, StoreError> {
        let timeout = self.inner.call_timeout;
        let call = async {
            let (mut conn, flight) = self.conn().await?;
            let result = cmd.query_async::<Value>(&mut conn).await;
            flight.finish(result)
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(timeout))?
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
    }
}

/// Parses an integer reply (number or decimal string).
pub(crate) fn parse_u64(v: &Value) -> Result<u64, StoreError> {
    match v {
        Value::Int(i) => {
            u64::try_from(*i).map_err(|_| StoreError::Protocol(format!("negative {i}")))
        }
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                StoreError::Protocol(format!("not an integer: {}", String::from_utf8_lossy(b)))
            }),
        Value::SimpleString(s) => s
            .parse()
            .map_err(|_| StoreError::Protocol(format!("not an integer: {s}"))),
        Value::Nil => Ok(0),
        other => Err(StoreError::Protocol(format!(
            "expected an integer, got {other:?}"
        ))),
    }
}

fn parse_i64(v: &Value) -> Result<i64, StoreError> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(StoreError::Protocol(format!(
            "expected an integer, got {other:?}"
        ))),
    }
}

fn parse_string(v: &Value) -> Result<Option<String>, StoreError> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(b) => Ok(Some(String::from_utf8_lossy(b).into_owned())),
        Value::SimpleString(s) => Ok(Some(s.clone())),
        other => Err(StoreError::Protocol(format!(
            "expected a string, got {other:?}"
        ))),
    }
}

fn array(v: Value, len: usize) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(items) if items.len() >= len => Ok(items),
        other => Err(StoreError::Protocol(format!(
            "expected an array of {len}, got {other:?}"
        ))),
    }
}

/// PTTL reply → time left; -1 (no expiry) and -2 (gone) → `None`/zero.
fn remaining(pttl: i64) -> Option<Duration> {
    match pttl {
        -1 => None,
        p if p < 0 => Some(Duration::ZERO),
        p => Some(Duration::from_millis(p.unsigned_abs())),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl LeaseStore for RedisStore {
    async fn acquire(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
        floor: Fence,
    ) -> Result<Acquire, StoreError> {
        let (lease_ms, floor) = (millis(lease).to_string(), floor.0.to_string());
        let reply = self
            .eval(
                &ACQUIRE,
                &[&keys.lease, &keys.fence],
                &[token, &lease_ms, &floor],
            )
            .await?;
        let items = array(reply, 3)?;
        if parse_i64(&items[0])? == 1 {
            Ok(Acquire::Won {
                fence: Fence(parse_u64(&items[1])?),
                regressed: parse_i64(&items[2])? == 1,
            })
        } else {
            let items = array(Value::Array(items), 4)?;
            let holder = parse_string(&items[1])?.unwrap_or_default();
            Ok(Acquire::Lost {
                holder: replica_of_token(&holder).to_owned(),
                remaining: remaining(parse_i64(&items[2])?),
                fence: Fence(parse_u64(&items[3])?),
            })
        }
    }

    async fn renew(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let lease_ms = millis(lease).to_string();
        let reply = self
            .eval(&RENEW, &[&keys.lease], &[token, &lease_ms])
            .await?;
        Ok(parse_i64(&reply)? == 1)
    }

    async fn release(&self, keys: &DutyKeys, token: &str) -> Result<bool, StoreError> {
        let reply = self
            .eval(&RELEASE, &[&keys.lease], &[token, &keys.channel])
            .await?;
        Ok(parse_i64(&reply)? == 1)
    }

    async fn leader(&self, keys: &DutyKeys) -> Result<Option<LeaderInfo>, StoreError> {
        let items = array(
            self.eval(&LEADER, &[&keys.lease, &keys.fence], &[]).await?,
            3,
        )?;
        let Some(token) = parse_string(&items[0])? else {
            return Ok(None);
        };
        Ok(Some(LeaderInfo {
            replica_id: replica_of_token(&token).to_owned(),
            remaining: remaining(parse_i64(&items[1])?),
            fence: Fence(parse_u64(&items[2])?),
        }))
    }

    fn release_notifier(&self, keys: &DutyKeys) -> Arc<Notify> {
        self.ensure_subscribed(&keys.channel);
        self.inner.notifiers.get(&keys.lease)
    }

    fn release_events(&self, keys: &DutyKeys) -> broadcast::Receiver<String> {
        self.ensure_subscribed(&keys.channel);
        self.inner.notifiers.events()
    }

    async fn self_check(&self) -> Result<Vec<BackendWarning>, StoreError> {
        self.inner
            .checked
            .get_or_try_init(|| self.read_settings())
            .await
            .cloned()
    }
}

impl RedisStore {
    async fn read_settings(&self) -> Result<Vec<BackendWarning>, StoreError> {
        let mut warnings = Vec::new();
        let get = |name: &str| {
            let mut cmd = redis::cmd("CONFIG");
            cmd.arg("GET").arg(name);
            cmd
        };
        let value = |v: Value| -> Result<String, StoreError> {
            let items = array(v, 2)?;
            Ok(parse_string(&items[1])?.unwrap_or_default())
        };
        let policy = value(self.command(&get("maxmemory-policy")).await?)?;
        if policy.starts_with("allkeys-") || policy.starts_with("volatile-") {
            warnings.push(BackendWarning::EvictionPolicy(policy));
        }
        let aof = value(self.command(&get("appendonly")).await?)?;
        let save = value(self.command(&get("save")).await?)?;
        if aof != "yes" && save.trim().is_empty() {
            warnings.push(BackendWarning::NoPersistence);
        }
        Ok(warnings)
    }
}

/// Keeps one pub/sub subscription per store alive: reconnects with backoff, resubscribes,
/// PINGs so a black-holed link is noticed, and wakes every follower after a reconnect
/// (a release may have been missed; followers then re-check at once).
async fn subscriber_loop(
    client: redis::Client,
    notifiers: Arc<Notifiers>,
    mut new_channels: mpsc::UnboundedReceiver<String>,
    stop: CancellationToken,
    call_timeout: Duration,
) {
    let mut channels: Vec<String> = Vec::new();
    let mut backoff = Duration::from_millis(50);
    let ping_every = Duration::from_secs(1).max(call_timeout);
    loop {
        // Wait for the first channel before connecting at all.
        if channels.is_empty() {
            tokio::select! {
                () = stop.cancelled() => return,
                ch = new_channels.recv() => match ch {
                    Some(ch) => channels.push(ch),
                    None => return,
                },
            }
        }
        let connected = async {
            let pubsub = client.get_async_pubsub().await?;
            let (mut sink, stream) = pubsub.split();
            sink.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>((sink, stream))
        };
        let (mut sink, mut stream) = tokio::select! {
            () = stop.cancelled() => return,
            r = tokio::time::timeout(call_timeout, connected) => match r {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => {
                    debug!(error = %e, "release subscription failed; retrying");
                    sleep_or_stop(&stop, &mut backoff).await;
                    continue;
                }
                Err(_) => {
                    debug!("release subscription timed out; retrying");
                    sleep_or_stop(&stop, &mut backoff).await;
                    continue;
                }
            },
        };
        if stop.is_cancelled() {
            return;
        }
        backoff = Duration::from_millis(50);
        notifiers.wake_all();
        let mut ping = tokio::time::interval(ping_every);
        ping.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                msg = stream.next() => match msg {
                    Some(msg) => {
                        if let Ok(key) = msg.get_payload::<String>() {
                            notifiers.wake(&key);
                        }
                    }
                    None => {
                        debug!("release subscription closed; reconnecting");
                        break;
                    }
                },
                ch = new_channels.recv() => match ch {
                    Some(ch) => {
                        let ok = tokio::time::timeout(call_timeout, sink.subscribe(&ch)).await;
                        channels.push(ch);
                        if !matches!(ok, Ok(Ok(()))) {
                            break;
                        }
                    }
                    None => return,
                },
                _ = ping.tick() => {
                    let ok = tokio::time::timeout(call_timeout, sink.ping::<Value>()).await;
                    if !matches!(ok, Ok(Ok(_))) {
                        warn!("release subscription stopped answering; reconnecting");
                        break;
                    }
                }
            }
        }
    }
}

async fn sleep_or_stop(stop: &CancellationToken, backoff: &mut Duration) {
    let d = *backoff;
    *backoff = (*backoff * 2).min(Duration::from_secs(2));
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(d) => {}
    }
}
