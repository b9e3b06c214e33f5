//! moves: the ledger of moves, one entry per change of owner (`lua/moves.lua` reads
//! it; `claim.lua` writes it, in the script that starts the new term, from how
//! `free.lua` noted the last term ended).

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::Group;

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("moves.lua");

/// How many entries the ledger keeps, about (`LEDGER_LEN` in `lua/lib/free.lua`; the
/// stream is trimmed with `MAXLEN ~`, so a few more may stay).
pub const LEDGER_LEN: usize = 20_000;

/// Why a partition's previous term ended, as its ledger entry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum MoveCause {
    /// Handed over to even out the group
    /// ([`Ownership::end_reason`](crate::Ownership::end_reason)).
    HandOff,
    /// Handed over because its replica was drained.
    Drain,
    /// Given back by a replica shutting down (or the leave that ended its session).
    Leave,
    /// Given back after the partition was removed (seen only if it was added again).
    Removal,
    /// Given back because its callback returned, failed or stepped down.
    Released,
    /// Freed because its owner's session expired: the replica crashed, hung, or lost
    /// Redis for a lease.
    Expiry,
    /// No previous term is known to this group: the partition's first owner (also
    /// after Redis lost the group and it was made again).
    New,
}

impl MoveCause {
    /// The stable label the ledger stores (and the metrics use).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HandOff => "handoff",
            Self::Drain => "drain",
            Self::Leave => "leave",
            Self::Removal => "removal",
            Self::Released => "released",
            Self::Expiry => "expiry",
            Self::New => "new",
        }
    }

    /// Whether someone asked for the move (a hand-off, a drain, a leave, a removal,
    /// the callback returning), as opposed to a failure (`Expiry`) or a first owner.
    pub fn is_planned(self) -> bool {
        !matches!(self, Self::Expiry | Self::New)
    }
}

impl fmt::Display for MoveCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A ledger entry's cause that this version does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown move cause {0:?}")]
pub struct UnknownCause(pub String);

impl FromStr for MoveCause {
    type Err = UnknownCause;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "handoff" => Self::HandOff,
            "drain" => Self::Drain,
            "leave" => Self::Leave,
            "removal" => Self::Removal,
            "released" => Self::Released,
            "expiry" => Self::Expiry,
            "new" => Self::New,
            other => return Err(UnknownCause(other.to_owned())),
        })
    }
}

/// One change of owner of a partition, as the ledger of its group keeps it
/// ([`crate::GroupAdmin::moves`]). Times are the Redis server's clock, in ms since the
/// Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Move {
    /// The entry's id in the ledger (a Redis stream id): pass it back to read on from
    /// after it.
    pub id: String,
    /// The partition.
    pub partition: String,
    /// The replica whose term ended (`None` for [`MoveCause::New`]).
    pub from: Option<String>,
    /// The replica whose term started.
    pub to: String,
    /// Why the previous term ended.
    pub cause: MoveCause,
    /// The previous term's fence.
    pub old_fence: Option<Fence>,
    /// The new term's fence.
    pub new_fence: Fence,
    /// When the previous term ended: given back, or its session expired.
    pub ended_ms: Option<u64>,
    /// When the previous term started.
    pub held_since_ms: Option<u64>,
    /// When the new term started (its claim ran).
    pub started_ms: u64,
    /// How long the partition had no owner: from `ended_ms` to `started_ms`.
    pub unowned: Option<Duration>,
    /// The bytes of state the previous term left for this one
    /// (`Ownership::hand_off`); `None` if it left none.
    pub state_bytes: Option<u64>,
}

/// What a claim says of the term before each partition it took (its ledger entry): the
/// new owner's [`Ownership::handed_over`](crate::Ownership::handed_over)
/// follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predecessor {
    /// Why the previous term ended.
    pub cause: MoveCause,
    /// How long the partition had no owner (`None` for a first owner).
    pub unowned: Option<Duration>,
    /// The previous term's fence (`None` for a first owner).
    pub fence: Option<Fence>,
    /// The bytes of state the previous term left (`None`: it left none, or left it in
    /// another server lifetime).
    pub state_bytes: Option<u64>,
    /// The previous term left state in another server lifetime than the one granting
    /// now (before a restart or a failover, which may have lost a later term with its
    /// writes): it is never offered.
    pub state_before_server_change: bool,
}

