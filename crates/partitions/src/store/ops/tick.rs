//! tick: one replica's heartbeat (`lua/tick.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};

use super::Op;
use super::slots::{Reply, Slots, slots};
use super::{SERVER_LUA, count, group_script, millis, ms, pairs, strings, triples};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::REAP_BUDGET;
use crate::store::memory::{Group, Heir, Now};
use crate::store::protocol::{MemberInfo, Origin, ReplicaState, SetInfo};

/// The tick script: the libraries, the names of its reply's slots (`SLOT`, from
/// [`TickSlot`]), then `lua/tick.lua`.
pub(crate) static SCRIPT: LazyLock<LuaScript> =
    group_script!("tick.lua", TickSlot::lua_index("SLOT"));

/// The heartbeat (`lua/heartbeat.lua`): a quiet tick, answered by a script of its own
/// with only the keys and arguments it reads and a short reply, after the lifetime's
/// two libraries and the names of its reply's slots (`SLOT`, from [`HeartbeatSlot`])
/// and of the META fields it reads (`FIELD` and `META_FIELDS`, from [`MetaField`]).
pub(crate) static HEARTBEAT: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::idempotent(
        [
            leasehold_election::ext::LIFETIME_LUA,
            SERVER_LUA,
            &HeartbeatSlot::lua_index("SLOT"),
            &MetaField::lua_index("FIELD"),
            &MetaField::lua_names("META_FIELDS"),
            include_str!("../lua/heartbeat.lua"),
        ]
        .concat(),
    )
});

slots! {
    /// The slots of `lua/tick.lua`'s reply, in the order it sends them: the script
    /// fills each by the name given here (`r[SLOT.status] = ...`), and [`parse`] reads
    /// each by name.
    pub(crate) enum TickSlot {
        /// `'live'`, `'lost'`, `'duplicate'` or `'nogroup'`.
        Status = "status",
        /// The token this join resumed, or `''`.
        Resumed = "resumed",
        /// Whether the group exists (1/0).
        Exists = "exists",
        /// The set's count of partitions.
        Count = "count",
        /// The list version.
        Version = "version",
        /// The list digest.
        Digest = "digest",
        /// `names[]` of the live members sent.
        Names = "names",
        /// Their `entries[]` (`state \t capacity \t held \t load`).
        Entries = "entries",
        /// `names[]` of the members gone since the version the replica named.
        Gone = "gone",
        /// Partitions without a live owner.
        Unowned = "unowned",
        /// Ms before anything is granted.
        GrantWait = "grant_wait",
        /// Ended sessions still holding partitions.
        Ending = "ending",
        /// Whether this replica is drained (1/0).
        Drained = "drained",
        /// `{revoked name, reason, ...}` of this session.
        Revoked = "revoked",
        /// Partitions of sessions that expired now.
        Expired = "expired",
        /// Whether the set is weighted (1/0).
        Weighted = "weighted",
        /// The total weight.
        TotalWeight = "total_weight",
        /// The largest weight.
        MaxWeight = "max_weight",
        /// The weights' version.
        WeightsVersion = "weights_version",
        /// The set's life.
        Life = "life",
        /// The set version.
        SetVersion = "set_version",
        /// The highest fence.
        HighestFence = "highest_fence",
        /// `'seed'`, `'restore'` or `''`.
        Origin = "origin",
        /// The group's lease ms.
        Lease = "lease",
        /// How many partitions a restore is to bring back (0 if none).
        RestoreCount = "restore_count",
        /// The group's incarnation.
        Incarnation = "incarnation",
        /// The server lifetime.
        Lifetime = "lifetime",
        /// `{name, fence, weight, ...}` held by the session if the lifetime is not the
        /// one the replica named (`ARGV[14]`), else 0.
        Holdings = "holdings",
        /// The roster version.
        RosterVersion = "roster_version",
        /// What of the roster is in this reply (0: nothing, it is the version named;
        /// 1: all of it; 2: the members changed since the version named).
        RosterSent = "roster_sent",
        /// Ms left of the session that expires first, other than this replica's (-1 if
        /// none).
        Soonest = "soonest",
        /// Free partitions reserved for this replica (handed to it by name:
        /// `release.lua`; 0 unless its session is live).
        Reserved = "reserved",
    }
}

