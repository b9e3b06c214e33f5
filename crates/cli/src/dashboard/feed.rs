//! The live reads behind the page: one reader per topic (the overview, or one group),
//! shared by every viewer of it, and running only while someone watches.
//!
//! A topic's reader is a task that feeds a [`watch`] channel; viewers hold its
//! receivers. The first viewer starts the task, and the task ends when the last
//! receiver is dropped, so with nobody watching the dashboard sends Redis nothing: its
//! store's connection sits idle, and the pub/sub subscription is closed (its store is
//! dropped with the last reader, see [`Notices`]).
//!
//! A reader reads at once when it starts, then again when something calls for it: for a
//! group, one of its notices ([`GroupAdmin::notices`], [`concerns_group`]: a release, a
//! leave, a drain, a change of state, weight, preference or partition set); for the
//! overview, a duty's release on the prefix's channel ([`concerns_overview`]); or after
//! `refresh` without one. A full read (the
//! status, and the ledger's new entries) comes at most once per renew interval of the
//! group (a third of the longest session seen: the library's default ratio), or per
//! `interval` if that is longer. A claim that moved partitions publishes its own
//! notice ([`GroupNotice::Moved`]): it calls for a read of the ledger's new entries only,
//! applied to the last page, at most once per `interval`: a take-over reaches the page
//! as soon as it is written, and the rest of the page within a renew interval. Many
//! viewers, and a storm of notices, cost one read per interval.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use leasehold_election::ext::ANY_RELEASE;
use leasehold_election::{DutyKeys, LeaseStore, RedisStore};
use leasehold_partitions::{GroupAdmin, GroupNotice};
use tokio::sync::{broadcast, watch};
use tokio::time::{Instant, sleep_until};

use super::alerts::AlertClock;
use super::view::{GroupPage, Overview, Source, group_page, with_moves};
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
    /// Its event's data, serialized once for every viewer.
    pub json: std::sync::OnceLock<String>,
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
    /// What calls for a read of `topic`: a group's notices
    /// ([`GroupAdmin::notices`]), or for the overview the duties' releases on the
    /// prefix's channel.
    fn events(&self, prefix: &str, topic: &Topic) -> Events {
        match topic {
            Topic::Overview => Events::Releases(self.store.release_events(&self.keys)),
            Topic::Group(group) => match GroupAdmin::new(self.store.clone(), group)
                .and_then(|a| a.with_key_prefix(prefix))
            {
                Ok(admin) => Events::Group(Box::pin(admin.notices())),
                // A name no group can have: nothing will ever say it changed.
                Err(_) => Events::Never,
            },
        }
    }
}

/// A reader's source of reasons to read.
enum Events {
    /// The prefix's release channel, for the overview (a duty's release).
    Releases(broadcast::Receiver<String>),
    /// A group's notices.
    Group(Pin<Box<dyn Stream<Item = GroupNotice> + Send>>),
    /// No subscription.
    Never,
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

    /// How often readers read.
    pub fn pace(&self) -> Pace {
        self.pace
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
        let groups = topics
            .keys()
            .filter(|t| matches!(t, Topic::Group(_)))
            .count();
        if matches!(topic, Topic::Group(_)) && groups >= MAX_GROUPS_WATCHED {
            return None;
        }
        let (slot, rx) = watch::channel(None);
        topics.insert(topic.clone(), slot.clone());
        tokio::spawn(self.clone().read_while_watched(topic, slot));
        Some(rx)
    }