/// Which entries of the ledger a read wants.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Page<'a> {
    /// Those after the entry with this id (from the oldest kept if `None`).
    After(Option<&'a str>),
    /// The newest.
    Newest,
}

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    page: Page<'_>,
    limit: usize,
) -> Result<Vec<Move>, StoreError> {
    let limit = limit.max(1).to_string();
    let args = match page {
        Page::After(after) => vec![after.unwrap_or(""), &limit],
        Page::Newest => vec!["", &limit, "newest"],
    };
    let reply = store.eval(&SCRIPT, &keys.all(), &args).await?;
    let items = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut p = Parse::new("moves", Value::Array(items));
    let mut out = Vec::with_capacity(p.remaining() / 2);
    while p.remaining() > 0 {
        let id = p.next_string()?;
        let mut f = p.next_array()?;
        let mut pairs = Vec::with_capacity(f.remaining() / 2);
        while f.remaining() > 1 {
            pairs.push((f.next_string()?, f.next_string()?));
        }
        out.push(entry(id, &pairs)?);
    }
    Ok(out)
}

/// A ledger entry from its stream fields.
fn entry(id: String, fields: &[(String, String)]) -> Result<Move, StoreError> {
    let get = |k: &str| {
        fields
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    let num = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
    let bad = |what: &str| StoreError::Protocol(format!("moves: entry {id} has no {what}"));
    Ok(Move {
        partition: get("partition").ok_or_else(|| bad("partition"))?.to_owned(),
        from: get("from").map(str::to_owned),
        to: get("to").ok_or_else(|| bad("receiver"))?.to_owned(),
        cause: get("cause")
            .unwrap_or("new")
            .parse()
            .map_err(|e: UnknownCause| StoreError::Protocol(format!("moves: {e}")))?,
        old_fence: num("old_fence").map(Fence),
        new_fence: Fence(num("new_fence").ok_or_else(|| bad("fence"))?),
        ended_ms: num("ended"),
        held_since_ms: num("held_since"),
        started_ms: num("started").ok_or_else(|| bad("start"))?,
        unowned: num("unowned_ms").map(Duration::from_millis),
        state_bytes: num("state_bytes"),
        id,
    })
}

/// How the previous term of a free partition ended (an ENDED field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastTerm {
    pub(crate) replica: String,
    pub(crate) fence: u64,
    pub(crate) cause: MoveCause,
    pub(crate) ended: u64,
    pub(crate) since: u64,
    /// The bytes of state the term left for its successor, and the server lifetime the
    /// group last saw when it did, if it left any.
    pub(crate) state: Option<(u64, u64)>,
}

impl Group {
    /// The twin of `free.lua`'s `record_moves`: one entry per partition just taken by
    /// `replica` in terms `fences` at `now` (ms), trimmed to [`LEDGER_LEN`]; returns
    /// what each one's entry says of the term before.
    pub(crate) fn record_moves(
        &mut self,
        replica: &str,
        taken: &[(String, u64)],
        now: u64,
    ) -> Vec<Predecessor> {
        let server = self.meta.as_ref().map_or(0, |m| m.follow.server);
        let mut info = Vec::with_capacity(taken.len());
        for (n, fence) in taken {
            let last = self.ends.ended.remove(n);
            self.ends.reserved.remove(n);
            self.log.move_seq = if self.log.move_ms == now {
                self.log.move_seq + 1
            } else {
                0
            };
            self.log.move_ms = self.log.move_ms.max(now);
            let id = format!("{}-{}", self.log.move_ms, self.log.move_seq);
            self.log.moves.push_back(Move {
                id,
                partition: n.clone(),
                from: last.as_ref().map(|l| l.replica.clone()),
                to: replica.to_owned(),
                cause: last.as_ref().map_or(MoveCause::New, |l| l.cause),
                old_fence: last.as_ref().map(|l| Fence(l.fence)),
                new_fence: Fence(*fence),
                ended_ms: last.as_ref().map(|l| l.ended),
                held_since_ms: last.as_ref().map(|l| l.since),
                started_ms: now,
                unowned: last
                    .as_ref()
                    .map(|l| Duration::from_millis(now.saturating_sub(l.ended))),
                state_bytes: last.as_ref().and_then(|l| l.state).map(|(b, _)| b),
            });
            let elsewhere = last
                .as_ref()
                .and_then(|l| l.state)
                .is_some_and(|(_, life)| life != server);
            if let Some(m) = self.log.moves.back() {
                info.push(Predecessor {
                    cause: m.cause,
                    unowned: m.unowned,
                    fence: m.old_fence,
                    state_bytes: m.state_bytes.filter(|_| !elsewhere),
                    state_before_server_change: elsewhere,
                });
            }
            if self.log.moves.len() > LEDGER_LEN {
                self.log.moves.pop_front();
            }
        }
        info
    }