slots! {
    /// The slots of `lua/heartbeat.lua`'s reply when the tick is quiet (else it
    /// replies 0), in order: the script fills each by this name, and
    /// [`parse_heartbeat`] reads each by name.
    pub(crate) enum HeartbeatSlot {
        /// META's fields, as [`MetaField`] names them (`HMGET`: a missing one is nil).
        Meta = "meta",
        /// Partitions without a live owner.
        Unowned = "unowned",
        /// Whether this replica is drained (1/0).
        Drained = "drained",
        /// The largest weight (1 unless the set is weighted).
        MaxWeight = "max_weight",
        /// Ms left of the session that expires first, other than this replica's (-1 if
        /// none).
        Soonest = "soonest",
        /// Ms before anything is granted.
        GrantWait = "grant_wait",
    }
}

slots! {
    /// The META fields the heartbeat reads and replies, in order: each is named as
    /// META's hash field (`meta.lua`'s `meta()` reads the same), the script reads them
    /// with one `HMGET` of `META_FIELDS` and each by `FIELD.<name>`.
    pub(crate) enum MetaField {
        Count = "count",
        Version = "version",
        Digest = "digest",
        GrantAfter = "grant_after",
        Life = "life",
        SetVersion = "sver",
        Lease = "lease",
        HighestFence = "fmax",
        Origin = "origin",
        Weighted = "weighted",
        TotalWeight = "total",
        WeightsVersion = "wver",
        RestoreCount = "rcount",
        Incarnation = "inc",
        Server = "server",
        RosterVersion = "rver",
        Checked = "checked",
    }
}

/// One replica's heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickRequest {
    pub replica: String,
    /// This process's token: it holds the session it started or resumed.
    pub process: String,
    /// The session this heartbeat is for: the process's own token, or the one it
    /// resumed.
    pub session: String,
    /// Start (or resume) a session (true), or extend it (false). A session that has
    /// ended is never extended again: the replica starts a new one with a new token.
    pub join: bool,
    pub state: ReplicaState,
    /// Session time-to-live: the lease (the rejoin grace for the parking tick before a
    /// sticky restart).
    pub ttl: Duration,
    /// The process, for operators (stored when it joins): `host pid`, then a tab and
    /// the address the replica advertises, if it does.
    pub instance: String,
    /// This replica's capacity (stored when it joins).
    pub capacity: u32,
    /// The replica's rejoin grace, if it is sticky: its partitions wait for it that long
    /// after its last heartbeat if its session expires (a crash), and a join refused
    /// because its old session still lives claims that session for when it expires.
    pub grace: Option<Duration>,
    /// The incarnation of the group the session lives in, as its join's reply said
    /// (ignored by a join): a tick of another incarnation is `Lost`.
    pub incarnation: String,
    /// The granting server's lifetime as the replica's last tick reply named it (empty
    /// if none): a tick in another one lists what the session holds
    /// ([`TickReply::holdings`]).
    pub lifetime: String,
    /// The roster version the replica last read (empty if none): the reply carries the
    /// roster only if it changed since, and then only what changed
    /// ([`TickReply::roster`]).
    pub roster: String,
    /// The replica's last tick changed nothing (its reply carried no roster, nothing
    /// expired, ended, revoked or listed, and this one sends the same state): the store
    /// may try a heartbeat first, a quiet tick's cheaper form, and sends the whole
    /// tick only if the heartbeat finds the tick is not quiet.
    pub quiet: bool,
}

#[cfg(test)]
impl TickRequest {
    /// A tick of the session `token` held by its own process, with capacity 1, naming
    /// no incarnation, lifetime or roster version: what tests change, they set after.
    pub(crate) fn of(
        replica: &str,
        token: &str,
        join: bool,
        state: ReplicaState,
        ttl: Duration,
    ) -> Self {
        TickRequest {
            replica: replica.to_owned(),
            process: token.to_owned(),
            session: token.to_owned(),
            join,
            state,
            ttl,
            instance: format!("host-{replica} 1"),
            capacity: 1,
            grace: None,
            incarnation: String::new(),
            lifetime: String::new(),
            roster: String::new(),
            quiet: false,
        }
    }
}

