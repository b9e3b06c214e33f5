//! claim: new terms for a session, free partitions or regrants (`lua/claim.lua`).

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{Fence, RedisStore, StoreError};

use super::Op;
use super::moves::{MoveCause, Predecessor};
use super::{count, group_script, ms, strings, triples};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::notice::GroupNotice;
use crate::store::REAP_BUDGET;
use crate::store::memory::{Group, Now};
use crate::store::protocol::{Granted, ReplicaState, Term};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("claim.lua");

/// A batch claim of free partitions, or (with `regrant`) new terms for terms the
/// session holds with no runner.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub replica: String,
    pub process: String,
    pub session: String,
    /// This process's request number, growing: a claim sent again with the same one
    /// gets the first answer (it is never applied twice).
    pub seq: u64,
    pub ttl: Duration,
    /// Take at most this many free partitions (oldest free first).
    pub count: usize,
    /// Every fence issued is at least this (the highest this replica has seen + 1).
    pub floor: Fence,
    /// Instead of free partitions: new terms for these terms of the session.
    pub regrant: Vec<Term>,
    /// A weighted claim: take the free partitions (oldest first, among the next
    /// `count`) whose weights fit into this much room. `None`: the first `count`.
    pub room: Option<u64>,
    /// With a room: if none fits, take the first free one anyway.
    pub fallback: bool,
    /// With a room: the free partitions reserved for this replica (handed to it by
    /// name) are taken first, as long as their weights fit into this (the replica's
    /// bound), whether or not they fit into the room.
    pub bound: u64,
    /// The incarnation of the group the session lives in: a claim of another one is
    /// `Lost`.
    pub incarnation: String,
    /// Free partitions preferred on this replica: taken first (oldest first), if the
    /// group has preferences.
    pub prefer: Vec<String>,
    /// Take only those (a swap's first half: see `balance/prefer.rs`).
    pub only_preferred: bool,
    /// Members (replica id, room) that take the free partitions preferred on them: the
    /// oldest such partitions whose weights fit into a member's room are left to it.
    pub leave_to: Vec<(String, u64)>,
}

#[cfg(test)]
impl ClaimRequest {
    /// A plain claim of `count` free partitions for the session `token` (the process
    /// that holds it), in incarnation `incarnation`: what tests change, they set after.
    pub(crate) fn of(
        replica: &str,
        token: &str,
        seq: u64,
        count: usize,
        ttl: Duration,
        incarnation: &str,
    ) -> Self {
        ClaimRequest {
            replica: replica.to_owned(),
            process: token.to_owned(),
            session: token.to_owned(),
            seq,
            ttl,
            count,
            floor: Fence(1),
            regrant: Vec::new(),
            room: None,
            fallback: false,
            bound: 0,
            incarnation: incarnation.to_owned(),
            prefer: Vec::new(),
            only_preferred: false,
            leave_to: Vec::new(),
        }
    }
}

/// How many free partitions past a claim's count it looks at when it leaves some to
/// their preferred members (`claim.lua`'s `want + 256`).
pub(crate) const PREFER_SCAN: usize = 256;

/// How many free partitions reserved for a named receiver a claim (or a tick) looks at
/// to find those reserved for it (`free.lua`'s `RESERVED_SCAN`).
const RESERVED_SCAN: usize = 256;

