//! add and remove: changes to the partition set (`lua/add.lua`, `lua/remove.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::read::{SUM_MOD, name_sum};
use super::{OpReply, count, group_script, keys_with_op, ms};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Budget, Follow, Group, Meta, Now, distinct};
use crate::store::protocol::Origin;

pub(crate) static ADD: LazyLock<LuaScript> = group_script!("add.lua");
pub(crate) static REMOVE: LazyLock<LuaScript> = group_script!("remove.lua");

/// How an addition or a removal treats the set it finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// An operator's change: nothing if one name is already there (an addition) or
    /// unknown, or if the set would be empty (a removal); the group must exist. `op`:
    /// the request's id, under which its reply is kept a minute for a retry.
    Strict { op: String },
    /// Whatever is not done yet (a replica applying its versioned list).
    #[cfg_attr(not(test), allow(dead_code))]
    Ensure,
    /// As `Ensure`, but only while the group's list version is this one: a newer list
    /// applied meanwhile wins.
    Versioned(u64),
    /// Creates a group that does not exist from a replica's configured list (no grant
    /// for `grant_delay`, or only for `gather` on a server that has granted on its own
    /// history for more than `lease`: it cannot have forgotten a lease of the group),
    /// and goes on only while the group is the one it created (`life`: the new group's
    /// id).
    Seed {
        life: String,
        grant_delay: Duration,
        lease: Duration,
        gather: Duration,
    },
}

impl Change {
    fn op(&self) -> Option<&str> {
        match self {
            Self::Strict { op } => Some(op),
            _ => None,
        }
    }

    fn mode(&self) -> String {
        match self {
            Self::Strict { .. } => "strict".to_owned(),
            Self::Ensure => "ensure".to_owned(),
            Self::Versioned(v) => v.to_string(),
            Self::Seed { .. } => "seed".to_owned(),
        }
    }

    /// The keys a script of this change takes: the group's, and an operator's reply key.
    fn keys(&self, keys: &GroupKeys) -> Vec<String> {
        keys_with_op(keys, self.op())
    }
}

/// What adding partitions did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddReply {
    /// This many were new.
    Added(usize),
    /// (strict) This one is in the set already; nothing was added.
    Exists(String),
    /// (versioned, seed) The group is at another list version now, or is not the one
    /// this seed created; nothing was added.
    Stale,
    /// The group does not exist (only a seed creates one).
    NoGroup,
    /// The group was just created again and its set may still be restored: try again
    /// after this long.
    Restoring(Duration),
}

/// What removing partitions did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoveReply {
    /// This many were removed.
    Removed(usize),
    /// (strict) This one is not in the set; nothing was removed.
    Unknown(String),
    /// (strict) It would leave the set empty; nothing was removed.
    Last,
    /// (versioned) The group is at another list version now; nothing was removed.
    Stale,
    /// The group does not exist.
    NoGroup,
    /// As for [`AddReply::Restoring`].
    Restoring(Duration),
}

pub(crate) async fn add(
    store: &RedisStore,
    keys: &GroupKeys,
    mode: &Change,
    names: &[String],
) -> Result<AddReply, StoreError> {
    let (life, delay, lease, gather) = match mode {
        Change::Seed {
            life,
            grant_delay,
            lease,
            gather,
        } => (
            life.clone(),
            super::millis(*grant_delay),
            super::millis(*lease),
            super::millis(*gather),
        ),
        _ => (String::new(), String::new(), String::new(), String::new()),
    };
    let m = mode.mode();
    let mut args = vec![
        m.as_str(),
        &life,
        &delay,
        &lease,
        &keys.channel,
        &keys.notice,
        &gather,
    ];
    args.extend(names.iter().map(String::as_str));
    let all = mode.keys(keys);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    parse_add(store.eval(&ADD, &all, &args).await?)
}

/// The reply of `lua/add.lua`.
pub(super) fn parse_add(reply: Value) -> Result<AddReply, StoreError> {
    let mut p = Parse::new("add", reply);
    let r = match p.next_string()?.as_str() {
        "ok" => AddReply::Added(count(p.next_int()?)),
        "exists" => AddReply::Exists(p.next_string()?),
        "stale" => AddReply::Stale,
        "nogroup" => AddReply::NoGroup,
        "restoring" => AddReply::Restoring(ms(p.next_int()?)),
        other => return Err(StoreError::Protocol(format!("add replied {other:?}"))),
    };
    p.finish()?;
    Ok(r)
}

