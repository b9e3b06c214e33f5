//! The reads: one partition's owner (`lua/owner.lua`), names by position
//! (`lua/list.lua`), the set as a replica keeps it (`lua/set_page.lua`), and the
//! operators' status (`lua/status_head.lua`, `lua/status_page.lua`). Read-only.

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::replica_of_token;
use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};
use redis::Value;

use super::{count, group_script, loads, ms, roster, strings};
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};
use crate::store::protocol::{MemberInfo, SetInfo};
use crate::store::status::PartitionOwner;

pub(crate) static OWNER: LazyLock<LuaScript> = group_script!("owner.lua");
pub(crate) static LIST: LazyLock<LuaScript> = group_script!("list.lua");
pub(crate) static SET_PAGE: LazyLock<LuaScript> = group_script!("set_page.lua");
pub(crate) static STATUS_HEAD: LazyLock<LuaScript> = group_script!("status_head.lua");
pub(crate) static STATUS_PAGE: LazyLock<LuaScript> = group_script!("status_page.lua");

/// A page of the set as a replica keeps it, with what the set carries besides names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetPage {
    pub life: String,
    pub set_version: u64,
    pub version: u64,
    pub digest: String,
    pub lease: Duration,
    pub highest_fence: Fence,
    pub weighted: bool,
    pub weights_version: u64,
    /// Every drained replica id.
    pub drained: Vec<String>,
    /// The partitions at the page's positions, with their weights.
    pub names: Vec<(String, u64)>,
}

/// The head of a status read: everything but the partitions.
#[derive(Debug, Clone)]
pub struct StatusHead {
    pub set: SetInfo,
    pub members: Vec<MemberInfo>,
    /// Each member's process (`host pid`), in the order of `members`.
    pub instances: Vec<String>,
    /// Every drained replica id (live or not).
    pub drained: Vec<String>,
}

pub(crate) async fn owner(
    store: &RedisStore,
    keys: &GroupKeys,
    partition: &str,
) -> Result<Option<PartitionOwner>, StoreError> {
    let reply = store.eval(&OWNER, &keys.all(), &[partition]).await?;
    if reply == Value::Nil {
        return Ok(None);
    }
    parse_owner(Some(partition.to_owned()), &mut Parse::new("owner", reply)).map(Some)
}

pub(crate) async fn list(
    store: &RedisStore,
    keys: &GroupKeys,
    offset: usize,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let (offset, limit) = (offset.to_string(), limit.max(1).to_string());
    let reply = store.eval(&LIST, &keys.all(), &[&offset, &limit]).await?;
    strings(&mut Parse::new("list", Value::Array(vec![reply])))
}

pub(crate) async fn set_page(
    store: &RedisStore,
    keys: &GroupKeys,
    offset: usize,
    limit: usize,
) -> Result<Option<SetPage>, StoreError> {
    let (offset, limit) = (offset.to_string(), limit.max(1).to_string());
    let reply = store
        .eval(&SET_PAGE, &keys.all(), &[&offset, &limit])
        .await?;
    if reply == Value::Nil {
        return Ok(None);
    }
    let mut p = Parse::new("set page", reply);
    let life = p.next_opt_string()?.unwrap_or_default();
    let set_version = p.next_u64()?;
    let version = p.next_u64()?;
    let digest = p.next_opt_string()?.unwrap_or_default();
    let lease = ms(p.next_int()?);
    let highest_fence = Fence(p.next_u64()?);
    let weighted = p.next_int()? == 1;
    let weights_version = p.next_u64()?;
    let drained = strings(&mut p)?;
    let mut flat = p.next_array()?;
    let mut names = Vec::with_capacity(flat.remaining() / 2);
    while flat.remaining() > 0 {
        names.push((flat.next_string()?, flat.next_u64()?));
    }
    p.finish()?;
    Ok(Some(SetPage {
        life,
        set_version,
        version,
        digest,
        lease,
        highest_fence,
        weighted,
        weights_version,
        drained,
        names,
    }))
}

pub(crate) async fn status_head(
    store: &RedisStore,
    keys: &GroupKeys,
) -> Result<Option<StatusHead>, StoreError> {
    let reply = store.eval(&STATUS_HEAD, &keys.all(), &[]).await?;
    if reply == Value::Nil {
        return Ok(None);
    }
    let mut p = Parse::new("group status", reply);
    let mut set = SetInfo::plain(count(p.next_int()?), p.next_u64()?, "");
    set.digest = p.next_opt_string()?.unwrap_or_default();
    let mut members = roster(&mut p)?;
    let instances = strings(&mut p)?;
    let drained = strings(&mut p)?;
    loads(&mut p, &mut members)?;
    set.weighted = p.next_int()? == 1;
    set.total_weight = p.next_int()?.max(0).unsigned_abs();
    set.max_weight = p.next_int()?.max(1).unsigned_abs();
    set.weights_version = p.next_u64()?;
    p.finish()?;
    Ok(Some(StatusHead {
        set,
        members,
        instances,
        drained,
    }))
}

