//! What the driver tells the world: the view its handle watches and the gauges.

use std::future::Future;

use leasehold_election::DutyResult;
use metrics::gauge;
use tokio::time::Instant;

use super::Driver;
use crate::config::GroupConfig;
use crate::error::PartitionsError;
use crate::metrics as m;
use crate::ownership::Ownership;
use crate::store::GroupStore;
use crate::store::protocol::MemberInfo;

/// The size of the roster a tick's reply carried, in bytes of its strings (what
/// [`m::ROSTER_BYTES`] counts): per member sent, its replica id and its entry
/// (`state \t capacity \t held \t load`); per member gone, its replica id; and the
/// roster version.
pub(super) fn roster_bytes(members: &[MemberInfo], gone: &[String], version: &str) -> u64 {
    let digits = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
    let each: usize = members
        .iter()
        .map(|m| {
            m.replica.len()
                + m.state.as_str().len()
                + 3
                + digits(u64::from(m.capacity))
                + digits(m.held as u64)
                + digits(m.load)
        })
        .sum();
    let gone: usize = gone.iter().map(String::len).sum();
    (each + gone + version.len()) as u64
}

#[derive(Debug, Clone)]
pub(crate) struct Labels {
    pub(super) group: String,
    pub(super) replica: String,
}

impl Labels {
    pub(crate) fn new(c: &GroupConfig) -> Self {
        Self {
            group: c.group.clone(),
            replica: c.replica_id.clone(),
        }
    }

    pub(super) fn pair(&self) -> [(&'static str, String); 2] {
        [
            ("group", self.group.clone()),
            ("replica", self.replica.clone()),
        ]
    }

    /// The pair and one more label.
    pub(super) fn with(
        &self,
        key: &'static str,
        value: &'static str,
    ) -> [(&'static str, String); 3] {
        let [g, r] = self.pair();
        [g, r, (key, value.to_owned())]
    }
}

impl<B, F, Fut> Driver<B, F>
where
    B: GroupStore,
    F: Fn(String, Ownership) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = DutyResult> + Send + 'static,
{
    /// Brings the view's owned partitions and load up to date with the holdings.
    pub(super) fn publish_owned(&mut self) {
        let changed = self.state.take_owned_changes();
        if changed.is_empty() {
            return;
        }
        let holdings = self.state.holdings();
        let (add, remove): (Vec<usize>, Vec<usize>) =
            changed.into_iter().partition(|&i| holdings.owned(i));
        let load = self.state.load();
        let names = &self.names;
        self.view.send_modify(|v| {
            for i in remove {
                v.owned.remove(&*names.get(i));
            }
            for i in add {
                v.owned.insert(names.get(i).to_string());
            }
            v.load = load;
            v.latch_readiness();
        });
        gauge!(m::OWNED, &self.labels.pair()).set(self.state.holdings().owned_count() as f64);
    }

    /// Publishes membership, plan and standing if they changed.
    pub(super) fn publish(&self, now: Instant) {
        let settling = self.state.settling(now);
        let grants_from = self.state.grants_from(now);
        let (cap, floor) = self.state.plan().map_or((0, 0), |p| (p.cap, p.floor));
        let joined = self.state.joined();
        let partitions = self.state.partitions();
        let drained = self.state.drained();
        let list_differs = self.state.list_differs();
        let list_difference = self.state.list_difference();
        let error = match self.state.conflict() {
            Some(c) => Some(self.conflict_error(c)),
            None => self.error.clone().map(PartitionsError::from),
        };
        let live = self.state.live();
        let away = self.state.away();
        let weighted = self.state.weighted();
        let load = self.state.load();
        let share = self.state.share();
        let max_weight = self.state.max_weight();
        let capacity = self.config.capacity;
        self.view.send_if_modified(|v| {
            let changed = v.live_replicas != live
                || v.away_replicas != away
                || v.cap != cap
                || v.floor != floor
                || v.weighted != weighted
                || v.load != load
                || v.share != share
                || v.max_weight != max_weight
                || v.capacity != capacity
                || v.settling != settling
                || v.grants_from != grants_from
                || v.joined != joined
                || v.partitions != partitions
                || v.drained != drained
                || v.list_differs != list_differs
                || v.list_difference.as_ref() != list_difference
                || v.error.as_ref().map(ToString::to_string)
                    != error.as_ref().map(ToString::to_string);
            if changed {
                v.live_replicas = live.to_vec();
                v.away_replicas = away;
                v.cap = cap;
                v.floor = floor;
                v.settling = settling;
                v.grants_from = grants_from;
                v.joined = joined;
                v.partitions = partitions;
                v.drained = drained;
                v.list_differs = list_differs;
                v.list_difference = list_difference.cloned();
                v.error = error;
                v.weighted = weighted;
                v.load = load;
                v.share = share;
                v.max_weight = max_weight;
                v.capacity = capacity;
            }
            v.latch_readiness() || changed
        });
        gauge!(m::LOAD, &self.labels.pair()).set(load as f64);
        gauge!(m::CAPACITY, &self.labels.pair()).set(f64::from(capacity));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::protocol::ReplicaState;

    #[test]
    fn a_roster_counts_the_bytes_of_its_strings() {
        let member = |replica: &str, state| MemberInfo {
            replica: replica.to_owned(),
            state,
            left: Duration::from_secs(1),
            held: 12,
            load: 120,
            capacity: 1,
        };
        let members = [
            member("replica-1", ReplicaState::Active),
            member("r2", ReplicaState::Settling),
        ];
        // `replica-1` and `active\t1\t12\t120`, `r2` and `settling\t1\t12\t120`,
        // a member gone, the version.
        assert_eq!(
            roster_bytes(&members, &["r3".to_owned()], "v:7"),
            (9 + 15) + (2 + 17) + 2 + 3
        );
        assert_eq!(roster_bytes(&[], &[], ""), 0);
    }
}
