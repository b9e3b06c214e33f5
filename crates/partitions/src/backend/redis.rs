//! The group protocol on Redis: one Lua script per operation, every key of the group
//! in `KEYS` (they share the group's hash tag, so this runs unchanged on a cluster).
//!
//! Cost per call, with N members, P partitions and k partitions moved: a tick is
//! O(N log P) (N session counts), a claim or a release of k is O(k log P), ending a
//! session of k partitions is O(k log P) spread over ticks in chunks of
//! [`DRAIN_BUDGET`], adding or removing k partitions is O(k log P). Nothing in a steady
//! tick reads or writes per-partition state.

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::keys::DutyKeys;
use leasehold_election::{BackendWarning, Fence, LeaseStore, RedisStore, StoreError};
use redis::Value;
use tokio::sync::broadcast;

use super::protocol::{
    AddReply, Change, ClaimReply, ClaimRequest, Conflict, MemberInfo, MemberState, Protocol,
    RemoveReply, SessionReply, SetInfo, StatusHead, TickReply, TickRequest, VersionStep,
    WeightReply,
};
use super::{DRAIN_BUDGET, PartitionOwner};
use crate::keys::GroupKeys;

/// Helpers every group script starts with. KEYS, in [`GroupKeys::all`] order:
/// 1 members, 2 sessions, 3 states, 4 meta, 5 partitions, 6 free, 7 owners, 8 fences,
/// 9 held, 10 dead, 11 revoked, 12 drains, 13 since, 14 info, 15 weights, 16 loads,
/// 17 capacity.
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

-- Every key of the group with its type, for scripts that may write any of them.
local function expect_all()
  return expect(1, 'zset', 2, 'hash', 3, 'hash', 4, 'hash', 5, 'zset', 6, 'zset', 7, 'hash',
    8, 'hash', 9, 'zset', 10, 'zset', 11, 'hash', 12, 'hash', 13, 'hash', 14, 'hash',
    15, 'zset', 16, 'hash', 17, 'hash')
end

-- Whether the group balances by weight (a weight was set once): then `loads` holds
-- every session's weights, summed.
local function weighted()
  return redis.call('HGET', KEYS[4], 'weighted') == '1'
end

-- The weights of `names` (1 unless set).
local function weights_of(names)
  local w = {}
  if #names == 0 then return w end
  local s = redis.call('ZMSCORE', KEYS[15], unpack(names))
  for j = 1, #names do w[j] = tonumber(s[j] or '1') end
  return w
end

local function sum(list)
  local n = 0
  for _, x in ipairs(list) do n = n + x end
  return n
end

-- The range of `held` that belongs to session `tok`: entries `tok \1 partition`.
local function span(tok)
  return '[' .. tok .. '\1', '(' .. tok .. '\2'
end

local function replica_of(tok)
  return string.match(tok, '^(.*):[^:]*$')
end

-- The expiry of session `tok` if it is its replica's current session and unexpired.
local function live(tok, now)
  local r = replica_of(tok)
  if not r or redis.call('HGET', KEYS[2], r) ~= tok then return nil end
  local exp = redis.call('ZSCORE', KEYS[1], r)
  if exp and tonumber(exp) > now then return tonumber(exp) end
  return nil
end

-- Ends every session whose expiry has passed; what they held waits in `dead`.
local function reap(now)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES')
  local lost = 0
  for i = 1, #gone, 2 do
    local r = gone[i]
    local tok = redis.call('HGET', KEYS[2], r)
    redis.call('ZREM', KEYS[1], r)
    redis.call('HDEL', KEYS[2], r)
    redis.call('HDEL', KEYS[3], r)
    redis.call('HDEL', KEYS[14], r)
    redis.call('HDEL', KEYS[17], r)
    if tok then
      local lo, hi = span(tok)
      lost = lost + redis.call('ZLEXCOUNT', KEYS[9], lo, hi)
      redis.call('ZADD', KEYS[10], gone[i + 1], tok)
      if redis.call('HGET', KEYS[12], r) == tok then redis.call('HDEL', KEYS[12], r) end
    end
  end
  return lost
end

