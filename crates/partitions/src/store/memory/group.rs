//! A group's state in the in-memory store, and the parts of the scripts' libraries
//! its operations share (the server clock, the group's meta, reaping, giving back,
//! the roster, replayed operator changes).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use leasehold_election::ext::replica_of_token;

use crate::notice::Moved;
use crate::store::ops;
use crate::store::ops::moves::{Move, MoveCause};
use crate::store::protocol::{ClaimReply, MemberInfo, Origin, ReplicaState, RosterUpdate, SetInfo};

use super::Began;

/// The server clock as the scripts read it: milliseconds (every score) and
/// microseconds (fences), since the store was created.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub(crate) ms: u64,
    pub(crate) us: u64,
    /// The server lifetime (`INFO`'s run id and replication id, as a number).
    pub(crate) lifetime: u64,
    /// When it began.
    pub(crate) began: Began,
}

impl Now {
    /// Whether the server has granted on its own history for at least `lease_ms` (the
    /// twin of `began + lease <= now` in `add.lua`): it cannot have forgotten a lease
    /// of that length.
    pub(crate) fn server_older_than(self, lease_ms: u64) -> bool {
        match self.began {
            Began::First => true,
            Began::At(ms) => ms.saturating_add(lease_ms) <= self.ms,
            Began::Unknown => false,
        }
    }
}

/// META.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) count: usize,
    pub(crate) next: u64,
    pub(crate) version: u64,
    pub(crate) digest: String,
    pub(crate) grant_after: u64,
    pub(crate) life: String,
    pub(crate) sver: u64,
    pub(crate) lease: u64,
    pub(crate) fmax: u64,
    pub(crate) origin: Origin,
    pub(crate) weighted: bool,
    pub(crate) total: u64,
    pub(crate) wver: u64,
    /// How many partitions a restore is to bring back.
    pub(crate) rcount: usize,
    /// This incarnation of the group (`inc` in `meta.lua`).
    pub(crate) inc: String,
    /// How the group follows the server's lifetime.
    pub(crate) follow: Follow,
    /// The checksum of the set's names (`ssum`: `count_names` in `meta.lua`).
    pub(crate) ssum: Option<u64>,
    /// The move budget.
    pub(crate) budget: Budget,
    /// An operator changed the group (`amended`).
    pub(crate) amended: bool,
    /// While a replica brings the group to its copy (origin `Adopt`): the copy's life
    /// and set version, and until when operator changes wait (`alife`, `asver`,
    /// `adopting`).
    pub(crate) adopting: Option<(String, u64, u64)>,
}

/// META's part that follows the server's lifetime (`server.lua`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Follow {
    /// The server lifetime that last wrote the group (`server`).
    pub(crate) server: u64,
    /// Nothing is granted before this after the lifetime changed (`server_after`).
    pub(crate) after: u64,
    /// When a script last read the lifetime and found it `server` (`checked`).
    pub(crate) checked: Option<u64>,
}

/// META's move budget: the current window, and the moves taken in it (`bwin`,
/// `bused`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Budget {
    pub(crate) window: Option<u64>,
    pub(crate) used: usize,
}

/// The twin of `server.lua`'s `check_window`.
pub(crate) fn check_window(lease: u64) -> u64 {
    lease / 4
}

impl Meta {
    /// The twin of `server.lua`'s `lifetime_fresh`.
    fn lifetime_fresh(&self, now: Now) -> bool {
        self.follow
            .checked
            .is_some_and(|c| c <= now.ms && now.ms < c + check_window(self.lease))
    }

