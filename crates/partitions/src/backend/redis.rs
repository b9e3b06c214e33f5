//! The group protocol on Redis: one Lua script per operation, every key of the group
//! in `KEYS` (they share the group's hash tag, so this runs unchanged on a cluster).
//!
//! Cost per call, with N members, P partitions and k partitions moved: a tick is
//! O(N log P) (N session counts), a claim or a release of k is O(k log P), ending a
//! session of k partitions is O(k log P) spread over ticks in chunks of
//! [`DRAIN_BUDGET`]. Nothing in a steady tick reads or writes per-partition state.

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::keys::DutyKeys;
use leasehold_election::{BackendWarning, Fence, LeaseStore, LuaScript, RedisStore, StoreError};
use redis::Value;
use tokio::sync::broadcast;

use super::protocol::{
    ClaimReply, ClaimRequest, Conflict, MemberInfo, MemberState, Protocol, SeedNeed, SeedReply,
    SeedRequest, SessionReply, StatusHead, TickReply, TickRequest,
};
use super::{DRAIN_BUDGET, PartitionOwner};
use crate::keys::GroupKeys;

/// Helpers every group script starts with. KEYS, in [`GroupKeys::all`] order:
/// 1 members, 2 sessions, 3 states, 4 meta, 5 partitions, 6 free, 7 owners, 8 fences,
/// 9 held, 10 dead.
macro_rules! prelude {
    () => {
        r#"
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- Refuses to run (before any write) if a key it writes holds another type than
-- expected, so that a foreign value in a group key is a typed error and never half an
-- update. Arguments: key index, type, key index, type, ...
local function expect(...)
  local want = {...}
  for i = 1, #want, 2 do
    local key = KEYS[want[i]]
    local t = redis.call('TYPE', key).ok
    if t ~= 'none' and t ~= want[i + 1] then
      return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. t .. ', not a ' .. want[i + 1])
    end
  end
  return nil
end

-- The range of `held` that belongs to session `tok`: entries `tok \1 partition`.
local function span(tok)
  return '[' .. tok .. '\1', '(' .. tok .. '\2'
end

-- The expiry of session `tok` if it is its replica's current session and unexpired.
local function live(tok, now)
  local r = string.match(tok, '^(.*):[^:]*$')
  if not r or redis.call('HGET', KEYS[2], r) ~= tok then return nil end
  local exp = redis.call('ZSCORE', KEYS[1], r)
  if exp and tonumber(exp) > now then return tonumber(exp) end
  return nil
end

-- Ends every session whose expiry has passed; what they held waits in `dead`.
local function reap(now)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES')
  for i = 1, #gone, 2 do
    local tok = redis.call('HGET', KEYS[2], gone[i])
    redis.call('ZREM', KEYS[1], gone[i])
    redis.call('HDEL', KEYS[2], gone[i])
    redis.call('HDEL', KEYS[3], gone[i])
    if tok then redis.call('ZADD', KEYS[10], gone[i + 1], tok) end
  end
end

-- Moves up to `budget` partitions of ended sessions to `free` (free since the end of
-- their session); returns the ended sessions that still hold partitions.
local function drain(budget)
  local dead = redis.call('ZRANGE', KEYS[10], 0, -1, 'WITHSCORES')
  local left_over = {}
  local moved = 0
  for i = 1, #dead, 2 do
    local tok, ended = dead[i], dead[i + 1]
    local left = budget - moved
    if left <= 0 then
      left_over[#left_over + 1] = tok
    else
      local lo, hi = span(tok)
      local entries = redis.call('ZRANGEBYLEX', KEYS[9], lo, hi, 'LIMIT', 0, left)
      if #entries < left then
        redis.call('ZREM', KEYS[10], tok)
      else
        left_over[#left_over + 1] = tok
      end
      if #entries > 0 then
        local names = {}
        for j, e in ipairs(entries) do names[j] = string.sub(e, #tok + 2) end
        local owners = redis.call('HMGET', KEYS[7], unpack(names))
        local listed = redis.call('ZMSCORE', KEYS[5], unpack(names))
        local gone, back = {}, {}
        for j, n in ipairs(names) do
          if owners[j] == tok then
            gone[#gone + 1] = n
            if listed[j] then
              back[#back + 1] = ended
              back[#back + 1] = n
            end
          end
        end
        redis.call('ZREM', KEYS[9], unpack(entries))
        if #gone > 0 then redis.call('HDEL', KEYS[7], unpack(gone)) end
        if #back > 0 then redis.call('ZADD', KEYS[6], unpack(back)) end
        moved = moved + #entries
      end
    end
  end
  return left_over
end

-- The group's metadata: digest, count, seeded, grant_after (count and seeded as 0 when
-- the list was never stored).
local function meta()
  local m = redis.call('HMGET', KEYS[4], 'digest', 'count', 'seeded', 'grant_after')
  return m[1], tonumber(m[2] or '0'), tonumber(m[3] or '0'), tonumber(m[4] or '0')
end

-- Partitions without a live owner: free, held by ended sessions, or not stored yet.
local function unowned(dead, count, seeded)
  local n = redis.call('ZCARD', KEYS[6])
  for _, tok in ipairs(dead) do
    local lo, hi = span(tok)
    n = n + redis.call('ZLEXCOUNT', KEYS[9], lo, hi)
  end
  return n + count - seeded
end

-- Live members: names, states, ms left, partitions held. `reaped`: ended sessions were
-- just removed, so every member is live.
local function roster(now, reaped)
  local scored
  if reaped then
    scored = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  else
    scored = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
  end
  local names, lefts, helds = {}, {}, {}
  for i = 1, #scored, 2 do
    names[#names + 1] = scored[i]
    lefts[#lefts + 1] = tonumber(scored[i + 1]) - now
  end
  local states = {}
  if #names > 0 then
    local toks = redis.call('HMGET', KEYS[2], unpack(names))
    states = redis.call('HMGET', KEYS[3], unpack(names))
    for k = 1, #names do
      if toks[k] then
        local lo, hi = span(toks[k])
        helds[k] = redis.call('ZLEXCOUNT', KEYS[9], lo, hi)
      else
        helds[k] = 0
      end
    end
  end
  return names, states, lefts, helds
end
"#
    };
}

/// ARGV: replica, token, join (1/0), state, ttl ms, digest, drain budget.
///
/// Reaps ended sessions; starts (join) or extends the session, never one that has
/// ended; checks the partition list on join; drains ended sessions; reads the roster.
/// Reply: {session, seed, names[], states[], ms left[], held[], unowned, grant wait ms,
/// draining}.
static TICK: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local replica, token, join, state = ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4]
local ttl, digest = tonumber(ARGV[5]), ARGV[6]
local bad = expect(1, 'zset', 2, 'hash', 3, 'hash', 4, 'hash', 6, 'zset', 7, 'hash', 9, 'zset', 10, 'zset')
if bad then return bad end
local now = clock()
reap(now)
local stored, count, seeded, after = meta()
local session, seed = 'live', 'no'
local cur = redis.call('HGET', KEYS[2], replica)
if cur == token then
  redis.call('ZADD', KEYS[1], 'GT', now + ttl, replica)
elseif not join then
  session = 'lost'
elseif cur then
  session = 'duplicate'
elseif stored and stored ~= digest and redis.call('ZCARD', KEYS[1]) > 0 then
  session = 'mismatch'
else
  redis.call('HSET', KEYS[2], replica, token)
  redis.call('ZADD', KEYS[1], now + ttl, replica)
end
if session == 'live' then
  redis.call('HSET', KEYS[3], replica, state)
  if not stored then
    seed = '0'
  elseif stored ~= digest then
    seed = 'replace'
  elseif seeded < count then
    seed = tostring(seeded)
  end
end
local dead = drain(tonumber(ARGV[7]))
local names, states, lefts, helds = roster(now, true)
local wait = after - now
if wait < 0 then wait = 0 end
return {session, seed, names, states, lefts, helds, unowned(dead, count, seeded), wait, #dead}
"#
    ))
});

/// ARGV: replica, token, ttl ms, count, fence floor, drain budget.
///
/// Extends the session, then takes up to `count` free partitions, oldest first, each
/// with fence = max(last + 1, floor, server time in µs). Reply {'ok', {name, fence,
/// ...}, unowned}, {'wait', ms} before the group may grant, {'lost'} without a session.
static CLAIM: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local replica, token = ARGV[1], ARGV[2]
local ttl, want, floor = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local bad = expect(1, 'zset', 2, 'hash', 3, 'hash', 4, 'hash', 6, 'zset', 7, 'hash', 8, 'hash', 9, 'zset', 10, 'zset')
if bad then return bad end
local now, now_us = clock()
reap(now)
if redis.call('HGET', KEYS[2], replica) ~= token then return {'lost'} end
local _, count, seeded, after = meta()
if after > now then return {'wait', after - now} end
redis.call('ZADD', KEYS[1], 'GT', now + ttl, replica)
local dead = drain(tonumber(ARGV[6]))
local out = {}
local popped = {}
if want > 0 then popped = redis.call('ZPOPMIN', KEYS[6], want) end
local names = {}
for i = 1, #popped, 2 do names[#names + 1] = popped[i] end
if #names > 0 then
  local owners = redis.call('HMGET', KEYS[7], unpack(names))
  local fences = redis.call('HMGET', KEYS[8], unpack(names))
  local fset, oset, hset = {}, {}, {}
  for j, n in ipairs(names) do
    local o = owners[j]
    -- A free partition is never held by a live session; if one is, it stays with it.
    if not (o and o ~= token and live(o, now)) then
      local f = (tonumber(fences[j] or '0') or 0) + 1
      if f < floor then f = floor end
      if f < now_us then f = now_us end
      f = string.format('%.0f', f)
      fset[#fset + 1] = n
      fset[#fset + 1] = f
      oset[#oset + 1] = n
      oset[#oset + 1] = token
      hset[#hset + 1] = 0
      hset[#hset + 1] = token .. '\1' .. n
      out[#out + 1] = n
      out[#out + 1] = f
    end
  end
  if #out > 0 then
    redis.call('HSET', KEYS[8], unpack(fset))
    redis.call('HSET', KEYS[7], unpack(oset))
    redis.call('ZADD', KEYS[9], unpack(hset))
  end
end
return {'ok', out, unowned(dead, count, seeded)}
"#
    ))
});

/// ARGV: token, channel, notice, names... Gives back those of `names` that `token`
/// holds (free from now), then publishes the notice once. Reply: one 1/0 per name.
static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local token = ARGV[1]
local bad = expect(6, 'zset', 7, 'hash', 9, 'zset')
if bad then return bad end
local now = clock()
local names = {}
for i = 4, #ARGV do names[#names + 1] = ARGV[i] end
local out = {}
if #names == 0 then return out end
local owners = redis.call('HMGET', KEYS[7], unpack(names))
local listed = redis.call('ZMSCORE', KEYS[5], unpack(names))
local gone, entries, back = {}, {}, {}
for j, n in ipairs(names) do
  if owners[j] == token then
    out[j] = 1
    gone[#gone + 1] = n
    entries[#entries + 1] = token .. '\1' .. n
    if listed[j] then
      back[#back + 1] = now
      back[#back + 1] = n
    end
  else
    out[j] = 0
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[7], unpack(gone))
  redis.call('ZREM', KEYS[9], unpack(entries))
  if #back > 0 then redis.call('ZADD', KEYS[6], unpack(back)) end
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return out
"#
    ))
});

/// ARGV: replica, token, channel, notice, drain budget. Ends the session if it is the
/// replica's current one, frees what it still holds, and publishes the notice.
static LEAVE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local bad = expect(1, 'zset', 2, 'hash', 3, 'hash', 6, 'zset', 7, 'hash', 9, 'zset', 10, 'zset')
if bad then return bad end
local now = clock()
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[10], now, ARGV[2])
  drain(tonumber(ARGV[5]))
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 1
"#
    ))
});