/// What a claim got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimReply {
    /// These terms were granted; `returned` are partitions of a regrant given back
    /// (removed, revoked, or the replica drained); `unowned` are left.
    Claimed {
        partitions: Vec<Granted>,
        returned: Vec<String>,
        unowned: usize,
        /// Per partition taken from the free set (not regranted), in the order of
        /// `partitions`: its previous term (why it ended, how long the partition had no
        /// owner, the state it left), as its entry in the ledger of moves says.
        moves: Vec<Predecessor>,
        /// The claim's fallback took a partition that fit into no room: the member
        /// furthest below its share is another one now, and others may have to plan
        /// again for what is still free.
        fell_back: bool,
    },
    /// The group grants nothing for this long yet.
    Wait(Duration),
    /// The session has ended.
    Lost,
    /// A later request of this process overtook this one: its answer is unknown here.
    Stale,
}

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    req: &ClaimRequest,
) -> Result<ClaimReply, StoreError> {
    let (seq, ttl, want, floor) = (
        req.seq.to_string(),
        super::millis(req.ttl),
        req.count.to_string(),
        req.floor.get().to_string(),
    );
    let budget = REAP_BUDGET.to_string();
    let room = req
        .room
        .map_or_else(|| "-1".to_owned(), |r| r.min(1 << 52).to_string());
    let bound = req.bound.min(1 << 52).to_string();
    let fences: Vec<String> = req
        .regrant
        .iter()
        .map(|(_, f)| f.get().to_string())
        .collect();
    let k = if req.only_preferred {
        format!("-{}", req.prefer.len())
    } else {
        req.prefer.len().to_string()
    };
    let s = req.leave_to.len().to_string();
    let rooms: Vec<String> = req
        .leave_to
        .iter()
        .map(|(_, r)| r.min(&(1 << 52)).to_string())
        .collect();
    let mut args = vec![
        req.replica.as_str(),
        &req.process,
        &req.session,
        &seq,
        &ttl,
        &want,
        &floor,
        &budget,
        &room,
        if req.fallback { "1" } else { "0" },
        &req.incarnation,
        &bound,
        &keys.channel,
        &keys.notice,
        &k,
    ];
    args.extend(req.prefer.iter().map(String::as_str));
    args.push(&s);
    for ((r, _), room) in req.leave_to.iter().zip(&rooms) {
        args.push(r);
        args.push(room);
    }
    for ((name, _), fence) in req.regrant.iter().zip(&fences) {
        args.push(name);
        args.push(fence);
    }
    let mut p = Parse::new(
        "claim",
        leasehold_election::ext::eval_acked(store, &SCRIPT, &keys.all(), &args).await?,
    );
    match p.next_string()?.as_str() {
        "ok" => {
            let partitions = triples(&mut p)?;
            let returned = strings(&mut p)?;
            let unowned = count(p.next_int()?);
            // A reply kept by an older version has no moves.
            let mut moves = Vec::new();
            if p.remaining() > 0 {
                let mut m = p.next_array()?;
                while m.remaining() > 0 {
                    let cause = m.next_string()?;
                    let cause: MoveCause =
                        cause.parse().map_err(|e: super::moves::UnknownCause| {
                            StoreError::Protocol(format!("claim: {e}"))
                        })?;
                    let unowned = u64::try_from(m.next_int()?).ok();
                    let fence = m.next_string()?.parse().ok().map(Fence);
                    let state = m.next_int()?;
                    moves.push(Predecessor {
                        cause,
                        unowned: unowned.map(Duration::from_millis),
                        fence,
                        state_bytes: u64::try_from(state).ok(),
                        state_before_server_change: state == -2,
                    });
                }
            }
            // A reply kept by an older version has no flag.
            let fell_back = p.remaining() > 0 && p.next_int()? == 1;
            p.finish()?;
            Ok(ClaimReply::Claimed {
                partitions,
                returned,
                unowned,
                moves,
                fell_back,
            })
        }
        "wait" => Ok(ClaimReply::Wait(ms(p.next_int()?))),
        "lost" => Ok(ClaimReply::Lost),
        "stale" => Ok(ClaimReply::Stale),
        other => Err(StoreError::Protocol(format!("claim replied {other:?}"))),
    }
}