    /// The twin of `meta.lua`'s `follow_server`: a group last written in another server
    /// lifetime holds its claims back for one lease (a promoted server cannot tell when
    /// it began, and ticks may have taken the old lifetime as read until now, so the
    /// lease counts from now). A tick (`tick`) takes the lifetime as read within a
    /// window of the last check. Returns the lifetime.
    pub(crate) fn follow_server(&mut self, now: Now, tick: bool) -> u64 {
        let fresh = self.lifetime_fresh(now);
        if tick && fresh {
            return self.follow.server;
        }
        if self.follow.server == now.lifetime {
            if !fresh {
                self.follow.checked = Some(now.ms);
            }
            return now.lifetime;
        }
        // A failover (the only change of lifetime the twin has): ticks took the old
        // lifetime as read at the latest until now.
        self.follow.after = self.follow.after.max(now.ms + self.lease);
        self.follow.server = now.lifetime;
        self.follow.checked = Some(now.ms);
        now.lifetime
    }

    /// The twin of `meta.lua`'s `grants_after`.
    pub(crate) fn grants_after(&self) -> u64 {
        self.grant_after.max(self.follow.after)
    }
}

/// One group, field for field the keys of [`GroupKeys`] (scores in server ms), the
/// keys that belong together in a part of their own: the set ([`SetKeys`]), the
/// members' particulars ([`ReplicaKeys`]), how terms and sessions ended ([`Ends`]),
/// and the ledger of moves ([`MoveLog`]).
///
/// [`GroupKeys`]: crate::keys::GroupKeys
#[derive(Debug, Default, Clone)]
pub(crate) struct Group {
    pub(crate) members: BTreeMap<String, u64>,
    pub(crate) sessions: BTreeMap<String, String>,
    pub(crate) meta: Option<Meta>,
    pub(crate) set: SetKeys,
    pub(crate) replicas: ReplicaKeys,
    /// FREE: (since, name), and name → since.
    pub(crate) free: BTreeSet<(u64, String)>,
    pub(crate) free_since: BTreeMap<String, u64>,
    pub(crate) owners: BTreeMap<String, String>,
    pub(crate) fences: BTreeMap<String, u64>,
    /// HELD: token → names.
    pub(crate) held: BTreeMap<String, BTreeSet<String>>,
    pub(crate) revoked: BTreeMap<String, String>,
    pub(crate) drains: BTreeSet<String>,
    /// Session token → its partitions' weights summed (kept once weighted).
    pub(crate) loads: BTreeMap<String, u64>,
    /// ACKS: process → (seq, reply).
    pub(crate) acks: BTreeMap<String, (u64, ClaimReply)>,
    /// The admin scripts' `op` keys: request id → (expiry, reply).
    pub(crate) ops: BTreeMap<String, (u64, ops::OpReply)>,
    /// ROSTER and CHANGES: the last rosters a tick named (version, members by replica
    /// id), to send a replica only what changed since the one it read.
    pub(crate) rosters: VecDeque<(String, Vec<MemberInfo>)>,
    pub(crate) ends: Ends,
    pub(crate) log: MoveLog,
}

/// The set: PARTITIONS, weights and preferences.
#[derive(Debug, Default, Clone)]
pub(crate) struct SetKeys {
    /// PARTITIONS: name → position, and position → name.
    pub(crate) positions: BTreeMap<String, u64>,
    pub(crate) order: BTreeMap<u64, String>,
    /// Partition → weight, for weights other than 1.
    pub(crate) weights: BTreeMap<String, u64>,
    /// PREFS: partition → the replica id an operator prefers it on.
    pub(crate) prefs: BTreeMap<String, String>,
}

/// What the group keeps of each member besides its session: STATES, SINCE, INFO,
/// capacities, HOLDERS (replica → the process holding its session) and HEIRS.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReplicaKeys {
    pub(crate) states: BTreeMap<String, ReplicaState>,
    pub(crate) since: BTreeMap<String, u64>,
    pub(crate) info: BTreeMap<String, String>,
    pub(crate) capacity: BTreeMap<String, u32>,
    pub(crate) holders: BTreeMap<String, String>,
    /// HEIRS: a sticky replica's grace, and a knock.
    pub(crate) heirs: BTreeMap<String, Heir>,
}