/// ARGV: replica, digest, count, offset, replace (1/0), grant delay ms, names...
///
/// Creates the group's metadata if there is none (nothing is granted for the grant
/// delay after that: if Redis lost its data, every old owner's deadline passes first);
/// replaces another list only if no other member is live; stores `names` at `offset`
/// if that is where the list stands. Reply {'ok', seeded}, {'moved', seeded} or
/// {'mismatch', 0}.
static SEED: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local bad = expect(1, 'zset', 2, 'hash', 3, 'hash', 4, 'hash', 5, 'zset', 6, 'zset', 7, 'hash', 10, 'zset')
if bad then return bad end
local now = clock()
local replica, digest = ARGV[1], ARGV[2]
local count, offset = tonumber(ARGV[3]), tonumber(ARGV[4])
local stored = redis.call('HGET', KEYS[4], 'digest')
if not stored then
  redis.call('HSET', KEYS[4], 'digest', digest, 'count', count, 'seeded', 0,
    'grant_after', now + tonumber(ARGV[6]))
elseif stored ~= digest then
  if ARGV[5] ~= '1' then return {'mismatch', 0} end
  reap(now)
  for _, r in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if r ~= replica then return {'mismatch', 0} end
  end
  redis.call('DEL', KEYS[5], KEYS[6])
  redis.call('HSET', KEYS[4], 'digest', digest, 'count', count, 'seeded', 0)