-- Forgets what a partition's owner had: its revocation, its claim time.
local function forget(names)
  if #names > 0 then
    redis.call('HDEL', KEYS[11], unpack(names))
    redis.call('HDEL', KEYS[13], unpack(names))
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
        redis.call('HDEL', KEYS[16], tok)
      else
        left_over[#left_over + 1] = tok
      end
      if #entries > 0 then
        local names = {}
        for j, e in ipairs(entries) do names[j] = string.sub(e, #tok + 2) end
        local owners = redis.call('HMGET', KEYS[7], unpack(names))
        local listed = redis.call('ZMSCORE', KEYS[5], unpack(names))
        local gone, back, unlisted = {}, {}, {}
        for j, n in ipairs(names) do
          if owners[j] == tok then
            gone[#gone + 1] = n
            if listed[j] then
              back[#back + 1] = ended
              back[#back + 1] = n
            else
              unlisted[#unlisted + 1] = n
            end
          end
        end
        redis.call('ZREM', KEYS[9], unpack(entries))
        if #unlisted > 0 then redis.call('ZREM', KEYS[15], unpack(unlisted)) end
        if #gone > 0 then redis.call('HDEL', KEYS[7], unpack(gone)) end
        forget(gone)
        if #back > 0 then redis.call('ZADD', KEYS[6], unpack(back)) end
        moved = moved + #entries
      end
    end
  end
  return left_over
end

-- The set's metadata: whether the group exists, count, version, digest, grant_after.
local function meta()
  local m = redis.call('HMGET', KEYS[4], 'count', 'version', 'digest', 'grant_after')
  return m[1] ~= false, tonumber(m[1] or '0'), tonumber(m[2] or '0'), m[3] or '',
    tonumber(m[4] or '0')
end

-- The weights of the set: weighted (1/0), total, largest, version of the last change.
local function weight_info(count)
  local m = redis.call('HMGET', KEYS[4], 'weighted', 'total', 'wver')
  if m[1] ~= '1' then return 0, count, 1, tonumber(m[3] or '0') end
  local top = redis.call('ZREVRANGE', KEYS[15], 0, 0, 'WITHSCORES')
  local wmax = 1
  if #top == 2 and tonumber(top[2]) > 1 then wmax = tonumber(top[2]) end
  return 1, tonumber(m[2] or '0'), wmax, tonumber(m[3] or '0')
end

-- Creates the group's metadata if there is none: no grant for `delay` ms from now.
local function create(now, delay)
  if redis.call('HEXISTS', KEYS[4], 'count') == 0 then
    redis.call('HSET', KEYS[4], 'count', 0, 'next', 0, 'version', 0, 'grant_after', now + delay)
  end
end

-- Whether a change in `mode` (`strict`, `ensure` or a list version) comes too late:
-- the group is at another list version than the one being applied.
local function stale(mode)
  local v = tonumber(mode)
  if not v then return false end
  return tonumber(redis.call('HGET', KEYS[4], 'version') or '0') ~= v
end

-- Partitions without a live owner: free, or held by ended sessions.
local function unowned(dead)
  local n = redis.call('ZCARD', KEYS[6])
  for _, tok in ipairs(dead) do
    local lo, hi = span(tok)
    n = n + redis.call('ZLEXCOUNT', KEYS[9], lo, hi)
  end
  return n
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
  local states, loads, caps = {}, {}, {}
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
    local c = redis.call('HMGET', KEYS[17], unpack(names))
    local w, l = weighted(), {}
    if w then
      local tk = {}
      for k = 1, #names do tk[k] = toks[k] or '' end
      l = redis.call('HMGET', KEYS[16], unpack(tk))
    end
    for k = 1, #names do
      caps[k] = tonumber(c[k] or '1')
      if w then loads[k] = tonumber(l[k] or '0') else loads[k] = helds[k] end
    end
  end
  return names, states, lefts, helds, loads, caps
end

-- `names` without repeats, in order.
local function distinct(names)
  local seen, out = {}, {}
  for _, n in ipairs(names) do
    if not seen[n] then
      seen[n] = true
      out[#out + 1] = n
    end
  end
  return out
end
"#
    };
}

/// ARGV: replica, token, join (1/0), state, ttl ms, drain budget, channel, notice,
/// instance, capacity.
///
/// Reaps ended sessions; starts (join) or extends the session, never one that has
/// ended, and resumes an `away` one on join; publishes the notice when the member's
/// state changes (so the others look again at once); reads this session's drain flag
/// and revocations; drains ended sessions; reads the roster. Reply: {session, resumed
/// token or '', exists, count, version, digest, names[], states[], ms left[], held[],
/// unowned, grant wait ms, draining, drained, {revoked name, reason, ...}}.
static TICK: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local replica, token, join, state = ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4]
local ttl = tonumber(ARGV[5])
local bad = expect_all()
if bad then return bad end
local now = clock()
local expired = reap(now)
local exists, count, version, digest, after = meta()
local session, resumed = 'live', ''
local cur = redis.call('HGET', KEYS[2], replica)
if cur == token then
  redis.call('ZADD', KEYS[1], 'GT', now + ttl, replica)
elseif not join then
  session = 'lost'
elseif cur then
  if redis.call('HGET', KEYS[3], replica) == 'away' then
    -- Back from a sticky restart: this process takes the session over.
    resumed = cur
    redis.call('ZADD', KEYS[1], 'GT', now + ttl, replica)
  else
    session = 'duplicate'
  end
else
  redis.call('HSET', KEYS[2], replica, token)
  redis.call('ZADD', KEYS[1], now + ttl, replica)
end
local drained, revoked = 0, {}
if session == 'live' then
  local tok = token
  if resumed ~= '' then tok = resumed end
  if redis.call('HGET', KEYS[3], replica) ~= state then
    redis.call('HSET', KEYS[3], replica, state)
    redis.call('PUBLISH', ARGV[7], ARGV[8])
  end
  if join then
    redis.call('HSET', KEYS[14], replica, ARGV[9])
    redis.call('HSET', KEYS[17], replica, ARGV[10])
  end
  if redis.call('HGET', KEYS[12], replica) == tok then drained = 1 end
  if redis.call('HLEN', KEYS[11]) > 0 then
    local all = redis.call('HGETALL', KEYS[11])
    local names = {}
    for i = 1, #all, 2 do names[#names + 1] = all[i] end
    local owners = redis.call('HMGET', KEYS[7], unpack(names))
    for j, n in ipairs(names) do
      if owners[j] == tok then
        revoked[#revoked + 1] = n
        revoked[#revoked + 1] = all[2 * j]
      end
    end
  end
end
local dead = drain(tonumber(ARGV[6]))
local names, states, lefts, helds, loads, caps = roster(now, true)
local wait = after - now
if wait < 0 then wait = 0 end
local w, total, wmax, wver = weight_info(count)
return {session, resumed, exists and 1 or 0, count, version, digest, names, states, lefts,
  helds, unowned(dead), wait, #dead, drained, revoked, expired, loads, caps, w, total, wmax,
  wver}
"#
    ))
});

/// ARGV: replica, token, ttl ms, count, fence floor, drain budget, room (-1: none),
/// fallback (1/0), names to regrant...
///
/// Extends the session, then takes up to `count` free partitions, oldest first (with a
/// room: those among the first `count` whose weights fit into it, or, with the
/// fallback, the first if none does), or, given names, new terms for those of them the session holds; each with
/// fence = max(last + 1, floor, server time in µs). Reply {'ok', {name, fence, weight,
/// ...}, unowned}, {'wait', ms} before the group may grant, {'lost'} without a session.
static CLAIM: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local replica, token = ARGV[1], ARGV[2]
local ttl, want, floor = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local bad = expect_all()
if bad then return bad end
local now, now_us = clock()
-- Sessions are reaped by ticks; a claim only refuses to extend its own ended one.
local until_ms = tonumber(redis.call('ZSCORE', KEYS[1], replica) or '0')
if redis.call('HGET', KEYS[2], replica) ~= token or until_ms <= now then return {'lost'} end
local _, count, _, _, after = meta()
if after > now then return {'wait', after - now} end
redis.call('ZADD', KEYS[1], 'GT', now + ttl, replica)
local dead = drain(tonumber(ARGV[6]))
local room = tonumber(ARGV[7])
local names, regrant = {}, #ARGV > 8
if regrant then
  for i = 9, #ARGV do names[#names + 1] = ARGV[i] end
elseif want > 0 and room < 0 then
  local popped = redis.call('ZPOPMIN', KEYS[6], want)
  for i = 1, #popped, 2 do names[#names + 1] = popped[i] end
elseif want > 0 then
  local cand = redis.call('ZRANGE', KEYS[6], 0, want - 1)
  local ws = weights_of(cand)
  local acc = 0
  for j, n in ipairs(cand) do
    if acc + ws[j] <= room then
      names[#names + 1] = n
      acc = acc + ws[j]
    end
  end
  if #names == 0 and #cand > 0 and ARGV[8] == '1' then names[1] = cand[1] end
  if #names > 0 then redis.call('ZREM', KEYS[6], unpack(names)) end
end
local out = {}
if #names > 0 then
  local owners = redis.call('HMGET', KEYS[7], unpack(names))
  local fences = redis.call('HMGET', KEYS[8], unpack(names))
  local ws = weights_of(names)
  local fset, oset, hset, sset = {}, {}, {}, {}
  local gained = 0
  for j, n in ipairs(names) do
    local o = owners[j]
    local take
    if regrant then
      take = o == token
    else
      -- A free partition is never held by a live session; if one is, it stays with it.
      take = not (o and o ~= token and live(o, now))
    end
    if take then
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
      sset[#sset + 1] = n
      sset[#sset + 1] = now
      out[#out + 1] = n
      out[#out + 1] = f
      out[#out + 1] = ws[j]
      if not regrant then gained = gained + ws[j] end
    end
  end
  if #out > 0 then
    redis.call('HSET', KEYS[8], unpack(fset))
    redis.call('HSET', KEYS[7], unpack(oset))
    redis.call('ZADD', KEYS[9], unpack(hset))
    redis.call('HSET', KEYS[13], unpack(sset))
    if gained > 0 and weighted() then redis.call('HINCRBY', KEYS[16], token, gained) end
  end
end
return {'ok', out, unowned(dead)}
"#
    ))
});

/// ARGV: token, channel, notice, names... Gives back those of `names` that `token`
/// holds (free from now, if still in the set), then publishes the notice once. Reply:
/// one 1/0 per name.
static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local token = ARGV[1]
local bad = expect(6, 'zset', 7, 'hash', 9, 'zset', 11, 'hash', 13, 'hash', 15, 'zset',
  16, 'hash')
if bad then return bad end
local now = clock()
local names = {}
for i = 4, #ARGV do names[#names + 1] = ARGV[i] end
local out = {}
if #names == 0 then return out end
local owners = redis.call('HMGET', KEYS[7], unpack(names))
local listed = redis.call('ZMSCORE', KEYS[5], unpack(names))
local gone, entries, back, unlisted = {}, {}, {}, {}
for j, n in ipairs(names) do
  if owners[j] == token then
    out[j] = 1
    gone[#gone + 1] = n
    entries[#entries + 1] = token .. '\1' .. n
    if listed[j] then
      back[#back + 1] = now
      back[#back + 1] = n
    else
      unlisted[#unlisted + 1] = n
    end
  else
    out[j] = 0
  end
end
if #gone > 0 then
  if weighted() then
    redis.call('HINCRBY', KEYS[16], token, -sum(weights_of(gone)))
  end
  redis.call('HDEL', KEYS[7], unpack(gone))
  redis.call('ZREM', KEYS[9], unpack(entries))
  forget(gone)
  if #back > 0 then redis.call('ZADD', KEYS[6], unpack(back)) end
  if #unlisted > 0 then redis.call('ZREM', KEYS[15], unpack(unlisted)) end
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
local bad = expect_all()
if bad then return bad end
local now = clock()
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[14], ARGV[1])
  redis.call('HDEL', KEYS[17], ARGV[1])
  if redis.call('HGET', KEYS[12], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[12], ARGV[1]) end
  redis.call('ZADD', KEYS[10], now, ARGV[2])
  drain(tonumber(ARGV[5]))
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 1
"#
    ))
});

/// ARGV: mode (`strict`, `ensure` or a list version), grant delay ms, channel, notice,
/// names...
///
/// Adds the names that are not in the set yet (free at once, unless a session still
/// holds one it was told to give up: it keeps it), creating the group if it does not
/// exist (no grant for the delay after that: if Redis lost its data, every old owner's
/// deadline passes first). Strict: nothing if one is already there. Versioned: nothing
/// unless the group is at that list version. Reply {'ok', added}, {'exists', name} or
/// {'stale'}.
static ADD: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local bad = expect(4, 'hash', 5, 'zset', 6, 'zset', 7, 'hash', 11, 'hash', 15, 'zset')
if bad then return bad end
if stale(ARGV[1]) then return {'stale'} end
local now = clock()
local names = {}
for i = 5, #ARGV do names[#names + 1] = ARGV[i] end
names = distinct(names)
create(now, tonumber(ARGV[2]))
if #names == 0 then return {'ok', 0} end
local present = redis.call('ZMSCORE', KEYS[5], unpack(names))
if ARGV[1] == 'strict' then
  for j, n in ipairs(names) do
    if present[j] then return {'exists', n} end
  end
end
local owners = redis.call('HMGET', KEYS[7], unpack(names))
local nxt = tonumber(redis.call('HGET', KEYS[4], 'next') or '0')
local pos, free, added = {}, {}, {}
for j, n in ipairs(names) do
  if not present[j] then
    pos[#pos + 1] = nxt
    pos[#pos + 1] = n
    nxt = nxt + 1
    added[#added + 1] = n
    if not owners[j] then
      free[#free + 1] = now
      free[#free + 1] = n
    end
  end
end
if #added > 0 then
  redis.call('ZADD', KEYS[5], unpack(pos))
  if #free > 0 then redis.call('ZADD', KEYS[6], unpack(free)) end
  redis.call('HDEL', KEYS[11], unpack(added))
  redis.call('HINCRBY', KEYS[4], 'count', #added)
  redis.call('HSET', KEYS[4], 'next', nxt)
  if weighted() then
    -- 1 each, unless one removed while held is back with its weight.
    redis.call('HINCRBY', KEYS[4], 'total', sum(weights_of(added)))
  end
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return {'ok', #added}
"#
    ))
});

/// ARGV: mode (`strict`, `ensure` or a list version), channel, notice, names...
///
/// Removes the names that are in the set; a held one stays with its owner, who is told
/// to give it up (`revoked`) and releases it. Strict: nothing if one is unknown, or if
/// the set would be empty. Versioned: nothing unless the group is at that list
/// version. Reply {'ok', removed}, {'unknown', name}, {'last'} or {'stale'}.
static REMOVE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local bad = expect(4, 'hash', 5, 'zset', 6, 'zset', 11, 'hash', 15, 'zset')
if bad then return bad end
if stale(ARGV[1]) then return {'stale'} end
local names = {}
for i = 4, #ARGV do names[#names + 1] = ARGV[i] end
names = distinct(names)
if #names == 0 then return {'ok', 0} end
local present = redis.call('ZMSCORE', KEYS[5], unpack(names))
local strict = ARGV[1] == 'strict'
local gone = {}
for j, n in ipairs(names) do
  if present[j] then
    gone[#gone + 1] = n
  elseif strict then
    return {'unknown', n}
  end
end
if strict and #gone >= redis.call('ZCARD', KEYS[5]) then return {'last'} end
if #gone == 0 then return {'ok', 0} end
redis.call('ZREM', KEYS[5], unpack(gone))
redis.call('ZREM', KEYS[6], unpack(gone))
local owners = redis.call('HMGET', KEYS[7], unpack(gone))
local revoke, unheld = {}, {}
for j, n in ipairs(gone) do
  if owners[j] then
    revoke[#revoke + 1] = n
    revoke[#revoke + 1] = 'removed'
  else
    unheld[#unheld + 1] = n
  end
end
if #revoke > 0 then redis.call('HSET', KEYS[11], unpack(revoke)) end
if weighted() then
  -- A held one keeps its weight (in its owner's load) until it is given back.
  redis.call('HINCRBY', KEYS[4], 'total', -sum(weights_of(gone)))
end
if #unheld > 0 then redis.call('ZREM', KEYS[15], unpack(unheld)) end
redis.call('HINCRBY', KEYS[4], 'count', -#gone)
redis.call('PUBLISH', ARGV[2], ARGV[3])
return {'ok', #gone}
"#
    ))
});

/// ARGV: offset, limit. Reply: partition names at those positions. Read-only.
static LIST: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
local first = tonumber(ARGV[1])
return redis.call('ZRANGE', KEYS[5], first, first + tonumber(ARGV[2]) - 1)
"#,
    )
});

/// ARGV: version, `begin` or `done`, digest. Begin: takes the version if the group's
/// is older (its digest empty until done), or continues one still being applied. Done:
/// records the digest if the group is still at that version. Reply 1/0.
static VERSION: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local bad = expect(4, 'hash')
if bad then return bad end
if redis.call('HEXISTS', KEYS[4], 'count') == 0 then return 0 end
local m = redis.call('HMGET', KEYS[4], 'version', 'digest')
local cur, v = tonumber(m[1] or '0'), tonumber(ARGV[1])
if ARGV[2] == 'begin' then
  if cur < v then
    redis.call('HSET', KEYS[4], 'version', ARGV[1], 'digest', '')
    return 1
  end
  if cur == v and (m[2] or '') == '' then return 1 end
  return 0
end
if cur == v then
  redis.call('HSET', KEYS[4], 'digest', ARGV[3])
  return 1
end
return 0
"#
    ))
});

/// ARGV: replica, on (1/0), channel, notice. Drains (or undrains) the replica's current
/// session and publishes the notice. Reply 1, or 0 if it has no live session.
static DRAIN: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local bad = expect(12, 'hash')
if bad then return bad end
local now = clock()
local tok = redis.call('HGET', KEYS[2], ARGV[1])
if not tok or not live(tok, now) then return 0 end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[12], ARGV[1], tok)
else
  redis.call('HDEL', KEYS[12], ARGV[1])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"#
    ))
});

