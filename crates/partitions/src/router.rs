//! A client's table of owners: which replica owns each partition of a group, and
//! where it serves, for processes that are not members (a gateway, another team's
//! service), kept current by the group's move notices.
//!
//! The table is read once in full; after that, every claim that moves partitions
//! publishes a notice with the ids of its ledger entries and the ledger entry before
//! them, so a router applies each notice as it comes, and after a gap (a notice lost:
//! pub/sub is best effort; a reconnect) reads only the ledger entries it missed. It
//! reads the whole table again only when the ledger no longer holds its last entry
//! (trimmed, or lost with Redis's data) or the group was made again. A still group
//! costs a router nothing but its subscription.
//!
//! Every route carries the fence of the term it names, and a route is only ever
//! replaced by one with a higher fence: a router never names an owner older than one
//! it has seen.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use leasehold_election::Fence;
use metrics::counter;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use crate::keys::GroupKeys;
use crate::metrics as m;
use crate::notice::{GroupNotice, Moved};
use crate::store::GroupStore;
use crate::store::ops;
use crate::store::ops::routes::{RouteBody, RouteRead};

/// How many ledger entries a router reads to close a gap before it reads the whole
/// table instead.
const CATCH_UP_LIMIT: usize = 1_000;
/// First and longest wait before a failed read is tried again.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How many route changes a [`Router::changes`] receiver may fall behind by.
const CHANGES: usize = 4_096;

/// Where a partition is served: its owner, the owner's address and the fence of the
/// owner's term. A route is a hint: the owner's own check
/// ([`CoordinatorHandle::owns`](crate::CoordinatorHandle::owns)) is the truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route(Arc<RouteInner>);

/// A route's parts, behind one `Arc`: a lookup clones one pointer.
#[derive(Debug, PartialEq, Eq)]
struct RouteInner {
    replica: Arc<str>,
    address: Option<Arc<str>>,
    fence: Fence,
}

impl Route {
    fn new(replica: Arc<str>, address: Option<Arc<str>>, fence: Fence) -> Self {
        Self(Arc::new(RouteInner {
            replica,
            address,
            fence,
        }))
    }

    /// The owner's replica id.
    pub fn replica(&self) -> &str {
        &self.0.replica
    }

    /// Where the owner serves ([`GroupConfigBuilder::advertise`](crate::GroupConfigBuilder::advertise)),
    /// if it advertises an address.
    pub fn address(&self) -> Option<&str> {
        self.0.address.as_deref()
    }

    /// The fence of the owner's term.
    pub fn fence(&self) -> Fence {
        self.0.fence
    }

    /// The same route at another address.
    fn at(&self, address: Option<Arc<str>>) -> Self {
        Self::new(self.0.replica.clone(), address, self.0.fence)
    }
}

/// A change of the router's table ([`Router::changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteChange {
    /// The partition.
    pub partition: String,
    /// Its new route; `None`: no owner is known now (it was freed and not yet
    /// claimed, or the group was lost).
    pub route: Option<Route>,
}

/// How a router stands ([`Router::status`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouterStatus {
    /// The table holds a full read of the group's current incarnation (and every move
    /// since that the router has heard of or read).
    pub ready: bool,
    /// The group exists, as the last read found it.
    pub group_exists: bool,
    /// The incarnation of the group the table is of (`None`: not read yet, or the
    /// group does not exist).
    pub incarnation: Option<String>,
    /// The id of the last ledger entry applied.
    pub last_move: Option<String>,
    /// Partitions with a known owner.
    pub routes: usize,
    /// Full reads of the table so far.
    pub full_reads: u64,
    /// Reads of missed ledger entries so far.
    pub catch_ups: u64,
    /// Move notices applied so far.
    pub notices: u64,
}

/// The owners of a group's partitions, kept current by push, for processes that are
/// not members of the group. Cheap lookups ([`owner`](Self::owner): a map read, no
/// I/O, no await) from any thread; one pub/sub subscription per store (shared by the
/// routers and coordinators of one store) and no commands while the group is still.
///
/// ```no_run
/// use leasehold_partitions::{RedisStore, Router};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::builder("redis://127.0.0.1:6379/")
///     // A router has no lease to keep: check the subscription once a minute.
///     .subscription_ping(std::time::Duration::from_secs(60))
///     .build()?;
/// let router = Router::new(store, "tenants")?;
/// router.wait_until_ready().await;
/// if let Some(route) = router.owner("tenant-7") {
///     println!("send to {} at {:?}", route.replica(), route.address());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Router {
    shared: Arc<Shared>,
    status: watch::Receiver<RouterStatus>,
    changes: broadcast::Sender<RouteChange>,
    stop: CancellationToken,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Hashed with foldhash (seeded per process): with SipHash, hashing the name was
    /// most of a lookup's cost.
    table: DashMap<String, Route, foldhash::fast::RandomState>,
}