end
local seeded = tonumber(redis.call('HGET', KEYS[4], 'seeded'))
if offset ~= seeded then return {'moved', seeded} end
local names = {}
for i = 7, #ARGV do names[#names + 1] = ARGV[i] end
if #names > 0 then
  local owners = redis.call('HMGET', KEYS[7], unpack(names))
  local pos, free = {}, {}
  for j, n in ipairs(names) do
    pos[#pos + 1] = offset + j - 1
    pos[#pos + 1] = n
    if not owners[j] then
      free[#free + 1] = now
      free[#free + 1] = n
    end
  end
  redis.call('ZADD', KEYS[5], unpack(pos))
  if #free > 0 then redis.call('ZADD', KEYS[6], unpack(free)) end
end
redis.call('HSET', KEYS[4], 'seeded', seeded + #names)
return {'ok', seeded + #names}
"#
    ))
});

/// ARGV: token. Reply: the partitions the session holds.
static HELD: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local tok = ARGV[1]
local lo, hi = span(tok)
local out = {}
for i, e in ipairs(redis.call('ZRANGEBYLEX', KEYS[9], lo, hi)) do
  out[i] = string.sub(e, #tok + 2)
end
return out
"#
    ))
});

/// ARGV: partition. Reply: {owner replica or '', fence, ms left or -1}.
static OWNER: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local now = clock()
local o = redis.call('HGET', KEYS[7], ARGV[1])
local fence = redis.call('HGET', KEYS[8], ARGV[1]) or '0'
if o then
  local exp = live(o, now)
  if exp then return {string.match(o, '^(.*):[^:]*$'), fence, exp - now} end
