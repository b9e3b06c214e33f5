//! The group's ledger of moves against what the bench saw: every change of owner the
//! replicas' own lines show (by replica id, from the cold start on) must be one ledger
//! entry, with the same partition, old owner, new owner and new fence, and the ledger
//! must hold no other change of owner.
//!
//! A new term of the same replica is not a change of owner on either side: the bench
//! sees a sticky restart's regrants as terms of the same replica id, and the ledger
//! writes no entry for a regrant; an entry from a replica to itself (it took back a
//! partition it had given up) is left out of the comparison.
//!
//! The state each planned move carried is checked too: with `--hand-off-bytes N`,
//! every entry of a planned cause (`MoveCause::is_planned`: not a first owner, not an
//! expiry) must name the bytes the previous term left, [`hand_off_state`]'s length for
//! its partition and old fence (N, unless N is below the header's length); without,
//! none.

use std::collections::BTreeMap;

use leasehold_partitions::{GroupAdmin, Move, MoveCause};
use serde::{Deserialize, Serialize};

use crate::group::event::{PartitionEvent, hand_off_state};
use crate::group::harness::Fleet;
use crate::group::status::PREFIX;
use crate::store::{self, BoxError};

/// How many entries a report lists of those that differ.
const SHOWN: usize = 5;

/// The ledger compared with the owner changes the bench observed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LedgerCheck {
    /// Ledger entries of the group (every new term taken from the free set).
    pub entries: usize,
    /// Every owner change the bench observed is in the ledger, and every entry that
    /// changes the owner was observed.
    pub matches_observed: bool,
    /// Owner changes the bench observed (first owners included).
    pub observed: usize,
    /// Ledger entries by cause.
    pub causes: BTreeMap<String, usize>,
    /// Observed changes missing from the ledger (the first few), as
    /// `partition from→to fence`.
    pub missing: Vec<String>,
    /// Ledger changes the bench did not observe (the first few).
    pub unexpected: Vec<String>,
    /// The most hand-offs (cause `handoff`) released in one renew interval of the
    /// server's clock (`floor(ended ms / (lease / 3))`).
    pub max_handoffs_per_interval: usize,
    /// Every entry of a planned move names the state the replicas leave
    /// (`--hand-off-bytes`: its size; without: none) in its `state_bytes`.
    #[serde(default)]
    pub state_matches: bool,
    /// Entries of planned moves whose `state_bytes` is not that.
    #[serde(default)]
    pub state_mismatches: usize,
    /// The first few of them, as `partition from→to fence (cause): state_bytes`.
    #[serde(default)]
    pub state_mismatched: Vec<String>,
}

/// What a ledger entry says of the state its move carried.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Carried {
    partition: String,
    from: Option<String>,
    to: String,
    new_fence: u64,
    cause: MoveCause,
    old_fence: Option<u64>,
    state_bytes: Option<u64>,
}

impl From<&Move> for Carried {
    fn from(m: &Move) -> Self {
        Self {
            partition: m.partition.clone(),
            from: m.from.clone(),
            to: m.to.clone(),
            new_fence: m.new_fence.get(),
            cause: m.cause,
            old_fence: m.old_fence.map(|f| f.get()),
            state_bytes: m.state_bytes,
        }
    }
}

/// The entries of planned moves whose `state_bytes` is not what the previous term
/// left: with `hand_off_bytes` N > 0, [`hand_off_state`]'s length for the entry's
/// partition and old fence; with 0, none. Returns their count and the first few.
fn state_mismatches(entries: &[Carried], hand_off_bytes: usize) -> (usize, Vec<String>) {
    let wrong: Vec<&Carried> = entries
        .iter()
        .filter(|e| e.cause.is_planned())
        .filter(|e| {
            let expected = match (hand_off_bytes, e.old_fence) {
                (0, _) => None,
                (n, Some(old)) => u64::try_from(hand_off_state(&e.partition, old, n).len()).ok(),
                // A planned move names its previous term; were it not to, any size goes.
                (_, None) => return false,
            };
            e.state_bytes != expected
        })
        .collect();
    let shown = wrong
        .iter()
        .take(SHOWN)
        .map(|e| {
            format!(
                "{} {}→{} {} ({}): {}",
                e.partition,
                e.from.as_deref().unwrap_or("-"),
                e.to,
                e.new_fence,
                e.cause,
                e.state_bytes
                    .map_or_else(|| "none".to_owned(), |b| format!("{b} bytes"))
            )
        })
        .collect();
    (wrong.len(), shown)
}

/// One change of owner: partition, old owner (`None`: first), new owner, new fence.
type Change = (String, Option<String>, String, u64);

fn show(c: &Change) -> String {
    format!("{} {}→{} {}", c.0, c.1.as_deref().unwrap_or("-"), c.2, c.3)
}