impl Group {
    /// The twin of `lua/claim.lua`.
    pub(crate) fn claim(&mut self, req: &ClaimRequest, now: Now) -> ClaimReply {
        let until = self.members.get(&req.replica).copied().unwrap_or(0);
        let holder = self
            .replicas
            .holders
            .get(&req.replica)
            .cloned()
            .unwrap_or_else(|| req.session.clone());
        if self.sessions.get(&req.replica) != Some(&req.session)
            || holder != req.process
            || until <= now.ms
            || self.replicas.states.get(&req.replica) == Some(&ReplicaState::Away)
        {
            return ClaimReply::Lost;
        }
        if req.incarnation != self.meta.as_ref().map_or("", |m| m.inc.as_str()) {
            return ClaimReply::Lost;
        }
        if let Some(m) = self.meta.as_mut() {
            let ttl = u64::try_from(req.ttl.as_millis().max(1)).unwrap_or(u64::MAX);
            m.lease = m.lease.max(ttl);
            m.follow_server(now, false);
        }
        if let Some((seq, reply)) = self.acks.get(&req.process) {
            if *seq == req.seq {
                return reply.clone();
            }
            if *seq > req.seq {
                return ClaimReply::Stale;
            }
        }
        let (fmax, weighted) = match &self.meta {
            Some(m) if m.grants_after() > now.ms => {
                return ClaimReply::Wait(Duration::from_millis(m.grants_after() - now.ms));
            }
            Some(m) => (m.fmax, m.weighted),
            None => (0, false),
        };
        let ttl = u64::try_from(req.ttl.as_millis().max(1)).unwrap_or(u64::MAX);
        if let Some(exp) = self.members.get_mut(&req.replica) {
            *exp = (*exp).max(now.ms + ttl);
        }
        self.free_ended(REAP_BUDGET);
        let drained = self.drains.contains(&req.replica);
        let regrant = !req.regrant.is_empty();
        let mut returned = Vec::new();
        let mut fell_back = false;
        let names: Vec<String> = if regrant {
            let (mut take, mut back, mut back_fences) = (Vec::new(), Vec::new(), Vec::new());
            for (n, f) in &req.regrant {
                if self.owners.get(n) == Some(&req.session) && self.fences.get(n) == Some(&f.0) {
                    if self.set.positions.contains_key(n)
                        && !self.revoked.contains_key(n)
                        && !drained
                    {
                        take.push(n.clone());
                    } else {
                        back.push(n.clone());
                        back_fences.push(f.0);
                    }
                }
            }
            let why = if drained {
                MoveCause::Drain
            } else {
                MoveCause::Removal
            };
            let (flags, _) =
                self.give_back(&req.session, &back, Some(&back_fences), now.ms, &|_| {
                    (why, None)
                });
            returned = back
                .into_iter()
                .zip(flags)
                .filter_map(|(n, ok)| ok.then_some(n))
                .collect();
            take
        } else if req.count == 0 || drained {
            Vec::new()
        } else if !self.set.prefs.is_empty() || req.only_preferred {
            let candidates = self.preferred_order(req, now);
            let first: Vec<String> = candidates.into_iter().take(req.count).collect();
            let chosen = match req.room {
                None => first,
                Some(room) => {
                    let (chosen, fell) = self.fitting(&req.replica, first, room, req, now);
                    fell_back = fell;
                    chosen
                }
            };
            for n in &chosen {
                self.remove_free(n);
            }
            chosen
        } else if req.room.is_some() || self.held_back(now) {
            // Among the next `count` (those reserved for it first, then the oldest
            // not held back for another): those that fit; else the first.
            let candidates = self.claimable(&req.replica, req.count, now);
            let chosen = match req.room {
                None => candidates,
                Some(room) => {
                    let (chosen, fell) = self.fitting(&req.replica, candidates, room, req, now);
                    fell_back = fell;
                    chosen
                }
            };
            for n in &chosen {
                self.remove_free(n);
            }
            chosen
        } else {
            let mut popped = Vec::new();
            while popped.len() < req.count {
                let Some((_, name)) = self.free.pop_first() else {
                    break;
                };
                self.free_since.remove(&name);
                popped.push(name);
            }
            popped
        };
        let mut gained = 0;
        let mut high = fmax;
        let mut partitions = Vec::new();
        for name in names {
            let owner = self.owners.get(&name);
            let take =
                regrant || !owner.is_some_and(|o| *o != req.session && self.live(o, now).is_some());
            if !take {
                continue;
            }
            let last = self.fences.get(&name).copied().unwrap_or(0);
            let fence = (last + 1).max(req.floor.get()).max(fmax + 1).max(now.us);
            high = high.max(fence);
            self.fences.insert(name.clone(), fence);
            self.owners.insert(name.clone(), req.session.clone());
            self.replicas.since.insert(name.clone(), now.ms);
            self.held
                .entry(req.session.clone())
                .or_default()
                .insert(name.clone());
            let w = self.weight(&name);
            if !regrant {
                gained += w;
            }
            partitions.push((name, Fence(fence), w));
        }
        if let Some(meta) = self.meta.as_mut() {
            meta.fmax = high;
        }
        if gained > 0 && weighted {
            *self.loads.entry(req.session.clone()).or_default() += gained;
        }
        let moves = if regrant {
            Vec::new()
        } else {
            let taken: Vec<(String, u64)> = partitions
                .iter()
                .map(|(n, f, _)| (n.clone(), f.0))
                .collect();
            self.record_moves(&req.replica, &taken, now.ms)
        };
        self.record(req, partitions, returned, moves, fell_back)
    }

    /// The twin of `claim.lua`'s `fitting`: of `candidates` (in the order to take
    /// them), those whose weights fit into `room` together (those reserved for
    /// `replica` into the request's bound instead, the others into the room as well),
    /// or, if none does and the request's fallback is on, the first (and then `true`).
    fn fitting(
        &self,
        replica: &str,
        candidates: Vec<String>,
        room: u64,
        req: &ClaimRequest,
        now: Now,
    ) -> (Vec<String>, bool) {
        let mine: std::collections::BTreeSet<String> =
            self.reserved_for(replica, now).into_iter().collect();
        let mut chosen = Vec::new();
        let (mut acc, mut others) = (0, 0);
        for n in &candidates {
            let w = self.weight(n);
            let fits = if mine.contains(n) {
                acc + w <= req.bound
            } else {
                others + w <= room && acc + w <= req.bound.max(room)
            };
            if fits {
                chosen.push(n.clone());
                acc += w;
                if !mine.contains(n) {
                    others += w;
                }
            }
        }
        if chosen.is_empty()
            && req.fallback
            && let Some(first) = candidates.into_iter().next()
        {
            chosen.push(first);
            return (chosen, true);
        }
        (chosen, false)
    }

