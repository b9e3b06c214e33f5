//! The release subscription of a [`super::RedisStore`]: one pub/sub connection per store.
//!
//! On Sentinel it follows the primary; on a cluster it subscribes on one seed node at a
//! time (a `PUBLISH`, even inside a script, reaches every node of a Redis 7 cluster).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use redis::{AsyncConnectionConfig, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::conn::Target;
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

/// Keeps one pub/sub subscription per store alive: reconnects with backoff, resubscribes,
/// PINGs so a black-holed link is noticed, and wakes every follower after a reconnect
/// (a release may have been missed; followers then re-check at once).
pub(super) async fn subscriber_loop(
    target: Arc<Target>,
    config: AsyncConnectionConfig,
    notifiers: Arc<Notifiers>,
    mut new_channels: mpsc::UnboundedReceiver<String>,
    stop: CancellationToken,
    call_timeout: Duration,
) {
    let mut channels: Vec<String> = Vec::new();
    let mut attempt = 0usize;
    let mut backoff = Backoff::new(RECONNECT_INITIAL, RECONNECT_MAX);
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
        attempt = attempt.wrapping_add(1);
        let connected = async {
            let client = target.pubsub_client(attempt, &config).await?;
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
        backoff.reset();
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

async fn sleep_or_stop(stop: &CancellationToken, backoff: &mut Backoff) {
    let d = backoff.next_delay();
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(d) => {}
    }
}