/// ARGV: token. Reply: {name, weight, ...} of the partitions the session holds.
static HELD: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local tok = ARGV[1]
local lo, hi = span(tok)
local names = {}
for i, e in ipairs(redis.call('ZRANGEBYLEX', KEYS[9], lo, hi)) do
  names[i] = string.sub(e, #tok + 2)
end
local ws = weights_of(names)
local out = {}
for i, n in ipairs(names) do
  out[#out + 1] = n
  out[#out + 1] = ws[i]
end
return out
"#
    ))
});

/// ARGV: partition. Reply: false if it is not in the set, else {owner replica or '',
/// fence, ms left or -1, ms held or -1, weight}. Read-only.
static OWNER: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local now = clock()
if not redis.call('ZSCORE', KEYS[5], ARGV[1]) then return false end
local o = redis.call('HGET', KEYS[7], ARGV[1])
local fence = redis.call('HGET', KEYS[8], ARGV[1]) or '0'
local weight = weights_of({ARGV[1]})[1]
if o then
  local exp = live(o, now)
  if exp then
    local since = tonumber(redis.call('HGET', KEYS[13], ARGV[1]) or '-1')
    local held = -1
    if since >= 0 then held = now - since end
    return {replica_of(o), fence, exp - now, held, weight}
  end