end
return {'', fence, -1}
"#
    ))
});

/// Reply: false if the group was never created, else {count, names[], states[],
/// ms left[], held[]} of the live members. Read-only.
static STATUS_HEAD: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local now = clock()
local count = redis.call('HGET', KEYS[4], 'count')
if not count then return false end
local names, states, lefts, helds = roster(now, false)
return {tonumber(count), names, states, lefts, helds}
"#
    ))
});

/// ARGV: offset, limit. Reply: {name, owner replica or '', fence, ms left or -1} for
/// the partitions at those positions. Read-only.
static STATUS_PAGE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local now = clock()
local first = tonumber(ARGV[1])
local names = redis.call('ZRANGE', KEYS[5], first, first + tonumber(ARGV[2]) - 1)
local out = {}
if #names == 0 then return out end
local owners = redis.call('HMGET', KEYS[7], unpack(names))
local fences = redis.call('HMGET', KEYS[8], unpack(names))
local seen = {}
for j, n in ipairs(names) do
  local who, left = '', -1
  local o = owners[j]
  if o then
    if seen[o] == nil then seen[o] = live(o, now) or false end
    if seen[o] then
      who = string.match(o, '^(.*):[^:]*$')
      left = seen[o] - now
    end
  end
  out[j] = {n, who, fences[j] or '0', left}
