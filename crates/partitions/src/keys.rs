//! The Redis key layout of a partition group. Every key carries the group's hash tag,
//! so every script of a group runs on one Redis Cluster slot.
//!
//! A fixed number of keys per group (seventeen), whatever the number of partitions: a
//! partition is a field or a member in them, not a key of its own.

use leasehold_election::keys::release_channel;

/// The keys of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupKeys {
    /// The key prefix.
    pub prefix: String,
    /// The group name (the hash tag).
    pub group: String,
    /// Sorted set: replica id → expiry of its session (server clock, ms). A replica's
    /// partitions are held exactly as long as its session lives.
    pub members: String,
    /// Hash: replica id → its current session token (`<replica>:<hex>`).
    pub sessions: String,
    /// Hash: replica id → `settling`, `active`, `leaving`, `draining` or `away`.
    pub states: String,
    /// Hash: `count` of partitions, `next` position, the list's `version` and `digest`
    /// (of the last versioned list applied; the digest is empty while one is being
    /// applied), `grant_after` (server ms before which no partition is granted); once a
    /// weight was set, `weighted` (1), `total` (the weights summed) and `wver` (bumped
    /// by every weight change).
    pub meta: String,
    /// Sorted set: partition → its position (order of addition). The partition set:
    /// authoritative once the group exists.
    pub partitions: String,
    /// Sorted set: partition with no live owner → since when (server ms).
    pub free: String,
    /// Hash: partition → session token of its owner.
    pub owners: String,
    /// Hash: partition → the last fence issued for it.
    pub fences: String,
    /// Sorted set (by name): `<session token>\x01<partition>` for every partition a
    /// session holds, so one session's partitions are one range.
    pub held: String,
    /// Sorted set: session token → expiry, for sessions that ended holding partitions
    /// not yet moved to `free`.
    pub dead: String,
    /// Hash: partition → why its owner must give it up (`removed`), until it does.
    pub revoked: String,
    /// Hash: replica id → the session token an operator drained.
    pub drains: String,
    /// Hash: partition → when its current owner took it (server ms).
    pub since: String,
    /// Hash: replica id → the process using it (`host pid`).
    pub info: String,
    /// Sorted set: partition → its weight, for partitions whose weight is not 1.
    pub weights: String,
    /// Hash: session token → the weights of its partitions, summed (kept once the group
    /// is weighted: a weight was set).
    pub loads: String,
    /// Hash: replica id → its capacity, as it said when it joined.
    pub capacity: String,
    /// The channel a release or a leave publishes on (shared with single duties under
    /// the same prefix).
    pub channel: String,
    /// The message published on `channel` when the group's free set grows.
    pub notice: String,
}

impl GroupKeys {
    /// The keys of `group` under `prefix`.
    pub fn new(prefix: &str, group: &str) -> Self {
        let key = |name: &str| format!("{prefix}:{{{group}}}:{name}");
        Self {
            prefix: prefix.to_owned(),
            group: group.to_owned(),
            members: key("members"),
            sessions: key("sessions"),
            states: key("states"),
            meta: key("meta"),
            partitions: key("partitions"),
            free: key("free"),
            owners: key("owners"),
            fences: key("fences"),
            held: key("held"),
            dead: key("dead"),
            revoked: key("revoked"),
            drains: key("drains"),
            since: key("since"),
            info: key("info"),
            weights: key("weights"),
            loads: key("loads"),
            capacity: key("capacity"),
            channel: release_channel(prefix),
            notice: format!("{prefix}:{{{group}}}"),
        }
    }

    /// Every key, in the order the group scripts take them as `KEYS`.
    pub(crate) fn all(&self) -> [&str; 17] {
        [
            &self.members,
            &self.sessions,
            &self.states,
            &self.meta,
            &self.partitions,
            &self.free,
            &self.owners,
            &self.fences,
            &self.held,
            &self.dead,
            &self.revoked,
            &self.drains,
            &self.since,
            &self.info,
            &self.weights,
            &self.loads,
            &self.capacity,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_group_tag() {
        let k = GroupKeys::new("lh", "tenants");
        assert_eq!(k.members, "lh:{tenants}:members");
        assert_eq!(k.held, "lh:{tenants}:held");
        assert!(k.all().iter().all(|key| key.starts_with("lh:{tenants}:")));
        assert_eq!(k.channel, "lh:released");
        assert_eq!(k.notice, "lh:{tenants}");
    }
}