    /// Whether `topic` has a reader running.
    pub fn is_watched(&self, topic: &Topic) -> bool {
        let topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        topics.contains_key(topic)
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
        let store = self.source.target.named_store(CLIENT_NAME).ok()?;
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
        let prefix = self.source.target.prefix.clone();
        let mut events = notices
            .as_ref()
            .map_or(Events::Never, |n| n.events(&prefix, &topic));
        let mut reader = Reader::new(&topic);
        let mut wanted = Wanted {
            full: true,
            moves: false,
        };
        // When the last read (of any kind) and the last full read were made.
        let mut last: Option<Instant> = None;
        let mut last_full: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let pace = reader.interval(self.pace.interval);
            let after = |t: Option<Instant>, d: Duration| t.map_or(now, |t| t + d);
            let any_due = after(last, self.pace.interval);
            let full_due = after(last_full, pace).max(any_due);
            let refresh_due = after(last_full, self.pace.refresh);
            if now >= refresh_due {
                wanted.full = true;
            }
            let kind = if wanted.full && now >= full_due {
                Some(Read::Full)
            } else if wanted.moves && now >= any_due {
                Some(Read::Moves)
            } else {
                None
            };
            if let Some(kind) = kind {
                if let Some(frame) = reader.read(&self.source, kind).await {
                    slot.send_replace(Some(frame));
                }
                let at = Instant::now();
                last = Some(at);
                if kind == Read::Full {
                    last_full = Some(at);
                    wanted.full = false;
                }
                wanted.moves = false;
                continue;
            }
            // The first read owed (moves may come before a full read that must wait);
            // each time here is still ahead (else that read would have been made).
            let mut wake = if wanted.full { full_due } else { refresh_due };
            if wanted.moves {
                wake = wake.min(any_due);
            }
            tokio::select! {
                () = sleep_until(wake) => {}
                read = next_notice(&mut events, &prefix) => match read {
                    Read::Full => wanted.full = true,
                    Read::Moves => wanted.moves = true,
                },
                () = slot.closed() => {
                    if self.retire(&topic, &slot) {
                        return;
                    }
                }
            }
        }
    }
}

/// What a reader reads next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// The topic's whole state: the status (and the ledger's new entries).
    Full,
    /// A group's ledger's new entries only, applied to the last page: after a claim's
    /// notice that partitions moved.
    Moves,
}

/// The reads a reader owes its viewers.
#[derive(Debug)]
struct Wanted {
    full: bool,
    moves: bool,
}

/// Which read a message on the prefix's release channel calls for in the overview: a
/// duty's release (its lease key, `<prefix>:{<duty>}:lease`) a full read (it reads
/// every group, so the groups' own notices leave it to its refresh); [`ANY_RELEASE`]
/// (the subscription was lost a while) a full read too.
fn concerns_overview(prefix: &str, message: &str) -> Option<Read> {
    if message == ANY_RELEASE {
        return Some(Read::Full);
    }
    (message.starts_with(prefix) && message.ends_with("}:lease")).then_some(Read::Full)
}

/// Which read a group's notice calls for: a claim's move a read of the ledger's new
/// entries; anything else (a release, a leave, a drain, a change of state, weight,
/// preference or partition set, a load step, notices missed) a full read.
fn concerns_group(notice: &GroupNotice) -> Read {
    match notice {
        GroupNotice::Moved(_) => Read::Moves,
        _ => Read::Full,
    }
}