impl Drop for Router {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Router {
    /// A router of `group` (under the default key prefix) on `store`, reading the
    /// table in the background: see [`wait_until_ready`](Self::wait_until_ready).
    ///
    /// # Errors
    /// [`PartitionsError::Config`](crate::PartitionsError::Config) for an invalid group
    /// name.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new<B: GroupStore>(store: B, group: &str) -> crate::Result<Self> {
        Ok(crate::GroupAdmin::new(store, group)?.router())
    }

    /// Starts a router of the group of `keys` on `store`.
    pub(crate) fn start<B: GroupStore>(store: B, keys: GroupKeys) -> Self {
        m::describe();
        let shared = Arc::new(Shared::default());
        let (status_tx, status) = watch::channel(RouterStatus::default());
        let (changes, _) = broadcast::channel(CHANGES);
        let stop = CancellationToken::new();
        let span = info_span!("router", group = %keys.group);
        let follower = Follower {
            notices: store.notices(&keys),
            store,
            keys,
            shared: shared.clone(),
            status: status_tx,
            changes: changes.clone(),
            stop: stop.clone(),
            floors: HashMap::new(),
            set_by: HashMap::new(),
            addresses: HashMap::new(),
        };
        let task = tokio::spawn(follower.run().instrument(span));
        Self {
            shared,
            status,
            changes,
            stop,
            task: std::sync::Mutex::new(Some(task)),
        }
    }

    /// The route of `partition`: its owner, the owner's address and its term's fence;
    /// `None` if no owner is known (no owner now, not read yet, or the group was lost
    /// and is not back). Local: a map read.
    pub fn owner(&self, partition: &str) -> Option<Route> {
        self.shared.table.get(partition).map(|r| r.clone())
    }

    /// Every known route, by partition (unordered).
    pub fn routes(&self) -> Vec<(String, Route)> {
        self.shared
            .table
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect()
    }

    /// How the router stands: whether its table is read, of which incarnation.
    pub fn status(&self) -> RouterStatus {
        self.status.borrow().clone()
    }

    /// Waits until the table holds a full read of the group (at once if it does).
    /// Waits on while Redis cannot be reached or the group does not exist: bound it
    /// with a timeout. Returns at once if the router was shut down.
    pub async fn wait_until_ready(&self) {
        let mut status = self.status.clone();
        let _ = status.wait_for(|s| s.ready).await;
    }

    /// A receiver of every change of the table from now on (a receiver that falls
    /// behind by more than 4,096 changes skips ahead: read [`routes`](Self::routes)
    /// then).
    pub fn changes(&self) -> broadcast::Receiver<RouteChange> {
        self.changes.subscribe()
    }

    /// A receiver of status changes.
    pub fn subscribe(&self) -> watch::Receiver<RouterStatus> {
        self.status.clone()
    }

    /// Stops following the group and waits for the background task to end. Dropping
    /// the router stops it too, without waiting.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let task = self
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

/// The router's background task: the only writer of the table.
struct Follower<B> {
    store: B,
    keys: GroupKeys,
    notices: broadcast::Receiver<String>,
    shared: Arc<Shared>,
    status: watch::Sender<RouterStatus>,
    changes: broadcast::Sender<RouteChange>,
    stop: CancellationToken,
    /// The highest fence seen per partition (kept when a route goes: an older term is
    /// never named again).
    floors: HashMap<String, Fence>,
    /// The ledger entry each route was set from (`None`: a full read).
    set_by: HashMap<String, Option<LedgerId>>,
    /// Each replica's address, as last read or heard.
    addresses: HashMap<String, Option<Arc<str>>>,
}

/// A ledger entry's id (a Redis stream id, `<ms>-<seq>`), ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LedgerId(u64, u64);

impl LedgerId {
    fn parse(id: &str) -> Option<Self> {
        let (ms, seq) = id.split_once('-')?;
        Some(Self(ms.parse().ok()?, seq.parse().ok()?))
    }
}

/// What the follower does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Nothing,
    CatchUp,
    FullRead,
}

