//! The group protocol in process memory, on tokio's clock: the same rules as the Redis
//! scripts in [`super::redis`], step for step, for simulations under paused time and
//! the embedded demo. It has none of Redis's costs, so it proves logic, never scale.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use leasehold_election::keys::replica_of_token;
use leasehold_election::{BackendWarning, Fence, StoreError};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::protocol::{
    ClaimReply, ClaimRequest, Conflict, MemberInfo, MemberState, Protocol, SeedNeed, SeedReply,
    SeedRequest, SessionReply, StatusHead, TickReply, TickRequest,
};
use super::{DRAIN_BUDGET, PartitionOwner};
use crate::keys::GroupKeys;

/// An in-process store for partition groups with the Redis scripts' semantics, on
/// tokio's clock (so it works under `tokio::time::pause()`). Cheap to clone; clones
/// share state.
///
/// For unit tests, simulations and the embedded demo; integration tests use a real
/// redis-server. Fences are floored at the microseconds since the store was created
/// (as Redis floors them at its clock), so [`MemoryGroupStore::wipe`] models a Redis
/// restart that lost every key.
#[derive(Debug, Clone)]
pub struct MemoryGroupStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    epoch: Instant,
    // A std mutex: never held across an await; every critical section is map work.
    groups: Mutex<HashMap<String, Group>>,
    notices: broadcast::Sender<String>,
}

impl Default for MemoryGroupStore {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug)]
struct Meta {
    digest: String,
    count: usize,
    seeded: usize,
    grant_after: Instant,
}

/// One group, field for field the keys of [`GroupKeys`].
#[derive(Debug, Default)]
struct Group {
    members: HashMap<String, Instant>,
    sessions: HashMap<String, String>,
    states: HashMap<String, MemberState>,
    meta: Option<Meta>,
    positions: HashMap<String, usize>,
    order: BTreeMap<usize, String>,
    free: BTreeSet<(Instant, String)>,
    free_since: HashMap<String, Instant>,
    owners: HashMap<String, String>,
    fences: HashMap<String, u64>,
    held: HashMap<String, BTreeSet<String>>,
    dead: BTreeSet<(Instant, String)>,
}

impl Group {
    fn live(&self, token: &str, now: Instant) -> Option<Instant> {
        let replica = replica_of_token(token);
        if self.sessions.get(replica).map(String::as_str) != Some(token) {
            return None;
        }
        self.members.get(replica).copied().filter(|exp| *exp > now)
    }

    fn reap(&mut self, now: Instant) {
        let gone: Vec<(String, Instant)> = self
            .members
            .iter()
            .filter(|(_, exp)| **exp <= now)
            .map(|(r, exp)| (r.clone(), *exp))
            .collect();
        for (r, exp) in gone {
            self.members.remove(&r);
            self.states.remove(&r);
            if let Some(token) = self.sessions.remove(&r) {
                self.dead.insert((exp, token));
            }
        }
    }

    fn add_free(&mut self, name: &str, since: Instant) {
        if let Some(old) = self.free_since.insert(name.to_owned(), since) {
            self.free.remove(&(old, name.to_owned()));
        }
        self.free.insert((since, name.to_owned()));
    }

    fn drain(&mut self, budget: usize) -> usize {
        let mut moved = 0;
        let dead: Vec<(Instant, String)> = self.dead.iter().cloned().collect();
        for (ended, token) in dead {
            let left = budget.saturating_sub(moved);
            if left == 0 {
                break;
            }
            let names: Vec<String> = self
                .held
                .get(&token)
                .map(|set| set.iter().take(left).cloned().collect())
                .unwrap_or_default();
            if names.len() < left {
                self.dead.remove(&(ended, token.clone()));
            }
            for name in &names {
                if let Some(set) = self.held.get_mut(&token) {
                    set.remove(name);
                }
                if self.owners.get(name) == Some(&token) {
                    self.owners.remove(name);
                    if self.positions.contains_key(name) {
                        self.add_free(name, ended);
                    }
                }
            }
            if self.held.get(&token).is_some_and(BTreeSet::is_empty) {
                self.held.remove(&token);
            }
            moved += names.len();
        }
        self.dead.len()
    }

    fn unowned(&self) -> usize {
        let draining: usize = self
            .dead
            .iter()
            .map(|(_, t)| self.held.get(t).map_or(0, BTreeSet::len))
            .sum();
        let unseeded = self
            .meta
            .as_ref()
            .map_or(0, |m| m.count.saturating_sub(m.seeded));
        self.free.len() + draining + unseeded
    }

