//! The calls that run one at a time beside the tick, claim and release lanes:
//! reconciling, changing or reading the set, ending the session, the move budget.

use std::future::Future;

use leasehold_election::{DutyResult, Fence, StoreError};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::Driver;
use crate::keys::GroupKeys;
use crate::ownership::Ownership;
use crate::replica::{Action, Leaving, SetAnswer, SetOp};
use crate::store::ops;
use crate::store::protocol::{
    Adopt, AdoptReply, AdoptStep, Change, Granted, NotAdopted, VersionStep,
};
use crate::store::{GroupStore, STATUS_PAGE};

/// The calls that run one at a time beside the tick, claim and release lanes.
pub(super) enum Chore {
    Reconciled {
        token: String,
        reply: Result<Vec<Granted>, StoreError>,
    },
    Set(SetAnswer),
    Ended,
    /// The move budget granted this many of the hand-overs of `indices` (0: it failed).
    Budget {
        indices: Vec<usize>,
        granted: usize,
    },
}

/// What a set step does, for logs.
pub(super) fn op_name(op: &SetOp) -> &'static str {
    match op {
        SetOp::Seed { .. } => "seed from this replica's list",
        SetOp::Restore(_) => "restore the set this replica saw",
        SetOp::Adopt(_) => "bring the group to the set this replica saw",
        _ => "change the set",
    }
}

/// What the begin of an adopt answered, for operators: the group was seeded again
/// from a list while this replica was away, and is brought back to the set this
/// replica saw (or keeps its own, saying why).
fn log_adopt(answer: &SetAnswer) {
    match answer {
        SetAnswer::Adopted(AdoptReply::Done) => info!(
            "the group was created again from a configured list while this replica was away: \
             bringing it back to the set this replica saw (its additions, removals, weights, \
             drains and preferences)"
        ),
        SetAnswer::Adopted(AdoptReply::Refused(NotAdopted::Amended)) => warn!(
            "the group was created again from a configured list while this replica was away, \
             and an operator has changed it since: it keeps its set, and the changes made to \
             the set this replica saw before are not brought back (compare with `leasehold \
             partitions list`)"
        ),
        _ => {}
    }
}