pub(crate) async fn remove(
    store: &RedisStore,
    keys: &GroupKeys,
    mode: &Change,
    names: &[String],
) -> Result<RemoveReply, StoreError> {
    let m = mode.mode();
    let mut args = vec![m.as_str(), keys.channel.as_str(), keys.notice.as_str()];
    args.extend(names.iter().map(String::as_str));
    let all = mode.keys(keys);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    parse_remove(store.eval(&REMOVE, &all, &args).await?)
}

/// The reply of `lua/remove.lua`.
pub(super) fn parse_remove(reply: Value) -> Result<RemoveReply, StoreError> {
    let mut p = Parse::new("remove", reply);
    let r = match p.next_string()?.as_str() {
        "ok" => RemoveReply::Removed(count(p.next_int()?)),
        "unknown" => RemoveReply::Unknown(p.next_string()?),
        "last" => RemoveReply::Last,
        "stale" => RemoveReply::Stale,
        "nogroup" => RemoveReply::NoGroup,
        "restoring" => RemoveReply::Restoring(ms(p.next_int()?)),
        other => return Err(StoreError::Protocol(format!("remove replied {other:?}"))),
    };
    p.finish()?;
    Ok(r)
}

impl Group {
    /// The twin of `lua/add.lua`; whether to publish the notice.
    pub(crate) fn add(&mut self, mode: &Change, names: &[String], now: Now) -> (AddReply, bool) {
        let op = mode.op();
        if let Some(OpReply::Add(r)) = self.replayed(op, now) {
            return (r, false);
        }
        let answer = |g: &mut Self, r: AddReply| {
            g.answer(op, OpReply::Add(r.clone()), now);
            r
        };
        match (mode, &self.meta) {
            (
                Change::Seed {
                    life,
                    grant_delay,
                    lease,
                    gather,
                },
                None,
            ) => {
                let delay = if now.server_older_than(millis(*lease)) {
                    grant_delay.min(gather)
                } else {
                    grant_delay
                };
                self.meta = Some(Meta {
                    count: 0,
                    next: 0,
                    version: 0,
                    digest: String::new(),
                    grant_after: now.ms + millis(*delay),
                    life: life.clone(),
                    sver: 0,
                    lease: millis(*lease),
                    fmax: 0,
                    origin: Origin::Seed,
                    weighted: false,
                    total: 0,
                    wver: 0,
                    rcount: 0,
                    inc: format!("s:{life}:{}", now.us),
                    follow: Follow {
                        server: now.lifetime,
                        after: 0,
                        checked: None,
                    },
                    ssum: Some(0),
                    budget: Budget::default(),
                    amended: false,
                    adopting: None,
                });
            }
            (Change::Seed { life, .. }, Some(m)) if m.life != *life || m.origin != Origin::Seed => {
                return (AddReply::Stale, false);
            }
            // The seed goes on, in its own grant window.
            (Change::Seed { .. }, Some(_)) => {}
            (_, None) => return (AddReply::NoGroup, false),
            (_, Some(_)) if self.change_wait(now).is_some() => {
                let wait = self.change_wait(now).unwrap_or_default();
                return (AddReply::Restoring(wait), false);
            }
            (Change::Versioned(v), Some(m)) if m.version != *v => {
                return (AddReply::Stale, false);
            }
            _ => {}
        }
        let names = distinct(names);
        if matches!(mode, Change::Strict { .. })
            && let Some(n) = names.iter().find(|n| self.set.positions.contains_key(*n))
        {
            return (AddReply::Exists(n.clone()), false);
        }
        let added = self.add_names(&names, None, now);
        if added > 0 {
            self.bump_set();
        }
        if added == 0 {
            return (AddReply::Added(0), false);
        }
        (answer(self, AddReply::Added(added)), true)
    }

    /// The twin of `lua/remove.lua`; whether to publish the notice.
    pub(crate) fn remove(
        &mut self,
        mode: &Change,
        names: &[String],
        now: Now,
    ) -> (RemoveReply, bool) {
        let op = mode.op();
        if let Some(OpReply::Remove(r)) = self.replayed(op, now) {
            return (r, false);
        }
        let answer = |g: &mut Self, r: RemoveReply| {
            g.answer(op, OpReply::Remove(r.clone()), now);
            r
        };
        let Some(m) = &self.meta else {
            return (RemoveReply::NoGroup, false);
        };
        if let Some(wait) = self.change_wait(now) {
            return (RemoveReply::Restoring(wait), false);
        }
        match mode {
            Change::Versioned(v) if m.version != *v => return (RemoveReply::Stale, false),
            Change::Seed { .. } => return (RemoveReply::Stale, false),
            _ => {}
        }
        let names = distinct(names);
        if names.is_empty() {
            return (RemoveReply::Removed(0), false);
        }
        let strict = matches!(mode, Change::Strict { .. });
        let mut gone = Vec::new();
        for n in &names {
            if self.set.positions.contains_key(n) {
                gone.push(n.clone());
            } else if strict {
                return (RemoveReply::Unknown(n.clone()), false);
            }
        }
        if strict && gone.len() >= self.set.positions.len() {
            return (RemoveReply::Last, false);
        }
        if gone.is_empty() {
            return (RemoveReply::Removed(0), false);
        }
        self.remove_names(&gone);
        self.bump_set();
        (answer(self, RemoveReply::Removed(gone.len())), true)
    }
}