/// How terms and sessions ended: ENDED, its reservations, DEAD and the hand-off keys.
#[derive(Debug, Default, Clone)]
pub(crate) struct Ends {
    /// ENDED: free partition → how its last term ended; and ended session token →
    /// why it ended (`leave`; none: it expired).
    pub(crate) ended: BTreeMap<String, ops::moves::LastTerm>,
    /// ENDED's reservations: a free partition handed to a named receiver → that
    /// receiver (its FREE score is the end of the hold).
    pub(crate) reserved: BTreeMap<String, String>,
    pub(crate) ended_sessions: BTreeMap<String, MoveCause>,
    /// DEAD: (ended, token).
    pub(crate) dead: BTreeSet<(u64, String)>,
    /// The hand-off keys: partition → (fence of the term that left it, state, expiry).
    pub(crate) hand_offs: BTreeMap<String, (u64, Vec<u8>, u64)>,
}

/// MOVES: the ledger of moves, oldest first, and the last entry id's parts (ms, seq).
#[derive(Debug, Default, Clone)]
pub(crate) struct MoveLog {
    pub(crate) moves: VecDeque<Move>,
    pub(crate) move_ms: u64,
    pub(crate) move_seq: u64,
}

/// HEIRS' entry of a sticky replica's session (`session.lua`): how long its partitions
/// wait for it after its last heartbeat, its ttl, and until when a knocking process
/// (refused while the session lived) is waited for (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Heir {
    pub(crate) grace: u64,
    pub(crate) ttl: u64,
    pub(crate) knock_until: u64,
}

impl Heir {
    /// `parked_until` in `session.lua`: until when the session that expired at `exp` is
    /// parked for its replica instead of ended.
    fn parked_until(self, exp: u64, now: Now) -> Option<u64> {
        let mut until = (exp + self.grace).saturating_sub(self.ttl);
        if self.knock_until > now.ms {
            until = until.max(now.ms + self.ttl);
        }
        (until > now.ms).then_some(until)
    }
}

/// How many of the last rosters the twin keeps to send changes from.
pub(crate) const ROSTERS_KEPT: usize = 64;

/// `names` without repeats, in order.
pub(crate) fn distinct(names: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    names
        .iter()
        .filter(|n| seen.insert(n.as_str()))
        .cloned()
        .collect()
}

impl Group {
    pub(crate) fn weight(&self, name: &str) -> u64 {
        self.set.weights.get(name).copied().unwrap_or(1)
    }

    pub(crate) fn weighted(&self) -> bool {
        self.meta.as_ref().is_some_and(|m| m.weighted)
    }

    /// How long an operator's change (or a versioned list's) must wait, if it must
    /// (`change_wait` in `meta.lua`).
    pub(crate) fn change_wait(&self, now: Now) -> Option<Duration> {
        self.restoring(now).or_else(|| {
            self.meta
                .as_ref()
                .filter(|m| m.origin == Origin::Adopt)
                .and_then(|m| m.adopting.as_ref())
                .filter(|(_, _, until)| *until > now.ms)
                .map(|(_, _, until)| Duration::from_millis(until - now.ms))
        })
    }

    /// Whether the group grants nothing yet (`restoring` in `meta.lua`).
    pub(crate) fn restoring(&self, now: Now) -> Option<Duration> {
        self.meta
            .as_ref()
            .filter(|m| m.grant_after > now.ms)
            .map(|m| Duration::from_millis(m.grant_after - now.ms))
    }

    pub(crate) fn bump_set(&mut self) {
        if let Some(m) = self.meta.as_mut() {
            m.sver += 1;
            m.rcount = 0;
        }
    }

    /// The expiry of session `token` if it is its replica's current session and
    /// unexpired (`live` in `session.lua`).
    pub(crate) fn live(&self, token: &str, now: Now) -> Option<u64> {
        let replica = replica_of_token(token);
        if self.sessions.get(replica).map(String::as_str) != Some(token) {
            return None;
        }
        self.members
            .get(replica)
            .copied()
            .filter(|exp| *exp > now.ms)
    }