/// The owner changes in the replicas' lines: each partition's terms by fence, a change
/// wherever the replica id differs from the term before.
fn observed(fleet: &Fleet) -> Vec<Change> {
    let mut terms: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for l in fleet.log.snapshot() {
        if let PartitionEvent::Owned {
            partition, fence, ..
        } = l.event
        {
            terms.entry(partition).or_default().push((fence, l.replica));
        }
    }
    let mut out = Vec::new();
    for (p, mut ts) in terms {
        ts.sort();
        ts.dedup();
        let mut owner: Option<String> = None;
        for (fence, replica) in ts {
            if owner.as_deref() != Some(replica.as_str()) {
                out.push((p.clone(), owner.clone(), replica.clone(), fence));
                owner = Some(replica);
            }
        }
    }
    out
}

/// Reads the whole ledger of the fleet's group.
///
/// # Errors
/// If the ledger cannot be read.
pub async fn read(fleet: &Fleet) -> Result<Vec<Move>, BoxError> {
    let store = store::build_store(&fleet.servers.spec, fleet.lease())?;
    let admin = GroupAdmin::new(store, &fleet.spec.group)?.with_key_prefix(PREFIX)?;
    let mut all: Vec<Move> = Vec::new();
    loop {
        let page = admin
            .moves(all.last().map(|m| m.id.as_str()), 1_000)
            .await?;
        if page.is_empty() {
            return Ok(all);
        }
        all.extend(page);
    }
}

/// Compares the group's ledger with what the fleet's lines showed. Call it with the
/// group at rest (no move in flight), before the fleet shuts down.
///
/// # Errors
/// If the ledger cannot be read.
pub async fn check(fleet: &Fleet) -> Result<LedgerCheck, BoxError> {
    Ok(check_moves(fleet, &read(fleet).await?))
}

/// Compares `moves`, the group's ledger as [`read`] returned it, with what the fleet's
/// lines showed (see [`check`]).
pub fn check_moves(fleet: &Fleet, moves: &[Move]) -> LedgerCheck {
    let mut causes = BTreeMap::new();
    for m in moves {
        *causes.entry(m.cause.as_str().to_owned()).or_default() += 1;
    }
    let mut recorded: Vec<Change> = moves
        .iter()
        .filter(|m| m.from.as_deref() != Some(m.to.as_str()))
        .map(|m| {
            (
                m.partition.clone(),
                m.from.clone(),
                m.to.clone(),
                m.new_fence.get(),
            )
        })
        .collect();
    let window = (fleet.lease().as_millis() as u64 / 3).max(1);
    let mut per_window: BTreeMap<u64, usize> = BTreeMap::new();
    for m in moves.iter().filter(|m| m.cause == MoveCause::HandOff) {
        if let Some(ended) = m.ended_ms {
            *per_window.entry(ended / window).or_default() += 1;
        }
    }
    let max_handoffs_per_interval = per_window.values().copied().max().unwrap_or(0);
    let carried: Vec<Carried> = moves.iter().map(Carried::from).collect();
    let (state_mismatches, state_mismatched) =
        state_mismatches(&carried, fleet.spec.hand_off_bytes);
    let mut seen = observed(fleet);
    recorded.sort();
    seen.sort();
    let missing: Vec<String> = seen
        .iter()
        .filter(|c| recorded.binary_search(c).is_err())
        .take(SHOWN)
        .map(show)
        .collect();
    let unexpected: Vec<String> = recorded
        .iter()
        .filter(|c| seen.binary_search(c).is_err())
        .take(SHOWN)
        .map(show)
        .collect();
    LedgerCheck {
        entries: moves.len(),
        matches_observed: recorded == seen,
        observed: seen.len(),
        causes,
        missing,
        unexpected,
        max_handoffs_per_interval,
        state_matches: state_mismatches == 0,
        state_mismatches,
        state_mismatched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(p: &str, cause: MoveCause, old: Option<u64>, state: Option<u64>) -> Carried {
        Carried {
            partition: p.into(),
            from: old.map(|_| "a".into()),
            to: "b".into(),
            new_fence: old.map_or(1, |f| f + 1),
            cause,
            old_fence: old,
            state_bytes: state,
        }
    }

    #[test]
    fn planned_moves_carry_the_state_and_nothing_else_is_checked() {
        let entries = [
            entry("p0", MoveCause::New, None, None),
            entry("p0", MoveCause::HandOff, Some(1), Some(4096)),
            entry("p0", MoveCause::Expiry, Some(2), None),
            entry("p0", MoveCause::Leave, Some(3), Some(4096)),
            entry("p0", MoveCause::Drain, Some(4), None),
        ];
        let (n, shown) = state_mismatches(&entries, 4096);
        assert_eq!(n, 1);
        assert_eq!(shown, ["p0 a→b 5 (drain): none"]);
        // Without hand-offs, no planned move may carry any.
        let (n, shown) = state_mismatches(&entries, 0);
        assert_eq!(n, 2);
        assert_eq!(shown[0], "p0 a→b 2 (handoff): 4096 bytes");
        // Below the header's length, the state is the header alone ("p0@3:").
        let small = [entry("p0", MoveCause::Leave, Some(3), Some(5))];
        assert_eq!(state_mismatches(&small, 2).0, 0);
    }
}
