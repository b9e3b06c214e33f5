//! The live reads behind the page: one reader per topic (the overview, or one group),
//! shared by every viewer of it, and running only while someone watches.
//!
//! A topic's reader is a task that feeds a [`watch`] channel; viewers hold its
//! receivers. The first viewer starts the task, and the task ends when the last
//! receiver is dropped, so with nobody watching the dashboard sends Redis nothing: its
//! store's connection sits idle, and the pub/sub subscription is closed (its store is
//! dropped with the last reader, see [`Notices`]).
//!
//! A reader reads at once when it starts, then again when a message on the prefix's
//! pub/sub channel concerns it ([`concerns`]: for a group, its notice: a release, a
//! leave, a drain, a change of state, weight or partition set; for the overview, a
//! duty's release), or after `refresh` without one (a join or an expiry publishes
//! nothing), but never twice within `interval`: many viewers, and a storm of notices,
//! cost one read per interval.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use leasehold_election::ext::ANY_RELEASE;
use leasehold_election::{DutyKeys, LeaseStore, RedisStore, redis};
use tokio::sync::{broadcast, watch};
use tokio::time::{Instant, sleep_until};

use super::alerts::AlertClock;
use super::view::{GroupPage, Overview, Source, group_page};
use crate::commands::read_after;
use crate::error::Error;
use crate::output::{self, MoveJson};

/// How many groups may be watched at once (each costs reads while watched): a page
/// that asks for one more is refused.
pub const MAX_GROUPS_WATCHED: usize = 64;

/// How many moves of the ledger a group's reader keeps for new viewers.
pub const RECENT_MOVES: usize = 500;

/// The name the dashboard gives its Redis connection (`CLIENT SETNAME`).
pub const CLIENT_NAME: &str = "leasehold-dashboard";

/// What a viewer watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Topic {
    /// The groups and duties under the prefix.
    Overview,
    /// One group.
    Group(String),
}

/// The last read of the overview.
#[derive(Debug)]
pub struct OverviewFrame {
    /// The last good read, if any.
    pub overview: Option<Arc<Overview>>,
    /// Why the last read failed, if it did.
    pub error: Option<String>,
}

/// The last read of a group, with the moves of its ledger seen since the reader
/// started.
#[derive(Debug)]
pub struct GroupFrame {
    /// The group.
    pub group: String,
    /// The last good read, if any.
    pub page: Option<Arc<GroupPage>>,
    /// Why the last read failed, if it did.
    pub error: Option<String>,
    /// The latest moves, oldest first (at most [`RECENT_MOVES`]).
    pub moves: Arc<Vec<MoveJson>>,
    /// How many moves this reader has read in all (the last of `moves` is the
    /// `moves_total`-th): a viewer that has had `n` is sent the `moves_total - n` last.
    pub moves_total: u64,
}

/// One read of a topic.
#[derive(Debug, Clone)]
pub enum Frame {
    /// Of the overview.
    Overview(Arc<OverviewFrame>),
    /// Of a group.
    Group(Arc<GroupFrame>),
}

/// How often readers read.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// The shortest time between two reads of a topic.
    pub interval: Duration,
    /// The longest time between two reads of a topic while it is watched.
    pub refresh: Duration,
}

type Slot = watch::Sender<Option<Frame>>;

/// The readers, by topic.
#[derive(Debug)]
pub struct Hub {
    source: Source,
    pace: Pace,
    topics: Mutex<HashMap<Topic, Slot>>,
    notices: Mutex<Weak<Notices>>,
}

/// The pub/sub subscription to the prefix's release channel, on a store of its own:
/// dropped with the last reader, which closes the subscription (and its PINGs).
#[derive(Debug)]
struct Notices {
    store: RedisStore,
    keys: DutyKeys,
}

impl Notices {
    fn events(&self) -> broadcast::Receiver<String> {
        self.store.release_events(&self.keys)
    }
}

