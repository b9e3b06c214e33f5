//! version: the steps of applying a versioned list (`lua/version.lua`).

use std::sync::LazyLock;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::Group;
use crate::store::protocol::Origin;

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("version.lua");

/// A step of applying a versioned list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionStep<'a> {
    /// Takes the version (if the group's is older, or this one is still being
    /// applied), leaving the digest empty until `Done`: nobody else applies an older
    /// list from now on, and one that is newer stops this one.
    Begin,
    /// The list is applied: records its digest, if the group is still at this version.
    Done(&'a str),
}

/// The reply of `lua/version.lua`: 1 or 0.
pub(super) fn parse(reply: Value) -> Result<bool, StoreError> {
    let mut p = Parse::new("version", reply);
    let taken = p.next_int()? == 1;
    p.finish()?;
    Ok(taken)
}

impl Group {
    /// The twin of `lua/version.lua`.
    pub(crate) fn set_version(&mut self, version: u64, step: VersionStep<'_>) -> bool {
        let Some(m) = self.meta.as_mut() else {
            return false;
        };
        match step {
            VersionStep::Begin if m.origin == Origin::Adopt => false,
            VersionStep::Begin if m.version < version => {
                m.version = version;
                m.digest.clear();
                m.sver += 1;
                m.rcount = 0;
                true
            }
            VersionStep::Begin => m.version == version && m.digest.is_empty(),
            VersionStep::Done(digest) if m.version == version => {
                if m.digest != digest {
                    m.digest = digest.to_owned();
                    m.sver += 1;
                    m.rcount = 0;
                }
                true
            }
            VersionStep::Done(_) => false,
        }
    }
}

/// A step of applying a versioned list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetVersion {
    pub(crate) version: u64,
    /// `None`: [`VersionStep::Begin`]; the digest: [`VersionStep::Done`].
    pub(crate) done: Option<String>,
}

impl SetVersion {
    /// The step `step` of applying list `version`.
    pub(crate) fn new(version: u64, step: VersionStep<'_>) -> Self {
        let done = match step {
            VersionStep::Begin => None,
            VersionStep::Done(digest) => Some(digest.to_owned()),
        };
        Self { version, done }
    }

    fn step(&self) -> VersionStep<'_> {
        self.done
            .as_deref()
            .map_or(VersionStep::Begin, VersionStep::Done)
    }
}

impl Op for SetVersion {
    type Reply = bool;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<bool, StoreError> {
        let (version, step) = (self.version, self.step());
        let v = version.to_string();
        let args = match step {
            VersionStep::Begin => [v.as_str(), "begin", ""],
            VersionStep::Done(digest) => [v.as_str(), "done", digest],
        };
        parse(store.eval(&SCRIPT, &keys.all(), &args).await?)
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> bool {
        store.with(keys, |g, _| {
            (g.set_version(self.version, self.step()), false)
        })
    }
}