    /// The twin of `lua/moves.lua`.
    pub(crate) fn moves_after(&self, after: Option<&str>, limit: usize) -> Vec<Move> {
        let key = |id: &str| -> (u64, u64) {
            let (a, b) = id.split_once('-').unwrap_or((id, "0"));
            (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
        };
        let from = after.map(key);
        self.log
            .moves
            .iter()
            .filter(|m| from.is_none_or(|f| key(&m.id) > f))
            .take(limit.max(1))
            .cloned()
            .collect()
    }

    /// The newest `limit` entries of the ledger, oldest first (`moves.lua` with
    /// `newest`).
    pub(crate) fn moves_newest(&self, limit: usize) -> Vec<Move> {
        let skip = self.log.moves.len().saturating_sub(limit.max(1));
        self.log.moves.iter().skip(skip).cloned().collect()
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for MoveCause {
    /// As its label ([`MoveCause::as_str`]).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Up to `limit` entries of the ledger of moves after the one with id `after` (from
/// the oldest kept if `None`), oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Moves {
    pub(crate) after: Option<String>,
    pub(crate) limit: usize,
}

impl Moves {
    /// Up to `limit` moves after `after`.
    pub(crate) fn new(after: Option<&str>, limit: usize) -> Self {
        Self {
            after: after.map(str::to_owned),
            limit,
        }
    }
}

impl Op for Moves {
    type Reply = Vec<Move>;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<Vec<Move>, StoreError> {
        redis(store, keys, Page::After(self.after.as_deref()), self.limit).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<Move> {
        store
            .read(keys, |g, _| {
                g.moves_after(self.after.as_deref(), self.limit)
            })
            .unwrap_or_default()
    }
}

/// The newest `limit` entries of the ledger of moves, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NewestMoves {
    pub(crate) limit: usize,
}

impl NewestMoves {
    /// The newest `limit` moves.
    pub(crate) fn new(limit: usize) -> Self {
        Self { limit }
    }
}

impl Op for NewestMoves {
    type Reply = Vec<Move>;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<Vec<Move>, StoreError> {
        redis(store, keys, Page::Newest, self.limit).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<Move> {
        store
            .read(keys, |g, _| g.moves_newest(self.limit))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_keep_as_many_entries_as_the_docs_say() {
        let lua = include_str!("../lua/lib/free.lua");
        assert!(
            lua.contains(&format!("local LEDGER_LEN = {LEDGER_LEN}\n")),
            "free.lua's LEDGER_LEN is not {LEDGER_LEN}"
        );
    }

    #[test]
    fn every_cause_reads_back_as_itself() {
        use MoveCause::*;
        for c in [HandOff, Drain, Leave, Removal, Released, Expiry, New] {
            assert_eq!(c.as_str().parse::<MoveCause>(), Ok(c));
        }
        assert_eq!(
            "crash".parse::<MoveCause>(),
            Err(UnknownCause("crash".into()))
        );
    }
}
