//! The reads: one partition's owner (`lua/owner.lua`), names by position
//! (`lua/list.lua`), the set as a replica keeps it (`lua/set_page.lua`), and the
//! operators' status (`lua/status_head.lua`, `lua/status_page.lua`). Read-only.

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::replica_of_token;
use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::{count, group_script, loads, ms, pairs, roster, strings};
use crate::MemoryGroupStore;
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
    /// How many partitions the set has.
    pub count: usize,
    /// The checksum of the set's names ([`set_checksum`]); `None` for a group created
    /// by an older version of the protocol, which keeps none.
    pub checksum: Option<u64>,
    /// Every preference (partition, replica id), on the first page only.
    pub preferences: Vec<(String, String)>,
}

/// The checksum of a set of names, as the scripts keep it (`count_names` in
/// `meta.lua`): the sum, modulo 2^52, of the first 52 bits of each name's SHA-1. The
/// same names give the same checksum in any order.
pub(crate) fn set_checksum<'a>(names: impl IntoIterator<Item = &'a str>) -> u64 {
    names
        .into_iter()
        .fold(0, |s, n| (s + name_sum(n)) % SUM_MOD)
}

/// What one name adds to the checksum.
pub(crate) fn name_sum(name: &str) -> u64 {
    let hex = sha1_smol::Sha1::from(name).digest().to_string();
    u64::from_str_radix(&hex[..13], 16).unwrap_or(0)
}

/// The checksum's modulus: 2^52 (a Lua number holds the sum of two exactly).
pub(crate) const SUM_MOD: u64 = 1 << 52;

/// The head of a status read: everything but the partitions.
#[derive(Debug, Clone)]
pub struct StatusHead {
    pub set: SetInfo,
    pub members: Vec<MemberInfo>,
    /// Each member's field of the group's `INFO` hash (`host pid`, then a tab and its
    /// advertised address if it has one), in the order of `members`.
    pub instances: Vec<String>,
    /// Every drained replica id (live or not).
    pub drained: Vec<String>,
    /// Every preference (partition, replica id).
    pub preferences: Vec<(String, String)>,
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
    let count = count(p.next_int()?);
    let checksum = p.next_opt_string()?.and_then(|s| s.parse().ok());
    let mut preferences = pairs(&mut p)?;
    // HGETALL's order is the hash's: by partition, as the twin keeps them.
    preferences.sort();
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
        count,
        checksum,
        preferences,
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
    let mut preferences = pairs(&mut p)?;
    // HGETALL's order is the hash's: by partition, as the twin keeps them.
    preferences.sort();
    p.finish()?;
    Ok(Some(StatusHead {
        set,
        members,
        instances,
        drained,
        preferences,
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
        self.set
            .positions
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
                self.replicas
                    .since
                    .get(name)
                    .map(|s| Duration::from_millis(now.ms.saturating_sub(*s)))
            }),
            weight: self.weight(name),
        }
    }

    /// The twin of `lua/list.lua`.
    pub(crate) fn list_page(&self, offset: usize, limit: usize) -> Vec<String> {
        self.set
            .order
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
            count: m.count,
            checksum: m.ssum,
            preferences: if offset == 0 {
                self.set
                    .prefs
                    .iter()
                    .map(|(p, r)| (p.clone(), r.clone()))
                    .collect()
            } else {
                Vec::new()
            },
        })
    }

    /// The twin of `lua/status_head.lua`.
    pub(crate) fn status_head(&self, now: Now) -> Option<StatusHead> {
        let set = self.set_info()?;
        let members = self.roster(now);
        let instances = members
            .iter()
            .map(|m| {
                self.replicas
                    .info
                    .get(&m.replica)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        Some(StatusHead {
            set,
            members,
            instances,
            drained: self.drains.iter().cloned().collect(),
            preferences: self
                .set
                .prefs
                .iter()
                .map(|(p, r)| (p.clone(), r.clone()))
                .collect(),
        })
    }

    /// The twin of `lua/status_page.lua`.
    pub(crate) fn status_page(&self, offset: usize, limit: usize, now: Now) -> Vec<PartitionOwner> {
        self.set
            .order
            .values()
            .skip(offset)
            .take(limit.max(1))
            .map(|name| self.owner_of(name, now))
            .collect()
    }
}

/// Up to `limit` partition names from position `offset` of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListPage {
    pub(crate) offset: usize,
    pub(crate) limit: usize,
}

impl ListPage {
    /// Up to `limit` names from `offset`.
    pub(crate) fn new(offset: usize, limit: usize) -> Self {
        Self { offset, limit }
    }
}

impl Op for ListPage {
    type Reply = Vec<String>;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<Vec<String>, StoreError> {
        list(store, keys, self.offset, self.limit).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<String> {
        store
            .read(keys, |g, _| g.list_page(self.offset, self.limit))
            .unwrap_or_default()
    }
}

/// The set as a replica keeps it (names with weights, drains, versions), a page;
/// `None` if the group does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadSetPage {
    pub(crate) offset: usize,
    pub(crate) limit: usize,
}

impl ReadSetPage {
    /// Up to `limit` names from `offset`.
    pub(crate) fn new(offset: usize, limit: usize) -> Self {
        Self { offset, limit }
    }
}

impl Op for ReadSetPage {
    type Reply = Option<SetPage>;