end
return out
"#
    ))
});

/// Every group script by name with the SHA1 digest `EVALSHA` names it by, so a
/// benchmark can tell the scripts apart in `SLOWLOG` (`tick`, `claim`, `release`,
/// `leave`, `seed`, `held` are the coordination traffic; `owner`, `status_head`,
/// `status_page` are an observer's reads).
#[doc(hidden)]
pub fn script_hashes() -> Vec<(&'static str, String)> {
    [
        ("tick", &*TICK),
        ("claim", &*CLAIM),
        ("release", &*RELEASE),
        ("leave", &*LEAVE),
        ("seed", &*SEED),
        ("held", &*HELD),
        ("owner", &*OWNER),
        ("status_head", &*STATUS_HEAD),
        ("status_page", &*STATUS_PAGE),
    ]
    .into_iter()
    .map(|(name, script)| (name, script.hash().to_owned()))
    .collect()
}

fn protocol_error(what: &str, v: &Value) -> StoreError {
    StoreError::Protocol(format!("{what}: unexpected {v:?}"))
}

/// A cursor over one script reply.
struct Reply(std::vec::IntoIter<Value>);

impl Reply {
    fn new(v: Value) -> Result<Self, StoreError> {
        match v {
            Value::Array(items) => Ok(Self(items.into_iter())),
            other => Err(protocol_error("array", &other)),
        }
    }

    fn next(&mut self) -> Result<Value, StoreError> {
        self.0
            .next()
            .ok_or_else(|| StoreError::Protocol("a group script reply is too short".into()))
    }

    fn text(&mut self) -> Result<String, StoreError> {
        text(&self.next()?)
    }

    fn int(&mut self) -> Result<i64, StoreError> {
        int(&self.next()?)
    }

    fn count(&mut self) -> Result<usize, StoreError> {
        Ok(usize::try_from(self.int()?.max(0)).unwrap_or(usize::MAX))
    }

    fn millis(&mut self) -> Result<Duration, StoreError> {
        Ok(Duration::from_millis(self.int()?.max(0).unsigned_abs()))
    }

    fn list(&mut self) -> Result<Vec<Value>, StoreError> {
        match self.next()? {
            Value::Array(items) => Ok(items),
            Value::Nil => Ok(Vec::new()),
            other => Err(protocol_error("array", &other)),
        }
    }
}

fn int(v: &Value) -> Result<i64, StoreError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| protocol_error("integer", v)),
        other => Err(protocol_error("integer", other)),
    }
}

fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Nil => Ok(String::new()),
        other => Err(protocol_error("string", other)),
    }
}

fn fence(v: &Value) -> Result<Fence, StoreError> {
    u64::try_from(int(v)?)
        .map(Fence)
        .map_err(|_| protocol_error("fence", v))
}

fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

