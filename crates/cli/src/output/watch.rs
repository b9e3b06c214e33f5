//! The lines of `watch`: what changed between two reads of a group.

use std::collections::{HashMap, HashSet};
use std::fmt;

use leasehold_election::Fence;
use leasehold_partitions::{GroupStatus, ReplicaState, ReplicaStatus};

use super::state_name;

/// A change between two reads of a group, as `watch` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A partition's lease changed hands, or its owner started a new term.
    Owner {
        /// The partition.
        partition: String,
        /// The owner before (`None`: unowned).
        from: Option<String>,
        /// The owner now (`None`: unowned).
        to: Option<String>,
        /// The fence now: the new term's, or the ended term's when `to` is `None`.
        fence: Fence,
    },
    /// A replica started heartbeating.
    Joined(String),
    /// A replica stopped heartbeating (left, or its heartbeat expired).
    Left(String),
    /// A partition was added to the group's set.
    Added(String),
    /// A partition was removed from the group's set.
    Removed(String),
    /// A live replica's state changed (`active → draining`, `active → away`, ...).
    State {
        /// The replica.
        replica: String,
        /// Its state before.
        from: ReplicaState,
        /// Its state now.
        to: ReplicaState,
    },
    /// An operator drained (`true`) or undrained (`false`) a live replica.
    Drained {
        /// The replica.
        replica: String,
        /// Whether it is drained now.
        drained: bool,
    },
    /// A partition's weight was set.
    Weight {
        /// The partition.
        partition: String,
        /// Its weight before.
        from: u64,
        /// Its weight now.
        to: u64,
    },
    /// The group started (`true`) or stopped balancing by weight.
    Weighted(bool),
    /// A newer versioned partition list was applied to the group.
    ListVersion {
        /// The version before.
        from: u64,
        /// The version now.
        to: u64,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |o: &Option<String>| o.clone().unwrap_or_else(|| "(none)".to_owned());
        match self {
            Self::Owner {
                partition,
                from,
                to,
                fence,
            } => write!(
                f,
                "{partition}  {} → {}  fence {fence}",
                name(from),
                name(to)
            ),
            Self::Joined(r) => write!(f, "replica {r} joined"),
            Self::Left(r) => write!(f, "replica {r} left"),
            Self::Added(p) => write!(f, "partition {p} added"),
            Self::Removed(p) => write!(f, "partition {p} removed"),
            Self::State { replica, from, to } => write!(
                f,
                "replica {replica} {} → {}",
                state_name(*from),
                state_name(*to)
            ),
            Self::Drained { replica, drained } => write!(
                f,
                "replica {replica} {}",
                if *drained { "drained" } else { "undrained" }
            ),
            Self::Weight {
                partition,
                from,
                to,
            } => write!(f, "partition {partition} weight {from} → {to}"),
            Self::Weighted(true) => write!(f, "the group balances by weight now"),
            Self::Weighted(false) => write!(f, "the group balances by partition count now"),
            Self::ListVersion { from, to } => write!(f, "list version {from} → {to}"),
        }
    }
}

fn live(s: &GroupStatus) -> Vec<String> {
    let mut v: Vec<String> = s.replicas.iter().map(|(r, _)| r.clone()).collect();
    v.sort();
    v
}

fn members(s: &GroupStatus) -> HashMap<&str, &ReplicaStatus> {
    s.members.iter().map(|m| (m.replica.as_str(), m)).collect()
}

