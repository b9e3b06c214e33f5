//! An in-memory [`GroupBackend`] on tokio's clock, for simulations under paused time
//! and the embedded demo. Lease semantics come from [`MemoryStore`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use leasehold_election::keys::DutyKeys;
use leasehold_election::{
    Acquire, BackendWarning, Fence, LeaderInfo, LeaseStore, MemoryStore, StoreError,
};
use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

use crate::backend::{
    Conflict, GroupBackend, GroupStatus, PartitionOwner, TickReply, TickRequest, Unowned,
};
use crate::keys::GroupKeys;

/// A [`MemoryStore`] that also keeps partition groups, with the Redis scripts'
/// semantics. Cheap to clone; clones share state.
#[derive(Debug, Clone, Default)]
pub struct MemoryGroupStore {
    leases: MemoryStore,
    groups: Arc<Mutex<HashMap<String, Group>>>,
}

#[derive(Debug, Default)]
struct Group {
    /// replica → (heartbeat expiry, owned or None while settling, instance)
    members: HashMap<String, (Instant, Option<usize>, String)>,
    digest: Option<String>,
    list: Vec<String>,
}

impl MemoryGroupStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The lease store inside.
    pub fn leases(&self) -> &MemoryStore {
        &self.leases
    }

    /// Forgets everything, as a Redis restart without persistence does.
    pub fn wipe(&self) {
        self.leases.wipe();
        self.groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl LeaseStore for MemoryGroupStore {
    async fn acquire(
        &self,
        k: &DutyKeys,
        t: &str,
        l: Duration,
        f: Fence,
    ) -> Result<Acquire, StoreError> {
        self.leases.acquire(k, t, l, f).await
    }
    async fn renew(&self, k: &DutyKeys, t: &str, l: Duration) -> Result<bool, StoreError> {
        self.leases.renew(k, t, l).await
    }
    async fn release(&self, k: &DutyKeys, t: &str) -> Result<bool, StoreError> {
        self.leases.release(k, t).await
    }
    async fn leader(&self, k: &DutyKeys) -> Result<Option<LeaderInfo>, StoreError> {
        self.leases.leader(k).await
    }
    fn release_notifier(&self, k: &DutyKeys) -> Arc<Notify> {
        self.leases.release_notifier(k)
    }
    fn release_events(&self, k: &DutyKeys) -> broadcast::Receiver<String> {
        self.leases.release_events(k)
    }
    async fn self_check(&self) -> Result<Vec<BackendWarning>, StoreError> {
        Ok(Vec::new())
    }
}

impl GroupBackend for MemoryGroupStore {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        let now = Instant::now();
        let (conflict, live) = {
            let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
            let g = groups.entry(keys.members.clone()).or_default();
            g.members.retain(|_, (exp, ..)| *exp > now);
            let mut conflict = None;
            if g.members
                .get(&req.replica)
                .is_some_and(|(.., inst)| *inst != req.instance)
            {
                conflict = Some(Conflict::DuplicateReplica);
            } else if g.digest.as_ref().is_some_and(|d| *d != req.digest) {
                let others = g.members.keys().filter(|r| **r != req.replica).count();
                if others > 0 {
                    conflict = Some(Conflict::PartitionListMismatch);
                }
            }
            if conflict.is_none() {
                if g.digest.as_deref() != Some(req.digest.as_str()) {
                    g.digest = Some(req.digest.clone());
                    g.list = req.list.split('\n').map(str::to_owned).collect();
                }
                g.members.insert(
                    req.replica.clone(),
                    (now + req.ttl, req.owned, req.instance.clone()),
                );
            }
            let mut live: Vec<(String, Option<usize>, Duration)> = g
                .members
                .iter()
                .map(|(r, (exp, c, _))| (r.clone(), *c, *exp - now))
                .collect();
            live.sort_by(|a, b| a.0.cmp(&b.0));
            (conflict, live)
        };
        let heartbeat_left = live.iter().map(|m| m.2).collect();
        let live: Vec<(String, Option<usize>)> = live.into_iter().map(|(r, c, _)| (r, c)).collect();
        let mut renewed = Vec::with_capacity(req.renewals.len());
        for (index, token) in &req.renewals {
            let ok = conflict.is_none()
                && self
                    .leases
                    .renew(&keys.partitions[*index], token, req.lease)
                    .await?;
            renewed.push(ok);
        }
        let live_set: std::collections::HashSet<&str> =
            live.iter().map(|(r, _)| r.as_str()).collect();
        let (unowned, held) = self.leases.scan(&keys.partitions, |r| live_set.contains(r));
        let unowned = unowned
            .into_iter()
            .map(|(index, holder, remaining)| Unowned {
                index,
                holder,
                remaining,
            })
            .collect();
        // Counts come from the leases; the published value only marks settling members.
        let live: Vec<(String, Option<usize>)> = live
            .into_iter()
            .map(|(r, c)| {
                let n = c.map(|_| held.get(&r).copied().unwrap_or(0));
                (r, n)
            })
            .collect();
        Ok(TickReply {
            renewed,
            members: live,
            heartbeat_left,
            unowned,
            conflict,
        })
    }

    async fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        instance: &str,
    ) -> Result<(), StoreError> {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(g) = groups.get_mut(&keys.members)
            && g.members.get(replica).is_some_and(|(.., i)| i == instance)
        {
            g.members.remove(replica);
        }
        Ok(())
    }

    async fn group_status(&self, keys: &GroupKeys) -> Result<Option<GroupStatus>, StoreError> {
        let now = Instant::now();
        let (list, mut replicas) = {
            let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(g) = groups.get(&keys.members) else {
                return Ok(None);
            };
            let replicas: Vec<(String, Option<usize>)> = g
                .members
                .iter()
                .filter(|(_, (exp, ..))| *exp > now)
                .map(|(r, (_, c, _))| (r.clone(), *c))
                .collect();
            (g.list.clone(), replicas)
        };
        replicas.sort();
        let keys = keys.with_partitions(&list);
        let mut partitions = Vec::with_capacity(list.len());
        for (partition, k) in list.into_iter().zip(&keys.partitions) {
            let info = self.leases.leader(k).await?;
            partitions.push(PartitionOwner {
                partition,
                fence: info.as_ref().map_or(Fence(0), |i| i.fence),
                remaining: info.as_ref().and_then(|i| i.remaining),
                owner: info.map(|i| i.replica_id),
            });
        }
        Ok(Some(GroupStatus {
            partitions,
            replicas,
        }))
    }
}
