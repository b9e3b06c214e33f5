//! What a new term is offered of the state its partition's previous term handed off:
//! the rule (from what the claim said of the previous term, and what the take found),
//! pure and unit-tested; the driver takes the state before the callback runs.

use std::time::Duration;

use leasehold_election::{Fence, StoreError};

use crate::ownership::{NoHandOff, Ownership, TermShared};
use metrics::counter;
use tokio::time::timeout;
use tracing::debug;

use crate::keys::GroupKeys;
use crate::metrics as m;
use crate::store::GroupStore;
use crate::store::ops;
use crate::store::protocol::{MoveCause, Predecessor, Taken};

/// How a new term learns what it is offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inherit {
    /// Known from the claim: nothing, and why.
    Nothing(Why),
    /// The previous term (this fence) left state: take it before the callback runs.
    Take(Fence),
}

/// Why a term is offered nothing, known from the claim ([`NoHandOff`] is not `Eq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    FirstOwner,
    Regranted,
    Crashed,
    NothingLeft(MoveCause),
    ServerChanged,
}

impl Why {
    fn no_hand_off(self) -> NoHandOff {
        match self {
            Self::FirstOwner => NoHandOff::FirstOwner,
            Self::Regranted => NoHandOff::Regranted,
            Self::Crashed => NoHandOff::Crashed,
            Self::ServerChanged => NoHandOff::ServerChanged,
            Self::NothingLeft(cause) => NoHandOff::NothingLeft { cause },
        }
    }
}

/// What a term is offered, from what its claim said of the previous term (`None`: a
/// regrant to the same session, which names none).
pub(crate) fn inherit(previous: Option<&Predecessor>) -> Inherit {
    let Some(p) = previous else {
        return Inherit::Nothing(Why::Regranted);
    };
    match (p.cause, p.fence, p.state_bytes) {
        (MoveCause::New, _, _) | (_, None, _) => Inherit::Nothing(Why::FirstOwner),
        (MoveCause::Expiry, _, _) => Inherit::Nothing(Why::Crashed),
        _ if p.state_before_server_change => Inherit::Nothing(Why::ServerChanged),
        (_, Some(fence), Some(_)) => Inherit::Take(fence),
        (cause, Some(_), None) => Inherit::Nothing(Why::NothingLeft(cause)),
    }
}

/// What a term is offered, from what the take found.
pub(crate) fn offered(taken: Result<Taken, StoreError>) -> Result<Vec<u8>, NoHandOff> {
    match taken {
        Ok(Taken::State(bytes)) => Ok(bytes),
        Ok(Taken::Stale) => Err(NoHandOff::Stale),
        Ok(Taken::Gone) => Err(NoHandOff::Gone),
        Err(e) => Err(NoHandOff::Unavailable(e)),
    }
}

/// The `outcome` label of [`m::HAND_OFF_STATE`] for what a term was offered.
pub(crate) fn outcome(offered: &Result<Vec<u8>, NoHandOff>) -> &'static str {
    match offered {
        Ok(_) => "delivered",
        Err(NoHandOff::FirstOwner) => "first_owner",
        Err(NoHandOff::Regranted) => "regranted",
        Err(NoHandOff::Crashed) => "crashed",
        Err(NoHandOff::NothingLeft { .. }) => "nothing_left",
        Err(NoHandOff::ServerChanged) => "server_changed",
        Err(NoHandOff::Gone) => "gone",
        Err(NoHandOff::Stale) => "stale",
        Err(NoHandOff::Unavailable(_)) => "unavailable",
    }
}

