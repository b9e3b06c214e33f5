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
    AddReply, Change, ClaimReply, ClaimRequest, Conflict, MemberInfo, MemberState, Protocol,
    RemoveReply, SessionReply, SetInfo, StatusHead, TickReply, TickRequest, VersionStep,
    WeightReply,
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
    count: usize,
    next: u64,
    version: u64,
    digest: String,
    grant_after: Instant,
    /// A weight was set once: `loads` is kept.
    weighted: bool,
    /// The weights summed (kept once weighted).
    total: u64,
    /// Bumped by every weight change.
    wver: u64,
}

/// One group, field for field the keys of [`GroupKeys`].
#[derive(Debug, Default)]
struct Group {
    members: HashMap<String, Instant>,
    sessions: HashMap<String, String>,
    states: HashMap<String, MemberState>,
    meta: Option<Meta>,
    positions: HashMap<String, u64>,
    order: BTreeMap<u64, String>,
    free: BTreeSet<(Instant, String)>,
    free_since: HashMap<String, Instant>,
    owners: HashMap<String, String>,
    fences: HashMap<String, u64>,
    held: HashMap<String, BTreeSet<String>>,
    dead: BTreeSet<(Instant, String)>,
    revoked: HashMap<String, String>,
    drains: HashMap<String, String>,
    since: HashMap<String, Instant>,
    info: HashMap<String, String>,
    /// Partition → weight, for weights other than 1.
    weights: HashMap<String, u64>,
    /// Session token → its partitions' weights summed (once weighted).
    loads: HashMap<String, u64>,
    capacity: HashMap<String, u32>,
}

impl Group {
    fn weight(&self, name: &str) -> u64 {
        self.weights.get(name).copied().unwrap_or(1)
    }

    fn weighted(&self) -> bool {
        self.meta.as_ref().is_some_and(|m| m.weighted)
    }

    /// Adds `delta` to session `token`'s load, in a weighted group.
    fn add_load(&mut self, token: &str, delta: i128) {
        if self.weighted() {
            let l = self.loads.entry(token.to_owned()).or_default();
            *l = u64::try_from((i128::from(*l) + delta).max(0)).unwrap_or(u64::MAX);
        }
    }

    fn live(&self, token: &str, now: Instant) -> Option<Instant> {
        let replica = replica_of_token(token);
        if self.sessions.get(replica).map(String::as_str) != Some(token) {
            return None;
        }
        self.members.get(replica).copied().filter(|exp| *exp > now)
    }

    /// Ends the sessions that have expired; returns how many partitions they held.
    fn reap(&mut self, now: Instant) -> usize {
        let gone: Vec<(String, Instant)> = self
            .members
            .iter()
            .filter(|(_, exp)| **exp <= now)
            .map(|(r, exp)| (r.clone(), *exp))
            .collect();
        let mut lost = 0;
        for (r, exp) in gone {
            self.members.remove(&r);
            self.states.remove(&r);
            self.info.remove(&r);
            self.capacity.remove(&r);
            if let Some(token) = self.sessions.remove(&r) {
                if self.drains.get(&r) == Some(&token) {
                    self.drains.remove(&r);
                }
                lost += self.owners.values().filter(|o| **o == token).count();
                self.dead.insert((exp, token));
            }
        }
        lost
    }

    /// Whether a change in `mode` comes too late: the group is at another list version
    /// than the one being applied.
    fn stale(&self, mode: Change) -> bool {
        match mode {
            Change::Versioned(v) => self.meta.as_ref().map_or(0, |m| m.version) != v,
            Change::Strict | Change::Ensure => false,
        }
    }

    fn add_free(&mut self, name: &str, since: Instant) {
        if let Some(old) = self.free_since.insert(name.to_owned(), since) {
            self.free.remove(&(old, name.to_owned()));
        }
        self.free.insert((since, name.to_owned()));
    }

    fn remove_free(&mut self, name: &str) {
        if let Some(since) = self.free_since.remove(name) {
            self.free.remove(&(since, name.to_owned()));
        }
    }

