//! The Redis key layout of a partition group. Every key carries the group's hash tag,
//! so every script of a group runs on one Redis Cluster hash slot.
//!
//! A fixed number of keys per group (twenty-five), whatever the number of partitions: a
//! partition is a field or a member in them, not a key of its own. An operator's change
//! also keeps its reply a minute under a key of its own (`<prefix>:{<group>}:op:<id>`),
//! so that a retry of the same request gets the same answer.

use leasehold_election::ext::release_channel;

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
    /// Hash: replica id → its current session token (`<replica>:<hex>`): every
    /// partition of the session names it.
    pub sessions: String,
    /// Hash: replica id → `settling`, `active`, `leaving`, `draining` or `away`.
    pub states: String,
    /// Hash: `count` of partitions, `next` position, the list's `version` and `digest`
    /// (of the last versioned list applied; the digest is empty while one is being
    /// applied), `grant_after` (server ms before which no partition is granted), `life`
    /// (this lifetime of the group: a random id), `origin` (`seed`: created from a
    /// replica's list; `restore`: from the set a replica saw before Redis lost it),
    /// `sver` (bumped by every change to the set, its weights, drains and preferences), `lease` (the
    /// creator's, ms), `fmax` (the highest fence issued), `rcount` (while a restore is
    /// under way: how many partitions the restored set has); once a weight was set,
    /// `weighted` (1) and `total` (the weights summed) until every weight is 1 again
    /// (then both are deleted, with `loads`), and `wver` (bumped by every weight
    /// change); the roster's `rver` (the count of its changes), `rfloor` (the oldest
    /// version `changes` is complete from) and `rbase` (the incarnation and server
    /// lifetime `roster` and `changes` were built in).
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
    /// Hash: replica id → 1, for every replica an operator drained (until undrained,
    /// whatever becomes of its sessions).
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
    /// Hash: replica id → the token of the process that holds its session (the one that
    /// started it, or resumed it after a sticky restart). Only that process ticks,
    /// claims for or ends the session.
    pub holders: String,
    /// Hash: replica id → `process \t until \t ttl` of a sticky replica's process that
    /// was refused while its old session lived (a restart after a crash): when the old
    /// session expires, it is parked for that process instead of ended.
    pub heirs: String,
    /// Hash: process token → `seq \t reply` of its last claim, for a retry of it.
    pub acks: String,
    /// Hash: replica id → its roster entry as a tick sends it (`state \t capacity \t
    /// held \t load`), computed once after each change of the member: a cache of what
    /// the keys above say, dropped by every change (`roster_changed` in `meta.lua`).
    pub roster: String,
    /// Sorted set: replica id → the roster version (`rver` in `meta`) of its last
    /// change (a join, a state, capacity, holdings or load, a leave): a tick sends only
    /// the members changed since the version the replica names. Kept short (the oldest
    /// entries go, and `rfloor` in `meta` says from which version on it is complete);
    /// built again, with `roster`, in a new incarnation or server lifetime (`rbase`).
    pub changes: String,
    /// Hash: free partition → how its last term ended (`replica \t fence \t cause \t
    /// ended ms \t since ms`), until its next claim writes the move to `moves`; and
    /// `\x01<session token>` → why an ended session ended (`leave`), until its
    /// partitions are all free.
    pub ended: String,
    /// Stream, capped (`MAXLEN ~`): one entry per change of owner, written by the claim
    /// that starts the new term ([`crate::Move`]).
    pub moves: String,
    /// Hash: partition → the replica id an operator prefers it on
    /// ([`crate::GroupAdmin::prefer`]). Read by replicas with the set (a change bumps
    /// the set's version), and by claims only while it exists.
    pub prefs: String,
    /// The channel a release or a leave publishes on (shared with single duties under
    /// the same prefix).
    pub channel: String,
    /// The group's tag on `channel`: every notice of the group starts with it
    /// ([`crate::GroupNotice`]); alone, it says something changed (the free set grew).
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
            holders: key("holders"),
            heirs: key("heirs"),
            acks: key("acks"),
            roster: key("roster"),
            changes: key("changes"),
            ended: key("ended"),
            moves: key("moves"),
            prefs: key("prefs"),
            channel: release_channel(prefix),
            notice: format!("{prefix}:{{{group}}}"),
        }
    }

    /// String, one per partition whose last term handed state off and whose next term
    /// has not taken it yet: `<fence>:<bytes>`, the fence of the term that left it,
    /// with a time to live (`GroupConfigBuilder::hand_off_ttl`; a little more once
    /// taken, for a retry). Not one of the group's fixed keys: written by the release
    /// that ends the term, read by the next owner.
    pub fn hand_off(&self, partition: &str) -> String {
        format!("{}:{{{}}}:handoff:{partition}", self.prefix, self.group)
    }

    /// Every key, in the order the group scripts take them as `KEYS` (and
    /// `lua/lib/keys.lua` names them).
    pub(crate) fn all(&self) -> [&str; 25] {
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
            &self.holders,
            &self.heirs,
            &self.acks,
            &self.roster,
            &self.changes,
            &self.ended,
            &self.moves,
            &self.prefs,
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
        // The scripts name them in the same order: `local A, B = KEYS[1], KEYS[2]`.
        let lua = include_str!("store/lua/lib/keys.lua");
        let mut named = std::collections::BTreeMap::new();
        for line in lua
            .lines()
            .filter(|l| l.starts_with("local ") && l.contains("KEYS["))
        {
            let (lhs, rhs) = line["local ".len()..].split_once(" = ").unwrap();
            for (name, key) in lhs.split(", ").zip(rhs.split(", ")) {
                let i: usize = key
                    .trim_start_matches("KEYS[")
                    .trim_end_matches(']')
                    .parse()
                    .unwrap();
                named.insert(i, name.to_lowercase());
            }
        }
        for (i, key) in k.all().iter().enumerate() {
            let name = &named[&(i + 1)];
            assert_eq!(*key, format!("lh:{{tenants}}:{name}"), "KEYS[{}]", i + 1);
        }
        assert_eq!(k.channel, "lh:released");
        assert_eq!(k.notice, "lh:{tenants}");
    }
}
