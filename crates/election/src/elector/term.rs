//! One term: run the duty, renew until the lease is lost or the term is ended, then
//! step down (cancel, grace, abort, join) and only then release.

use std::future::Future;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::{Instrument, info_span, warn};

use super::{DutyResult, Runner};
use super::{detail, rules};
use crate::error::StoreError;
use crate::fence::Fence;
use crate::leadership::Leadership;
use crate::metrics as m;
use crate::status::{Role, TermEnd, TermEndReason};

use super::TermCalls;

impl<S, F, Fut> Runner<S, F>
where
    S: TermCalls,
    F: Fn(Leadership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Leads one term whose lease is valid for `validity` from `sent` (the send time of
    /// the call that took or confirmed it); returns once the duty has ended and the
    /// lease is released.
    pub(super) async fn lead(
        &self,
        fence: Fence,
        sent: Instant,
        token: &str,
        validity: Duration,
    ) -> TermEnd {
        let cfg = &self.config;
        let mut deadline = rules::deadline(sent, validity, cfg.safety_margin);
        let cancel = CancellationToken::new();
        let leadership =
            Leadership::new(fence, &cfg.replica_id, &cfg.duty, cancel.clone(), deadline);
        let span = info_span!("duty", fence = fence.0);
        let work = (self.duty)(leadership.clone()).instrument(span);
        let mut duty = AbortOnDropHandle::new(match &self.duty_runtime {
            Some(runtime) => runtime.spawn(work),
            None => tokio::spawn(work),
        });
        let since = Instant::now();
        gauge!(m::IS_LEADER, &self.labels.pair()).set(1.0);
        gauge!(m::LEADER_FENCE, "duty" => cfg.duty.clone(), "group" => self.labels.group.clone())
            .set(fence.0 as f64);
        gauge!(m::VALIDITY_LEFT, &self.labels.pair()).set(
            deadline
                .saturating_duration_since(Instant::now())
                .as_secs_f64(),
        );
        counter!(m::TERMS_STARTED, &self.labels.pair()).increment(1);
        // Before the status says "leader": a `step_down()` that saw this term's fence
        // bumps the counter after this point, so the term sees it.
        let mut step_downs = self.control.step_downs.subscribe();
        step_downs.mark_unchanged();
        // Gauges first, then the status: whoever sees the status sees the gauges too.
        self.status.send_modify(|s| {
            s.role = Role::Leader { fence, since };
            s.last_error = None;
        });
        detail!(self, info, fence = fence.0, "became leader");

        let mut next_renew = rules::first_renew(sent, validity, cfg, self.grid, Instant::now());
        let mut duty_done = false;
        let reason = loop {
            tokio::select! {
                biased;
                () = sleep_until(deadline) => {
                    self.woke(deadline, "deadline");
                    break TermEndReason::DeadlinePassed;
                }
                () = self.shutdown.cancelled() => break TermEndReason::Shutdown,
                Ok(()) = step_downs.changed() => break TermEndReason::SteppedDown,
                joined = &mut duty => {
                    duty_done = true;
                    break match joined {
                        Ok(Ok(())) => TermEndReason::DutyReturned,
                        Ok(Err(e)) => TermEndReason::DutyFailed(crate::ErrorChain(&*e).to_string().into()),
                        Err(e) => TermEndReason::DutyPanicked(panic_message(e).into()),
                    };
                }
                () = sleep_until(next_renew) => {
                    self.woke(next_renew, "renewal");
                    let sent = Instant::now();
                    let limit = rules::renew_limit(cfg.call_timeout, deadline, sent);
                    let renewed = tokio::select! {
                        biased;
                        () = self.shutdown.cancelled() => break TermEndReason::Shutdown,
                        r = timeout(limit, self.store.renew(token, cfg.lease)) => {
                            r.unwrap_or(Err(StoreError::Timeout(limit)))
                        }
                    };
                    match renewed {
                        Ok(true) => {
                            let extended = rules::deadline(sent, cfg.lease, cfg.safety_margin);
                            // A reply processed after the deadline (a stalled elector)
                            // does not revive the term: the duty may have seen it end.
                            if !leadership.extend_deadline(extended) {
                                break TermEndReason::DeadlinePassed;
                            }
                            deadline = extended;
                            next_renew = rules::next_renew(sent, cfg.renew_interval, self.grid);
                            histogram!(m::RENEW_RTT, &self.labels.pair()).record(sent.elapsed().as_secs_f64());
                            gauge!(m::VALIDITY_LEFT, &self.labels.pair())
                                .set(deadline.saturating_duration_since(Instant::now()).as_secs_f64());
                            if self.status.borrow().last_error.is_some() {
                                self.status.send_modify(|s| s.last_error = None);
                            }
                        }
                        Ok(false) => break TermEndReason::RenewalRefused,
                        Err(e) if !e.is_retryable() => {
                            self.record_error(e.clone(), "renew");
                            break TermEndReason::BackendError(e);
                        }
                        Err(e) => {
                            self.record_error(e, "renew");
                            next_renew = Instant::now() + rules::renew_retry(cfg.renew_interval);
                        }
                    }
                }
            }
        };
        leadership.set_end_reason(&reason);
        self.step_down(
            &leadership,
            reason,
            duty,
            duty_done,
            &cancel,
            deadline,
            token,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn step_down(
        &self,
        leadership: &Leadership,
        reason: TermEndReason,
        mut duty: AbortOnDropHandle<DutyResult>,
        duty_done: bool,
        cancel: &CancellationToken,
        deadline: Instant,
        token: &str,
    ) -> TermEnd {
        let cfg = &self.config;
        let fence = leadership.fence();
        // From here on this replica does not consider itself leader: the duty's token
        // fires first, then the status and gauges say so.
        cancel.cancel();
        gauge!(m::IS_LEADER, &self.labels.pair()).set(0.0);
        gauge!(m::VALIDITY_LEFT, &self.labels.pair()).set(0.0);
        self.status
            .send_modify(|s| s.role = Role::Follower { leader: None });
        let lease_lost = rules::lease_may_be_lost(&reason);
        let mut grace_overrun = false;
        if !duty_done {
            let now = Instant::now();
            let grace_end = rules::grace_end(now, cfg.grace, deadline, lease_lost);
            let mut stop_by = self.control.stop_by.subscribe();
            loop {
                // A deadline set by `stop_by` (now or while the duty winds down) cuts
                // the grace short.
                let end = rules::hurried(grace_end, *stop_by.borrow_and_update());
                tokio::select! {
                    biased;
                    _ = &mut duty => break,
                    Ok(()) = stop_by.changed() => {}
                    () = sleep_until(end) => {
                        grace_overrun = end > now;
                        duty.abort();
                        let _ = (&mut duty).await;
                        break;
                    }
                }
            }
            if grace_overrun {
                counter!(m::GRACE_OVERRUNS, &self.labels.pair()).increment(1);
                warn!(fence = fence.0, "duty outran its grace and was aborted");
            }
        }
        // The duty has provably ended (joined): only now give the lease back.
        let released = if !rules::releases(&reason) {
            false
        } else {
            match timeout(cfg.call_timeout, self.store.release(token)).await {
                Ok(Ok(released)) => released,
                Ok(Err(e)) => {
                    self.record_error(e, "release");
                    false
                }
                Err(_) => {
                    self.record_error(StoreError::Timeout(cfg.call_timeout), "release");
                    false
                }
            }
        };
        counter!(m::TERMS_ENDED, &self.labels.with("reason", reason.label())).increment(1);
        // A partition's end is summed up by its group's coordinator.
        if reason.is_planned() {
            detail!(self, info, fence = fence.0, %reason, released, "stepped down");
        } else {
            detail!(self, warn, fence = fence.0, %reason, released, "stepped down");
        }
        let end = TermEnd {
            fence,
            reason,
            grace_overrun,
            released,
        };
        self.status.send_modify(|s| s.last_term = Some(end.clone()));
        end
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    if e.is_cancelled() {
        return "cancelled".to_owned();
    }
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}
