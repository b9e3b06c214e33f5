//! The Redis key layout.
//!
//! Every key of one duty shares the Redis Cluster hash tag `{<duty>}`, so the scripts
//! that touch several of them stay valid on a cluster:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `<prefix>:{<duty>}:lease` | string with TTL | the holder's token `<replica-id>:<128-bit hex>` |
//! | `<prefix>:{<duty>}:fence` | string (integer) | the last fencing token issued |
//! | `<prefix>:{<duty>}:boot` | hash, no TTL | `run_id` and `since`: the server lifetime the duty's keys were written in, and its start (server ms) as the acquire script estimated it |
//!
//! Release notifications go to the channel `<prefix>:released` with the lease key as
//! the message.

/// The Redis names of one duty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DutyKeys {
    /// The lease key.
    pub lease: String,
    /// The fence counter key.
    pub fence: String,
    /// The boot marker: which server lifetime wrote the duty's keys, and since when it
    /// counts; after a restart nothing is granted until one lease after that. `None`
    /// for the keys of a group's partition unless asked for with
    /// [`DutyKeys::with_boot_marker`] (a partition group holds its grants back after a
    /// restart its own way: a group created again grants nothing for one lease).
    pub boot: Option<String>,
    /// The release-notification channel (shared by every duty under one prefix).
    pub channel: String,
}

impl DutyKeys {
    /// The keys of `duty` under `prefix`.
    pub fn new(prefix: &str, duty: &str) -> Self {
        Self {
            lease: format!("{prefix}:{{{duty}}}:lease"),
            fence: format!("{prefix}:{{{duty}}}:fence"),
            boot: Some(format!("{prefix}:{{{duty}}}:boot")),
            channel: release_channel(prefix),
        }
    }
}

impl DutyKeys {
    /// The keys of `name` inside `group`: they carry the group's hash tag, so every
    /// key of a group lives in one Redis Cluster slot.
    pub fn grouped(prefix: &str, group: &str, name: &str) -> Self {
        Self {
            lease: format!("{prefix}:{{{group}}}:{name}:lease"),
            fence: format!("{prefix}:{{{group}}}:{name}:fence"),
            boot: None,
            channel: release_channel(prefix),
        }
    }

    /// The same keys with a boot marker next to the lease (`...:boot`, same hash tag):
    /// acquires then grant nothing for one lease after a restart.
    pub fn with_boot_marker(mut self) -> Self {
        let base = self.lease.strip_suffix(":lease").unwrap_or(&self.lease);
        self.boot = Some(format!("{base}:boot"));
        self
    }
}

/// The release-notification channel of a key prefix.
pub fn release_channel(prefix: &str) -> String {
    format!("{prefix}:released")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let k = DutyKeys::new("lh", "scheduler");
        assert_eq!(k.lease, "lh:{scheduler}:lease");
        assert_eq!(k.fence, "lh:{scheduler}:fence");
        assert_eq!(k.boot.as_deref(), Some("lh:{scheduler}:boot"));
        let g = DutyKeys::grouped("lh", "tenants", "t1");
        assert_eq!(g.boot, None);
        assert_eq!(
            g.with_boot_marker().boot.as_deref(),
            Some("lh:{tenants}:t1:boot")
        );
        assert_eq!(k.channel, "lh:released");
    }
}