impl Hub {
    /// A hub with no reader running.
    pub fn new(source: Source, pace: Pace) -> Arc<Self> {
        Arc::new(Self {
            source,
            pace,
            topics: Mutex::new(HashMap::new()),
            notices: Mutex::new(Weak::new()),
        })
    }

    /// The source every read goes to.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// A receiver of `topic`'s reads, starting its reader if none runs; `None` if
    /// [`MAX_GROUPS_WATCHED`] groups are watched already.
    pub fn watch(self: &Arc<Self>, topic: Topic) -> Option<watch::Receiver<Option<Frame>>> {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = topics.get(&topic) {
            return Some(slot.subscribe());
        }
        if matches!(topic, Topic::Group(_)) && topics.len() > MAX_GROUPS_WATCHED {
            return None;
        }
        let (slot, rx) = watch::channel(None);
        topics.insert(topic.clone(), slot.clone());
        tokio::spawn(self.clone().read_while_watched(topic, slot));
        Some(rx)
    }

    /// Forgets `topic`'s reader if nobody watches it (checked under the lock
    /// [`Hub::watch`] takes, so no viewer is left with a reader that ended).
    fn retire(&self, topic: &Topic, slot: &Slot) -> bool {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.receiver_count() > 0 {
            return false;
        }
        topics.remove(topic);
        true
    }

    /// The shared subscription, made if no reader holds it.
    fn notices(&self) -> Option<Arc<Notices>> {
        let mut weak = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = weak.upgrade() {
            return Some(n);
        }
        let store = self.source.target.store().ok()?;
        let notices = Arc::new(Notices {
            store,
            // Only the channel is used: the prefix's, shared by its groups and duties.
            keys: DutyKeys::new(&self.source.target.prefix, "dashboard"),
        });
        *weak = Arc::downgrade(&notices);
        Some(notices)
    }