impl<B: GroupStore> Follower<B> {
    async fn run(mut self) {
        let mut next = Next::FullRead;
        let mut retry = RETRY_FIRST;
        loop {
            if next != Next::Nothing {
                debug!(?next, "router reads");
                let read = match next {
                    Next::CatchUp => self.catch_up().await,
                    _ => self.full_read().await,
                };
                match read {
                    Ok(then) => {
                        next = then;
                        retry = RETRY_FIRST;
                        continue;
                    }
                    Err(e) => {
                        debug!(error = %crate::ErrorChain(&e), "router read failed; trying again");
                        tokio::select! {
                            () = self.stop.cancelled() => return,
                            () = tokio::time::sleep(retry) => {}
                        }
                        retry = (retry * 2).min(RETRY_MAX);
                        // A failed catch-up is retried as a full read only if it
                        // cannot be closed; keep what was asked.
                        continue;
                    }
                }
            }
            let message = tokio::select! {
                () = self.stop.cancelled() => return,
                m = self.notices.recv() => m,
            };
            next = match message {
                Ok(message) => match GroupNotice::decode(&self.keys.notice, &message) {
                    Some(Ok(GroupNotice::Moved(moved))) => self.on_moved(moved),
                    Some(Ok(GroupNotice::Missed)) => self.after_gap(),
                    Some(Ok(_)) | None => Next::Nothing,
                    Some(Err(_)) => {
                        counter!(m::UNKNOWN_NOTICES, "group" => self.keys.group.clone())
                            .increment(1);
                        Next::Nothing
                    }
                },
                Err(broadcast::error::RecvError::Lagged(_)) => self.after_gap(),
                Err(broadcast::error::RecvError::Closed) => return,
            };
        }
    }

    /// What to read after notices may have been missed.
    fn after_gap(&self) -> Next {
        if self.status.borrow().incarnation.is_some() {
            Next::CatchUp
        } else {
            Next::FullRead
        }
    }

    fn on_moved(&mut self, moved: Moved) -> Next {
        let (incarnation, last) = {
            let s = self.status.borrow();
            (s.incarnation.clone(), s.last_move.clone())
        };
        if incarnation.as_deref() != Some(moved.incarnation.as_str()) {
            // Not read yet, or the group was made again (Redis lost it): nothing of
            // the old table is true of the new group.
            if incarnation.is_some() {
                self.forget_all();
            }
            return Next::FullRead;
        }
        let address = moved.address.map(Arc::<str>::from);
        self.learn_address(&moved.replica, address.clone());
        let id = LedgerId::parse(&moved.last);
        let replica: Arc<str> = moved.replica.as_str().into();
        for (partition, fence) in moved.partitions {
            let route = Route::new(replica.clone(), address.clone(), fence);
            self.set(partition, route, id);
        }
        let follows = moved.after == last;
        let newer = match (
            LedgerId::parse(&moved.last),
            last.as_deref().and_then(LedgerId::parse),
        ) {
            (Some(n), Some(l)) => n > l,
            _ => true,
        };
        self.status.send_modify(|s| {
            s.notices += 1;
            if follows {
                s.last_move = Some(moved.last.clone());
            }
        });
        self.publish_count();
        if follows || !newer {
            Next::Nothing
        } else {
            Next::CatchUp
        }
    }

    async fn full_read(&mut self) -> Result<Next, leasehold_election::StoreError> {
        let read = self
            .store
            .run(&self.keys, &ops::Routes::new(None, CATCH_UP_LIMIT))
            .await?;
        self.status.send_modify(|s| s.full_reads += 1);
        let Some(RouteRead {
            life,
            last,
            addresses,
            body,
        }) = read
        else {
            self.group_gone();
            return Ok(Next::Nothing);
        };
        if self.status.borrow().incarnation.as_deref() != Some(life.as_str()) {
            self.forget_all();
        }
        self.addresses = addresses
            .into_iter()
            .map(|(r, a)| (r, a.map(Arc::from)))
            .collect();
        let RouteBody::Table(rows) = body else {
            return Ok(Next::FullRead);
        };
        let read_at = last.as_deref().and_then(LedgerId::parse);
        let mut seen = HashMap::with_capacity(rows.len());
        for (partition, replica, fence) in rows {
            let address = self.addresses.get(&replica).cloned().flatten();
            seen.insert(partition.clone(), ());
            let route = Route::new(replica.into(), address, fence);
            self.set(partition, route, None);
        }
        // Routes the read did not find (freed, removed), unless set by a move newer
        // than the read.
        let gone: Vec<String> = self
            .shared
            .table
            .iter()
            .map(|e| e.key().clone())
            .filter(|p| !seen.contains_key(p))
            .filter(|p| match (self.set_by.get(p).copied().flatten(), read_at) {
                (Some(by), Some(at)) => by <= at,
                (Some(_), None) => false,
                (None, _) => true,
            })
            .collect();
        for p in gone {
            self.unset(&p);
        }
        self.status.send_modify(|s| {
            s.ready = true;
            s.group_exists = true;
            s.incarnation = Some(life);
            s.last_move = last;
        });
        self.publish_count();
        Ok(Next::Nothing)
    }

