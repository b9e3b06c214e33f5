//! The release subscription of a [`super::RedisStore`]: one pub/sub connection per store.
//!
//! On Sentinel it follows the primary; on a cluster it subscribes on one seed node at a
//! time (a `PUBLISH`, even inside a script, reaches every node of a Redis 7 cluster).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{MultiplexedConnection, PubSubSink, PubSubStream};
use redis::{
    AsyncConnectionConfig, Client, ProtocolVersion, PushInfo, PushKind, RedisError, Value,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::conn::{Target, set_name};
use crate::backoff::Backoff;
use crate::store::notify::Notifiers;

/// First delay before the subscription tries to reconnect.
const RECONNECT_INITIAL: Duration = Duration::from_millis(50);
/// Longest delay between reconnect attempts (each drawn from the upper half of its
/// step). Short, because the reconnect is what finds a promoted primary and wakes the
/// followers: their first acquire there starts its hold (nothing is granted for a lease
/// after a change of server), so every delay here is leaderless time after a failover.
/// One attempt per store per 50-100 ms during an outage.
const RECONNECT_MAX: Duration = Duration::from_millis(100);

/// The subscription's timeouts: of each call, and between PINGs of a quiet link.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    pub(super) call_timeout: Duration,
    pub(super) ping_every: Duration,
}

/// Keeps one pub/sub subscription per store alive: reconnects with backoff, resubscribes,
/// PINGs so a black-holed link is noticed, and wakes every follower after a reconnect
/// (a release may have been missed; followers then re-check at once).
pub(super) async fn subscriber_loop(
    target: Arc<Target>,
    config: AsyncConnectionConfig,
    name: Option<Arc<str>>,
    notifiers: Arc<Notifiers>,
    mut new_channels: mpsc::UnboundedReceiver<String>,
    stop: CancellationToken,
    Timing {
        call_timeout,
        ping_every,
    }: Timing,
) {
    let mut channels: Vec<String> = Vec::new();
    let mut attempt = 0usize;
    let mut backoff = Backoff::new(RECONNECT_INITIAL, RECONNECT_MAX);
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
        attempt = attempt.wrapping_add(1);
        let connected = async {
            let client = target.pubsub_client(attempt, &config).await?;
            Subscription::open(&client, &config, name.as_deref(), &channels).await
        };
        let mut sub = tokio::select! {
            () = stop.cancelled() => return,
            r = tokio::time::timeout(call_timeout, connected) => match r {
                Ok(Ok(sub)) => sub,
                Ok(Err(e)) => {
                    debug!(error = %crate::ErrorChain(&e), "release subscription failed; retrying");
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
        backoff.reset();
        notifiers.wake_all();
        let mut ping = tokio::time::interval(ping_every);
        ping.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                msg = sub.next() => match msg {
                    Some(Some(key)) => notifiers.wake(&key),
                    Some(None) => {}
                    None => {
                        debug!("release subscription closed; reconnecting");
                        break;
                    }
                },
                ch = new_channels.recv() => match ch {
                    Some(ch) => {
                        let ok = tokio::time::timeout(call_timeout, sub.subscribe(&ch)).await;
                        channels.push(ch);
                        if !matches!(ok, Ok(Ok(()))) {
                            break;
                        }
                    }
                    None => return,
                },
                _ = ping.tick() => {
                    let ok = tokio::time::timeout(call_timeout, sub.ping()).await;
                    if !matches!(ok, Ok(Ok(_))) {
                        warn!("release subscription stopped answering; reconnecting");
                        break;
                    }
                }
            }
        }
    }
}

async fn sleep_or_stop(stop: &CancellationToken, backoff: &mut Backoff) {
    let d = backoff.next_delay();
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(d) => {}
    }
}

/// One live subscription: a RESP2 pub/sub connection, or, for a store whose connections
/// are named, a RESP3 connection (Redis 6 and later), which can name itself before it
/// subscribes (a RESP2 pub/sub connection of the Redis client cannot).
enum Subscription {
    Resp2 {
        sink: PubSubSink,
        stream: PubSubStream,
    },
    Resp3 {
        conn: MultiplexedConnection,
        pushes: mpsc::UnboundedReceiver<PushInfo>,
    },
}

impl Subscription {
    /// Connects with `client` and subscribes to `channels`; named `name` if given and
    /// the server speaks RESP3 (else unnamed, as without a name).
    async fn open(
        client: &Client,
        config: &AsyncConnectionConfig,
        name: Option<&str>,
        channels: &[String],
    ) -> Result<Self, RedisError> {
        if let Some(name) = name {
            match Self::open_named(client, config, name, channels).await {
                Ok(sub) => return Ok(sub),
                Err(e) => {
                    debug!(error = %crate::ErrorChain(&e), "a named (RESP3) subscription failed; subscribing unnamed")
                }
            }
        }
        let (mut sink, stream) = client.get_async_pubsub().await?.split();
        sink.subscribe(channels).await?;
        Ok(Self::Resp2 { sink, stream })
    }

    async fn open_named(
        client: &Client,
        config: &AsyncConnectionConfig,
        name: &str,
        channels: &[String],
    ) -> Result<Self, RedisError> {
        let info = client.get_connection_info().clone();
        let resp3 = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = Client::open(info.set_redis_settings(resp3))?;
        let (tx, pushes) = mpsc::unbounded_channel();
        let config = config.clone().set_push_sender(tx);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        set_name(&mut conn, name).await;
        conn.subscribe(channels).await?;
        Ok(Self::Resp3 { conn, pushes })
    }

    /// The next message: `Some(Some(payload))`, `Some(None)` for one that is not a
    /// message or has no text; `None` once the connection is closed.
    async fn next(&mut self) -> Option<Option<String>> {
        match self {
            Self::Resp2 { stream, .. } => {
                let msg = stream.next().await?;
                Some(msg.get_payload::<String>().ok())
            }
            Self::Resp3 { pushes, .. } => {
                let push = pushes.recv().await?;
                match push.kind {
                    PushKind::Disconnection => None,
                    PushKind::Message => Some(
                        push.data
                            .into_iter()
                            .nth(1)
                            .and_then(|v| redis::from_redis_value::<String>(v).ok()),
                    ),
                    _ => Some(None),
                }
            }
        }
    }

    async fn subscribe(&mut self, channel: &str) -> Result<(), RedisError> {
        match self {
            Self::Resp2 { sink, .. } => sink.subscribe(channel).await,
            Self::Resp3 { conn, .. } => conn.subscribe(channel).await,
        }
    }

    async fn ping(&mut self) -> Result<Value, RedisError> {
        match self {
            Self::Resp2 { sink, .. } => sink.ping::<Value>().await,
            Self::Resp3 { conn, .. } => redis::cmd("PING").query_async::<Value>(conn).await,
        }
    }
}
