//! What a coordinator reports about itself.

use std::collections::BTreeSet;

use crate::error::PartitionsError;

/// This replica's view of its group, published when it changes (never on a tick that
/// changed nothing).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GroupView {
    /// Partitions this replica holds: from the claim that won each one until its
    /// runner has stopped the callback and released it. A callback starts a moment
    /// after its partition appears here, and has stopped before it disappears.
    pub owned: BTreeSet<String>,
    /// Live replicas in the heartbeat set (this one included once it has joined).
    pub live_replicas: Vec<String>,
    /// Other replicas parked `away` (sticky ones: after a graceful shutdown, or a crash
    /// within their rejoin grace): their partitions wait for them, unserved, until they
    /// return or their grace ends. Also in `live_replicas`.
    pub away_replicas: Vec<String>,
    /// ceil(P/N): the most partitions a replica holds at steady state.
    pub cap: usize,
    /// floor(P/N): the least.
    pub floor: usize,
    /// Still settling (heartbeating, claiming nothing yet).
    pub settling: bool,
    /// Whether the first group tick has succeeded.
    pub joined: bool,
    /// The group grants nothing before this instant, as of the last tick: a group just
    /// created waits one renew interval (its replicas started together join meanwhile),
    /// or one lease on a Redis that started or was promoted less than a lease ago (or
    /// restarted without its data), because leases granted before may still be held.
    /// `None` when it grants now.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub grants_from: Option<tokio::time::Instant>,
    /// The last error (a Redis failure, or a conflict that stops this replica from
    /// claiming: a duplicate replica id).
    #[cfg_attr(feature = "serde", serde(serialize_with = "error_text"))]
    pub error: Option<PartitionsError>,
    /// Partitions released so that an under-loaded replica could take them.
    pub handoffs: u64,
    /// Partitions in the group's set (P), as of the last tick.
    pub partitions: usize,
    /// An operator drained this replica: it hands everything over and claims nothing
    /// until undrained.
    pub drained: bool,
    /// This replica's configured partition list differs from the group's set, versioned
    /// or not: the group's is followed (see `GroupConfigBuilder::list_version`, and
    /// `list_difference` for which partitions differ).
    pub list_differs: bool,
    /// Which partitions differ between this replica's configured list and the group's
    /// set, as of the last complete read of the set (`None` while they agree, before
    /// the first read, and while this replica applies its newer versioned list).
    pub list_difference: Option<ListDifference>,
    /// The group balances by weight: a partition has a weight, or the replicas'
    /// capacities differ. `cap` and `floor` are then 0: see `share`.
    pub weighted: bool,
    /// The weights of the partitions this replica holds, summed (the count of `owned`
    /// in an unweighted group).
    pub load: u64,
    /// This replica's capacity (`GroupConfigBuilder::capacity`).
    pub capacity: u32,
    /// In a weighted group: the share this replica balances to: the total weight × its
    /// capacity / the capacities summed, unless some replicas hold a single partition
    /// heavier than their share (isolated): an isolated replica's share is that
    /// partition's weight, and the others share the rest in proportion to their
    /// capacities. Its load stays within share ± the largest weight the non-isolated
    /// replicas hold.
    pub share: Option<f64>,
    /// The largest weight of a partition in the group's set (1 in an unweighted group):
    /// a replica's load stays within its share ± this.
    pub max_weight: u64,
    /// The life and set version of this replica's copy of the group's set (kept to
    /// restore the group if Redis loses it), once it has read one (the simulation
    /// checks it).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub(crate) set_copy: Option<(String, u64)>,
    /// This replica has held its floor share (or its share by weight) since it last
    /// joined, undrained: [`readiness`](Self::readiness) asks for the share only until
    /// then, so a replica that was ready stays ready while a peer leaves or a load
    /// report moves the shares (it is taking the difference), and a readiness probe
    /// does not flap. Cleared when its session ends or it is drained.
    pub share_reached: bool,
}

impl GroupView {
    /// Sets or clears [`share_reached`](Self::share_reached) from the rest of the view;
    /// whether it changed.
    pub(crate) fn latch_readiness(&mut self) -> bool {
        let admitted = self.joined
            && !self.drained
            && !self.settling
            && self.grants_from.is_none()
            && !self.error.as_ref().is_some_and(PartitionsError::keeps_out);
        // A share is known once the plan is (a floor of 0 before it is means nothing).
        let known = if self.weighted {
            self.share.is_some()
        } else {
            self.cap > 0
        };
        let reached = admitted && (self.share_reached || (known && self.share_held().is_ok()));
        let changed = reached != self.share_reached;
        self.share_reached = reached;
        changed
    }

    /// Whether this replica is ready in its group's sense: admitted, settled, granting,
    /// not drained, and holding at least its floor share (by count, floor(P/N); by
    /// weight, its share less the largest weight), or as much as the group lets it take
    /// (a group with fewer partitions than replicas has a floor of 0). What a readiness
    /// probe reports ([`CoordinatorHandle::readiness`](crate::CoordinatorHandle::readiness)
    /// also says so once this replica is leaving).
    ///
    /// # Errors
    /// [`NotReady`], saying why not.
    pub fn readiness(&self) -> Result<(), NotReady> {
        if let Some(e) = self.error.as_ref().filter(|e| e.keeps_out()) {
            return Err(NotReady::Refused(e.clone()));
        }
        if !self.joined {
            return Err(NotReady::Joining);
        }
        if self.drained {
            return Err(NotReady::Drained);
        }
        if self.settling {
            return Err(NotReady::Settling);
        }
        if self.grants_from.is_some() {
            return Err(NotReady::GrantHold);
        }
        if self.share_reached {
            return Ok(());
        }
        self.share_held()
    }