    /// Whether a free partition is reserved until after `now` (`claim.lua`'s
    /// `reserved`, for the first 256 such).
    fn held_back(&self, now: Now) -> bool {
        self.free
            .range((now.ms + 1, String::new())..)
            .next()
            .is_some()
    }

    /// The free partitions reserved for `replica` now (`claim.lua`'s `mine`), in FREE's
    /// order, among the first 256 held back.
    pub(crate) fn reserved_for(&self, replica: &str, now: Now) -> Vec<String> {
        self.free
            .range((now.ms + 1, String::new())..)
            .take(RESERVED_SCAN)
            .filter(|(_, n)| self.ends.reserved.get(n).is_some_and(|r| r == replica))
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// The twin of `claim.lua`'s `claimable`: the first `k` free partitions a claim of
    /// `replica` may take, those reserved for it first, then the oldest not held back.
    fn claimable(&self, replica: &str, k: usize, now: Now) -> Vec<String> {
        let mut out = self.reserved_for(replica, now);
        out.truncate(k);
        let left = k - out.len();
        out.extend(
            self.free
                .iter()
                .take_while(|(since, _)| *since <= now.ms)
                .take(left)
                .map(|(_, n)| n.clone()),
        );
        out
    }

    /// The twin of `claim.lua`'s `preferred_order`: the free partitions a claim with
    /// preferences may take, in order.
    fn preferred_order(&self, req: &ClaimRequest, now: Now) -> Vec<String> {
        let mut out = if req.only_preferred {
            Vec::new()
        } else {
            self.reserved_for(&req.replica, now)
        };
        let mut seen: std::collections::BTreeSet<String> = out.iter().cloned().collect();
        let mut mine: Vec<(u64, String)> = req
            .prefer
            .iter()
            .filter_map(|n| {
                let since = *self.free_since.get(n)?;
                (since <= now.ms && seen.insert(n.clone())).then(|| (since, n.clone()))
            })
            .collect();
        mine.sort();
        out.extend(mine.into_iter().map(|(_, n)| n));
        if req.only_preferred {
            return out;
        }
        let mut left: BTreeMap<&str, u64> = req
            .leave_to
            .iter()
            .map(|(r, room)| (r.as_str(), *room))
            .collect();
        let claimable = self.free.iter().take_while(|(since, _)| *since <= now.ms);
        for (_, n) in claimable.take(req.count + PREFER_SCAN) {
            if seen.contains(n) {
                continue;
            }
            let w = self.weight(n);
            let to = self.set.prefs.get(n).and_then(|r| left.get_mut(r.as_str()));
            match to {
                Some(room) if w <= *room => *room -= w,
                _ => out.push(n.clone()),
            }
        }
        out
    }

    /// Keeps a claim's reply for its retry.
    fn record(
        &mut self,
        req: &ClaimRequest,
        partitions: Vec<Granted>,
        returned: Vec<String>,
        moves: Vec<Predecessor>,
        fell_back: bool,
    ) -> ClaimReply {
        let reply = ClaimReply::Claimed {
            partitions,
            returned,
            unowned: self.unowned(),
            moves,
            fell_back,
        };
        self.acks
            .insert(req.process.clone(), (req.seq, reply.clone()));
        reply
    }
}

impl Op for ClaimRequest {
    type Reply = ClaimReply;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<ClaimReply, StoreError> {
        redis(store, keys, self).await
    }

    /// The claim's twin; a claim that moved partitions tells their previous owners
    /// (`GroupNotice::Moved`).
    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> ClaimReply {
        let (reply, moved) = store.with(keys, |g, now| {
            let before = g.log.moves.back().map(|m| m.id.clone());
            let reply = g.claim(self, now);
            let moved = matches!(&reply, ClaimReply::Claimed { moves, .. } if !moves.is_empty())
                .then(|| g.moved_notice(before))
                .flatten();
            ((reply, moved), false)
        });
        if let Some(message) = moved.and_then(|m| GroupNotice::Moved(m).encode(&keys.notice)) {
            store.notify(message);
        }
        reply
    }
}