/// What became of the heartbeat's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionReply {
    /// Live until at least the tick's server time + ttl.
    Live,
    /// Ended (expired, or Redis lost it): every partition it held is gone.
    Lost,
    /// Not admitted.
    Refused(Conflict),
    /// A join found no group: no session was started (the replica seeds or restores the
    /// group, then joins).
    NoGroup,
}

/// Something that keeps a replica out of its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// Another live session uses this replica id.
    DuplicateReplica,
}

/// What a tick found.
#[derive(Debug, Clone)]
pub struct TickReply {
    pub session: SessionReply,
    /// The token of the `away` session this join resumed: from now on the replica's.
    pub resumed: Option<String>,
    /// The partition set; `None` if the group does not exist (never created, or Redis
    /// lost it).
    pub set: Option<SetInfo>,
    /// The live members (this one included once admitted), or what changed of them
    /// since the version the request named, or nothing if that is still the roster.
    /// A tick's members carry no time left ([`MemberInfo::left`] is zero): see
    /// [`soonest`](Self::soonest).
    pub roster: RosterUpdate,
    /// The roster's version: the group's incarnation, the server lifetime and a count
    /// of the roster's changes (members, states, capacities, holdings, loads).
    pub roster_version: String,
    /// Time left of the session that expires first, other than this replica's.
    pub soonest: Option<Duration>,
    /// Partitions with no live owner (free, or held by ended sessions).
    pub unowned: usize,
    /// Time left before the group grants anything (after it was created, or created
    /// again when Redis lost its data).
    pub grant_wait: Duration,
    /// Ended sessions whose partitions are not all free yet (freed a few hundred per
    /// call).
    pub ending: usize,
    /// An operator drained this replica.
    pub drained: bool,
    /// Partitions this session holds and must give up, with why (`removed`).
    pub revoked: Vec<(String, String)>,
    /// Partitions held by sessions this tick found expired (their replica crashed, was
    /// killed or paused past its lease): each is counted by one tick only.
    pub expired: usize,
    /// The granting server's lifetime (a restart or a failover changes it; empty if the
    /// store cannot tell).
    pub lifetime: String,
    /// Everything the extended session holds (name, fence, weight), if the lifetime is
    /// not the one the request named: the server changed, and may have lost claims the
    /// replica believes in. The tick extends only these terms.
    pub holdings: Option<Vec<(String, Fence, u64)>>,
    /// Free partitions reserved for this replica: handed to it by name, and held back
    /// from others' claims for a while (`release.lua`). Its claims take them first.
    pub reserved: usize,
}

/// What of the roster a tick's reply carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RosterUpdate {
    /// Nothing: the roster is still the version the request named.
    Same,
    /// The whole roster: every live member.
    Full(Vec<MemberInfo>),
    /// What changed since the version the request named: the members that joined or
    /// changed (state, capacity, holdings, load), and those gone.
    Changes {
        /// The members that joined or changed, with what they are now.
        changed: Vec<MemberInfo>,
        /// The replica ids of the members gone.
        gone: Vec<String>,
    },
}

impl RosterUpdate {
    /// Whether the reply carries any of the roster.
    pub fn is_sent(&self) -> bool {
        !matches!(self, Self::Same)
    }

    /// The members this update names (all of them, or those that changed).
    pub fn members(&self) -> &[MemberInfo] {
        match self {
            Self::Same => &[],
            Self::Full(members)
            | Self::Changes {
                changed: members, ..
            } => members,
        }
    }

    /// The names of the members gone (a change only).
    pub fn gone(&self) -> &[String] {
        match self {
            Self::Changes { gone, .. } => gone,
            _ => &[],
        }
    }