end
return {'', fence, -1, -1, weight}
"#
    ))
});

/// ARGV: partition, weight, channel, notice. Sets the partition's weight; the first
/// weight set makes the group weighted (every session's load counted from what it
/// holds). The owner's load follows at once. Reply {'ok', old weight} or {'unknown'}.
static WEIGHT: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local bad = expect(2, 'hash', 4, 'hash', 5, 'zset', 7, 'hash', 9, 'zset', 15, 'zset',
  16, 'hash')
if bad then return bad end
local n, w = ARGV[1], tonumber(ARGV[2])
if not redis.call('ZSCORE', KEYS[5], n) then return {'unknown'} end
if not weighted() then
  redis.call('HSET', KEYS[4], 'weighted', 1, 'total', redis.call('ZCARD', KEYS[5]))
  for _, tok in ipairs(redis.call('HVALS', KEYS[2])) do
    local lo, hi = span(tok)
    redis.call('HSET', KEYS[16], tok, redis.call('ZLEXCOUNT', KEYS[9], lo, hi))
  end
end
local old = weights_of({n})[1]
if w == 1 then
  redis.call('ZREM', KEYS[15], n)
else
  redis.call('ZADD', KEYS[15], w, n)
end
redis.call('HINCRBY', KEYS[4], 'total', w - old)
local o = redis.call('HGET', KEYS[7], n)
if o and redis.call('HEXISTS', KEYS[16], o) == 1 then
  redis.call('HINCRBY', KEYS[16], o, w - old)
