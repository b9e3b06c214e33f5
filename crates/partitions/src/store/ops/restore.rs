//! restore: a group Redis lost, created again from the set a live replica saw
//! (`lua/restore.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Budget, Follow, Group, Meta, Now};
use crate::store::protocol::Origin;

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("restore.lua");

/// The set a replica saw, as a restore carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Its life and set version.
    pub life: String,
    pub set_version: u64,
    /// No grant for this long after the group is created again.
    pub grant_delay: Duration,
    /// How many partitions it has.
    pub count: usize,
}

/// A step of restoring a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreStep {
    /// Creates the group (or takes over one seeded, or restored from an older version
    /// of this set, whose window is still open), with its first chunk of partitions.
    Begin {
        of: Restored,
        version: u64,
        digest: String,
        lease: Duration,
        highest_fence: Fence,
        weighted: bool,
        weights_version: u64,
        drained: Vec<String>,
        /// Every preference (partition, replica id) the copy carried.
        preferences: Vec<(String, String)>,
        names: Vec<(String, u64)>,
    },
    /// Puts these partitions (with their weights) in, while the group is this restore's.
    Add {
        of: Restored,
        names: Vec<(String, u64)>,
    },
}

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    step: &RestoreStep,
) -> Result<bool, StoreError> {
    let of = match step {
        RestoreStep::Begin { of, .. } | RestoreStep::Add { of, .. } => of,
    };
    let (sver, delay) = (of.set_version.to_string(), super::millis(of.grant_delay));
    let mut args: Vec<String> = vec![
        match step {
            RestoreStep::Begin { .. } => "begin".into(),
            RestoreStep::Add { .. } => "add".into(),
        },
        of.life.clone(),
        sver,
        delay,
        of.count.to_string(),
    ];
    let names = match step {
        RestoreStep::Begin {
            version,
            digest,
            lease,
            highest_fence,
            weighted,
            weights_version,
            drained,
            preferences,
            names,
            ..
        } => {
            args.extend([
                version.to_string(),
                digest.clone(),
                super::millis(*lease),
                highest_fence.get().to_string(),
                if *weighted { "1" } else { "0" }.into(),
                weights_version.to_string(),
                drained.len().to_string(),
            ]);
            args.extend(drained.iter().cloned());
            args.push(preferences.len().to_string());
            for (p, r) in preferences {
                args.push(p.clone());
                args.push(r.clone());
            }
            names
        }
        RestoreStep::Add { names, .. } => names,
    };
    for (n, w) in names {
        args.push(n.clone());
        args.push(w.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    parse(store.eval(&SCRIPT, &keys.all(), &args).await?)
}

/// The reply of `lua/restore.lua`: whether the step was applied.
pub(super) fn parse(reply: Value) -> Result<bool, StoreError> {
    let mut p = Parse::new("restore", reply);
    let applied = match p.next_string()?.as_str() {
        "ok" => true,
        "stale" => false,
        other => return Err(StoreError::Protocol(format!("restore replied {other:?}"))),
    };
    p.finish()?;
    Ok(applied)
}

impl Group {
    /// The twin of `lua/restore.lua`.
    pub(crate) fn restore(&mut self, step: &RestoreStep, now: Now) -> bool {
        match step {
            RestoreStep::Begin {
                of,
                version,
                digest,
                lease,
                highest_fence,
                weighted,
                weights_version,
                drained,
                preferences,
                names,
            } => {
                let (after, fmax, server_after, checked) = match &self.meta {
                    Some(m) => {
                        let same = m.origin == Origin::Restore
                            && m.life == of.life
                            && m.sver == of.set_version;
                        if same {
                            return true;
                        }
                        let older = m.origin == Origin::Seed
                            || (m.origin == Origin::Restore
                                && m.life == of.life
                                && m.sver < of.set_version);
                        if !(self.restoring(now).is_some() && older) {
                            return false;
                        }
                        self.set.positions.clear();
                        self.set.order.clear();
                        self.free.clear();
                        self.free_since.clear();
                        self.set.weights.clear();
                        self.revoked.clear();
                        // A group of another server lifetime keeps its hold.
                        let mut followed = m.clone();
                        followed.follow_server(now, false);
                        (
                            m.grant_after,
                            m.fmax,
                            followed.follow.after,
                            followed.follow.checked,
                        )
                    }
                    None => (0, 0, 0, None),
                };
                self.meta = Some(Meta {
                    count: 0,
                    next: 0,
                    version: *version,
                    digest: digest.clone(),
                    grant_after: after.max(now.ms + millis(of.grant_delay)),
                    life: of.life.clone(),
                    sver: of.set_version,
                    lease: millis(*lease),
                    fmax: fmax.max(highest_fence.get()),
                    origin: Origin::Restore,
                    weighted: *weighted,
                    total: 0,
                    wver: *weights_version,
                    rcount: of.count,
                    inc: format!("r:{}:{}:{}", of.life, of.set_version, now.us),
                    follow: Follow {
                        server: now.lifetime,
                        after: server_after,
                        checked,
                    },
                    ssum: Some(0),
                    budget: Budget::default(),
                    amended: false,
                    adopting: None,
                });
                self.drains = drained.iter().cloned().collect();
                self.set.prefs = preferences.iter().cloned().collect();
                self.restore_names(names, now);
                true
            }
            RestoreStep::Add { of, names } => {
                let Some(m) = self.meta.as_mut() else {
                    return false;
                };
                if !(m.origin == Origin::Restore && m.life == of.life && m.sver == of.set_version) {
                    return false;
                }
                self.restore_names(names, now);
                true
            }
        }
    }

    fn restore_names(&mut self, names: &[(String, u64)], now: Now) {
        for (n, w) in names {
            if self.set.positions.contains_key(n) {
                continue;
            }
            let m = self.meta.as_mut().expect("the group exists");
            let pos = m.next;
            m.next += 1;
            m.count += 1;
            m.total += w;
            m.ssum = m
                .ssum
                .map(|s| (s + super::read::name_sum(n)) % super::read::SUM_MOD);
            self.set.positions.insert(n.clone(), pos);
            self.set.order.insert(pos, n.clone());
            self.add_free(n, now.ms);
            if *w != 1 {
                self.set.weights.insert(n.clone(), *w);
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis().max(1)).unwrap_or(u64::MAX)
}

impl Op for RestoreStep {
    type Reply = bool;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<bool, StoreError> {
        redis(store, keys, self).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> bool {
        store.with(keys, |g, now| (g.restore(self, now), false))
    }
}