    /// Brings `kept`, the roster of the version the request named sorted by replica
    /// id, to this reply's version (still sorted by replica id).
    pub fn apply(&self, kept: &mut Vec<MemberInfo>) {
        match self {
            Self::Same => {}
            Self::Full(members) => {
                kept.clone_from(members);
                kept.sort_by(|a, b| a.replica.cmp(&b.replica));
            }
            Self::Changes { changed, gone } => {
                for m in changed {
                    match kept.binary_search_by(|k| k.replica.cmp(&m.replica)) {
                        Ok(i) => kept[i] = m.clone(),
                        Err(i) => kept.insert(i, m.clone()),
                    }
                }
                kept.retain(|k| !gone.contains(&k.replica));
            }
        }
    }
}

/// The members of a tick's reply: `names[]` and their entries (`state \t capacity \t
/// held \t load`, see `entries` in `session.lua`).
fn members(names: Vec<String>, entries: &[String]) -> Result<Vec<MemberInfo>, StoreError> {
    if names.len() != entries.len() {
        return Err(StoreError::Protocol(format!(
            "group tick: {} members, {} entries",
            names.len(),
            entries.len()
        )));
    }
    names
        .into_iter()
        .zip(entries)
        .map(|(replica, e)| {
            let bad = || StoreError::Protocol(format!("group tick: roster entry {e:?}"));
            let mut f = e.split('\t');
            let state = ReplicaState::parse(f.next().ok_or_else(bad)?);
            let mut number = || f.next().and_then(|n| n.parse::<u64>().ok()).ok_or_else(bad);
            let capacity = u32::try_from(number()?.max(1)).unwrap_or(u32::MAX);
            let held = usize::try_from(number()?).unwrap_or(usize::MAX);
            let load = number()?;
            Ok(MemberInfo {
                replica,
                state,
                left: Duration::ZERO,
                held,
                load,
                capacity,
            })
        })
        .collect()
}

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    req: &TickRequest,
) -> Result<TickReply, StoreError> {
    if req.quiet
        && !req.join
        && req.state != ReplicaState::Away
        && !req.roster.is_empty()
        && let Some(reply) = heartbeat(store, keys, req).await?
    {
        return Ok(reply);
    }
    run(store, keys, req, &SCRIPT).await
}

/// Sends the heartbeat: the tick's reply if it was quiet, `None` if the whole tick is
/// to be sent (the heartbeat changed nothing).
async fn heartbeat(
    store: &RedisStore,
    keys: &GroupKeys,
    req: &TickRequest,
) -> Result<Option<TickReply>, StoreError> {
    let ttl = super::millis(req.ttl);
    let hk = [
        keys.members.as_str(),
        &keys.sessions,
        &keys.states,
        &keys.meta,
        &keys.free,
        &keys.dead,
        &keys.revoked,
        &keys.drains,
        &keys.weights,
        &keys.holders,
    ];
    let args = [
        req.replica.as_str(),
        &req.process,
        &req.session,
        req.state.as_str(),
        &ttl,
        &req.incarnation,
        &req.lifetime,
        &req.roster,
    ];
    parse_heartbeat(
        req,
        leasehold_election::ext::eval_acked(store, &HEARTBEAT, &hk, &args).await?,
    )
}

