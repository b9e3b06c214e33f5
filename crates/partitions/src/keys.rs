//! The Redis key layout of a partition group. Every key carries the group's hash tag.

use leasehold_election::keys::DutyKeys;

/// The keys of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupKeys {
    /// The key prefix.
    pub prefix: String,
    /// The group name (the hash tag).
    pub group: String,
    /// Sorted set: replica id → heartbeat expiry (server clock, ms).
    pub members: String,
    /// Hash: replica id → partitions it owns (`-1` while settling).
    pub owned: String,
    /// Hash: replica id → instance nonce of the process heartbeating with it.
    pub instances: String,
    /// Hash: `digest` and `partitions` (the newline-separated list).
    pub meta: String,
    /// Lease and fence keys of every partition, in configured order.
    pub partitions: Vec<DutyKeys>,
}

impl GroupKeys {
    /// The keys of `group` under `prefix` with these partitions.
    pub fn new(prefix: &str, group: &str, partitions: &[String]) -> Self {
        let key = |name: &str| format!("{prefix}:{{{group}}}:{name}");
        Self {
            prefix: prefix.to_owned(),
            group: group.to_owned(),
            members: key("members"),
            owned: key("owned"),
            instances: key("instances"),
            meta: key("meta"),
            partitions: partitions
                .iter()
                .map(|p| DutyKeys::grouped(prefix, group, p))
                .collect(),
        }
    }
}

impl GroupKeys {
    /// The same group with another partition list (read from the group's metadata).
    pub fn with_partitions(&self, partitions: &[String]) -> Self {
        Self::new(&self.prefix, &self.group, partitions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_group_tag() {
        let k = GroupKeys::new("lh", "tenants", &["t1".into()]);
        assert_eq!(k.members, "lh:{tenants}:members");
        assert_eq!(k.partitions[0].lease, "lh:{tenants}:t1:lease");
        assert_eq!(k.partitions[0].fence, "lh:{tenants}:t1:fence");
    }
}