    async fn catch_up(&mut self) -> Result<Next, leasehold_election::StoreError> {
        let (incarnation, last) = {
            let s = self.status.borrow();
            (s.incarnation.clone(), s.last_move.clone())
        };
        let Some(last) = last else {
            return Ok(Next::FullRead);
        };
        let read = self
            .store
            .run(&self.keys, &ops::Routes::new(Some(&last), CATCH_UP_LIMIT))
            .await?;
        self.status.send_modify(|s| s.catch_ups += 1);
        let Some(read) = read else {
            self.group_gone();
            return Ok(Next::Nothing);
        };
        if incarnation.as_deref() != Some(read.life.as_str()) {
            debug!("the group was made again");
            self.forget_all();
            return Ok(Next::FullRead);
        }
        for (r, a) in read.addresses {
            self.learn_address(&r, a.map(Arc::from));
        }
        let RouteBody::After(entries) = read.body else {
            debug!(%last, "the ledger no longer holds the router's last entry");
            return Ok(Next::FullRead);
        };
        let mut newest = None;
        for (partition, replica, fence, id) in entries {
            let address = self.addresses.get(&replica).cloned().flatten();
            let route = Route::new(replica.into(), address, fence);
            self.set(partition, route, LedgerId::parse(&id));
            newest = Some(id);
        }
        if let Some(id) = newest {
            self.status.send_modify(|s| s.last_move = Some(id));
        }
        self.publish_count();
        Ok(Next::Nothing)
    }

    /// Sets `partition`'s route if its fence is above every fence seen for it.
    fn set(&mut self, partition: String, route: Route, by: Option<LedgerId>) {
        let floor = self.floors.get(&partition).copied();
        if floor.is_some_and(|f| route.fence() < f) {
            return;
        }
        if floor == Some(route.fence())
            && self.shared.table.get(&partition).as_deref() == Some(&route)
        {
            return;
        }
        if floor == Some(route.fence()) && !self.shared.table.contains_key(&partition) {
            // The term was seen and has ended since: not named again.
            return;
        }
        self.floors.insert(partition.clone(), route.fence());
        self.set_by.insert(partition.clone(), by);
        self.shared.table.insert(partition.clone(), route.clone());
        let _ = self.changes.send(RouteChange {
            partition,
            route: Some(route),
        });
    }

    fn unset(&mut self, partition: &str) {
        self.set_by.remove(partition);
        if self.shared.table.remove(partition).is_some() {
            let _ = self.changes.send(RouteChange {
                partition: partition.to_owned(),
                route: None,
            });
        }
    }

    /// A replica's address, as a read or a notice says: its routes follow.
    fn learn_address(&mut self, replica: &str, address: Option<Arc<str>>) {
        let old = self.addresses.insert(replica.to_owned(), address.clone());
        if old.is_none() || old == Some(address.clone()) {
            return;
        }
        let moved: Vec<(String, Route)> = self
            .shared
            .table
            .iter()
            .filter(|e| e.value().replica() == replica)
            .map(|e| (e.key().clone(), e.value().at(address.clone())))
            .collect();
        for (partition, route) in moved {
            self.shared.table.insert(partition.clone(), route.clone());
            let _ = self.changes.send(RouteChange {
                partition,
                route: Some(route),
            });
        }
    }

    /// The group was made again, or is gone: every route is unknown.
    fn forget_all(&mut self) {
        let all: Vec<String> = self.shared.table.iter().map(|e| e.key().clone()).collect();
        for p in all {
            self.unset(&p);
        }
        self.set_by.clear();
        self.status.send_modify(|s| {
            s.ready = false;
            s.incarnation = None;
            s.last_move = None;
        });
        self.publish_count();
    }