pub(crate) async fn status_page(
    store: &RedisStore,
    keys: &GroupKeys,
    offset: usize,
    limit: usize,
) -> Result<Vec<PartitionOwner>, StoreError> {
    let (offset, limit) = (offset.to_string(), limit.max(1).to_string());
    let reply = store
        .eval(&STATUS_PAGE, &keys.all(), &[&offset, &limit])
        .await?;
    let mut rows = Parse::new("group status page", Value::Array(vec![reply])).next_array()?;
    let mut out = Vec::with_capacity(rows.remaining());
    while rows.remaining() > 0 {
        out.push(parse_owner(None, &mut rows.next_array()?)?);
    }
    Ok(out)
}

/// `{name, owner or '', fence, ms left or -1, ms held or -1, weight}` (the name given
/// for the owner script, which does not repeat it).
fn parse_owner(name: Option<String>, p: &mut Parse) -> Result<PartitionOwner, StoreError> {
    let partition = match name {
        Some(n) => n,
        None => p.next_string()?,
    };
    let who = p.next_opt_string()?.unwrap_or_default();
    let fence = Fence(p.next_u64()?);
    let left = p.next_int()?;
    let held = p.next_int()?;
    let weight = p.next_int()?.max(1).unsigned_abs();
    let owned = !who.is_empty();
    Ok(PartitionOwner {
        partition,
        fence,
        remaining: (owned && left >= 0).then(|| ms(left)),
        held_for: (owned && held >= 0).then(|| ms(held)),
        owner: owned.then_some(who),
        weight,
    })
}

impl Group {
    /// The twin of `lua/owner.lua`.
    pub(crate) fn owner(&self, name: &str, now: Now) -> Option<PartitionOwner> {
        self.positions
            .contains_key(name)
            .then(|| self.owner_of(name, now))
    }

    fn owner_of(&self, name: &str, now: Now) -> PartitionOwner {
        let fence = Fence(self.fences.get(name).copied().unwrap_or(0));
        let live = self
            .owners
            .get(name)
            .and_then(|t| self.live(t, now).map(|exp| (t, exp)));
        PartitionOwner {
            partition: name.to_owned(),
            fence,
            owner: live.map(|(t, _)| replica_of_token(t).to_owned()),
            remaining: live.map(|(_, exp)| Duration::from_millis(exp - now.ms)),
            held_for: live.and_then(|_| {
                self.since
                    .get(name)
                    .map(|s| Duration::from_millis(now.ms.saturating_sub(*s)))
            }),
            weight: self.weight(name),
        }
    }

    /// The twin of `lua/list.lua`.
    pub(crate) fn list_page(&self, offset: usize, limit: usize) -> Vec<String> {
        self.order
            .values()
            .skip(offset)
            .take(limit.max(1))
            .cloned()
            .collect()
    }

    /// The twin of `lua/set_page.lua`.
    pub(crate) fn set_page(&self, offset: usize, limit: usize) -> Option<SetPage> {
        let m = self.meta.as_ref()?;
        Some(SetPage {
            life: m.life.clone(),
            set_version: m.sver,
            version: m.version,
            digest: m.digest.clone(),
            lease: Duration::from_millis(m.lease),
            highest_fence: Fence(m.fmax),
            weighted: m.weighted,
            weights_version: m.wver,
            drained: self.drains.iter().cloned().collect(),
            names: self
                .list_page(offset, limit)
                .into_iter()
                .map(|n| {
                    let w = self.weight(&n);
                    (n, w)
                })
                .collect(),
        })
    }

    /// The twin of `lua/status_head.lua`.
    pub(crate) fn status_head(&self, now: Now) -> Option<StatusHead> {
        let set = self.set_info()?;
        let members = self.roster(now);
        let instances = members
            .iter()
            .map(|m| self.info.get(&m.replica).cloned().unwrap_or_default())
            .collect();
        Some(StatusHead {
            set,
            members,
            instances,
            drained: self.drains.iter().cloned().collect(),
        })
    }

    /// The twin of `lua/status_page.lua`.
    pub(crate) fn status_page(&self, offset: usize, limit: usize, now: Now) -> Vec<PartitionOwner> {
        self.order
            .values()
            .skip(offset)
            .take(limit.max(1))
            .map(|name| self.owner_of(name, now))
            .collect()
    }
}