    /// `teardown` in `session.lua`.
    pub(crate) fn teardown(&mut self, replica: &str, token: Option<&str>, ended: u64) {
        let holder = self.replicas.holders.remove(replica);
        self.members.remove(replica);
        self.sessions.remove(replica);
        self.replicas.states.remove(replica);
        self.replicas.info.remove(replica);
        self.replicas.capacity.remove(replica);
        if let Some(h) = holder {
            self.acks.remove(&h);
        }
        if let Some(t) = token {
            self.ends.dead.retain(|(_, d)| d != t);
            self.ends.dead.insert((ended, t.to_owned()));
        }
    }

    /// `reap` in `session.lua`.
    pub(crate) fn reap(&mut self, now: Now) -> usize {
        let gone: Vec<(String, u64)> = self
            .members
            .iter()
            .filter(|(_, exp)| **exp <= now.ms)
            .map(|(r, exp)| (r.clone(), *exp))
            .collect();
        let mut lost = 0;
        for (r, exp) in gone {
            let token = self.sessions.get(&r).cloned();
            let heir = self.replicas.heirs.remove(&r);
            let away = self.replicas.states.get(&r) == Some(&ReplicaState::Away);
            let parked = heir
                .filter(|_| token.is_some() && !away)
                .and_then(|h| h.parked_until(exp, now));
            if let Some(until) = parked {
                self.members.insert(r.clone(), until);
                self.replicas.states.insert(r, ReplicaState::Away);
            } else {
                if let Some(t) = &token {
                    lost += self.held.get(t).map_or(0, BTreeSet::len);
                }
                self.teardown(&r, token.as_deref(), exp);
            }
        }
        lost
    }

    /// `remember_grace` in `session.lua`.
    pub(crate) fn remember_grace(&mut self, replica: &str, grace: Option<Duration>, ttl: u64) {
        match grace {
            Some(g) => {
                let grace = u64::try_from(g.as_millis().max(1)).unwrap_or(u64::MAX);
                self.replicas.heirs.insert(
                    replica.to_owned(),
                    Heir {
                        grace,
                        ttl,
                        knock_until: 0,
                    },
                );
            }
            None => {
                self.replicas.heirs.remove(replica);
            }
        }
    }

    /// `give_back` in `free.lua`: one flag per name, and how many were given back now.
    pub(crate) fn give_back(
        &mut self,
        token: &str,
        names: &[String],
        fences: Option<&[u64]>,
        at: u64,
        ended_as: &dyn Fn(usize) -> (MoveCause, Option<(u64, u64)>),
    ) -> (Vec<bool>, usize) {
        let mut out = Vec::with_capacity(names.len());
        let mut seen = BTreeSet::new();
        let mut gone = 0;
        for (j, n) in names.iter().enumerate() {
            let f = fences.map(|f| f[j]);
            let current = self.fences.get(n).copied();
            let ours = f.is_none_or(|f| current == Some(f));
            let owner = self.owners.get(n).map(String::as_str);
            if owner == Some(token) && ours && !seen.contains(n) {
                seen.insert(n.clone());
                out.push(true);
                gone += 1;
                let w = self.weight(n);
                if let Some(l) = self.loads.get_mut(token) {
                    *l = l.saturating_sub(w);
                }
                self.owners.remove(n);
                if let Some(set) = self.held.get_mut(token) {
                    set.remove(n);
                }
                self.revoked.remove(n);
                let since = self.replicas.since.remove(n).unwrap_or(at);
                if self.set.positions.contains_key(n) {
                    self.add_free(n, at);
                    let (cause, state) = ended_as(j);
                    let last = ops::moves::LastTerm {
                        replica: replica_of_token(token).to_owned(),
                        fence: current.unwrap_or(0),
                        cause,
                        ended: at,
                        since,
                        state,
                    };
                    self.ends.ended.insert(n.clone(), last);
                } else {
                    self.set.weights.remove(n);
                }
            } else if (seen.contains(n) || owner.is_none()) && f.is_some() && current == f {
                out.push(true);
            } else {
                out.push(false);
            }
        }
        if self.held.get(token).is_some_and(BTreeSet::is_empty) {
            self.held.remove(token);
        }
        (out, gone)
    }