/// Takes the state the term with `fence` left for `partition`, within `limit`.
async fn take<B: GroupStore>(
    store: &B,
    keys: &GroupKeys,
    partition: &str,
    fence: Fence,
    limit: Duration,
) -> Result<Vec<u8>, NoHandOff> {
    let terms = [(partition.to_owned(), fence)];
    let taken = match timeout(limit, store.run(keys, &ops::TakeHandOffs::new(&terms))).await {
        Ok(Ok(mut t)) if t.len() == 1 => Ok(t.remove(0)),
        Ok(Ok(t)) => Err(StoreError::Protocol(format!(
            "handoff: {} replies for one partition",
            t.len()
        ))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(StoreError::Timeout(limit)),
    };
    offered(taken)
}

/// Offers `lease` what `inherit` says, taking the state from the store first if there
/// is some (within `limit`, never past the term's deadline): before the callback runs.
/// Counted in [`m::HAND_OFF_STATE`] under `labels` (group, replica).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn offer<B: GroupStore>(
    lead: &Ownership,
    term: &TermShared,
    inherit: Inherit,
    store: &B,
    keys: &GroupKeys,
    partition: &str,
    limit: Duration,
    labels: [(&'static str, String); 2],
) {
    let offer = match inherit {
        Inherit::Nothing(why) => Err(why.no_hand_off()),
        Inherit::Take(fence) => {
            take(store, keys, partition, fence, limit.min(lead.remaining())).await
        }
    };
    if let Err(NoHandOff::Unavailable(e)) = &offer {
        debug!(partition, error = %crate::ErrorChain(e), "the state the previous term handed off could not be read");
    }
    let [a, b] = labels;
    counter!(
        m::HAND_OFF_STATE,
        &[a, b, ("outcome", outcome(&offer).to_owned())]
    )
    .increment(1);
    term.offer(offer);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn previous(cause: MoveCause, fence: Option<u64>, state: Option<u64>) -> Predecessor {
        Predecessor {
            cause,
            unowned: Some(Duration::from_millis(3)),
            fence: fence.map(Fence),
            state_bytes: state,
            state_before_server_change: false,
        }
    }

    #[test]
    fn state_is_taken_only_from_a_previous_term_that_left_some_and_did_not_crash() {
        use MoveCause::*;
        let cases = [
            (None, Inherit::Nothing(Why::Regranted)),
            (
                Some(previous(New, None, None)),
                Inherit::Nothing(Why::FirstOwner),
            ),
            (
                Some(previous(Expiry, Some(7), None)),
                Inherit::Nothing(Why::Crashed),
            ),
            // An expired session left nothing by the release path; were a size ever
            // noted, a crash still hands nothing over.
            (
                Some(previous(Expiry, Some(7), Some(10))),
                Inherit::Nothing(Why::Crashed),
            ),
            (
                Some(previous(HandOff, Some(7), None)),
                Inherit::Nothing(Why::NothingLeft(HandOff)),
            ),
            (
                Some(previous(HandOff, Some(7), Some(0))),
                Inherit::Take(Fence(7)),
            ),
            (
                Some(previous(Drain, Some(9), Some(4096))),
                Inherit::Take(Fence(9)),
            ),
            (
                Some(previous(Leave, Some(9), Some(1))),
                Inherit::Take(Fence(9)),
            ),
            (
                Some(previous(Removal, Some(9), Some(1))),
                Inherit::Take(Fence(9)),
            ),
            (
                Some(previous(Released, Some(9), Some(1))),
                Inherit::Take(Fence(9)),
            ),
        ];
        for (p, want) in cases {
            assert_eq!(inherit(p.as_ref()), want, "{p:?}");
        }
        // State left before a restart or a failover: a later term may have been lost.
        let mut p = previous(HandOff, Some(7), None);
        p.state_before_server_change = true;
        assert_eq!(inherit(Some(&p)), Inherit::Nothing(Why::ServerChanged));
    }

    #[tokio::test]
    async fn a_take_from_a_frozen_redis_gives_up_at_its_limit_and_the_term_runs_cold() {
        use leasehold_election::RedisStore;
        use leasehold_testkit::RedisServer;
        let server = RedisServer::start();
        let store = RedisStore::builder(server.url())
            .call_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let keys = GroupKeys::new("leasehold", "g");
        server.redis_cli(&["SET", &keys.hand_off("p1"), "7:offset=42"]);
        let got = take(&store, &keys, "p1", Fence(7), Duration::from_secs(1)).await;
        assert_eq!(got.unwrap(), b"offset=42");
        // SIGSTOP: the connection hangs, the take gives up at its own limit (the
        // store's call timeout is longer) and says why.
        server.pause();
        let started = tokio::time::Instant::now();
        let got = take(&store, &keys, "p1", Fence(7), Duration::from_millis(300)).await;
        let took = started.elapsed();
        server.resume();
        assert!(
            matches!(got, Err(NoHandOff::Unavailable(StoreError::Timeout(_)))),
            "{got:?}"
        );
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(3),
            "{took:?}"
        );
        // Redis back: a retry within the keep window still gets it.
        let got = take(&store, &keys, "p1", Fence(7), Duration::from_secs(2)).await;
        assert_eq!(got.unwrap(), b"offset=42");
    }

    #[test]
    fn what_the_take_found_is_offered_or_named() {
        assert_eq!(offered(Ok(Taken::State(b"x".to_vec()))).unwrap(), b"x");
        assert!(matches!(offered(Ok(Taken::Stale)), Err(NoHandOff::Stale)));
        assert!(matches!(offered(Ok(Taken::Gone)), Err(NoHandOff::Gone)));
        assert!(matches!(
            offered(Err(StoreError::Timeout(Duration::from_millis(5)))),
            Err(NoHandOff::Unavailable(StoreError::Timeout(_)))
        ));
        assert!(matches!(
            Why::NothingLeft(MoveCause::Drain).no_hand_off(),
            NoHandOff::NothingLeft {
                cause: MoveCause::Drain
            }
        ));
    }
}