/// A heartbeat's reply (`lua/heartbeat.lua`) as the whole tick's: what a quiet tick
/// leaves out is what it found unchanged.
fn parse_heartbeat(
    req: &TickRequest,
    reply: redis::Value,
) -> Result<Option<TickReply>, StoreError> {
    if matches!(reply, redis::Value::Int(0)) {
        return Ok(None);
    }
    use HeartbeatSlot as S;
    use MetaField as F;
    let mut r = Reply::<S>::new("group heartbeat", reply)?;
    let mut m = Reply::<F>::new("group heartbeat META", r.value(S::Meta)?)?;
    let unowned = count(r.int(S::Unowned)?);
    let drained = r.int(S::Drained)? == 1;
    let max_weight = r.int(S::MaxWeight)?.max(1).unsigned_abs();
    let soonest = u64::try_from(r.int(S::Soonest)?)
        .ok()
        .map(Duration::from_millis);
    let grant_wait = ms(r.int(S::GrantWait)?);
    let weighted = meta_text(&mut m, F::Weighted)? == "1";
    let partitions = meta_number(&mut m, F::Count)?;
    let mut set = SetInfo::plain(count(partitions), meta_unsigned(&mut m, F::Version)?, "");
    set.digest = meta_text(&mut m, F::Digest)?;
    set.weighted = weighted;
    // An unweighted set weighs one a partition.
    set.total_weight = if weighted {
        meta_unsigned(&mut m, F::TotalWeight)?
    } else {
        partitions.max(0).unsigned_abs()
    };
    set.max_weight = if weighted { max_weight } else { 1 };
    set.weights_version = meta_unsigned(&mut m, F::WeightsVersion)?;
    set.life = meta_text(&mut m, F::Life)?;
    set.set_version = meta_unsigned(&mut m, F::SetVersion)?;
    set.highest_fence = Fence(meta_unsigned(&mut m, F::HighestFence)?);
    set.origin = Origin::parse(&meta_text(&mut m, F::Origin)?);
    set.lease = ms(meta_number(&mut m, F::Lease)?);
    set.restore_count = count(meta_number(&mut m, F::RestoreCount)?);
    set.incarnation = meta_text(&mut m, F::Incarnation)?;
    Ok(Some(TickReply {
        session: SessionReply::Live,
        resumed: None,
        set: Some(set),
        roster: RosterUpdate::Same,
        roster_version: req.roster.clone(),
        soonest,
        unowned,
        grant_wait,
        ending: 0,
        drained,
        revoked: Vec::new(),
        expired: 0,
        lifetime: meta_text(&mut m, F::Server)?,
        holdings: None,
        reserved: 0,
    }))
}