    fn group_gone(&mut self) {
        self.forget_all();
        self.status.send_modify(|s| s.group_exists = false);
    }

    fn publish_count(&self) {
        let n = self.shared.table.len();
        self.status.send_if_modified(|s| {
            let changed = s.routes != n;
            s.routes = n;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryGroupStore;
    use crate::store::protocol::Protocol;

    fn follower() -> Follower<MemoryGroupStore> {
        let store = MemoryGroupStore::new();
        let keys = GroupKeys::new("lh", "g");
        Follower {
            notices: store.notices(&keys),
            store,
            keys,
            shared: Arc::default(),
            status: watch::channel(RouterStatus::default()).0,
            changes: broadcast::channel(16).0,
            stop: CancellationToken::new(),
            floors: HashMap::new(),
            set_by: HashMap::new(),
            addresses: HashMap::new(),
        }
    }

    fn moved(after: Option<&str>, last: &str, replica: &str, fence: u64) -> Moved {
        Moved {
            incarnation: "life".into(),
            after: after.map(str::to_owned),
            last: last.into(),
            replica: replica.into(),
            address: Some(format!("{replica}:80")),
            partitions: vec![("p".into(), Fence(fence))],
        }
    }

    fn read_as(f: &mut Follower<MemoryGroupStore>, last: Option<&str>) {
        f.status.send_modify(|s| {
            s.ready = true;
            s.incarnation = Some("life".into());
            s.last_move = last.map(str::to_owned);
        });
    }

    #[test]
    fn a_notice_that_follows_the_last_entry_is_applied_and_closes_nothing() {
        let mut f = follower();
        read_as(&mut f, Some("1-0"));
        assert_eq!(
            f.on_moved(moved(Some("1-0"), "2-0", "a", 10)),
            Next::Nothing
        );
        let route = f.shared.table.get("p").unwrap().clone();
        assert_eq!((route.replica(), route.fence()), ("a", Fence(10)));
        assert_eq!(route.address(), Some("a:80"));
        assert_eq!(f.status.borrow().last_move.as_deref(), Some("2-0"));
    }

    #[test]
    fn a_notice_after_a_gap_is_applied_and_the_gap_read_from_the_ledger() {
        let mut f = follower();
        read_as(&mut f, Some("1-0"));
        assert_eq!(
            f.on_moved(moved(Some("3-0"), "4-0", "b", 12)),
            Next::CatchUp
        );
        assert_eq!(f.shared.table.get("p").unwrap().replica(), "b");
        assert_eq!(
            f.status.borrow().last_move.as_deref(),
            Some("1-0"),
            "the gap is still open"
        );
    }

    #[test]
    fn an_older_term_is_never_named_after_a_newer_one() {
        let mut f = follower();
        read_as(&mut f, Some("1-0"));
        f.on_moved(moved(Some("1-0"), "2-0", "b", 20));
        // A late or replayed notice of an earlier term (a catch-up that overlaps it).
        f.on_moved(moved(None, "1-0", "a", 10));
        assert_eq!(f.shared.table.get("p").unwrap().fence(), Fence(20));
        // Once the term was seen and its route dropped (freed), it is not named again.
        f.unset("p");
        f.set("p".into(), Route::new("b".into(), None, Fence(20)), None);
        assert!(f.shared.table.get("p").is_none());
    }

    #[test]
    fn another_incarnations_notice_drops_every_route_and_reads_again() {
        let mut f = follower();
        read_as(&mut f, Some("1-0"));
        f.on_moved(moved(Some("1-0"), "2-0", "a", 10));
        let mut other = moved(None, "1-0", "c", 30);
        other.incarnation = "another".into();
        assert_eq!(f.on_moved(other), Next::FullRead);
        assert!(
            f.shared.table.is_empty(),
            "nothing of the old table is kept"
        );
        assert!(!f.status.borrow().ready);
    }

    #[test]
    fn ledger_ids_order_by_time_then_sequence() {
        assert!(LedgerId::parse("10-2").unwrap() > LedgerId::parse("10-1").unwrap());
        assert!(LedgerId::parse("11-0").unwrap() > LedgerId::parse("10-9").unwrap());
        assert_eq!(LedgerId::parse("x"), None);
    }
}