    /// The reader of `topic`: reads, publishes, waits for a reason to read again;
    /// ends once nobody watches.
    async fn read_while_watched(self: Arc<Self>, topic: Topic, slot: Slot) {
        let notices = self.notices();
        let mut events = notices.as_ref().map(|n| n.events());
        name_connection(&self.source.store).await;
        let mut reader = Reader::new(&topic);
        loop {
            let frame = reader.read(&self.source).await;
            slot.send_replace(Some(frame));
            let read_at = Instant::now();
            // A notice for the topic, or the refresh; then at least the interval.
            let due = async {
                tokio::select! {
                    () = sleep_until(read_at + self.pace.refresh) => {}
                    () = next_notice(events.as_mut(), &self.source.target.prefix, &topic) => {}
                }
                sleep_until(read_at + self.pace.interval).await;
            };
            tokio::pin!(due);
            loop {
                tokio::select! {
                    () = &mut due => break,
                    () = slot.closed() => {
                        if self.retire(&topic, &slot) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Names the store's connection [`CLIENT_NAME`], so that `CLIENT LIST` tells the
/// dashboard apart. Best effort: an ACL without `client|setname` leaves it unnamed.
async fn name_connection(store: &RedisStore) {
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg("SETNAME").arg(CLIENT_NAME);
    let _ = store.query(&cmd).await;
}

/// Whether a message on the prefix's release channel concerns `topic`: a duty's
/// release (its lease key, `<prefix>:{<duty>}:lease`) does the overview, which reads
/// every group, so the groups' own notices leave it to its refresh; a group's notice
/// (`<prefix>:{<group>}`, or it and a tab and more) does the group. [`ANY_RELEASE`]
/// (the subscription was lost a while) concerns all.
fn concerns(prefix: &str, topic: &Topic, message: &str) -> bool {
    if message == ANY_RELEASE {
        return true;
    }
    let Topic::Group(group) = topic else {
        return message.starts_with(prefix) && message.ends_with("}:lease");
    };
    let notice = format!("{prefix}:{{{group}}}");
    message
        .strip_prefix(&notice)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('\t'))
}

/// Waits for the next message that concerns `topic` (a lagged receiver may have missed
/// one: that counts); forever without a subscription.
async fn next_notice(
    events: Option<&mut broadcast::Receiver<String>>,
    prefix: &str,
    topic: &Topic,
) {
    let Some(events) = events else {
        return std::future::pending().await;
    };
    loop {
        match events.recv().await {
            Ok(message) if concerns(prefix, topic, &message) => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => return std::future::pending().await,
        }
    }
}

/// What a reader keeps between reads.
enum Reader {
    Overview {
        clock: AlertClock,
        last: Option<Arc<OverviewFrame>>,
    },
    Group {
        group: String,
        clock: AlertClock,
        last: Option<Arc<GroupFrame>>,
        /// The id of the last move read.
        after: Option<String>,
        recent: VecDeque<MoveJson>,
        total: u64,
    },
}

impl Reader {
    fn new(topic: &Topic) -> Self {
        match topic {
            Topic::Overview => Self::Overview {
                clock: AlertClock::default(),
                last: None,
            },
            Topic::Group(group) => Self::Group {
                group: group.clone(),
                clock: AlertClock::default(),
                last: None,
                after: None,
                recent: VecDeque::new(),
                total: 0,
            },
        }
    }

    async fn read(&mut self, source: &Source) -> Frame {
        let prefix = &source.target.prefix;
        match self {
            Self::Overview { clock, last } => {
                let frame = match source.overview(clock).await {
                    Ok(o) => OverviewFrame {
                        overview: Some(Arc::new(o)),
                        error: None,
                    },
                    Err(e) => OverviewFrame {
                        overview: last.as_ref().and_then(|l| l.overview.clone()),
                        error: Some(e.failure(&source.target).message),
                    },
                };
                let frame = Arc::new(frame);
                *last = Some(frame.clone());
                Frame::Overview(frame)
            }
            Self::Group {
                group,
                clock,
                last,
                after,
                recent,
                total,
            } => {
                let read = async {
                    let status = source.status(group).await?;
                    let admin = source.admin(group)?;
                    let new = read_after(&admin, group, after.clone()).await?;
                    Ok::<_, Error>((status, new))
                };
                let previous = last.as_ref().and_then(|l| l.page.clone());
                let (page, error, moved) = match read.await {
                    Ok((status, new)) => {
                        let rows = previous.as_ref().map(|p| &p.partitions);
                        let page = group_page(prefix, group, &status, clock, rows);
                        (Some(Arc::new(page)), None, new)
                    }
                    Err(e) => (
                        previous,
                        Some(e.failure(&source.target).message),
                        Vec::new(),
                    ),
                };
                let moves = if moved.is_empty() {
                    last.as_ref().map(|l| l.moves.clone()).unwrap_or_default()
                } else {
                    *after = moved.last().map(|m| m.id.clone());
                    *total += moved.len() as u64;
                    recent.extend(moved.iter().map(output::move_json));
                    while recent.len() > RECENT_MOVES {
                        recent.pop_front();
                    }
                    Arc::new(recent.iter().cloned().collect())
                };
                let frame = Arc::new(GroupFrame {
                    group: group.clone(),
                    page,
                    error,
                    moves,
                    moves_total: *total,
                });
                *last = Some(frame.clone());
                Frame::Group(frame)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_notice_concerns_its_group_only() {
        let g = Topic::Group("tenants".into());
        assert!(concerns("lh", &g, "lh:{tenants}"));
        assert!(concerns("lh", &g, "lh:{tenants}\tstep"));
        assert!(concerns("lh", &g, ANY_RELEASE));
        assert!(!concerns("lh", &g, "lh:{tenants2}"));
        assert!(!concerns("lh", &g, "lh:{scheduler}:lease"));
        let all = Topic::Overview;
        assert!(concerns("lh", &all, "lh:{scheduler}:lease"));
        assert!(concerns("lh", &all, ANY_RELEASE));
        assert!(!concerns("lh", &all, "lh:{tenants}"), "left to the refresh");
    }
}