    /// `free_ended` in `free.lua`: returns how many ended sessions still hold some.
    pub(crate) fn free_ended(&mut self, budget: usize) -> usize {
        let mut moved = 0;
        let mut left_over = 0;
        let dead: Vec<(u64, String)> = self.ends.dead.iter().cloned().collect();
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
            let why = self
                .ends
                .ended_sessions
                .get(&token)
                .copied()
                .unwrap_or(MoveCause::Expiry);
            if names.len() < left {
                self.ends.dead.remove(&(ended, token.clone()));
                self.loads.remove(&token);
                self.ends.ended_sessions.remove(&token);
            } else {
                left_over += 1;
            }
            if !names.is_empty() {
                self.give_back(&token, &names, None, ended, &|_| (why, None));
                // An entry whose partition another session owns now is stale: dropped.
                if let Some(set) = self.held.get_mut(&token) {
                    for n in &names {
                        set.remove(n);
                    }
                    if set.is_empty() {
                        self.held.remove(&token);
                    }
                }
                moved += names.len();
            }
        }
        left_over
    }

    pub(crate) fn add_free(&mut self, name: &str, since: u64) {
        if let Some(old) = self.free_since.insert(name.to_owned(), since) {
            self.free.remove(&(old, name.to_owned()));
        }
        self.free.insert((since, name.to_owned()));
    }

    pub(crate) fn remove_free(&mut self, name: &str) -> bool {
        match self.free_since.remove(name) {
            Some(since) => self.free.remove(&(since, name.to_owned())),
            None => false,
        }
    }

    /// `unowned` in `free.lua`.
    pub(crate) fn unowned(&self) -> usize {
        let ending: usize = self
            .ends
            .dead
            .iter()
            .map(|(_, t)| self.held.get(t).map_or(0, BTreeSet::len))
            .sum();
        self.free.len() + ending
    }

    /// `roster` in `session.lua`, ordered as Redis orders the members: by expiry, then
    /// by name.
    pub(crate) fn roster(&self, now: Now) -> Vec<MemberInfo> {
        let weighted = self.weighted();
        let mut members: Vec<(u64, MemberInfo)> = self
            .members
            .iter()
            .filter(|(_, exp)| **exp > now.ms)
            .map(|(r, exp)| {
                let token = self.sessions.get(r);
                let held = token
                    .and_then(|t| self.held.get(t))
                    .map_or(0, BTreeSet::len);
                let load = if weighted {
                    token.and_then(|t| self.loads.get(t)).copied().unwrap_or(0)
                } else {
                    held as u64
                };
                (
                    *exp,
                    MemberInfo {
                        replica: r.clone(),
                        state: self
                            .replicas
                            .states
                            .get(r)
                            .copied()
                            .unwrap_or(ReplicaState::Settling),
                        left: Duration::from_millis(exp - now.ms),
                        held,
                        load,
                        capacity: self.replicas.capacity.get(r).copied().unwrap_or(1),
                    },
                )
            })
            .collect();
        members.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.replica.cmp(&b.1.replica)));
        members.into_iter().map(|(_, m)| m).collect()
    }

    /// `roster_for` in `session.lua`: the roster's version and what of it a tick
    /// sends to a replica that last read version `seen`. Redis counts the roster's
    /// changes and notes the members each changed; the twin hashes the roster itself
    /// (without the time left), so it sends the roster exactly when it changed, and
    /// keeps the last [`ROSTERS_KEPT`] rosters it named to send only what changed since
    /// one of them (the whole roster after an older one).
    pub(crate) fn roster_for(
        &mut self,
        now: Now,
        lifetime: &str,
        seen: &str,
    ) -> (String, RosterUpdate) {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut members = self.roster(now);
        for m in &mut members {
            m.left = Duration::ZERO;
        }
        members.sort_by(|a, b| a.replica.cmp(&b.replica));
        let mut h = DefaultHasher::new();
        for m in &members {
            (&m.replica, m.state, m.held, m.load, m.capacity).hash(&mut h);
        }
        let inc = self.meta.as_ref().map_or("", |m| m.inc.as_str());
        let version = format!("{inc}/{lifetime}/{:x}", h.finish());
        if version == seen {
            return (version, RosterUpdate::Same);
        }
        // Both sorted by replica id: each lookup a binary search.
        let find = |in_: &[MemberInfo], r: &str| {
            in_.binary_search_by(|m| m.replica.as_str().cmp(r))
                .ok()
                .map(|i| in_[i].clone())
        };
        let update = match self.rosters.iter().find(|(v, _)| v == seen) {
            Some((_, old)) => RosterUpdate::Changes {
                changed: members
                    .iter()
                    .filter(|m| find(old, &m.replica).as_ref() != Some(*m))
                    .cloned()
                    .collect(),
                gone: old
                    .iter()
                    .filter(|o| find(&members, &o.replica).is_none())
                    .map(|o| o.replica.clone())
                    .collect(),
            },
            None => RosterUpdate::Full(members.clone()),
        };
        if !self.rosters.iter().any(|(v, _)| *v == version) {
            self.rosters.push_back((version.clone(), members));
            if self.rosters.len() > ROSTERS_KEPT {
                self.rosters.pop_front();
            }
        }
        (version, update)
    }

    /// The set as a tick reports it (`meta` and `weight_info` in `meta.lua`).
    pub(crate) fn set_info(&self) -> Option<SetInfo> {
        self.meta.as_ref().map(|m| SetInfo {
            count: m.count,
            version: m.version,
            digest: m.digest.clone(),
            weighted: m.weighted,
            total_weight: if m.weighted { m.total } else { m.count as u64 },
            max_weight: if m.weighted {
                self.set.weights.values().copied().max().unwrap_or(1).max(1)
            } else {
                1
            },
            weights_version: m.wver,
            life: m.life.clone(),
            set_version: m.sver,
            highest_fence: leasehold_election::Fence(m.fmax),
            origin: m.origin,
            lease: Duration::from_millis(m.lease),
            restore_count: m.rcount,
            incarnation: m.inc.clone(),
        })
    }

    /// An operator's change answered before (`replayed` in `meta.lua`).
    pub(crate) fn replayed(&self, op: Option<&str>, now: Now) -> Option<ops::OpReply> {
        let op = op?;
        self.ops
            .get(op)
            .filter(|(until, _)| *until > now.ms)
            .map(|(_, r)| r.clone())
    }

    /// Keeps an operator's reply a minute, and marks the group amended (`answer` in
    /// `meta.lua`).
    pub(crate) fn answer(&mut self, op: Option<&str>, reply: ops::OpReply, now: Now) {
        if let Some(op) = op {
            self.ops.retain(|_, (until, _)| *until > now.ms);
            self.ops.insert(op.to_owned(), (now.ms + 60_000, reply));
            if let Some(m) = self.meta.as_mut() {
                m.amended = true;
                if m.origin == Origin::Adopt {
                    m.origin = Origin::Seed;
                    m.adopting = None;
                }
            }
        }
    }
}

impl Group {
    /// The twin of the move notice `claim.lua` publishes: the ledger entries after
    /// `before` (this claim's), with the claimer's address.
    pub(crate) fn moved_notice(&self, before: Option<String>) -> Option<Moved> {
        let start = match &before {
            Some(id) => self.log.moves.iter().position(|m| &m.id == id)? + 1,
            None => 0,
        };
        let taken: Vec<&Move> = self.log.moves.iter().skip(start).collect();
        let last = taken.last()?;
        let address = self
            .replicas
            .info
            .get(&last.to)
            .and_then(|i| i.split_once('\t'))
            .map(|(_, a)| a.to_owned());
        Some(Moved {
            incarnation: self
                .meta
                .as_ref()
                .map(|m| m.life.clone())
                .unwrap_or_default(),
            after: before,
            last: last.id.clone(),
            replica: last.to.clone(),
            address,
            partitions: taken
                .iter()
                .map(|m| (m.partition.clone(), m.new_fence))
                .collect(),
        })
    }
}
