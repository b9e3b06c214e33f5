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

/// The Redis names of one duty: its lease key, fence counter, boot marker and the
/// release-notification channel. Build them with [`DutyKeys::new`]; read them with the
/// getters (to look at a duty's keys with `redis-cli`, say).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DutyKeys {
    /// The lease key.
    pub(crate) lease: String,
    /// The fence counter key.
    pub(crate) fence: String,
    /// The boot marker: which server lifetime wrote the duty's keys, and since when it
    /// counts; after a restart nothing is granted until one lease after that.
    pub(crate) boot: Option<String>,
    /// The release-notification channel (shared by every duty under one prefix).
    pub(crate) channel: String,
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

    /// The keys of a release channel alone (a partition group's notices share the
    /// channel of their prefix): no duty's lease, fence or boot marker.
    pub(crate) fn of_channel(channel: &str) -> Self {
        Self {
            lease: channel.to_owned(),
            fence: channel.to_owned(),
            boot: None,
            channel: channel.to_owned(),
        }
    }

    /// The lease key (`<prefix>:{<duty>}:lease`): a string holding the leader's token,
    /// with the lease's time to live.
    pub fn lease(&self) -> &str {
        &self.lease
    }

    /// The fence counter key (`<prefix>:{<duty>}:fence`): the last fence issued.
    pub fn fence(&self) -> &str {
        &self.fence
    }

    /// The boot marker key (`<prefix>:{<duty>}:boot`): which server lifetime wrote
    /// the duty's keys, and since when it counts.
    pub fn boot(&self) -> &str {
        self.boot.as_deref().unwrap_or_default()
    }

    /// The release-notification channel (`<prefix>:released`, shared by every duty
    /// under one prefix).
    pub fn channel(&self) -> &str {
        &self.channel
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
        assert_eq!(k.boot(), "lh:{scheduler}:boot");
        assert_eq!(k.channel(), "lh:released");
    }
}