    fn forget(&mut self, name: &str) {
        self.revoked.remove(name);
        self.since.remove(name);
    }

    /// Moves up to `budget` partitions of ended sessions to the free set; returns how
    /// many ended sessions still hold partitions.
    fn drain(&mut self, budget: usize) -> usize {
        let mut moved = 0;
        let mut left_over = 0;
        let dead: Vec<(Instant, String)> = self.dead.iter().cloned().collect();
        for (ended, token) in dead {
            let left = budget.saturating_sub(moved);
            if left == 0 {
                left_over += 1;
                continue;
            }
            let names: Vec<String> = self
                .held
                .get(&token)
                .map(|set| set.iter().take(left).cloned().collect())
                .unwrap_or_default();
            if names.len() < left {
                self.dead.remove(&(ended, token.clone()));
                self.loads.remove(&token);
            } else {
                left_over += 1;
            }
            for name in &names {
                if let Some(set) = self.held.get_mut(&token) {
                    set.remove(name);
                }
                if self.owners.get(name) == Some(&token) {
                    self.owners.remove(name);
                    self.forget(name);
                    if self.positions.contains_key(name) {
                        self.add_free(name, ended);
                    } else {
                        self.weights.remove(name);
                    }
                }
            }
            if self.held.get(&token).is_some_and(BTreeSet::is_empty) {
                self.held.remove(&token);
            }
            moved += names.len();
        }
        left_over
    }

    fn unowned(&self) -> usize {
        let draining: usize = self
            .dead
            .iter()
            .map(|(_, t)| self.held.get(t).map_or(0, BTreeSet::len))
            .sum();
        self.free.len() + draining
    }

    fn roster(&self, now: Instant) -> Vec<MemberInfo> {
        let mut members: Vec<MemberInfo> = self
            .members
            .iter()
            .filter(|(_, exp)| **exp > now)
            .map(|(r, exp)| {
                let token = self.sessions.get(r);
                let held = token
                    .and_then(|t| self.held.get(t))
                    .map_or(0, BTreeSet::len);
                MemberInfo {
                    replica: r.clone(),
                    state: self.states.get(r).copied().unwrap_or(MemberState::Settling),
                    left: *exp - now,
                    held,
                    load: if self.weighted() {
                        token.and_then(|t| self.loads.get(t)).copied().unwrap_or(0)
                    } else {
                        held as u64
                    },
                    capacity: self.capacity.get(r).copied().unwrap_or(1),
                }
            })
            .collect();
        // Redis orders the sorted set by expiry, then by name.
        members.sort_by(|a, b| a.left.cmp(&b.left).then_with(|| a.replica.cmp(&b.replica)));
        members
    }

    fn set_info(&self) -> Option<SetInfo> {
        self.meta.as_ref().map(|m| SetInfo {
            count: m.count,
            version: m.version,
            digest: m.digest.clone(),
            weighted: m.weighted,
            total_weight: if m.weighted { m.total } else { m.count as u64 },
            max_weight: if m.weighted {
                self.weights.values().copied().max().unwrap_or(1).max(1)
            } else {
                1
            },
            weights_version: m.wver,
        })
    }

    fn create(&mut self, now: Instant, delay: Duration) {
        if self.meta.is_none() {
            self.meta = Some(Meta {
                count: 0,
                next: 0,
                version: 0,
                digest: String::new(),
                grant_after: now + delay,
                weighted: false,
                total: 0,
                wver: 0,
            });
        }
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
            held_for: live.and_then(|_| self.since.get(name).map(|s| now - *s)),
            weight: self.weight(name),
        }
    }
}

