//! What operators read of a group: its status, one partition's owner, and how the
//! whole group is read page by page.

use std::time::Duration;

use leasehold_election::{Fence, StoreError};

use super::{GroupStore, STATUS_PAGE};
use crate::balance::weighted::{Loaded, shares};
use crate::keys::GroupKeys;
use crate::store::ops;

/// The whole group as stored, for operators.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GroupStatus {
    /// Every partition with its owner, in the order they were added. On a large group
    /// this is read in pages of a thousand, so it is not one atomic snapshot.
    pub partitions: Vec<PartitionOwner>,
    /// Live replicas with how many partitions each holds (`None`: still settling).
    pub replicas: Vec<(String, Option<usize>)>,
    /// Every live replica in detail, in the order of `replicas`. Read in one script
    /// with `replicas`, before the partitions.
    pub members: Vec<ReplicaStatus>,
    /// The version of the last versioned partition list applied to the group (0 if
    /// none: the set was seeded, or changed through [`crate::GroupAdmin`] only).
    pub list_version: u64,
    /// Whether the group balances by weight: a weight was set
    /// ([`crate::GroupAdmin::set_weight`]), or its replicas' capacities differ.
    pub weighted: bool,
    /// The partitions' weights, summed (P in an unweighted group).
    pub total_weight: u64,
    /// Every drained replica id, live or not: a drain lasts until undrained.
    pub drained: Vec<String>,
    /// Every preference ([`crate::GroupAdmin::prefer`]): partition and the replica id
    /// it is preferred on, by partition name. Read in one script with `replicas`.
    pub preferences: Vec<(String, String)>,
}

/// What a live replica of a group is doing (as the other members see it too: the
/// protocol's member state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum ReplicaState {
    /// Just joined: heartbeating, claiming nothing yet.
    #[default]
    Settling,
    /// Taking part.
    Active,
    /// Shutting down: handing its partitions back.
    Leaving,
    /// Drained by an operator: handing its partitions over, claiming nothing.
    Draining,
    /// Restarting: its partitions are kept for its return (`rejoin_grace`).
    Away,
}

impl ReplicaState {
    /// Its name in the store (and in `leasehold status`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Settling => "settling",
            Self::Active => "active",
            Self::Leaving => "leaving",
            Self::Draining => "draining",
            Self::Away => "away",
        }
    }

    /// From its name in the store (an unknown one reads as `Settling`).
    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "active" => Self::Active,
            "leaving" => Self::Leaving,
            "draining" => Self::Draining,
            "away" => Self::Away,
            _ => Self::Settling,
        }
    }

    /// Whether the member counts towards N (it will hold its share).
    pub(crate) fn counts(self) -> bool {
        matches!(self, Self::Settling | Self::Active | Self::Away)
    }
}

/// One live replica, for operators.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ReplicaStatus {
    /// The replica id.
    pub replica: String,
    /// What it is doing.
    pub state: ReplicaState,
    /// Partitions its session holds.
    pub held: usize,
    /// Time left on its session: its partitions are held that long unless it
    /// heartbeats again.
    pub session_left: Duration,
    /// The process using it (`host pid`), as it said when it joined.
    pub instance: String,
    /// Where it serves requests, as it advertised when it joined
    /// ([`crate::GroupConfigBuilder::advertise`]); `None` if it advertises nothing.
    pub address: Option<String>,
    /// Whether an operator drained it.
    pub drained: bool,
    /// The weights of its partitions, summed (its partition count in an unweighted
    /// group).
    pub load: u64,
    /// Its capacity ([`crate::GroupConfigBuilder::capacity`]).
    pub capacity: u32,
}

impl GroupStatus {
    /// In a weighted group, the share each replica balances to, by replica id, for the
    /// replicas that take part (settling, active or away; a drained one is draining): as the
    /// replicas compute it (the total weight × its capacity / the capacities summed,
    /// unless some hold a single partition heavier than that: such a replica's share is
    /// that partition's weight, and the others share the rest). Empty in an unweighted
    /// group.
    pub fn shares(&self) -> Vec<(String, f64)> {
        if !self.weighted {
            return Vec::new();
        }
        let taking_part: Vec<&ReplicaStatus> = self
            .members
            .iter()
            .filter(|m| {
                matches!(
                    m.state,
                    ReplicaState::Settling | ReplicaState::Active | ReplicaState::Away
                )
            })
            .collect();
        let loaded: Vec<Loaded> = taking_part
            .iter()
            .map(|m| Loaded::member(&m.replica, m.state, m.load, m.held, m.capacity))
            .collect();
        taking_part
            .iter()
            .map(|m| m.replica.clone())
            .zip(shares(&loaded, self.total_weight))
            .collect()
    }

    /// The replica id `partition` is preferred on, if an operator set one.
    pub fn preferred(&self, partition: &str) -> Option<&str> {
        self.preferences
            .binary_search_by(|(p, _)| p.as_str().cmp(partition))
            .ok()
            .map(|i| self.preferences[i].1.as_str())
    }