end
redis.call('HINCRBY', KEYS[4], 'wver', 1)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {'ok', old}
"#
    ))
});

/// Reply: false if the group was never created, else {count, version, digest, names[],
/// states[], ms left[], held[], instances[], drained[], loads[], capacities[], weighted,
/// total weight, largest weight, weights version} of the live members. Read-only.
static STATUS_HEAD: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        prelude!(),
        r#"
local now = clock()
local exists, count, version, digest = meta()
if not exists then return false end
local names, states, lefts, helds, loads, caps = roster(now, false)
local instances, drained = {}, {}
if #names > 0 then
  instances = redis.call('HMGET', KEYS[14], unpack(names))
  local toks = redis.call('HMGET', KEYS[2], unpack(names))
  local drains = redis.call('HMGET', KEYS[12], unpack(names))
  for k, n in ipairs(names) do
    if drains[k] and drains[k] == toks[k] then drained[#drained + 1] = n end
  end
end
local w, total, wmax, wver = weight_info(count)
return {count, version, digest, names, states, lefts, helds, instances, drained, loads, caps,
  w, total, wmax, wver}
"#
    ))
});

/// ARGV: offset, limit. Reply: {name, owner replica or '', fence, ms left or -1, ms held
/// or -1, weight} for the partitions at those positions. Read-only.
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
local sinces = redis.call('HMGET', KEYS[13], unpack(names))
local ws = weights_of(names)
local seen = {}
for j, n in ipairs(names) do
  local who, left, held = '', -1, -1
  local o = owners[j]
  if o then
    if seen[o] == nil then seen[o] = live(o, now) or false end
    if seen[o] then
      who = replica_of(o)
      left = seen[o] - now
      if sinces[j] then held = now - tonumber(sinces[j]) end
    end
  end
  out[j] = {n, who, fences[j] or '0', left, held, ws[j]}