    async fn redis(
        &self,
        store: &RedisStore,
        keys: &GroupKeys,
    ) -> Result<Option<SetPage>, StoreError> {
        set_page(store, keys, self.offset, self.limit).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Option<SetPage> {
        store
            .read(keys, |g, _| g.set_page(self.offset, self.limit))
            .flatten()
    }
}

/// One partition's owner; `None` if it is not in the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner(pub(crate) String);

impl Owner {
    /// The owner of `partition`.
    pub(crate) fn new(partition: &str) -> Self {
        Self(partition.to_owned())
    }
}

impl Op for Owner {
    type Reply = Option<PartitionOwner>;

    async fn redis(
        &self,
        store: &RedisStore,
        keys: &GroupKeys,
    ) -> Result<Option<PartitionOwner>, StoreError> {
        owner(store, keys, &self.0).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Option<PartitionOwner> {
        store.read(keys, |g, now| g.owner(&self.0, now)).flatten()
    }
}

/// The group without its partitions; `None` if it does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadStatusHead;

impl Op for ReadStatusHead {
    type Reply = Option<StatusHead>;

    async fn redis(
        &self,
        store: &RedisStore,
        keys: &GroupKeys,
    ) -> Result<Option<StatusHead>, StoreError> {
        status_head(store, keys).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Option<StatusHead> {
        store.read(keys, |g, now| g.status_head(now)).flatten()
    }
}

/// Up to `limit` partitions from position `offset`, with their owners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatusPage {
    pub(crate) offset: usize,
    pub(crate) limit: usize,
}

impl StatusPage {
    /// Up to `limit` owners from `offset`.
    pub(crate) fn new(offset: usize, limit: usize) -> Self {
        Self { offset, limit }
    }
}

impl Op for StatusPage {
    type Reply = Vec<PartitionOwner>;

    async fn redis(
        &self,
        store: &RedisStore,
        keys: &GroupKeys,
    ) -> Result<Vec<PartitionOwner>, StoreError> {
        status_page(store, keys, self.offset, self.limit).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<PartitionOwner> {
        store
            .read(keys, |g, now| g.status_page(self.offset, self.limit, now))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use leasehold_testkit::RedisServer;

    use super::*;
    use crate::MemoryGroupStore;
    use crate::store::ops;
    use crate::store::ops::restore::Restored;
    use crate::store::protocol::{Change, Protocol, RestoreStep};

    /// The checksum a set page names is that of the set's names, whatever added or
    /// removed them (a seed in chunks, an operator, a restore), on Redis and in
    /// memory; a group that keeps none (created by an older version) names none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_set_page_names_the_checksum_of_the_sets_names() {
        let redis = RedisServer::start();
        let store = RedisStore::builder(redis.url()).build().unwrap();
        let memory = MemoryGroupStore::new();
        let names: Vec<String> = (0..600).map(|i| format!("p{i}")).collect();
        async fn check<B: Protocol>(b: &B, k: &GroupKeys, names: &[String]) -> Option<u64> {
            let seed = Change::Seed {
                life: "life-sum".to_owned(),
                grant_delay: Duration::from_millis(1),
                lease: Duration::from_secs(5),
                gather: Duration::from_millis(1),
            };
            for chunk in names.chunks(250) {
                b.run(k, &ops::Add::new(&seed, chunk)).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            let page = b
                .run(k, &ops::ReadSetPage::new(0, 1000))
                .await
                .unwrap()
                .unwrap();
            let all = set_checksum(names.iter().map(String::as_str));
            assert_eq!((page.count, page.checksum), (600, Some(all)), "seeded");
            let strict = |op: &str| Change::Strict { op: op.to_owned() };
            b.run(k, &ops::Add::new(&strict("a"), &["x".to_owned()]))
                .await
                .unwrap();
            b.run(
                k,
                &ops::Remove::new(&strict("r"), &["p3".to_owned(), "p599".to_owned()]),
            )
            .await
            .unwrap();
            let now: Vec<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|n| !["p3", "p599"].contains(n))
                .chain(["x"])
                .collect();
            let page = b
                .run(k, &ops::ReadSetPage::new(0, 1000))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                (page.count, page.checksum),
                (599, Some(set_checksum(now.iter().copied()))),
                "after an add and a removal"
            );
            assert_ne!(page.checksum, Some(all));
            page.checksum
        }
        let k = GroupKeys::new("leasehold", "sum");
        let on_redis = check(&store, &k, &names).await;
        let in_memory = check(&memory, &k, &names).await;
        assert_eq!(on_redis, in_memory);
        // A restore brings the checksum of what it restored.
        redis.redis_cli(&["FLUSHALL"]);
        let of = Restored {
            life: "life-sum".to_owned(),
            set_version: 9,
            grant_delay: Duration::from_millis(1),
            count: 2,
        };
        let begin = RestoreStep::Begin {
            of: of.clone(),
            version: 0,
            digest: String::new(),
            lease: Duration::from_secs(5),
            highest_fence: Fence(0),
            weighted: false,
            weights_version: 0,
            drained: Vec::new(),
            preferences: Vec::new(),
            names: vec![("a".to_owned(), 1)],
        };
        store.run(&k, &begin).await.unwrap();
        let add = RestoreStep::Add {
            of,
            names: vec![("b".to_owned(), 1)],
        };
        store.run(&k, &add).await.unwrap();
        let page = store
            .run(&k, &ops::ReadSetPage::new(0, 1000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(page.checksum, Some(set_checksum(["b", "a"])));
        // A group of an older version keeps none.
        redis.redis_cli(&["HDEL", &k.meta, "ssum"]);
        let page = store
            .run(&k, &ops::ReadSetPage::new(0, 1000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((page.count, page.checksum), (2, None));
    }
}