/// The roster part of a tick or status reply: names, states, ms left, held.
fn roster(r: &mut Reply) -> Result<Vec<MemberInfo>, StoreError> {
    let names = r.list()?;
    let states = r.list()?;
    let lefts = r.list()?;
    let helds = r.list()?;
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let state = states.get(i).map(text).transpose()?.unwrap_or_default();
            Ok(MemberInfo {
                replica: text(name)?,
                state: MemberState::parse(&state),
                left: Duration::from_millis(
                    lefts
                        .get(i)
                        .map(int)
                        .transpose()?
                        .unwrap_or(0)
                        .max(0)
                        .unsigned_abs(),
                ),
                held: usize::try_from(helds.get(i).map(int).transpose()?.unwrap_or(0).max(0))
                    .unwrap_or(0),
            })
        })
        .collect()
}

fn owner(name: String, who: &Value, f: &Value, left: &Value) -> Result<PartitionOwner, StoreError> {
    let who = text(who)?;
    let left = int(left)?;
    Ok(PartitionOwner {
        partition: name,
        fence: fence(f)?,
        remaining: (!who.is_empty() && left >= 0)
            .then(|| Duration::from_millis(left.unsigned_abs())),
        owner: (!who.is_empty()).then_some(who),
    })
}

impl Protocol for RedisStore {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        let ttl = millis(req.ttl);
        let budget = DRAIN_BUDGET.to_string();
        let args = [
            req.replica.as_str(),
            &req.token,
            if req.join { "1" } else { "0" },
            req.state.as_str(),
            &ttl,
            &req.digest,
            &budget,
        ];
        let mut r = Reply::new(self.eval(&TICK, &keys.all(), &args).await?)?;
        let session = match r.text()?.as_str() {
            "live" => SessionReply::Live,
            "lost" => SessionReply::Lost,
            "duplicate" => SessionReply::Refused(Conflict::DuplicateReplica),
            "mismatch" => SessionReply::Refused(Conflict::PartitionListMismatch),
            other => return Err(StoreError::Protocol(format!("tick session {other:?}"))),
        };
        let seed = match r.text()?.as_str() {
            "no" => SeedNeed::No,
            "replace" => SeedNeed::Replace,
            n => SeedNeed::From(
                n.parse()
                    .map_err(|_| StoreError::Protocol(format!("tick seed {n:?}")))?,
            ),
        };
        let members = roster(&mut r)?;
        Ok(TickReply {
            session,
            seed,
            members,
            unowned: r.count()?,
            grant_wait: r.millis()?,
            draining: r.count()?,
        })
    }

    async fn claim(&self, keys: &GroupKeys, req: &ClaimRequest) -> Result<ClaimReply, StoreError> {
        let (ttl, count, floor) = (
            millis(req.ttl),
            req.count.to_string(),
            req.floor.get().to_string(),
        );
        let budget = DRAIN_BUDGET.to_string();
        let args = [
            req.replica.as_str(),
            &req.token,
            &ttl,
            &count,
            &floor,
            &budget,
        ];
        let mut r = Reply::new(self.eval(&CLAIM, &keys.all(), &args).await?)?;
        match r.text()?.as_str() {
            "ok" => {
                let flat = r.list()?;
                let partitions = flat
                    .chunks(2)
                    .map(|pair| match pair {
                        [name, f] => Ok((text(name)?, fence(f)?)),
                        _ => Err(StoreError::Protocol("odd claim reply".into())),
                    })
                    .collect::<Result<_, _>>()?;
                Ok(ClaimReply::Claimed {
                    partitions,
                    unowned: r.count()?,
                })
            }
            "wait" => Ok(ClaimReply::Wait(r.millis()?)),
            "lost" => Ok(ClaimReply::Lost),
            other => Err(StoreError::Protocol(format!("claim replied {other:?}"))),
        }
    }

    async fn release(
        &self,
        keys: &GroupKeys,
        token: &str,
        names: &[String],
    ) -> Result<Vec<bool>, StoreError> {
        let mut args = vec![token, keys.channel.as_str(), keys.notice.as_str()];
        args.extend(names.iter().map(String::as_str));
        match self.eval(&RELEASE, &keys.all(), &args).await? {
            Value::Array(items) => items.iter().map(|v| int(v).map(|i| i == 1)).collect(),
            Value::Nil => Ok(Vec::new()),
            other => Err(protocol_error("release", &other)),
        }
    }

    async fn leave(&self, keys: &GroupKeys, replica: &str, token: &str) -> Result<(), StoreError> {
        let budget = DRAIN_BUDGET.to_string();
        let args = [replica, token, &keys.channel, &keys.notice, &budget];
        self.eval(&LEAVE, &keys.all(), &args).await.map(drop)
    }

    async fn seed(&self, keys: &GroupKeys, req: &SeedRequest) -> Result<SeedReply, StoreError> {
        let (count, offset, delay) = (
            req.count.to_string(),
            req.offset.to_string(),
            millis(req.grant_delay),
        );
        let mut args = vec![
            req.replica.as_str(),
            &req.digest,
            &count,
            &offset,
            if req.replace { "1" } else { "0" },
            &delay,
        ];
        args.extend(req.names.iter().map(String::as_str));
        let mut r = Reply::new(self.eval(&SEED, &keys.all(), &args).await?)?;
        let what = r.text()?;
        let n = r.count()?;
        match what.as_str() {
            "ok" => Ok(SeedReply::Seeded(n)),
            "moved" => Ok(SeedReply::Moved(n)),
            "mismatch" => Ok(SeedReply::Mismatch),
            other => Err(StoreError::Protocol(format!("seed replied {other:?}"))),
        }
    }

    async fn held(&self, keys: &GroupKeys, token: &str) -> Result<Vec<String>, StoreError> {
        match self.eval(&HELD, &keys.all(), &[token]).await? {
            Value::Array(items) => items.iter().map(text).collect(),
            Value::Nil => Ok(Vec::new()),
            other => Err(protocol_error("held", &other)),
        }
    }

    async fn owner(&self, keys: &GroupKeys, partition: &str) -> Result<PartitionOwner, StoreError> {
        let mut r = Reply::new(self.eval(&OWNER, &keys.all(), &[partition]).await?)?;
        let (who, f, left) = (r.next()?, r.next()?, r.next()?);
        owner(partition.to_owned(), &who, &f, &left)
    }

    async fn status_head(&self, keys: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
        let reply = self.eval(&STATUS_HEAD, &keys.all(), &[]).await?;
        if reply == Value::Nil {
            return Ok(None);
        }
        let mut r = Reply::new(reply)?;
        let count = r.count()?;
        Ok(Some(StatusHead {
            count,
            members: roster(&mut r)?,
        }))
    }

    async fn status_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PartitionOwner>, StoreError> {
        let (offset, limit) = (offset.to_string(), limit.max(1).to_string());
        let rows = match self
            .eval(&STATUS_PAGE, &keys.all(), &[&offset, &limit])
            .await?
        {
            Value::Array(rows) => rows,
            Value::Nil => Vec::new(),
            other => return Err(protocol_error("status page", &other)),
        };
        rows.into_iter()
            .map(|row| {
                let mut r = Reply::new(row)?;
                let name = r.text()?;
                let (who, f, left) = (r.next()?, r.next()?, r.next()?);
                owner(name, &who, &f, &left)
            })
            .collect()
    }

    fn notices(&self, keys: &GroupKeys) -> broadcast::Receiver<String> {
        // The release channel of the prefix; the lease and fence names are unused.
        self.release_events(&DutyKeys {
            lease: keys.notice.clone(),
            fence: keys.notice.clone(),
            boot: None,
            channel: keys.channel.clone(),
        })
    }

    async fn warnings(&self) -> Result<Vec<BackendWarning>, StoreError> {
        self.self_check().await
    }
}