end
return out
"#
    ))
});

/// Every group script by name with the SHA1 digest `EVALSHA` names it by, so a
/// benchmark can tell the scripts apart in `SLOWLOG` (`tick`, `claim`, `release`,
/// `leave`, `add`, `remove`, `version`, `held` are the coordination traffic; `drain`,
/// `owner`, `list`, `status_head`, `status_page` are an operator's).
#[doc(hidden)]
pub fn script_hashes() -> Vec<(&'static str, String)> {
    [
        ("tick", &*TICK),
        ("claim", &*CLAIM),
        ("release", &*RELEASE),
        ("leave", &*LEAVE),
        ("add", &*ADD),
        ("remove", &*REMOVE),
        ("version", &*VERSION),
        ("held", &*HELD),
        ("drain", &*DRAIN),
        ("weight", &*WEIGHT),
        ("owner", &*OWNER),
        ("list", &*LIST),
        ("status_head", &*STATUS_HEAD),
        ("status_page", &*STATUS_PAGE),
    ]
    .into_iter()
    .map(|(name, script)| (name, script.hash().to_owned()))
    .collect()
}

fn mode_arg(mode: Change) -> String {
    match mode {
        Change::Strict => "strict".to_owned(),
        Change::Ensure => "ensure".to_owned(),
        Change::Versioned(v) => v.to_string(),
    }
}

fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

fn ms(i: i64) -> Duration {
    Duration::from_millis(i.max(0).unsigned_abs())
}

fn count(i: i64) -> usize {
    usize::try_from(i.max(0)).unwrap_or(usize::MAX)
}

/// The next item as a list of strings (nil items as empty strings).
fn strings(p: &mut Parse) -> Result<Vec<String>, StoreError> {
    let mut list = p.next_array()?;
    let mut out = Vec::with_capacity(list.remaining());
    while list.remaining() > 0 {
        out.push(list.next_opt_string()?.unwrap_or_default());
    }
    Ok(out)
}

/// The next item as a list of integers.
fn ints(p: &mut Parse) -> Result<Vec<i64>, StoreError> {
    let mut list = p.next_array()?;
    let mut out = Vec::with_capacity(list.remaining());
    while list.remaining() > 0 {
        out.push(list.next_int()?);
    }
    Ok(out)
}

/// The roster part of a tick or status reply: names, states, ms left, held (loads and
/// capacities come later in the reply: [`weigh`]).
fn roster(p: &mut Parse) -> Result<Vec<MemberInfo>, StoreError> {
    let names = strings(p)?;
    let states = strings(p)?;
    let lefts = ints(p)?;
    let helds = ints(p)?;
    Ok(names
        .into_iter()
        .enumerate()
        .map(|(i, replica)| {
            let held = count(helds.get(i).copied().unwrap_or(0));
            MemberInfo {
                replica,
                state: MemberState::parse(states.get(i).map_or("", String::as_str)),
                left: ms(lefts.get(i).copied().unwrap_or(0)),
                held,
                load: held as u64,
                capacity: 1,
            }
        })
        .collect())
}

/// The weights part of a tick or status reply: loads[], capacities[], weighted, total,
/// largest, version; into the roster and the set read before it.
fn weigh(p: &mut Parse, members: &mut [MemberInfo], set: &mut SetInfo) -> Result<(), StoreError> {
    let loads = ints(p)?;
    let caps = ints(p)?;
    for (i, m) in members.iter_mut().enumerate() {
        m.load = loads
            .get(i)
            .map_or(m.held as u64, |l| l.max(&0).unsigned_abs());
        m.capacity = caps
            .get(i)
            .map_or(1, |c| u32::try_from((*c).max(1)).unwrap_or(u32::MAX));
    }
    set.weighted = p.next_int()? == 1;
    set.total_weight = p.next_int()?.max(0).unsigned_abs();
    set.max_weight = p.next_int()?.max(1).unsigned_abs();
    set.weights_version = p.next_u64()?;
    Ok(())
}