/// What changed from `old` to `new`, in this order: replicas that left; drains and
/// state changes of the replicas live in both; the list version; partitions removed,
/// then added; weights set (in partition order), and whether the group balances by
/// weight; changes of owner (in partition order); replicas that joined. A renewal
/// changes nothing; a new term does, even for the same owner.
pub fn changes(old: &GroupStatus, new: &GroupStatus) -> Vec<Change> {
    let (before, after) = (live(old), live(new));
    let mut out: Vec<Change> = before
        .iter()
        .filter(|r| !after.contains(r))
        .map(|r| Change::Left(r.clone()))
        .collect();

    let (was, is) = (members(old), members(new));
    for replica in after.iter().filter(|r| before.contains(r)) {
        let (Some(was), Some(is)) = (was.get(replica.as_str()), is.get(replica.as_str())) else {
            continue;
        };
        if was.drained != is.drained {
            out.push(Change::Drained {
                replica: replica.clone(),
                drained: is.drained,
            });
        }
        if was.state != is.state {
            out.push(Change::State {
                replica: replica.clone(),
                from: was.state,
                to: is.state,
            });
        }
    }

    if old.list_version != new.list_version {
        out.push(Change::ListVersion {
            from: old.list_version,
            to: new.list_version,
        });
    }

    let names = |s: &GroupStatus| -> HashSet<String> {
        s.partitions.iter().map(|p| p.partition.clone()).collect()
    };
    let (had, has) = (names(old), names(new));
    out.extend(
        old.partitions
            .iter()
            .filter(|p| !has.contains(&p.partition))
            .map(|p| Change::Removed(p.partition.clone())),
    );
    out.extend(
        new.partitions
            .iter()
            .filter(|p| !had.contains(&p.partition))
            .map(|p| Change::Added(p.partition.clone())),
    );

    let previous: HashMap<&str, (&Option<String>, Fence, u64)> = old
        .partitions
        .iter()
        .map(|p| (p.partition.as_str(), (&p.owner, p.fence, p.weight)))
        .collect();
    out.extend(new.partitions.iter().filter_map(|p| {
        let (_, _, from) = previous.get(p.partition.as_str())?;
        (*from != p.weight).then(|| Change::Weight {
            partition: p.partition.clone(),
            from: *from,
            to: p.weight,
        })
    }));
    if old.weighted != new.weighted {
        out.push(Change::Weighted(new.weighted));
    }
    for p in &new.partitions {
        let (from, fence) = previous
            .get(p.partition.as_str())
            .map_or((None, Fence(0)), |(o, f, _)| ((*o).clone(), *f));
        if from != p.owner || (p.owner.is_some() && fence != p.fence) {
            out.push(Change::Owner {
                partition: p.partition.clone(),
                from,
                to: p.owner.clone(),
                fence: p.fence,
            });
        }
    }

    out.extend(
        after
            .iter()
            .filter(|r| !before.contains(r))
            .map(|r| Change::Joined(r.clone())),
    );
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::group::tests::{group, member, part};
    use super::*;

    fn lines(old: &GroupStatus, new: &GroupStatus) -> Vec<String> {
        changes(old, new).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn renewals_are_not_changes() {
        let old = group();
        let mut new = group();
        new.partitions[0].remaining = Some(Duration::from_millis(10_000));
        new.partitions[0].held_for = Some(Duration::from_secs(100));
        new.members[0].session_left = Duration::from_secs(1);
        assert_eq!(changes(&old, &new), vec![]);
    }

    #[test]
    fn hand_overs_expiries_new_terms_and_membership_are_changes() {
        let old = group();
        let mut new = group();
        new.partitions[0] = part("p0", Some("c"), 1_764_000_000_000_009, 10_000); // moved
        new.partitions[1] = part("p1", None, 1_764_000_000_000_002, 0); // released
        new.partitions[2] = part("p2", Some("a"), 8, 10_000); // claimed
        new.partitions[4] = part("p4", Some("a"), 13, 10_000); // new term, same owner
        new.replicas = vec![
            ("a".into(), Some(2)),
            ("c".into(), Some(1)),
            ("d".into(), None),
        ];
        new.members = vec![
            member("a", ReplicaState::Active, false),
            member("c", ReplicaState::Settling, false),
            member("d", ReplicaState::Settling, false),
        ];
        assert_eq!(
            lines(&old, &new),
            [
                "replica b left",
                "p0  b → c  fence 1764000000000009",
                "p1  a → (none)  fence 1764000000000002",
                "p2  (none) → a  fence 8",
                "p4  a → a  fence 13",
                "replica d joined",
            ]
        );
    }

    #[test]
    fn drains_states_set_changes_and_list_versions_are_changes() {
        let old = group();
        let mut new = group();
        // a is drained and starts handing over; b is undrained; c became active.
        new.members = vec![
            member("b", ReplicaState::Active, false),
            member("a", ReplicaState::Draining, true),
            member("c", ReplicaState::Active, false),
        ];
        new.list_version = 4;
        new.partitions.remove(2); // p2 removed
        new.partitions.push(part("p5", None, 0, 0)); // added, unowned
        new.partitions.push(part("p6", Some("c"), 20, 10_000)); // added and claimed
        assert_eq!(
            lines(&old, &new),
            [
                "replica a drained",
                "replica a active → draining",
                "replica b undrained",
                "replica b draining → active",
                "replica c settling → active",
                "list version 3 → 4",
                "partition p2 removed",
                "partition p5 added",
                "partition p6 added",
                "p6  (none) → c  fence 20",
            ]
        );
    }

    #[test]
    fn weights_set_and_balancing_by_weight_are_changes() {
        let old = group();
        let mut new = group();
        new.partitions[3].weight = 250;
        new.partitions[1].weight = 2;
        new.weighted = true;
        new.total_weight = 256;
        new.partitions.push(part("p5", None, 0, 0)); // added: no weight line
        assert_eq!(
            lines(&old, &new),
            [
                "partition p5 added",
                "partition p1 weight 1 → 2",
                "partition p3 weight 1 → 250",
                "the group balances by weight now",
            ]
        );
        assert_eq!(
            lines(&new, &old),
            [
                "partition p5 removed",
                "partition p1 weight 2 → 1",
                "partition p3 weight 250 → 1",
                "the group balances by partition count now",
            ]
        );
    }

    #[test]
    fn a_replica_returning_from_away_is_a_state_change() {
        let mut old = group();
        old.members[1] = member("a", ReplicaState::Away, false);
        let new = group();
        assert_eq!(lines(&old, &new), ["replica a away → active"]);
    }
}
