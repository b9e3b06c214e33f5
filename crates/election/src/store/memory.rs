//! An in-memory lease store on tokio's clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

use super::notify::Notifiers;
use super::{Acquire, LeaderInfo, LeaseStore};
use crate::error::StoreError;
use crate::fence::Fence;
use crate::keys::DutyKeys;
use crate::token::replica_of_token;

/// An in-process [`LeaseStore`] with the same semantics as [`super::RedisStore`], on
/// tokio's clock, so it works under `tokio::time::pause()`.
///
/// For unit tests, simulations and the embedded demo. Fences are floored at the
/// microseconds elapsed since the store was created (as the Redis store floors them at
/// the server's clock), so [`MemoryStore::wipe`] models a Redis restart that lost data;
/// after a wipe, as after such a restart, nothing is granted for one lease
/// ([`Acquire::Recovering`]). A new store models a server that has been up for long.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    epoch: Instant,
    // A std mutex: it is never held across an await, and every critical section is a
    // few map operations.
    state: Mutex<State>,
    notifiers: Notifiers,
}

#[derive(Debug, Default)]
struct State {
    leases: HashMap<String, (String, Instant)>,
    fences: HashMap<String, u64>,
    /// When the data was last wiped (a restart that lost it), if ever.
    wiped: Option<Instant>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                epoch: Instant::now(),
                state: Mutex::new(State::default()),
                notifiers: Notifiers::default(),
            }),
        }
    }

    /// Forgets every lease and fence counter, as a Redis restart without persistence does;
    /// grants nothing for one lease after it.
    pub fn wipe(&self) {
        let mut s = self.lock();
        s.leases.clear();
        s.fences.clear();
        s.wiped = Some(Instant::now());
    }

    /// Scans many leases under one lock. Returns, by position in `keys`, the leases
    /// whose holder is missing or not `live` (with that holder's replica id and the
    /// time left), and how many of the leases each live holder has. Group backends use
    /// it to find partitions without a live owner and to count ownership cheaply.
    #[allow(clippy::type_complexity)]
    pub fn scan(
        &self,
        keys: &[DutyKeys],
        live: impl Fn(&str) -> bool,
    ) -> (
        Vec<(usize, Option<String>, Option<Duration>)>,
        HashMap<String, usize>,
    ) {
        let now = Instant::now();
        let s = self.lock();
        let mut held: HashMap<String, usize> = HashMap::new();
        let mut unowned = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            match s.leases.get(&k.lease) {
                Some((holder, exp)) if *exp > now => {
                    let replica = replica_of_token(holder);
                    if live(replica) {
                        match held.get_mut(replica) {
                            Some(n) => *n += 1,
                            None => {
                                held.insert(replica.to_owned(), 1);
                            }
                        }
                    } else {
                        unowned.push((i, Some(replica.to_owned()), Some(*exp - now)));
                    }
                }
                _ => unowned.push((i, None, None)),
            }
        }
        (unowned, held)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn live_holder<'a>(s: &'a mut State, key: &str, now: Instant) -> Option<&'a (String, Instant)> {
        if s.leases.get(key).is_some_and(|(_, exp)| *exp <= now) {
            s.leases.remove(key);
        }
        s.leases.get(key)
    }
}

impl LeaseStore for MemoryStore {
    async fn acquire(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
        floor: Fence,
    ) -> Result<Acquire, StoreError> {
        let now = Instant::now();
        let mut s = self.lock();
        let counter = s.fences.get(&keys.fence).copied().unwrap_or(0);
        match Self::live_holder(&mut s, &keys.lease, now) {
            Some((holder, exp)) if holder != token => {
                return Ok(Acquire::Lost {
                    holder: replica_of_token(holder).to_owned(),
                    remaining: Some(*exp - now),
                    fence: Fence(counter),
                });
            }
            // Already ours: confirmed, not extended (as the Redis script).
            Some((_, exp)) => {
                return Ok(Acquire::Confirmed {
                    fence: Fence(counter),
                    remaining: *exp - now,
                });
            }
            None => {}
        }
        if let Some(wiped) = s.wiped
            && keys.boot.is_some()
            && now < wiped + lease
        {
            return Ok(Acquire::Recovering {
                wait: wiped + lease - now,
            });
        }
        let clock =
            u64::try_from(now.duration_since(self.inner.epoch).as_micros()).unwrap_or(u64::MAX);
        let regressed = counter + 1 < floor.0;
        let fence = (counter + 1).max(floor.0).max(clock);
        s.fences.insert(keys.fence.clone(), fence);
        s.leases
            .insert(keys.lease.clone(), (token.to_owned(), now + lease));
        Ok(Acquire::Won {
            fence: Fence(fence),
            regressed,
        })
    }

    async fn renew(
        &self,
        keys: &DutyKeys,
        token: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut s = self.lock();
        match Self::live_holder(&mut s, &keys.lease, now) {
            Some((holder, _)) if holder == token => {
                s.leases
                    .insert(keys.lease.clone(), (token.to_owned(), now + lease));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&self, keys: &DutyKeys, token: &str) -> Result<bool, StoreError> {
        let released = {
            let mut s = self.lock();
            let ours = Self::live_holder(&mut s, &keys.lease, Instant::now())
                .is_some_and(|(holder, _)| holder == token);
            if ours {
                s.leases.remove(&keys.lease);
            }
            ours
        };
        if released {
            self.inner.notifiers.wake(&keys.lease);
        }
        Ok(released)
    }

    async fn leader(&self, keys: &DutyKeys) -> Result<Option<LeaderInfo>, StoreError> {
        let now = Instant::now();
        let mut s = self.lock();
        let fence = Fence(s.fences.get(&keys.fence).copied().unwrap_or(0));
        Ok(
            Self::live_holder(&mut s, &keys.lease, now).map(|(holder, exp)| LeaderInfo {
                replica_id: replica_of_token(holder).to_owned(),
                fence,
                remaining: Some(*exp - now),
            }),
        )
    }

    fn release_notifier(&self, keys: &DutyKeys) -> Arc<Notify> {
        self.inner.notifiers.get(&keys.lease)
    }

    fn release_events(&self, _keys: &DutyKeys) -> broadcast::Receiver<String> {
        self.inner.notifiers.events()
    }
}