    /// Whether this replica holds its floor share now (by count), or its share less
    /// the largest weight (by weight).
    fn share_held(&self) -> Result<(), NotReady> {
        let owned = self.owned.len();
        match self.share {
            Some(share) if self.weighted => {
                let floor = share - self.max_weight as f64;
                if (self.load as f64) < floor {
                    return Err(NotReady::BelowShare {
                        load: self.load,
                        floor,
                    });
                }
            }
            _ => {
                if owned < self.floor {
                    return Err(NotReady::BelowFloor {
                        owned,
                        floor: self.floor,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Why a replica is not ready in its group's sense ([`GroupView::readiness`]): a
/// readiness probe answers 503 with this text. All but [`Refused`](Self::Refused) and
/// [`Stopped`](Self::Stopped) pass on their own.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NotReady {
    /// The coordinator has stopped.
    #[error("the coordinator has stopped")]
    Stopped,
    /// This replica is leaving its group (a shutdown began).
    #[error("leaving the group")]
    Leaving,
    /// Its first heartbeat has not succeeded yet (Redis unreachable, or just started).
    #[error("not admitted to the group yet")]
    Joining,
    /// Kept out of the group (a duplicate replica id, an invalid configuration).
    #[error("kept out of the group")]
    Refused(#[source] PartitionsError),
    /// Drained by an operator: it claims nothing.
    #[error("drained")]
    Drained,
    /// Settling: it claims once it has seen the group.
    #[error("settling")]
    Settling,
    /// The group grants nothing yet: just created (one renew interval on a server older
    /// than a lease, else a lease), or after Redis lost its data.
    #[error("the group grants nothing yet (just created, or after Redis lost its data)")]
    GrantHold,
    /// By count: fewer partitions than floor(P/N).
    #[error("holds {owned} partitions, below its floor of {floor}")]
    BelowFloor {
        /// Partitions it holds.
        owned: usize,
        /// floor(P/N).
        floor: usize,
    },
    /// By weight: a load below its share less the largest weight.
    #[error("carries a load of {load}, below {floor:.1} (its share less the largest weight)")]
    BelowShare {
        /// Its load.
        load: u64,
        /// Its share less the largest weight.
        floor: f64,
    },
}

/// How a replica's configured partition list differs from its group's set (the
/// group's is followed: the configured list only seeds a new group, or is applied
/// when its version is newer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ListDifference {
    /// Partitions in this replica's list and not in the group's set.
    pub only_here: usize,
    /// Partitions in the group's set and not in this replica's list.
    pub only_in_group: usize,
    /// A few of `only_here`, in order.
    pub only_here_sample: Vec<String>,
    /// A few of `only_in_group`, in order.
    pub only_in_group_sample: Vec<String>,
    /// This replica's list version (0: unversioned).
    pub configured_version: u64,
    /// The group's list version.
    pub group_version: u64,
}

impl ListDifference {
    /// How many names of each side a difference keeps.
    pub const SAMPLE: usize = 3;
}

impl std::fmt::Display for ListDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = |f: &mut std::fmt::Formatter<'_>, n: usize, sample: &[String], place: &str| {
            write!(f, "{n} only {place}")?;
            if n > 0 {
                write!(f, " ({}", sample.join(", "))?;
                if n > sample.len() {
                    write!(f, ", ...")?;
                }
                write!(f, ")")?;
            }
            Ok(())
        };
        side(
            f,
            self.only_in_group,
            &self.only_in_group_sample,
            "in the group's set",
        )?;
        write!(f, ", ")?;
        side(
            f,
            self.only_here,
            &self.only_here_sample,
            "in this replica's list",
        )
    }
}

/// A view's error as its text, with its causes.
#[cfg(feature = "serde")]
fn error_text<S: serde::Serializer>(
    error: &Option<PartitionsError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match error {
        Some(e) => s.serialize_some(&crate::ErrorChain(e).to_string()),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted() -> GroupView {
        GroupView {
            joined: true,
            partitions: 12,
            ..GroupView::default()
        }
    }

    #[test]
    fn readiness_is_latched_only_once_a_known_share_is_held() {
        // Joined, but no plan yet: a floor of 0 means nothing, and is not latched.
        let mut v = admitted();
        assert!(!v.latch_readiness());
        assert!(!v.share_reached);
        // The plan: floor 4, and 4 held: latched.
        v.cap = 4;
        v.floor = 4;
        v.owned = (0..4).map(|i| format!("p{i}")).collect();
        assert!(v.latch_readiness());
        assert!(v.share_reached);
        // A peer leaves: the floor rises before the partitions come; still ready.
        v.cap = 6;
        v.floor = 6;
        assert!(!v.latch_readiness());
        assert!(v.readiness().is_ok(), "{:?}", v.readiness());
        // Drained: cleared, and not ready.
        v.drained = true;
        assert!(v.latch_readiness());
        assert!(!v.share_reached);
        assert!(v.readiness().is_err());
    }
}