    fn roster(&self, now: Instant) -> Vec<MemberInfo> {
        let mut members: Vec<MemberInfo> = self
            .members
            .iter()
            .filter(|(_, exp)| **exp > now)
            .map(|(r, exp)| MemberInfo {
                replica: r.clone(),
                state: self.states.get(r).copied().unwrap_or(MemberState::Settling),
                left: *exp - now,
                held: self
                    .sessions
                    .get(r)
                    .and_then(|t| self.held.get(t))
                    .map_or(0, BTreeSet::len),
            })
            .collect();
        // Redis orders the sorted set by expiry, then by name.
        members.sort_by(|a, b| a.left.cmp(&b.left).then_with(|| a.replica.cmp(&b.replica)));
        members
    }

    fn owner_of(&self, name: &str, now: Instant) -> PartitionOwner {
        let fence = Fence(self.fences.get(name).copied().unwrap_or(0));
        let live = self
            .owners
            .get(name)
            .and_then(|t| self.live(t, now).map(|exp| (t, exp)));
        PartitionOwner {
            partition: name.to_owned(),
            fence,
            owner: live.map(|(t, _)| replica_of_token(t).to_owned()),
            remaining: live.map(|(_, exp)| exp - now),
        }
    }
}

impl MemoryGroupStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                epoch: Instant::now(),
                groups: Mutex::new(HashMap::new()),
                notices: broadcast::channel(4096).0,
            }),
        }
    }

    /// Forgets every group, as a Redis restart without persistence does.
    pub fn wipe(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Group>> {
        self.inner
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn micros(&self, now: Instant) -> u64 {
        u64::try_from(now.duration_since(self.inner.epoch).as_micros()).unwrap_or(u64::MAX)
    }

    fn notify(&self, keys: &GroupKeys) {
        let _ = self.inner.notices.send(keys.notice.clone());
    }
}

impl Protocol for MemoryGroupStore {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        let now = Instant::now();
        let mut groups = self.lock();
        let g = groups.entry(keys.notice.clone()).or_default();
        g.reap(now);
        let mut session = SessionReply::Live;
        match g.sessions.get(&req.replica) {
            Some(cur) if *cur == req.token => {
                let exp = g.members.entry(req.replica.clone()).or_insert(now);
                *exp = (*exp).max(now + req.ttl);
            }
            _ if !req.join => session = SessionReply::Lost,
            Some(_) => session = SessionReply::Refused(Conflict::DuplicateReplica),
            None => {
                let other_list = g.meta.as_ref().is_some_and(|m| m.digest != req.digest);
                if other_list && !g.members.is_empty() {
                    session = SessionReply::Refused(Conflict::PartitionListMismatch);
                } else {
                    g.sessions.insert(req.replica.clone(), req.token.clone());
                    g.members.insert(req.replica.clone(), now + req.ttl);
                }
            }
        }
        let mut seed = SeedNeed::No;
        if session == SessionReply::Live {
            g.states.insert(req.replica.clone(), req.state);
            seed = match &g.meta {
                None => SeedNeed::From(0),
                Some(m) if m.digest != req.digest => SeedNeed::Replace,
                Some(m) if m.seeded < m.count => SeedNeed::From(m.seeded),
                Some(_) => SeedNeed::No,
            };
        }
        let draining = g.drain(DRAIN_BUDGET);
        Ok(TickReply {
            session,
            seed,
            members: g.roster(now),
            unowned: g.unowned(),
            grant_wait: g.meta.as_ref().map_or(Duration::ZERO, |m| {
                m.grant_after.saturating_duration_since(now)
            }),
            draining,
        })
    }

    async fn claim(&self, keys: &GroupKeys, req: &ClaimRequest) -> Result<ClaimReply, StoreError> {
        let now = Instant::now();
        let now_us = self.micros(now);
        let mut groups = self.lock();
        let g = groups.entry(keys.notice.clone()).or_default();
        g.reap(now);
        if g.sessions.get(&req.replica) != Some(&req.token) {
            return Ok(ClaimReply::Lost);
        }
        if let Some(m) = &g.meta
            && m.grant_after > now
        {
            return Ok(ClaimReply::Wait(m.grant_after - now));
        }
        if let Some(exp) = g.members.get_mut(&req.replica) {
            *exp = (*exp).max(now + req.ttl);
        }
        g.drain(DRAIN_BUDGET);
        let mut partitions = Vec::new();
        for _ in 0..req.count {
            let Some((since, name)) = g.free.pop_first() else {
                break;
            };
            g.free_since.remove(&name);
            let _ = since;
            if let Some(o) = g.owners.get(&name)
                && *o != req.token
                && g.live(o, now).is_some()
            {
                continue;
            }
            let fence = (g.fences.get(&name).copied().unwrap_or(0) + 1)
                .max(req.floor.get())
                .max(now_us);
            g.fences.insert(name.clone(), fence);
            g.owners.insert(name.clone(), req.token.clone());
            g.held
                .entry(req.token.clone())
                .or_default()
                .insert(name.clone());
            partitions.push((name, Fence(fence)));
        }
        Ok(ClaimReply::Claimed {
            partitions,
            unowned: g.unowned(),
        })
    }

    async fn release(
        &self,
        keys: &GroupKeys,
        token: &str,
        names: &[String],
    ) -> Result<Vec<bool>, StoreError> {
        let now = Instant::now();
        let released: Vec<bool> = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            names
                .iter()
                .map(|name| {
                    if g.owners.get(name).map(String::as_str) != Some(token) {
                        return false;
                    }
                    g.owners.remove(name);
                    if let Some(set) = g.held.get_mut(token) {
                        set.remove(name);
                    }
                    if g.positions.contains_key(name) {
                        g.add_free(name, now);
                    }
                    true
                })
                .collect()
        };
        if released.iter().any(|r| *r) {
            self.notify(keys);
        }
        Ok(released)
    }

    async fn leave(&self, keys: &GroupKeys, replica: &str, token: &str) -> Result<(), StoreError> {
        let now = Instant::now();
        let left = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            let ours = g.sessions.get(replica).map(String::as_str) == Some(token);
            if ours {
                g.members.remove(replica);
                g.sessions.remove(replica);
                g.states.remove(replica);
                g.dead.insert((now, token.to_owned()));
                g.drain(DRAIN_BUDGET);
            }
            ours
        };
        if left {
            self.notify(keys);
        }
        Ok(())
    }

    async fn seed(&self, keys: &GroupKeys, req: &SeedRequest) -> Result<SeedReply, StoreError> {
        let now = Instant::now();
        let mut groups = self.lock();
        let g = groups.entry(keys.notice.clone()).or_default();
        match &mut g.meta {
            None => {
                g.meta = Some(Meta {
                    digest: req.digest.clone(),
                    count: req.count,
                    seeded: 0,
                    grant_after: now + req.grant_delay,
                });
            }
            Some(m) if m.digest != req.digest => {
                if !req.replace {
                    return Ok(SeedReply::Mismatch);
                }
                g.reap(now);
                if g.members.keys().any(|r| *r != req.replica) {
                    return Ok(SeedReply::Mismatch);
                }
                g.positions.clear();
                g.order.clear();
                g.free.clear();
                g.free_since.clear();
                if let Some(m) = &mut g.meta {
                    m.digest.clone_from(&req.digest);
                    m.count = req.count;
                    m.seeded = 0;
                }
            }
            Some(_) => {}
        }
        let seeded = g.meta.as_ref().map_or(0, |m| m.seeded);
        if req.offset != seeded {
            return Ok(SeedReply::Moved(seeded));
        }
        for (j, name) in req.names.iter().enumerate() {
            g.positions.insert(name.clone(), req.offset + j);
            g.order.insert(req.offset + j, name.clone());
            if !g.owners.contains_key(name) {
                g.add_free(name, now);
            }
        }
        let total = seeded + req.names.len();
        if let Some(m) = &mut g.meta {
            m.seeded = total;
        }
        Ok(SeedReply::Seeded(total))
    }

    async fn held(&self, keys: &GroupKeys, token: &str) -> Result<Vec<String>, StoreError> {
        let groups = self.lock();
        Ok(groups
            .get(&keys.notice)
            .and_then(|g| g.held.get(token))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default())
    }

    async fn owner(&self, keys: &GroupKeys, partition: &str) -> Result<PartitionOwner, StoreError> {
        let now = Instant::now();
        let groups = self.lock();
        Ok(match groups.get(&keys.notice) {
            Some(g) => g.owner_of(partition, now),
            None => PartitionOwner {
                partition: partition.to_owned(),
                owner: None,
                fence: Fence(0),
                remaining: None,
            },
        })
    }

    async fn status_head(&self, keys: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
        let now = Instant::now();
        let groups = self.lock();
        Ok(groups.get(&keys.notice).and_then(|g| {
            g.meta.as_ref().map(|m| StatusHead {
                count: m.count,
                members: g.roster(now),
            })
        }))
    }

    async fn status_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PartitionOwner>, StoreError> {
        let now = Instant::now();
        let groups = self.lock();
        Ok(groups.get(&keys.notice).map_or_else(Vec::new, |g| {
            g.order
                .range(offset..)
                .take(limit.max(1))
                .map(|(_, name)| g.owner_of(name, now))
                .collect()
        }))
    }

    fn notices(&self, _keys: &GroupKeys) -> broadcast::Receiver<String> {
        self.inner.notices.subscribe()
    }

    async fn warnings(&self) -> Result<Vec<BackendWarning>, StoreError> {
        Ok(Vec::new())
    }
}