/// Performs one step of changing or reading the set.
pub(super) async fn set_op<B: GroupStore>(
    store: &B,
    keys: &GroupKeys,
    op: &SetOp,
) -> Result<SetAnswer, StoreError> {
    match op {
        SetOp::Read { offset } => store
            .run(keys, &ops::ReadSetPage::new(*offset, STATUS_PAGE))
            .await
            .map(SetAnswer::Page),
        SetOp::Seed {
            life,
            names,
            grant_delay,
            lease,
            gather,
        } => store
            .run(
                keys,
                &ops::Add::new(
                    &Change::Seed {
                        life: life.clone(),
                        grant_delay: *grant_delay,
                        lease: *lease,
                        gather: *gather,
                    },
                    names,
                ),
            )
            .await
            .map(SetAnswer::Added),
        SetOp::Restore(step) => store.run(keys, step).await.map(SetAnswer::Ok),
        SetOp::Adopt(adopt) => store.run(keys, adopt).await.map(SetAnswer::Adopted),
        SetOp::Add { version, names } => store
            .run(keys, &ops::Add::new(&Change::Versioned(*version), names))
            .await
            .map(SetAnswer::Added),
        SetOp::List { offset } => store
            .run(keys, &ops::ListPage::new(*offset, STATUS_PAGE))
            .await
            .map(SetAnswer::Listed),
        SetOp::Remove { version, names } => store
            .run(keys, &ops::Remove::new(&Change::Versioned(*version), names))
            .await
            .map(SetAnswer::Removed),
        SetOp::Begin { version } => store
            .run(keys, &ops::SetVersion::new(*version, VersionStep::Begin))
            .await
            .map(SetAnswer::Ok),
        SetOp::Done { version, digest } => store
            .run(
                keys,
                &ops::SetVersion::new(*version, VersionStep::Done(digest)),
            )
            .await
            .map(SetAnswer::Ok),
    }
}

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    pub(super) fn next_chore(&mut self) {
        if self.lanes.chore.is_some() {
            return;
        }
        let Some(action) = self.lanes.chores.pop_front() else {
            return;
        };
        let calls = &self.calls;
        self.lanes.chore = Some(match action {
            Action::Reconcile { resume } => {
                if resume {
                    info!(
                        "resumed this replica's session after a restart: its partitions get new terms"
                    );
                }
                let token = self.state.token().to_owned();
                let call = {
                    let token = token.clone();
                    calls.call(|store, keys| async move {
                        store.run(&keys, &ops::Held::new(&token)).await
                    })
                };
                Box::pin(async move {
                    Chore::Reconciled {
                        token,
                        reply: call.await,
                    }
                })
            }
            Action::Set(op) => {
                if let SetOp::Seed { .. } | SetOp::Restore(_) = &op {
                    info!(op = ?op_name(&op), "creating the group, which does not exist");
                }
                let begins = matches!(
                    &op,
                    SetOp::Adopt(Adopt {
                        step: AdoptStep::Begin { .. },
                        ..
                    })
                );
                let call =
                    calls.call(|store, keys| async move { set_op(&store, &keys, &op).await });
                Box::pin(async move {
                    let answer = call.await.unwrap_or_else(|e| {
                        debug!(error = %crate::ErrorChain(&e), "a step on the partition set failed");
                        SetAnswer::Failed
                    });
                    if begins {
                        log_adopt(&answer);
                    }
                    Chore::Set(answer)
                })
            }
            Action::End => {
                let replica = self.config.replica_id.clone();
                let process = self.state.process().to_owned();
                let token = self.state.token().to_owned();
                let call = calls.call(|store, keys| async move {
                    store
                        .run(&keys, &ops::Leave::new(&replica, &process, &token))
                        .await
                });
                Box::pin(async move {
                    if let Err(e) = call.await {
                        warn!(error = %crate::ErrorChain(&e), "could not end the session; it expires within one lease");
                    }
                    Chore::Ended
                })
            }
            Action::Budget {
                indices,
                want,
                budget,
            } => {
                let window = self.config.renew_interval;
                let call = calls.call(|store, keys| async move {
                    store
                        .run(&keys, &ops::TakeBudget::new(want, budget, window))
                        .await
                });
                Box::pin(async move {
                    let granted = call.await.unwrap_or_else(|e| {
                        debug!(error = %crate::ErrorChain(&e), "taking moves from the move budget failed; asking again at a later tick");
                        0
                    });
                    Chore::Budget { indices, granted }
                })
            }
            _ => return,
        });
    }

    /// Returns true when the coordinator is done.
    pub(super) fn on_chore(&mut self, chore: Chore) -> bool {
        let now = Instant::now();
        let actions = match chore {
            Chore::Reconciled { token, reply } => match reply {
                Ok(held) => {
                    let held: Vec<(usize, Fence, u64)> = held
                        .iter()
                        .map(|(name, fence, weight)| (self.names.intern(name), *fence, *weight))
                        .collect();
                    self.state.on_reconciled(Some(held), &token, now)
                }
                Err(e) => {
                    debug!(error = %crate::ErrorChain(&e), "reconciling failed");
                    self.state.on_reconciled(None, &token, now)
                }
            },
            Chore::Set(answer) => {
                if matches!(answer, SetAnswer::Failed) {
                    debug!("a change to the partition set failed; taken up again at a later tick");
                }
                let mut actions = self.state.on_set(answer, now);
                if let Some(prefs) = self.state.new_preferences() {
                    let prefs = prefs
                        .iter()
                        .map(|(p, r)| (self.names.intern(p), r.clone()))
                        .collect();
                    actions.extend(self.state.set_preferences(prefs, now));
                }
                let copy = self.state.set_copy();
                self.view.send_if_modified(|v| {
                    let changed = v.set_copy != copy;
                    v.set_copy = copy;
                    changed
                });
                actions
            }
            Chore::Ended => {
                if self.state.leaving() == Leaving::Ending {
                    return true;
                }
                Vec::new()
            }
            Chore::Budget { indices, granted } => self.state.on_budget(indices, granted, now),
        };
        let done = self.perform(actions);
        self.next_chore();
        done
    }
}