/// A META field of the heartbeat's reply as text (missing: empty).
fn meta_text(m: &mut Reply<MetaField>, f: MetaField) -> Result<String, StoreError> {
    match m.value(f)? {
        redis::Value::Nil => Ok(String::new()),
        redis::Value::BulkString(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        other => Err(StoreError::Protocol(format!(
            "group heartbeat: META field {} {other:?}",
            f.name()
        ))),
    }
}

/// A META field of the heartbeat's reply as an integer (missing: 0), as the whole tick
/// reads it.
fn meta_number(m: &mut Reply<MetaField>, f: MetaField) -> Result<i64, StoreError> {
    let v = meta_text(m, f)?;
    if v.is_empty() {
        return Ok(0);
    }
    v.parse::<i64>().map_err(|_| {
        StoreError::Protocol(format!("group heartbeat: META field {} {v:?}", f.name()))
    })
}

/// A META field of the heartbeat's reply as a non-negative integer.
fn meta_unsigned(m: &mut Reply<MetaField>, f: MetaField) -> Result<u64, StoreError> {
    meta_number(m, f).map(|n| n.max(0).unsigned_abs())
}

async fn run(
    store: &RedisStore,
    keys: &GroupKeys,
    req: &TickRequest,
    script: &LuaScript,
) -> Result<TickReply, StoreError> {
    let ttl = super::millis(req.ttl);
    let budget = REAP_BUDGET.to_string();
    let capacity = req.capacity.max(1).to_string();
    let args = [
        req.replica.as_str(),
        &req.process,
        &req.session,
        if req.join { "1" } else { "0" },
        req.state.as_str(),
        &ttl,
        &budget,
        &keys.channel,
        &keys.notice,
        &req.instance,
        &capacity,
        &req.grace.map_or_else(|| "0".to_owned(), millis),
        &req.incarnation,
        &req.lifetime,
        &req.roster,
    ];
    parse(leasehold_election::ext::eval_acked(store, script, &keys.all(), &args).await?)
}

fn parse(reply: redis::Value) -> Result<TickReply, StoreError> {
    use TickSlot as S;
    let mut r = Reply::<S>::new("group tick", reply)?;
    let session = match r.string(S::Status)?.as_str() {
        "live" => SessionReply::Live,
        "lost" => SessionReply::Lost,
        "duplicate" => SessionReply::Refused(Conflict::DuplicateReplica),
        "nogroup" => SessionReply::NoGroup,
        other => {
            return Err(StoreError::Protocol(format!(
                "group tick session {other:?}"
            )));
        }
    };
    let resumed = r.opt_string(S::Resumed)?.filter(|t| !t.is_empty());
    let exists = r.int(S::Exists)? == 1;
    let mut set = SetInfo::plain(count(r.int(S::Count)?), r.u64(S::Version)?, "");
    set.digest = r.text(S::Digest)?;
    let names = r.list(S::Names, strings)?;
    let entries = r.list(S::Entries, strings)?;
    let gone = r.list(S::Gone, strings)?;
    let sent = members(names, &entries)?;
    let unowned = count(r.int(S::Unowned)?);
    let grant_wait = ms(r.int(S::GrantWait)?);
    let ending = count(r.int(S::Ending)?);
    let drained = r.int(S::Drained)? == 1;
    let revoked = r.list(S::Revoked, pairs)?;
    let expired = count(r.int(S::Expired)?);
    set.weighted = r.int(S::Weighted)? == 1;
    set.total_weight = r.int(S::TotalWeight)?.max(0).unsigned_abs();
    set.max_weight = r.int(S::MaxWeight)?.max(1).unsigned_abs();
    set.weights_version = r.u64(S::WeightsVersion)?;
    set.life = r.text(S::Life)?;
    set.set_version = r.u64(S::SetVersion)?;
    set.highest_fence = Fence(r.u64(S::HighestFence)?);
    set.origin = Origin::parse(&r.text(S::Origin)?);
    set.lease = ms(r.int(S::Lease)?);
    set.restore_count = count(r.int(S::RestoreCount)?);
    set.incarnation = r.text(S::Incarnation)?;
    let lifetime = r.text(S::Lifetime)?;
    let holdings = match r.value(S::Holdings)? {
        redis::Value::Int(0) => None,
        v => Some(triples(&mut Parse::new(
            "group tick holdings",
            redis::Value::Array(vec![v]),
        ))?),
    };
    let roster_version = r.text(S::RosterVersion)?;
    let roster = match r.int(S::RosterSent)? {
        0 => RosterUpdate::Same,
        1 => RosterUpdate::Full(sent),
        2 => RosterUpdate::Changes {
            changed: sent,
            gone,
        },
        other => {
            return Err(StoreError::Protocol(format!(
                "group tick: roster sent as {other}"
            )));
        }
    };
    let soonest = u64::try_from(r.int(S::Soonest)?)
        .ok()
        .map(Duration::from_millis);
    let reserved = count(r.int(S::Reserved)?);
    Ok(TickReply {
        session,
        resumed,
        set: exists.then_some(set),
        roster,
        unowned,
        grant_wait,
        ending,
        drained,
        revoked,
        expired,
        lifetime,
        holdings,
        roster_version,
        soonest,
        reserved,
    })
}

impl Group {
    /// The twin of `lua/tick.lua`; whether to publish the notice.
    pub(crate) fn tick(&mut self, req: &TickRequest, now: Now) -> (TickReply, bool) {
        let ttl = u64::try_from(req.ttl.as_millis().max(1)).unwrap_or(u64::MAX);
        let expired = self.reap(now);
        let lifetime = self
            .meta
            .as_mut()
            .map_or(now.lifetime, |m| m.follow_server(now, true))
            .to_string();
        let mut session = SessionReply::Live;
        let mut resumed = None;
        let mut state = req.state;
        let cur = self.sessions.get(&req.replica).cloned();
        let holder = self
            .replicas
            .holders
            .get(&req.replica)
            .cloned()
            .or_else(|| cur.clone());
        let mine = holder.as_deref() == Some(req.process.as_str());
        let parked = self.replicas.states.get(&req.replica) == Some(&ReplicaState::Away);
        let inc = self.meta.as_ref().map_or("", |m| m.inc.as_str());
        let foreign = !req.join && req.incarnation != inc;
        match &cur {
            _ if req.join && self.meta.is_none() => session = SessionReply::NoGroup,
            _ if foreign => session = SessionReply::Lost,
            Some(c) if *c == req.session && mine && parked && req.state != ReplicaState::Away => {
                session = SessionReply::Lost;
            }
            Some(c) if *c == req.session && mine => {
                let exp = self.members.entry(req.replica.clone()).or_insert(0);
                *exp = if req.state == ReplicaState::Away {
                    now.ms + ttl
                } else {
                    (*exp).max(now.ms + ttl)
                };
            }
            _ if !req.join => session = SessionReply::Lost,
            Some(_) if mine && parked => session = SessionReply::Lost,
            Some(c) if mine => {
                resumed = Some(c.clone());
                let exp = self.members.entry(req.replica.clone()).or_insert(0);
                *exp = (*exp).max(now.ms + ttl);
                self.remember_grace(&req.replica, req.grace, ttl);
                if state == ReplicaState::Settling {
                    state = ReplicaState::Active;
                }
            }
            Some(c) if parked => {
                resumed = Some(c.clone());
                if let Some(h) = holder {
                    self.acks.remove(&h);
                }
                self.replicas
                    .holders
                    .insert(req.replica.clone(), req.process.clone());
                self.members.insert(req.replica.clone(), now.ms + ttl);
                self.remember_grace(&req.replica, req.grace, ttl);
                if state == ReplicaState::Settling {
                    state = ReplicaState::Active;
                }
            }
            Some(_) => {
                session = SessionReply::Refused(Conflict::DuplicateReplica);
                if req.grace.is_some() {
                    let heir = self
                        .replicas
                        .heirs
                        .entry(req.replica.clone())
                        .or_insert(Heir {
                            grace: 0,
                            ttl,
                            knock_until: 0,
                        });
                    heir.knock_until = now.ms + 2 * ttl;
                }
            }
            None => {
                self.sessions
                    .insert(req.replica.clone(), req.process.clone());
                self.replicas
                    .holders
                    .insert(req.replica.clone(), req.process.clone());
                self.members.insert(req.replica.clone(), now.ms + ttl);
                self.remember_grace(&req.replica, req.grace, ttl);
            }
        }
        let (mut drained, mut revoked, mut changed) = (false, Vec::new(), false);
        if session == SessionReply::Live {
            let token = resumed.clone().unwrap_or_else(|| req.session.clone());
            changed = self.replicas.states.insert(req.replica.clone(), state) != Some(state);
            if req.join {
                self.replicas
                    .info
                    .insert(req.replica.clone(), req.instance.clone());
                self.replicas
                    .capacity
                    .insert(req.replica.clone(), req.capacity.max(1));
            }
            drained = self.drains.contains(&req.replica);
            revoked = self
                .revoked
                .iter()
                .filter(|(p, _)| self.owners.get(*p) == Some(&token))
                .map(|(p, why)| (p.clone(), why.clone()))
                .collect();
        }
        let holdings = (session == SessionReply::Live
            && !req.join
            && resumed.is_none()
            && req.lifetime != lifetime)
            .then(|| self.held_by(&req.session));
        let ending = self.free_ended(REAP_BUDGET);
        let (roster_version, roster) = self.roster_for(now, &lifetime, &req.roster);
        let reply = TickReply {
            session,
            resumed,
            set: self.set_info(),
            soonest: self
                .members
                .iter()
                .filter(|(r, exp)| **r != req.replica && **exp > now.ms)
                .map(|(_, exp)| Duration::from_millis(exp - now.ms))
                .min(),
            roster,
            roster_version,
            unowned: self.unowned(),
            grant_wait: self.meta.as_ref().map_or(Duration::ZERO, |m| {
                Duration::from_millis(m.grant_after.saturating_sub(now.ms))
            }),
            ending,
            drained,
            revoked,
            expired,
            lifetime,
            holdings,
            reserved: if session == SessionReply::Live {
                self.reserved_for(&req.replica, now).len()
            } else {
                0
            },
        };
        (reply, changed)
    }
}

impl Op for TickRequest {
    type Reply = TickReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<TickReply, StoreError> {
        redis(store, keys, self).await
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> TickReply {
        store.with(keys, |g, now| g.tick(self, now))
    }
}

#[cfg(test)]
mod tests;
