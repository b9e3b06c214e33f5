//! The campaign: ask for the lease, follow the holder until it is free, lead each
//! term won ([`super::term`]), and resolve acquires whose outcome is unknown.

use std::future::Future;
use std::time::Duration;

use metrics::histogram;
use tokio::time::{Instant, sleep_until, timeout};
use tracing::{debug, info, warn};

use super::rules::{self, AfterTerm};
use super::{DutyResult, Keyed, Runner};
use crate::backoff::Backoff;
use crate::error::StoreError;
use crate::fence::Fence;
use crate::leadership::Leadership;
use crate::metrics as m;
use crate::status::Role;
use crate::store::{Acquire, LeaseStore};
use crate::token::new_token;

impl<S, F, Fut> Runner<Keyed<S>, F>
where
    S: LeaseStore,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Campaigns, leads and campaigns again until shut down.
    pub(super) async fn campaign(&self) {
        let notify = self.store.store.release_notifier(&self.store.keys);
        let cfg = self.config.clone();
        let mut backoff = Backoff::new(cfg.backoff_initial, cfg.backoff_max);
        let mut token = new_token(&cfg.replica_id);
        // Tokens (and send times) of acquires whose outcome is unknown and whose release
        // is not confirmed yet: each may hold the lease with nobody leading. Their
        // release is on its way; shutdown waits for it to be confirmed.
        let mut unresolved: Vec<(String, Instant)> = Vec::new();
        let mut campaign_start = Instant::now();
        while !self.shutdown.is_cancelled() {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let floor = Fence(self.status.borrow().highest_fence.0 + 1);
            let sent = Instant::now();
            // Shutdown does not wait for an acquire in flight: it is resolved below.
            let result = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => None,
                r = timeout(
                    cfg.call_timeout,
                    self.store.store.acquire(&self.store.keys, &token, cfg.lease, floor),
                ) => Some(r.unwrap_or(Err(StoreError::Timeout(cfg.call_timeout)))),
            };
            let Some(result) = result else {
                unresolved.push((token, sent));
                break;
            };
            match result {
                Ok(Acquire::Won { fence, regressed }) => {
                    backoff.reset();
                    self.observe_fence(fence, regressed);
                    let after = self
                        .lead_and_pause(
                            fence,
                            sent,
                            &token,
                            cfg.lease,
                            campaign_start,
                            &mut backoff,
                        )
                        .await;
                    if after == AfterTerm::Stop {
                        break;
                    }
                    token = new_token(&cfg.replica_id);
                    campaign_start = Instant::now();
                }
                // An earlier call with this token (a store's retry) took the lease and
                // its reply was lost. Lead only for what is provable from this call's
                // send time; if that is too little, give the lease back.
                Ok(Acquire::Confirmed { fence, remaining }) => {
                    backoff.reset();
                    self.observe_fence(fence, false);
                    if rules::worth_leading(sent, remaining, cfg.safety_margin, Instant::now()) {
                        let after = self
                            .lead_and_pause(
                                fence,
                                sent,
                                &token,
                                remaining,
                                campaign_start,
                                &mut backoff,
                            )
                            .await;
                        if after == AfterTerm::Stop {
                            break;
                        }
                        campaign_start = Instant::now();
                    } else if !self.abandon(&token, cfg.call_timeout).await {
                        unresolved.push((token.clone(), sent));
                    }
                    token = new_token(&cfg.replica_id);
                }
                // The store lost its data (or another server took over its keys) less
                // than a lease ago: a lease granted before may still be believed valid
                // by its holder. Nobody leads until the store says the lease is over.
                Ok(Acquire::Recovering { wait }) => {
                    backoff.reset();
                    let first = self.status.send_if_modified(|s| {
                        let role = Role::Follower { leader: None };
                        let changed = s.role != role || s.last_error.is_some();
                        s.role = role;
                        s.last_error = None;
                        changed
                    });
                    if first {
                        info!(
                            wait_ms = wait.as_millis(),
                            "redis lost its data (or another server took over) less than a \
                             lease ago: no lease is granted until the old ones have expired"
                        );
                    }
                    let jitter = cfg.follower_jitter.mul_f64(rand::random::<f64>());
                    // From now, not from `sent`: the wait was measured when the store
                    // answered, which is later.
                    if self.sleep_unless_shutdown(wait + jitter).await {
                        break;
                    }
                }
                Ok(Acquire::Lost {
                    holder,
                    remaining,
                    fence,
                }) => {
                    backoff.reset();
                    self.observe_fence(fence, false);
                    self.status.send_if_modified(|s| {
                        let role = Role::Follower {
                            leader: Some(holder.clone()),
                        };
                        let changed = s.role != role || s.last_error.is_some();
                        s.role = role;
                        s.last_error = None;
                        changed
                    });
                    let jitter = cfg.follower_jitter.mul_f64(rand::random::<f64>());
                    let recheck =
                        rules::follower_recheck(sent, remaining, cfg.retry_interval, jitter);
                    tokio::select! {
                        () = self.shutdown.cancelled() => break,
                        () = &mut notified => debug!("woken by a release notification"),
                        () = sleep_until(recheck) => self.woke(recheck, "follower re-check"),
                    }
                }
                Err(e) => {
                    // After a retryable error the acquire may have taken the lease with
                    // this token, and nobody would lead it: resolve it (release), and
                    // campaign on with a new token, never re-extending that lease.
                    let unknown = e.is_retryable();
                    self.record_error(e, "acquire");
                    if unknown {
                        if !self.abandon(&token, cfg.call_timeout).await {
                            unresolved.push((token, sent));
                        }
                        token = new_token(&cfg.replica_id);
                    }
                    self.status.send_if_modified(|s| {
                        let role = Role::Follower { leader: None };
                        let changed = s.role != role;
                        s.role = role;
                        changed
                    });
                    if self.sleep_unless_shutdown(backoff.next_delay()).await {
                        break;
                    }
                }
            }
            // A lease an old acquire may have taken has expired two leases after it
            // was sent (its request took less than a lease to arrive, or nothing works).
            let now = Instant::now();
            unresolved.retain(|(_, at)| rules::may_still_hold(*at, cfg.lease, now));
        }
        self.resolve_at_shutdown(unresolved).await;
    }

    /// Leads the term just won or confirmed, valid for `validity` from `sent`, then waits
    /// out the pause [`rules::after_term`] gives; `Stop` when the elector stops.
    async fn lead_and_pause(
        &self,
        fence: Fence,
        sent: Instant,
        token: &str,
        validity: Duration,
        campaign_start: Instant,
        backoff: &mut Backoff,
    ) -> AfterTerm {
        histogram!(m::TIME_TO_LEADER, &self.labels.pair())
            .record(campaign_start.elapsed().as_secs_f64());
        let end = self.lead(fence, sent, token, validity).await;
        let stopping = self.shutdown.is_cancelled();
        match rules::after_term(&end.reason, stopping, &self.config, backoff) {
            AfterTerm::Campaign(pause)
                if !pause.is_zero() && self.sleep_unless_shutdown(pause).await =>
            {
                AfterTerm::Stop
            }
            after => after,
        }
    }

    /// Releases whatever an acquire with `token` of unknown outcome may hold, waiting
    /// up to `limit` for the store to confirm; `true` once confirmed.
    async fn abandon(&self, token: &str, limit: Duration) -> bool {
        match timeout(limit, self.store.store.abandon(&self.store.keys, token)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                debug!(error = %crate::ErrorChain(&e), "release after an unanswered acquire not confirmed yet");
                false
            }
            Err(_) => {
                debug!("release after an unanswered acquire not confirmed yet");
                false
            }
        }
    }

    /// At shutdown: waits up to one lease for the store to confirm that no unresolved
    /// token holds the lease (on a slow link the confirmation takes a round trip longer
    /// than the call timeout). Past that, any such lease expires on its own.
    async fn resolve_at_shutdown(&self, tokens: Vec<(String, Instant)>) {
        if tokens.is_empty() {
            return;
        }
        let limit = self.config.lease;
        let attempts = tokens.iter().map(|(t, _)| self.abandon(t, limit));
        let confirmed = futures::future::join_all(attempts).await;
        let left = confirmed.iter().filter(|ok| !**ok).count();
        if left > 0 {
            warn!(
                left,
                "could not confirm the release of leases that unanswered acquires may hold; \
                 they expire within one lease"
            );
        }
    }
}