/// Waits for the next event that calls for a read and says which (a lagged receiver
/// may have missed one: a full read); forever without a subscription.
async fn next_notice(events: &mut Events, prefix: &str) -> Read {
    match events {
        Events::Never => std::future::pending().await,
        Events::Group(notices) => match notices.next().await {
            Some(notice) => concerns_group(&notice),
            None => std::future::pending().await,
        },
        Events::Releases(events) => loop {
            match events.recv().await {
                Ok(message) => {
                    if let Some(read) = concerns_overview(prefix, &message) {
                        return read;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => return Read::Full,
                Err(broadcast::error::RecvError::Closed) => return std::future::pending().await,
            }
        },
    }
}

/// The newest [`RECENT_MOVES`] moves of `group`'s ledger, oldest first.
async fn newest_moves(
    admin: &GroupAdmin<RedisStore>,
    group: &str,
) -> Result<Vec<leasehold_partitions::Move>, Error> {
    admin
        .newest_moves(RECENT_MOVES)
        .await
        .map_err(|error| Error::Group {
            group: group.to_owned(),
            error,
        })
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
        /// The longest session seen left to a member: the group's lease, nearly.
        lease: Duration,
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
                lease: Duration::ZERO,
            },
        }
    }

    /// The shortest time to the next read: `floor`, or for a group its renew interval
    /// if longer (a third of its lease, as replicas renew by default; the group's state
    /// changes no faster).
    fn interval(&self, floor: Duration) -> Duration {
        match self {
            Self::Overview { .. } => floor,
            Self::Group { lease, .. } => floor.max(*lease / 3),
        }
    }

    /// Reads `kind`; the frame to send, if there is news (a read of the moves that
    /// found none has none).
    async fn read(&mut self, source: &Source, kind: Read) -> Option<Frame> {
        let prefix = &source.target.prefix;
        match self {
            Self::Overview { clock, last } => {
                let frame = match source.overview(clock).await {
                    Ok(o) => OverviewFrame {
                        overview: Some(Arc::new(o)),
                        error: None,
                        json: std::sync::OnceLock::new(),
                    },
                    Err(e) => OverviewFrame {
                        overview: last.as_ref().and_then(|l| l.overview.clone()),
                        error: Some(e.failure(&source.target).message),
                        json: std::sync::OnceLock::new(),
                    },
                };
                let frame = Arc::new(frame);
                *last = Some(frame.clone());
                Some(Frame::Overview(frame))
            }
            Self::Group {
                group,
                clock,
                last,
                after,
                recent,
                total,
                lease,
            } => {
                let previous = last.as_ref().and_then(|l| l.page.clone());
                // Only the moves: on the last page, if there is one to apply them to.
                let only_moves = kind == Read::Moves && previous.is_some();
                let read = async {
                    let status = if only_moves {
                        None
                    } else {
                        Some(source.status(group).await?)
                    };
                    let admin = source.admin(group)?;
                    let new = match after {
                        Some(_) => read_after(&admin, group, after.clone()).await?,
                        // The first read: the newest only, not the whole ledger.
                        None => newest_moves(&admin, group).await?,
                    };
                    Ok::<_, Error>((status, new))
                };
                let (page, error, moved) = match read.await {
                    Ok((Some(status), new)) => {
                        let longest = status.members.iter().map(|m| m.session_left).max();
                        *lease = (*lease).max(longest.unwrap_or_default());
                        let rows = previous.as_ref().map(|p| &p.partitions);
                        let page = group_page(prefix, group, &status, clock, rows);
                        (Some(Arc::new(page)), None, new)
                    }
                    Ok((None, new)) if new.is_empty() => return None,
                    Ok((None, new)) => {
                        let page = previous
                            .as_ref()
                            .and_then(|p| with_moves(p, &new).map(Arc::new))
                            .or(previous);
                        (page, None, new)
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
                Some(Frame::Group(frame))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duty_release_concerns_the_overview_and_a_groups_notice_does_not() {
        let full = Some(Read::Full);
        assert_eq!(concerns_overview("lh", "lh:{scheduler}:lease"), full);
        assert_eq!(concerns_overview("lh", ANY_RELEASE), full);
        assert_eq!(
            concerns_overview("lh", "lh:{tenants}"),
            None,
            "left to the refresh"
        );
        assert_eq!(concerns_overview("lh", "other:{scheduler}:lease"), None);
    }

    #[tokio::test]
    async fn the_overview_does_not_count_among_the_groups_watched() {
        let target = crate::target::Target {
            url: "redis://127.0.0.1:1/".into(),
            more_urls: Vec::new(),
            topology: crate::target::Topology::Node,
            prefix: "lh".into(),
            timeout: Duration::from_millis(50),
        };
        let source = Source {
            store: target.store().unwrap(),
            target,
            admin: false,
        };
        let pace = Pace {
            interval: Duration::from_secs(1),
            refresh: Duration::from_secs(5),
        };
        let hub = Hub::new(source, pace);
        let mut held = vec![hub.watch(Topic::Overview).unwrap()];
        for i in 0..MAX_GROUPS_WATCHED {
            let rx = hub.watch(Topic::Group(format!("g{i}")));
            held.push(rx.unwrap_or_else(|| panic!("group {i} refused")));
        }
        assert!(hub.watch(Topic::Group("one-more".into())).is_none());
        assert!(
            hub.watch(Topic::Group("g0".into())).is_some(),
            "watched already"
        );
        assert!(hub.watch(Topic::Overview).is_some());
    }

    #[test]
    fn a_claims_notice_calls_for_its_groups_moves_only() {
        assert_eq!(concerns_group(&GroupNotice::Changed), Read::Full);
        assert_eq!(concerns_group(&GroupNotice::LoadStep), Read::Full);
        assert_eq!(concerns_group(&GroupNotice::Missed), Read::Full);
    }
}