impl Group {
    /// `add_names` in `lib/set.lua`: adds the `names` (distinct) not in the set yet,
    /// each free unless still held, with weight `ws[j]` if given; how many it added.
    pub(crate) fn add_names(&mut self, names: &[String], ws: Option<&[u64]>, now: Now) -> usize {
        let new: Vec<(String, Option<u64>)> = names
            .iter()
            .enumerate()
            .filter(|(_, n)| !self.set.positions.contains_key(*n))
            .map(|(j, n)| (n.clone(), ws.map(|w| w[j])))
            .collect();
        if new.is_empty() {
            return 0;
        }
        if new.iter().any(|(_, w)| w.is_some_and(|w| w != 1)) && !self.weighted() {
            self.make_weighted();
        }
        for (n, w) in &new {
            if let Some(w) = *w {
                let old = self.weight(n);
                if old != w
                    && let Some(owner) = self.owners.get(n).cloned()
                    && let Some(l) = self.loads.get_mut(&owner)
                {
                    *l = u64::try_from((i128::from(*l) + i128::from(w) - i128::from(old)).max(0))
                        .unwrap_or(0);
                }
                if w == 1 {
                    self.set.weights.remove(n);
                } else {
                    self.set.weights.insert(n.clone(), w);
                }
            }
            let w = self.weight(n);
            let meta = self.meta.as_mut().expect("the group exists");
            let pos = meta.next;
            meta.next += 1;
            meta.count += 1;
            if meta.weighted {
                meta.total += w;
            }
            meta.ssum = meta.ssum.map(|s| (s + name_sum(n)) % SUM_MOD);
            self.set.positions.insert(n.clone(), pos);
            self.set.order.insert(pos, n.clone());
            if !self.owners.contains_key(n) {
                self.add_free(n, now.ms);
            }
            self.revoked.remove(n);
        }
        new.len()
    }

    /// `remove_names` in `lib/set.lua`: removes `gone` (distinct names in the set) and
    /// their preferences; a held one is revoked.
    pub(crate) fn remove_names(&mut self, gone: &[String]) {
        for n in gone {
            if let Some(pos) = self.set.positions.remove(n) {
                self.set.order.remove(&pos);
            }
            self.remove_free(n);
            self.ends.ended.remove(n);
            self.ends.reserved.remove(n);
            self.set.prefs.remove(n);
            let w = self.weight(n);
            if self.owners.contains_key(n) {
                self.revoked.insert(n.clone(), "removed".into());
            } else {
                self.set.weights.remove(n);
            }
            if let Some(m) = self.meta.as_mut() {
                m.count = m.count.saturating_sub(1);
                if m.weighted {
                    m.total = m.total.saturating_sub(w);
                }
                m.ssum = m.ssum.map(|s| (s + SUM_MOD - name_sum(n)) % SUM_MOD);
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis().max(1)).unwrap_or(u64::MAX)
}

/// Adds partitions to the set (see [`Change`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Add {
    pub(crate) mode: Change,
    pub(crate) names: Vec<String>,
}

impl Add {
    /// Adds `names` as `mode` says.
    pub(crate) fn new(mode: &Change, names: &[String]) -> Self {
        Self {
            mode: mode.clone(),
            names: names.to_vec(),
        }
    }
}

impl Op for Add {
    type Reply = AddReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<AddReply, StoreError> {
        add(store, keys, &self.mode, &self.names).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> AddReply {
        store.with(keys, |g, now| g.add(&self.mode, &self.names, now))
    }
}

/// Removes partitions from the set; their owners are told to give them up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remove {
    pub(crate) mode: Change,
    pub(crate) names: Vec<String>,
}

impl Remove {
    /// Removes `names` as `mode` says.
    pub(crate) fn new(mode: &Change, names: &[String]) -> Self {
        Self {
            mode: mode.clone(),
            names: names.to_vec(),
        }
    }
}

impl Op for Remove {
    type Reply = RemoveReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<RemoveReply, StoreError> {
        remove(store, keys, &self.mode, &self.names).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> RemoveReply {
        store.with(keys, |g, now| g.remove(&self.mode, &self.names, now))
    }
}
