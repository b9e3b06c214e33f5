//! adopt: a group seeded again from a replica's configured list while the replicas
//! that had seen it were away, brought to the set such a replica saw
//! (`lua/adopt.lua`, whose header says what each step does and when it refuses).

use std::sync::LazyLock;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now, distinct};
use crate::store::protocol::Origin;

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("adopt.lua");

/// How long operator changes wait after each step of an adopt (`ADOPT_HOLD`).
const HOLD_MS: u64 = 10_000;

/// A step of adopting the copy `life` at set version `set_version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopt {
    pub life: String,
    pub set_version: u64,
    pub step: AdoptStep,
}

/// The steps of an adopt, in order (names and removals in chunks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdoptStep {
    /// Takes the seeded group `seeded` (or goes on with an unfinished adopt of this
    /// copy): the copy's life, set version, list version and digest, drains and
    /// preferences, and a highest fence at least `highest_fence`.
    Begin {
        seeded: String,
        version: u64,
        digest: String,
        highest_fence: Fence,
        drained: Vec<String>,
        preferences: Vec<(String, String)>,
    },
    /// The copy's names with their weights: those missing are added, the others get
    /// their weight.
    Names(Vec<(String, u64)>),
    /// Names of the set the copy lacks: removed.
    Remove(Vec<String>),
    /// The adopt is over.
    Done,
}

/// Why a step was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAdopted {
    /// An operator changed the seeded group since its seed: it keeps its set.
    Amended,
    /// The group does not exist.
    NoGroup,
    /// Another lifetime, origin, list version or copy: the group is not this one's to
    /// adopt (any more).
    Other,
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdoptReply {
    Done,
    Refused(NotAdopted),
}

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    adopt: &Adopt,
) -> Result<AdoptReply, StoreError> {
    let step = match &adopt.step {
        AdoptStep::Begin { .. } => "begin",
        AdoptStep::Names(_) => "names",
        AdoptStep::Remove(_) => "remove",
        AdoptStep::Done => "done",
    };
    let mut args: Vec<String> = vec![
        step.to_owned(),
        adopt.life.clone(),
        adopt.set_version.to_string(),
        keys.channel.clone(),
        keys.notice.clone(),
    ];
    match &adopt.step {
        AdoptStep::Begin {
            seeded,
            version,
            digest,
            highest_fence,
            drained,
            preferences,
        } => {
            args.extend([
                seeded.clone(),
                version.to_string(),
                digest.clone(),
                highest_fence.get().to_string(),
                drained.len().to_string(),
            ]);
            args.extend(drained.iter().cloned());
            args.push(preferences.len().to_string());
            for (p, r) in preferences {
                args.push(p.clone());
                args.push(r.clone());
            }
        }
        AdoptStep::Names(names) => {
            for (n, w) in names {
                args.push(n.clone());
                args.push(w.to_string());
            }
        }
        AdoptStep::Remove(names) => args.extend(names.iter().cloned()),
        AdoptStep::Done => {}
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    parse(store.eval(&SCRIPT, &keys.all(), &args).await?)
}

/// The reply of `lua/adopt.lua`.
pub(super) fn parse(reply: Value) -> Result<AdoptReply, StoreError> {
    let mut p = Parse::new("adopt", reply);
    let r = match p.next_string()?.as_str() {
        "ok" => AdoptReply::Done,
        "stale" => AdoptReply::Refused(match p.next_string()?.as_str() {
            "amended" => NotAdopted::Amended,
            "nogroup" => NotAdopted::NoGroup,
            _ => NotAdopted::Other,
        }),
        other => return Err(StoreError::Protocol(format!("adopt replied {other:?}"))),
    };
    p.finish()?;
    Ok(r)
}

impl Group {
    /// The twin of `lua/adopt.lua`; whether to publish the notice.
    pub(crate) fn adopt(&mut self, adopt: &Adopt, now: Now) -> (AdoptReply, bool) {
        let restoring = self.restoring(now).is_some();
        let Some(m) = self.meta.as_mut() else {
            return (AdoptReply::Refused(NotAdopted::NoGroup), false);
        };
        let mine = m.origin == Origin::Adopt
            && m.adopting
                .as_ref()
                .is_some_and(|(l, v, _)| *l == adopt.life && *v == adopt.set_version);
        let changed = match &adopt.step {
            AdoptStep::Begin {
                seeded,
                version,
                digest,
                highest_fence,
                drained,
                preferences,
            } => {
                if !mine {
                    if m.origin != Origin::Seed || m.life != *seeded || m.life == adopt.life {
                        return (AdoptReply::Refused(NotAdopted::Other), false);
                    }
                    if m.amended {
                        return (AdoptReply::Refused(NotAdopted::Amended), false);
                    }
                    if restoring || m.version > *version {
                        return (AdoptReply::Refused(NotAdopted::Other), false);
                    }
                    m.adopting = Some((adopt.life.clone(), adopt.set_version, 0));
                    m.origin = Origin::Adopt;
                    m.version = *version;
                    m.digest.clone_from(digest);
                    m.fmax = m.fmax.max(highest_fence.get());
                    m.rcount = 0;
                    self.drains = drained.iter().cloned().collect();
                    self.set.prefs = preferences.iter().cloned().collect();
                }
                !mine
            }
            _ if !mine => return (AdoptReply::Refused(NotAdopted::Other), false),
            AdoptStep::Names(names) => {
                let mut changed = false;
                let mut new = Vec::new();
                let mut ws = Vec::new();
                for (n, w) in names {
                    if self.set.positions.contains_key(n) {
                        if self.weight(n) != *w {
                            self.set_weight_of(n, *w);
                            changed = true;
                        }
                    } else {
                        new.push(n.clone());
                        ws.push(*w);
                    }
                }
                self.add_names(&new, Some(&ws), now) > 0 || changed
            }
            AdoptStep::Remove(names) => {
                let gone: Vec<String> = distinct(names)
                    .into_iter()
                    .filter(|n| self.set.positions.contains_key(n))
                    .collect();
                self.remove_names(&gone);
                !gone.is_empty()
            }
            AdoptStep::Done => {
                m.origin = Origin::Restore;
                m.adopting = None;
                m.life.clone_from(&adopt.life);
                m.sver = adopt.set_version;
                m.wver += 1;
                self.bump_set();
                return (AdoptReply::Done, true);
            }
        };
        if let Some((_, _, until)) = self.meta.as_mut().and_then(|m| m.adopting.as_mut()) {
            *until = now.ms + HOLD_MS;
        }
        (AdoptReply::Done, changed)
    }
}

impl Op for Adopt {
    type Reply = AdoptReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<AdoptReply, StoreError> {
        redis(store, keys, self).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> AdoptReply {
        store.with(keys, |g, now| g.adopt(self, now))
    }
}