/// `{name, owner or '', fence, ms left or -1, ms held or -1, weight}` (the name given for the
/// owner script, which does not repeat it).
fn owner(name: Option<String>, p: &mut Parse) -> Result<PartitionOwner, StoreError> {
    let partition = match name {
        Some(n) => n,
        None => p.next_string()?,
    };
    let who = p.next_opt_string()?.unwrap_or_default();
    let fence = Fence(p.next_u64()?);
    let left = p.next_int()?;
    let held = p.next_int()?;
    let weight = p.next_int()?.max(1).unsigned_abs();
    let owned = !who.is_empty();
    Ok(PartitionOwner {
        partition,
        fence,
        remaining: (owned && left >= 0).then(|| ms(left)),
        held_for: (owned && held >= 0).then(|| ms(held)),
        owner: owned.then_some(who),
        weight,
    })
}

fn pairs(p: &mut Parse) -> Result<Vec<(String, String)>, StoreError> {
    let flat = strings(p)?;
    Ok(flat
        .chunks(2)
        .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
        .collect())
}

impl Protocol for RedisStore {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        let ttl = millis(req.ttl);
        let budget = DRAIN_BUDGET.to_string();
        let capacity = req.capacity.max(1).to_string();
        let args = [
            req.replica.as_str(),
            &req.token,
            if req.join { "1" } else { "0" },
            req.state.as_str(),
            &ttl,
            &budget,
            &keys.channel,
            &keys.notice,
            &req.instance,
            &capacity,
        ];
        let mut p = Parse::new("group tick", self.eval(&TICK, &keys.all(), &args).await?);
        let session = match p.next_string()?.as_str() {
            "live" => SessionReply::Live,
            "lost" => SessionReply::Lost,
            "duplicate" => SessionReply::Refused(Conflict::DuplicateReplica),
            other => {
                return Err(StoreError::Protocol(format!(
                    "group tick session {other:?}"
                )));
            }
        };
        let resumed = p.next_opt_string()?.filter(|t| !t.is_empty());
        let exists = p.next_int()? == 1;
        let count_ = count(p.next_int()?);
        let version = p.next_u64()?;
        let digest = p.next_opt_string()?.unwrap_or_default();
        let mut set = SetInfo::plain(count_, version, &digest);
        let mut members = roster(&mut p)?;
        let unowned = count(p.next_int()?);
        let grant_wait = ms(p.next_int()?);
        let draining = count(p.next_int()?);
        let drained = p.next_int()? == 1;
        let revoked = pairs(&mut p)?;
        let expired = count(p.next_int()?);
        weigh(&mut p, &mut members, &mut set)?;
        p.finish()?;
        Ok(TickReply {
            session,
            resumed,
            set: exists.then_some(set),
            members,
            unowned,
            grant_wait,
            draining,
            drained,
            revoked,
            expired,
        })
    }

    async fn claim(&self, keys: &GroupKeys, req: &ClaimRequest) -> Result<ClaimReply, StoreError> {
        let (ttl, want, floor) = (
            millis(req.ttl),
            req.count.to_string(),
            req.floor.get().to_string(),
        );
        let budget = DRAIN_BUDGET.to_string();
        let room = req
            .room
            .map_or_else(|| "-1".to_owned(), |r| r.min(1 << 52).to_string());
        let mut args = vec![
            req.replica.as_str(),
            &req.token,
            &ttl,
            &want,
            &floor,
            &budget,
            &room,
            if req.fallback { "1" } else { "0" },
        ];
        args.extend(req.regrant.iter().map(String::as_str));
        let mut p = Parse::new("claim", self.eval(&CLAIM, &keys.all(), &args).await?);
        match p.next_string()?.as_str() {
            "ok" => {
                let mut flat = p.next_array()?;
                let mut partitions = Vec::with_capacity(flat.remaining() / 3);
                while flat.remaining() > 0 {
                    partitions.push((
                        flat.next_string()?,
                        Fence(flat.next_u64()?),
                        flat.next_u64()?,
                    ));
                }
                Ok(ClaimReply::Claimed {
                    partitions,
                    unowned: count(p.next_int()?),
                })
            }
            "wait" => Ok(ClaimReply::Wait(ms(p.next_int()?))),
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
        let reply = self.eval(&RELEASE, &keys.all(), &args).await?;
        if reply == Value::Nil {
            return Ok(Vec::new());
        }
        let mut p = Parse::new("release", reply);
        let mut out = Vec::with_capacity(p.remaining());
        while p.remaining() > 0 {
            out.push(p.next_int()? == 1);
        }
        Ok(out)
    }

    async fn leave(&self, keys: &GroupKeys, replica: &str, token: &str) -> Result<(), StoreError> {
        let budget = DRAIN_BUDGET.to_string();
        let args = [replica, token, &keys.channel, &keys.notice, &budget];
        self.eval(&LEAVE, &keys.all(), &args).await.map(drop)
    }

    async fn add(
        &self,
        keys: &GroupKeys,
        mode: Change,
        grant_delay: Duration,
        names: &[String],
    ) -> Result<AddReply, StoreError> {
        let delay = millis(grant_delay);
        let mode = mode_arg(mode);
        let mut args = vec![
            mode.as_str(),
            delay.as_str(),
            keys.channel.as_str(),
            keys.notice.as_str(),
        ];
        args.extend(names.iter().map(String::as_str));
        let mut p = Parse::new("add", self.eval(&ADD, &keys.all(), &args).await?);
        match p.next_string()?.as_str() {
            "ok" => Ok(AddReply::Added(count(p.next_int()?))),
            "exists" => Ok(AddReply::Exists(p.next_string()?)),
            "stale" => Ok(AddReply::Stale),
            other => Err(StoreError::Protocol(format!("add replied {other:?}"))),
        }
    }

    async fn remove(
        &self,
        keys: &GroupKeys,
        mode: Change,
        names: &[String],
    ) -> Result<RemoveReply, StoreError> {
        let mode = mode_arg(mode);
        let mut args = vec![mode.as_str(), keys.channel.as_str(), keys.notice.as_str()];
        args.extend(names.iter().map(String::as_str));
        let mut p = Parse::new("remove", self.eval(&REMOVE, &keys.all(), &args).await?);
        match p.next_string()?.as_str() {
            "ok" => Ok(RemoveReply::Removed(count(p.next_int()?))),
            "unknown" => Ok(RemoveReply::Unknown(p.next_string()?)),
            "last" => Ok(RemoveReply::Last),
            "stale" => Ok(RemoveReply::Stale),
            other => Err(StoreError::Protocol(format!("remove replied {other:?}"))),
        }
    }

    async fn list_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let (offset, limit) = (offset.to_string(), limit.max(1).to_string());
        let reply = self.eval(&LIST, &keys.all(), &[&offset, &limit]).await?;
        let mut p = Parse::new("list", Value::Array(vec![reply]));
        strings(&mut p)
    }

    async fn set_version(
        &self,
        keys: &GroupKeys,
        version: u64,
        step: VersionStep<'_>,
    ) -> Result<bool, StoreError> {
        let v = version.to_string();
        let args = match step {
            VersionStep::Begin => [v.as_str(), "begin", ""],
            VersionStep::Done(digest) => [v.as_str(), "done", digest],
        };
        let reply = self.eval(&VERSION, &keys.all(), &args).await?;
        Ok(Parse::new("version", reply).next_int()? == 1)
    }

    async fn drain(&self, keys: &GroupKeys, replica: &str, on: bool) -> Result<bool, StoreError> {
        let args = [
            replica,
            if on { "1" } else { "0" },
            &keys.channel,
            &keys.notice,
        ];
        let reply = self.eval(&DRAIN, &keys.all(), &args).await?;
        Ok(Parse::new("drain", reply).next_int()? == 1)
    }

    async fn held(&self, keys: &GroupKeys, token: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let reply = self.eval(&HELD, &keys.all(), &[token]).await?;
        let mut flat = Parse::new("held", Value::Array(vec![reply])).next_array()?;
        let mut out = Vec::with_capacity(flat.remaining() / 2);
        while flat.remaining() > 0 {
            out.push((flat.next_string()?, flat.next_u64()?));
        }
        Ok(out)
    }

    async fn set_weight(
        &self,
        keys: &GroupKeys,
        partition: &str,
        weight: u64,
    ) -> Result<WeightReply, StoreError> {
        let w = weight.to_string();
        let args = [partition, w.as_str(), &keys.channel, &keys.notice];
        let mut p = Parse::new("weight", self.eval(&WEIGHT, &keys.all(), &args).await?);
        match p.next_string()?.as_str() {
            "ok" => Ok(WeightReply::Set(p.next_u64()?)),
            "unknown" => Ok(WeightReply::Unknown),
            other => Err(StoreError::Protocol(format!("weight replied {other:?}"))),
        }
    }

    async fn owner(
        &self,
        keys: &GroupKeys,
        partition: &str,
    ) -> Result<Option<PartitionOwner>, StoreError> {
        let reply = self.eval(&OWNER, &keys.all(), &[partition]).await?;
        if reply == Value::Nil {
            return Ok(None);
        }
        let mut p = Parse::new("owner", reply);
        owner(Some(partition.to_owned()), &mut p).map(Some)
    }

    async fn status_head(&self, keys: &GroupKeys) -> Result<Option<StatusHead>, StoreError> {
        let reply = self.eval(&STATUS_HEAD, &keys.all(), &[]).await?;
        if reply == Value::Nil {
            return Ok(None);
        }
        let mut p = Parse::new("group status", reply);
        let count = count(p.next_int()?);
        let version = p.next_u64()?;
        let digest = p.next_opt_string()?.unwrap_or_default();
        let mut set = SetInfo::plain(count, version, &digest);
        let mut members = roster(&mut p)?;
        let instances = strings(&mut p)?;
        let drained = strings(&mut p)?;
        weigh(&mut p, &mut members, &mut set)?;
        p.finish()?;
        Ok(Some(StatusHead {
            set,
            members,
            instances,
            drained,
        }))
    }

    async fn status_page(
        &self,
        keys: &GroupKeys,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PartitionOwner>, StoreError> {
        let (offset, limit) = (offset.to_string(), limit.max(1).to_string());
        let reply = self
            .eval(&STATUS_PAGE, &keys.all(), &[&offset, &limit])
            .await?;
        let mut rows = Parse::new("group status page", Value::Array(vec![reply])).next_array()?;
        let mut out = Vec::with_capacity(rows.remaining());
        while rows.remaining() > 0 {
            out.push(owner(None, &mut rows.next_array()?)?);
        }
        Ok(out)
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