/// `names` without repeats, in order.
fn distinct(names: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .iter()
        .filter(|n| seen.insert(n.as_str()))
        .cloned()
        .collect()
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
        let mut changed = false;
        let reply = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            let expired = g.reap(now);
            let mut session = SessionReply::Live;
            let mut resumed = None;
            match g.sessions.get(&req.replica).cloned() {
                Some(cur) if cur == req.token => {
                    let exp = g.members.entry(req.replica.clone()).or_insert(now);
                    *exp = (*exp).max(now + req.ttl);
                }
                _ if !req.join => session = SessionReply::Lost,
                Some(cur) => {
                    if g.states.get(&req.replica) == Some(&MemberState::Away) {
                        resumed = Some(cur);
                        let exp = g.members.entry(req.replica.clone()).or_insert(now);
                        *exp = (*exp).max(now + req.ttl);
                    } else {
                        session = SessionReply::Refused(Conflict::DuplicateReplica);
                    }
                }
                None => {
                    g.sessions.insert(req.replica.clone(), req.token.clone());
                    g.members.insert(req.replica.clone(), now + req.ttl);
                }
            }
            let (mut drained, mut revoked) = (false, Vec::new());
            if session == SessionReply::Live {
                let token = resumed.clone().unwrap_or_else(|| req.token.clone());
                changed = g.states.insert(req.replica.clone(), req.state) != Some(req.state);
                if req.join {
                    g.info.insert(req.replica.clone(), req.instance.clone());
                    g.capacity.insert(req.replica.clone(), req.capacity.max(1));
                }
                drained = g.drains.get(&req.replica) == Some(&token);
                let mut mine: Vec<(String, String)> = g
                    .revoked
                    .iter()
                    .filter(|(p, _)| g.owners.get(*p) == Some(&token))
                    .map(|(p, why)| (p.clone(), why.clone()))
                    .collect();
                mine.sort();
                revoked = mine;
            }
            let draining = g.drain(DRAIN_BUDGET);
            TickReply {
                session,
                resumed,
                set: g.set_info(),
                members: g.roster(now),
                unowned: g.unowned(),
                grant_wait: g.meta.as_ref().map_or(Duration::ZERO, |m| {
                    m.grant_after.saturating_duration_since(now)
                }),
                draining,
                drained,
                revoked,
                expired,
            }
        };
        if changed {
            self.notify(keys);
        }
        Ok(reply)
    }

    async fn claim(&self, keys: &GroupKeys, req: &ClaimRequest) -> Result<ClaimReply, StoreError> {
        let now = Instant::now();
        let now_us = self.micros(now);
        let mut groups = self.lock();
        let g = groups.entry(keys.notice.clone()).or_default();
        // Sessions are reaped by ticks; a claim only refuses to extend its own ended one.
        if g.sessions.get(&req.replica) != Some(&req.token)
            || g.members.get(&req.replica).is_none_or(|exp| *exp <= now)
        {
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
        let regrant = !req.regrant.is_empty();
        let names: Vec<String> = if regrant {
            req.regrant.clone()
        } else if let Some(room) = req.room {
            // Among the next `count`, oldest first: those that fit; else the first.
            let candidates: Vec<String> = g
                .free
                .iter()
                .take(req.count)
                .map(|(_, n)| n.clone())
                .collect();
            let mut chosen = Vec::new();
            let mut acc = 0;
            for n in &candidates {
                let w = g.weight(n);
                if acc + w <= room {
                    chosen.push(n.clone());
                    acc += w;
                }
            }
            if chosen.is_empty()
                && req.fallback
                && let Some(first) = candidates.first()
            {
                chosen.push(first.clone());
            }
            for n in &chosen {
                g.remove_free(n);
            }
            chosen
        } else {
            let mut popped = Vec::new();
            for _ in 0..req.count {
                let Some((_, name)) = g.free.pop_first() else {
                    break;
                };
                g.free_since.remove(&name);
                popped.push(name);
            }
            popped
        };
        let mut gained = 0;
        let mut partitions = Vec::new();
        for name in names {
            let owner = g.owners.get(&name);
            let take = if regrant {
                owner == Some(&req.token)
            } else {
                !owner.is_some_and(|o| *o != req.token && g.live(o, now).is_some())
            };
            if !take {
                continue;
            }
            let fence = (g.fences.get(&name).copied().unwrap_or(0) + 1)
                .max(req.floor.get())
                .max(now_us);
            g.fences.insert(name.clone(), fence);
            g.owners.insert(name.clone(), req.token.clone());
            g.since.insert(name.clone(), now);
            g.held
                .entry(req.token.clone())
                .or_default()
                .insert(name.clone());
            let w = g.weight(&name);
            if !regrant {
                gained += w;
            }
            partitions.push((name, Fence(fence), w));
        }
        g.add_load(&req.token, i128::from(gained));
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
                    g.forget(name);
                    if let Some(set) = g.held.get_mut(token) {
                        set.remove(name);
                    }
                    let w = g.weight(name);
                    g.add_load(token, -i128::from(w));
                    if g.positions.contains_key(name) {
                        g.add_free(name, now);
                    } else {
                        g.weights.remove(name);
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
                g.info.remove(replica);
                g.capacity.remove(replica);
                if g.drains.get(replica).map(String::as_str) == Some(token) {
                    g.drains.remove(replica);
                }
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

    async fn add(
        &self,
        keys: &GroupKeys,
        mode: Change,
        grant_delay: Duration,
        names: &[String],
    ) -> Result<AddReply, StoreError> {
        let now = Instant::now();
        let added = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            if g.stale(mode) {
                return Ok(AddReply::Stale);
            }
            let names = distinct(names);
            g.create(now, grant_delay);
            if mode == Change::Strict
                && let Some(n) = names.iter().find(|n| g.positions.contains_key(*n))
            {
                return Ok(AddReply::Exists(n.clone()));
            }
            let mut added = 0;
            for n in names {
                if g.positions.contains_key(&n) {
                    continue;
                }
                let w = g.weight(&n);
                let meta = g.meta.as_mut().expect("created above");
                let pos = meta.next;
                meta.next += 1;
                meta.count += 1;
                if meta.weighted {
                    meta.total += w;
                }
                g.positions.insert(n.clone(), pos);
                g.order.insert(pos, n.clone());
                if !g.owners.contains_key(&n) {
                    g.add_free(&n, now);
                }
                g.revoked.remove(&n);
                added += 1;
            }
            added
        };
        if added > 0 {
            self.notify(keys);
        }
        Ok(AddReply::Added(added))
    }

    async fn remove(
        &self,
        keys: &GroupKeys,
        mode: Change,
        names: &[String],
    ) -> Result<RemoveReply, StoreError> {
        let removed = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            if g.stale(mode) {
                return Ok(RemoveReply::Stale);
            }
            let names = distinct(names);
            if mode == Change::Strict {
                if let Some(n) = names.iter().find(|n| !g.positions.contains_key(*n)) {
                    return Ok(RemoveReply::Unknown(n.clone()));
                }
                if names.len() >= g.positions.len() && !names.is_empty() {
                    return Ok(RemoveReply::Last);
                }
            }
            let mut removed = 0;
            for n in names {
                let Some(pos) = g.positions.remove(&n) else {
                    continue;
                };
                g.order.remove(&pos);
                g.remove_free(&n);
                let w = g.weight(&n);
                if g.owners.contains_key(&n) {
                    g.revoked.insert(n.clone(), "removed".into());
                } else {
                    g.weights.remove(&n);
                }
                if let Some(m) = g.meta.as_mut() {
                    m.count = m.count.saturating_sub(1);
                    if m.weighted {
                        m.total = m.total.saturating_sub(w);
                    }
                }
                removed += 1;
            }
            removed
        };
        if removed > 0 {
            self.notify(keys);
        }
        Ok(RemoveReply::Removed(removed))
    }

    async fn list_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let groups = self.lock();
        Ok(groups.get(&keys.notice).map_or_else(Vec::new, |g| {
            g.order
                .values()
                .skip(offset)
                .take(limit.max(1))
                .cloned()
                .collect()
        }))
    }

    async fn set_version(
        &self,
        keys: &GroupKeys,
        version: u64,
        step: VersionStep<'_>,
    ) -> Result<bool, StoreError> {
        let mut groups = self.lock();
        let g = groups.entry(keys.notice.clone()).or_default();
        let Some(m) = g.meta.as_mut() else {
            return Ok(false);
        };
        Ok(match step {
            VersionStep::Begin if m.version < version => {
                m.version = version;
                m.digest.clear();
                true
            }
            VersionStep::Begin => m.version == version && m.digest.is_empty(),
            VersionStep::Done(digest) if m.version == version => {
                m.digest = digest.to_owned();
                true
            }
            VersionStep::Done(_) => false,
        })
    }

    async fn drain(&self, keys: &GroupKeys, replica: &str, on: bool) -> Result<bool, StoreError> {
        let now = Instant::now();
        let done = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            match g.sessions.get(replica).cloned() {
                Some(token) if g.live(&token, now).is_some() => {
                    if on {
                        g.drains.insert(replica.to_owned(), token);
                    } else {
                        g.drains.remove(replica);
                    }
                    true
                }
                _ => false,
            }
        };
        if done {
            self.notify(keys);
        }
        Ok(done)
    }

    async fn held(&self, keys: &GroupKeys, token: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let groups = self.lock();
        Ok(groups
            .get(&keys.notice)
            .and_then(|g| {
                let set = g.held.get(token)?;
                Some(set.iter().map(|n| (n.clone(), g.weight(n))).collect())
            })
            .unwrap_or_default())
    }

    async fn set_weight(
        &self,
        keys: &GroupKeys,
        partition: &str,
        weight: u64,
    ) -> Result<WeightReply, StoreError> {
        let old = {
            let mut groups = self.lock();
            let g = groups.entry(keys.notice.clone()).or_default();
            if !g.positions.contains_key(partition) {
                return Ok(WeightReply::Unknown);
            }
            if !g.weighted() {
                let count = g.positions.len() as u64;
                let tokens: Vec<String> = g.sessions.values().cloned().collect();
                for t in tokens {
                    let n = g.held.get(&t).map_or(0, BTreeSet::len) as u64;
                    g.loads.insert(t, n);
                }
                if let Some(m) = g.meta.as_mut() {
                    m.weighted = true;
                    m.total = count;
                }
            }
            let old = g.weight(partition);
            if weight == 1 {
                g.weights.remove(partition);
            } else {
                g.weights.insert(partition.to_owned(), weight);
            }
            let delta = i128::from(weight) - i128::from(old);
            if let Some(m) = g.meta.as_mut() {
                m.total = u64::try_from((i128::from(m.total) + delta).max(0)).unwrap_or(0);
                m.wver += 1;
            }
            if let Some(owner) = g.owners.get(partition).cloned()
                && g.loads.contains_key(&owner)
            {
                g.add_load(&owner, delta);
            }
            old
        };
        self.notify(keys);
        Ok(WeightReply::Set(old))
    }

    async fn owner(
        &self,
        keys: &GroupKeys,
        partition: &str,
    ) -> Result<Option<PartitionOwner>, StoreError> {
        let now = Instant::now();
        let groups = self.lock();
        Ok(groups
            .get(&keys.notice)
            .filter(|g| g.positions.contains_key(partition))
            .map(|g| g.owner_of(partition, now)))
    }

    async fn status_head(&self, keys: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
        let now = Instant::now();
        let groups = self.lock();
        Ok(groups.get(&keys.notice).and_then(|g| {
            let set = g.set_info()?;
            let members = g.roster(now);
            let instances = members
                .iter()
                .map(|m| g.info.get(&m.replica).cloned().unwrap_or_default())
                .collect();
            let drained = members
                .iter()
                .filter(|m| {
                    g.drains.contains_key(&m.replica)
                        && g.drains.get(&m.replica) == g.sessions.get(&m.replica)
                })
                .map(|m| m.replica.clone())
                .collect();
            Some(StatusHead {
                set,
                members,
                instances,
                drained,
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
                .values()
                .skip(offset)
                .take(limit.max(1))
                .map(|name| g.owner_of(name, now))
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
