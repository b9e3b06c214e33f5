//! [`LeaseStore`] for [`RedisStore`]: the lease scripts, the resolution of acquires
//! whose reply was lost, and the self-check.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::Value;
use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::conn::Conn;
use super::replies::{self, DutyKeysRead};
use super::scripts::{ACQUIRE, LEADER, RELEASE, RENEW, SCAN};
use super::{Parse, RedisStore, run_script};
use crate::error::StoreError;
use crate::fence::Fence;
use crate::keys::DutyKeys;
use crate::store::{Acquire, BackendWarning, LeaderInfo, LeaseStore};
use crate::token::replica_of_token;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Acquires that were sent but not answered (a timeout, a dropped future, a connection
/// error after sending), by token, with the connection each went out on.
///
/// A connection delivers in order, so a release sent on the same connection runs right
/// after the acquire it resolves, however slow the link: a follower whose replies never
/// arrive in time frees the lease one call timeout after taking it, instead of holding
/// it for a lease. (A fresh connection could not even be set up over such a link.)
#[derive(Default)]
pub(super) struct Unanswered {
    by_token: Mutex<HashMap<String, Sent>>,
}

struct Sent {
    conn: Conn,
    lease: Duration,
    at: Instant,
}

impl Unanswered {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Sent>> {
        self.by_token.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers that an acquire with `token` is going out on `conn`.
    fn sent(&self, token: &str, conn: &Conn, lease: Duration) {
        let mut map = self.lock();
        // Forget entries nobody resolved (callers that drop acquires and never
        // abandon them); any lease those took has long expired.
        map.retain(|_, s| s.at.elapsed() < s.lease * 4 + Duration::from_secs(60));
        map.insert(
            token.to_owned(),
            Sent {
                conn: conn.clone(),
                lease,
                at: Instant::now(),
            },
        );
    }

    /// The acquire with `token` was answered: nothing to resolve.
    fn answered(&self, token: &str) {
        self.lock().remove(token);
    }

    /// The connection an unanswered acquire with `token` went out on, and its lease.
    fn get(&self, token: &str) -> Option<(Conn, Duration)> {
        self.lock().get(token).map(|s| (s.conn.clone(), s.lease))
    }
}

/// Whether `result` is a definite answer to an acquire: the script ran (and replied or
/// failed before writing), as opposed to an error after which it may or may not have run.
fn answered(result: &Result<Acquire, StoreError>) -> bool {
    match result {
        Ok(_) => true,
        Err(e) => !e.is_retryable() && !matches!(e, StoreError::Protocol(_)),
    }
}

impl RedisStore {
    /// A duty's keys as they are, in one read.
    pub(crate) async fn read_duty(&self, keys: &DutyKeys) -> Result<DutyKeysRead, StoreError> {
        let reply = self.eval(&LEADER, &[&keys.lease, &keys.fence], &[]).await?;
        replies::duty(reply)
    }

    /// One step of a SCAN for keys matching `pattern`: the next cursor ("0" once done)
    /// and the keys found; `count` is the server's hint for the step's size. On a
    /// cluster the scan goes through every primary in turn (by address, in order), its
    /// cursor `<primary>@<cursor>`.
    pub(crate) async fn scan_step(
        &self,
        cursor: &str,
        pattern: &str,
        count: usize,
    ) -> Result<(String, Vec<String>), StoreError> {
        let count = count.to_string();
        if !self.is_cluster() {
            let reply = self.eval(&SCAN, &[], &[cursor, pattern, &count]).await?;
            return replies::scan(reply);
        }
        let (node, at) = match cursor.split_once('@') {
            None => (0, cursor),
            Some((node, at)) => (
                node.parse::<usize>().map_err(|_| {
                    StoreError::Protocol(format!("scan: not a cluster scan cursor: {cursor:?}"))
                })?,
                at,
            ),
        };
        let code = SCAN.eval(&[], &[at, pattern, count.as_str()]);
        let (reply, primaries) = self.on_primary(node, &code).await?;
        let Some(reply) = reply else {
            return Ok(("0".to_owned(), Vec::new()));
        };
        let (next, keys) = replies::scan(reply)?;
        let next = match (next.as_str(), node + 1 < primaries) {
            ("0", true) => format!("{}@0", node + 1),
            ("0", false) => "0".to_owned(),
            (_, _) => format!("{node}@{next}"),
        };
        Ok((next, keys))
    }

    /// Releases with `token` on the connection its unanswered acquire went out on:
    /// `None` if there is no such acquire (or that connection is dead).
    async fn release_after_unanswered(
        &self,
        keys: &DutyKeys,
        token: &str,
    ) -> Option<Result<bool, StoreError>> {
        let (mut conn, lease) = self.unanswered().get(token)?;
        // The reply may need longer than a call timeout on a slow link: it is the only
        // proof that the lease is gone, so wait for it up to one lease.
        let limit = lease.max(self.call_timeout());
        conn.set_response_timeout(limit);
        let args = [token, keys.channel.as_str()];
        let reply = tokio::time::timeout(
            limit,
            run_script(&mut conn, &RELEASE, &[&keys.lease], &args),
        )
        .await;
        match reply {
            Err(_) => Some(Err(StoreError::Timeout(limit))),
            Ok(Ok(v)) => {
                self.unanswered().answered(token);
                Some(replies::flag("release", v))
            }
            Ok(Err(e)) if e.is_connection_dropped() || e.is_io_error() => {
                // The connection is gone, and with it anything not yet delivered: a
                // release on a fresh connection now runs after whatever did arrive.
                debug!(error = %crate::ErrorChain(&e), "the unanswered acquire's connection is gone");
                self.unanswered().answered(token);
                None
            }
            Ok(Err(e)) => {
                self.unanswered().answered(token);
                Some(Err(e.into()))
            }
        }
    }
}

impl LeaseStore for RedisStore {
    fn with_replica_acks(&self, replicas: usize, timeout: Duration) -> Self {
        self.acked_copy(replicas, timeout)
    }

    async fn acquire(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
        floor: Fence,
    ) -> Result<Acquire, StoreError> {
        let (lease_ms, floor) = (millis(lease).to_string(), floor.0.to_string());
        let mut script_keys = vec![keys.lease.as_str(), keys.fence.as_str()];
        script_keys.extend(keys.boot.as_deref());
        let result = async {
            let reply = self
                .eval_then_wait(
                    &ACQUIRE,
                    &script_keys,
                    &[token, &lease_ms, &floor],
                    |reply| matches!(reply, Value::Array(items) if items.first() == Some(&Value::Int(1))),
                    |conn| self.unanswered().sent(token, conn, lease),
                )
                .await?;
            replies::acquire(reply)
        }
        .await;
        // Dropped before this point (a caller's timeout), the acquire stays unanswered.
        if answered(&result) {
            self.unanswered().answered(token);
        }
        result
    }

    async fn renew(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let lease_ms = millis(lease).to_string();
        let reply = self
            .eval_then_wait(
                &RENEW,
                &[&keys.lease],
                &[token, &lease_ms],
                |reply| *reply == Value::Int(1),
                |_| {},
            )
            .await?;
        replies::flag("renew", reply)
    }

    /// After an unanswered acquire with `token`, the release goes out on that acquire's
    /// connection (see [`LeaseStore::abandon`]); otherwise on the store's connection.
    async fn release(&self, keys: &DutyKeys, token: &str) -> Result<bool, StoreError> {
        if let Some(result) = self.release_after_unanswered(keys, token).await {
            return result;
        }
        let reply = self
            .eval(&RELEASE, &[&keys.lease], &[token, &keys.channel])
            .await?;
        replies::flag("release", reply)
    }

    /// Nothing to do if no acquire with `token` went out unanswered; otherwise the
    /// release follows that acquire on its own connection.
    async fn abandon(&self, keys: &DutyKeys, token: &str) -> Result<(), StoreError> {
        if self.unanswered().get(token).is_none() {
            return Ok(());
        }
        self.release(keys, token).await.map(drop)
    }

    async fn leader(&self, keys: &DutyKeys) -> Result<Option<LeaderInfo>, StoreError> {
        let read = self.read_duty(keys).await?;
        Ok(read.lease.map(|token| LeaderInfo {
            replica_id: replica_of_token(&token).to_owned(),
            remaining: read.lease_left,
            fence: read.fence.unwrap_or_default(),
        }))
    }

    /// A copy with its own pool, connections and release subscription, which start on
    /// the runtime of their first call: the dedicated runtime of
    /// `Elector::spawn_dedicated`.
    fn detached(&self) -> Self {
        self.detached_copy()
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
            .get_or_try_init(|| async {
                match self.read_settings().await {
                    // An ACL user without `config|get`: the check is optional.
                    Err(StoreError::NoPermission(e)) => {
                        debug!(error = %crate::ErrorChain(&e), "self-check skipped: CONFIG GET is not permitted");
                        Ok(Vec::new())
                    }
                    // Logged once per store, however many electors share it.
                    Ok(warnings) => {
                        for w in &warnings {
                            warn!(warning = %w, "redis self-check");
                        }
                        Ok(warnings)
                    }
                    other => other,
                }
            })
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
            let mut p = Parse::new("config get", v);
            p.next_string()?;
            let value = p.next_opt_string()?.unwrap_or_default();
            p.finish()?;
            Ok(value)
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