    /// Partitions owned per live replica, counted from the partitions themselves.
    pub fn owned_counts(&self) -> Vec<(String, usize)> {
        let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for p in &self.partitions {
            if let Some(owner) = p.owner.as_deref() {
                *counts.entry(owner).or_default() += 1;
            }
        }
        self.replicas
            .iter()
            .map(|(r, _)| (r.clone(), counts.get(r.as_str()).copied().unwrap_or(0)))
            .collect()
    }

    /// max − min of [`GroupStatus::owned_counts`] (0 with no replicas).
    pub fn spread(&self) -> usize {
        let counts: Vec<usize> = self.owned_counts().into_iter().map(|(_, n)| n).collect();
        match (counts.iter().max(), counts.iter().min()) {
            (Some(max), Some(min)) => max - min,
            _ => 0,
        }
    }
}

/// One partition's owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PartitionOwner {
    /// The partition.
    pub partition: String,
    /// Its owner's replica id, if a live session holds it.
    pub owner: Option<String>,
    /// The fence of the current (or last) term.
    pub fence: Fence,
    /// Time left on the owner's session (when it is not renewed).
    pub remaining: Option<Duration>,
    /// How long its owner has held it (since the claim that won it).
    pub held_for: Option<Duration>,
    /// Its weight (1 unless set).
    pub weight: u64,
}

/// A replica's field of the group's `INFO` hash, split at its first tab: the process
/// (`host pid`) and the address the replica advertises, if any (an empty one is none).
pub(crate) fn split_info(value: &str) -> (&str, Option<&str>) {
    match value.split_once('\t') {
        Some((instance, address)) => (instance, Some(address).filter(|a| !a.is_empty())),
        None => (value, None),
    }
}

/// Reads the whole group: the head, then the partitions page by page.
pub(crate) async fn read_status<B: GroupStore>(
    store: &B,
    keys: &GroupKeys,
) -> Result<Option<GroupStatus>, StoreError> {
    let Some(head) = store.run(keys, &ops::ReadStatusHead).await? else {
        return Ok(None);
    };
    let mut partitions = Vec::with_capacity(head.set.count);
    while partitions.len() < head.set.count {
        let page = store
            .run(keys, &ops::StatusPage::new(partitions.len(), STATUS_PAGE))
            .await?;
        if page.is_empty() {
            break;
        }
        partitions.extend(page);
    }
    let members: Vec<ReplicaStatus> = head
        .members
        .iter()
        .zip(
            head.instances
                .iter()
                .chain(std::iter::repeat(&String::new())),
        )
        .map(|(m, info)| {
            let (instance, address) = split_info(info);
            (m, instance.to_owned(), address.map(str::to_owned))
        })
        .map(|(m, instance, address)| ReplicaStatus {
            replica: m.replica.clone(),
            state: m.state,
            held: m.held,
            session_left: m.left,
            instance,
            address,
            drained: head.drained.contains(&m.replica),
            load: m.load,
            capacity: m.capacity,
        })
        .collect();
    let weighted = head.set.weighted
        || head
            .members
            .windows(2)
            .any(|w| w[0].capacity != w[1].capacity);
    let replicas = head
        .members
        .into_iter()
        .map(|m| {
            let held = (m.state != ReplicaState::Settling).then_some(m.held);
            (m.replica, held)
        })
        .collect();
    Ok(Some(GroupStatus {
        partitions,
        replicas,
        members,
        list_version: head.set.version,
        weighted,
        total_weight: head.set.total_weight,
        drained: {
            // Redis answers in hash order; the in-memory store sorted.
            let mut d = head.drained;
            d.sort();
            d
        },
        preferences: head.preferences,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(replica: &str, state: ReplicaState, held: usize, load: u64) -> ReplicaStatus {
        ReplicaStatus {
            replica: replica.to_owned(),
            state,
            held,
            load,
            capacity: 1,
            ..ReplicaStatus::default()
        }
    }

    #[test]
    fn shares_are_the_ones_the_replicas_balance_to() {
        // 34 tenants, one of weight 250, on 3 replicas: the heavy one alone is its own
        // share, the other two share the rest; a draining replica takes no share.
        let status = GroupStatus {
            weighted: true,
            total_weight: 283,
            members: vec![
                member("a", ReplicaState::Active, 17, 17),
                member("b", ReplicaState::Active, 1, 250),
                member("c", ReplicaState::Active, 16, 16),
                member("d", ReplicaState::Draining, 0, 0),
            ],
            ..GroupStatus::default()
        };
        assert_eq!(
            status.shares(),
            [("a".into(), 16.5), ("b".into(), 250.0), ("c".into(), 16.5)]
        );
        let unweighted = GroupStatus {
            weighted: false,
            ..status
        };
        assert!(unweighted.shares().is_empty());
    }
}
