-- Sessions: a replica's membership, and everything its partitions hang off.

-- How many members gone CHANGES keeps beyond one entry per member (see teardown).
local KEPT_GONE = 64

-- The expiry of session `tok` if it is its replica's current session and unexpired.
local function live(tok, now)
  local r = replica_of(tok)
  if not r or redis.call('HGET', SESSIONS, r) ~= tok then return nil end
  local exp = redis.call('ZSCORE', MEMBERS, r)
  if exp and tonumber(exp) > now then return tonumber(exp) end
  return nil
end

-- Ends replica `r`'s session `tok` at `ended`: the replica leaves the roster, what the
-- session holds waits in DEAD until it is freed.
local function teardown(r, tok, ended)
  local holder = redis.call('HGET', HOLDERS, r)
  roster_changed(r)
  redis.call('ZREM', MEMBERS, r)
  redis.call('HDEL', SESSIONS, r)
  redis.call('HDEL', STATES, r)
  redis.call('HDEL', INFO, r)
  redis.call('HDEL', CAPACITY, r)
  redis.call('HDEL', HOLDERS, r)
  if holder then redis.call('HDEL', ACKS, holder) end
  if tok then redis.call('ZADD', DEAD, ended, tok) end
  -- CHANGES keeps the members gone since a replica's version, but not forever: the
  -- oldest entries go (members or not), and a replica naming a version older than
  -- the last of them reads the whole roster.
  local extra = redis.call('ZCARD', CHANGES) - redis.call('ZCARD', MEMBERS) - KEPT_GONE
  if extra > 0 and redis.call('HEXISTS', META, 'count') == 1 then
    local popped = redis.call('ZPOPMIN', CHANGES, extra)
    redis.call('HSET', META, 'rfloor', popped[#popped])
  end
end

-- HEIRS keeps, for each live session of a sticky replica (`rejoin_grace`), how long
-- its partitions wait for the replica after its last heartbeat, and whether a process
-- of it knocked: `<grace ms>\t<ttl ms>\t<knock until ms>` (0: no knock). A join writes
-- it; a process refused while the session lived (a restart after a crash) knocks.
local function remember_grace(r, grace, ttl)
  if grace > 0 then
    redis.call('HSET', HEIRS, r, int(grace) .. '\t' .. int(ttl) .. '\t0')
  else
    redis.call('HDEL', HEIRS, r)
  end
end

local function knock(r, now, ttl)
  local g, t = string.match(redis.call('HGET', HEIRS, r) or '', '^(%d+)\t(%d+)\t%d+$')
  redis.call('HSET', HEIRS, r, (g or '0') .. '\t' .. (t or int(ttl)) .. '\t' .. int(now + 2 * ttl))
end

-- Until when (server ms) the expired session of replica `r`, which expired at `exp`,
-- is parked `away` for its replica instead of ended (nil: it ends): a sticky
-- replica's partitions wait for it until its grace after its last heartbeat (its
-- expiry less its ttl), and a knocking process (refused while the session lived, at
-- most two ttls ago) gets one ttl more. An entry written by an older version,
-- `<process>\t<until>\t<ttl>`, is a knock only.
local function parked_until(heir, exp, now)
  if not heir then return nil end
  local until_ms = 0
  local g, t, k = string.match(heir, '^(%d+)\t(%d+)\t(%d+)$')
  if g then
    until_ms = exp - tonumber(t) + tonumber(g)
    if tonumber(k) > now then until_ms = math.max(until_ms, now + tonumber(t)) end
  else
    local u, ttl = string.match(heir, '^[^\t]*\t(%d+)\t(%d+)$')
    if u and tonumber(u) > now then until_ms = now + tonumber(ttl) end
  end
  if until_ms > now then return until_ms end
  return nil
end

-- Ends every session whose expiry has passed, and returns how many partitions they
-- held. A sticky replica's session that expired (a crash, a cut, a pause: not parked
-- by its replica) is parked (`away`) instead, its partitions held for the replica
-- until `parked_until`, so that a process of it started again within its grace
-- resumes it; a parked session that expires ends.
local function reap(now)
  local gone = redis.call('ZRANGEBYSCORE', MEMBERS, '-inf', now, 'WITHSCORES')
  local lost = 0
  for i = 1, #gone, 2 do
    local r, exp = gone[i], tonumber(gone[i + 1])
    local tok = redis.call('HGET', SESSIONS, r)
    local heir = redis.call('HGET', HEIRS, r)
    redis.call('HDEL', HEIRS, r)
    local until_ms = nil
    if tok and redis.call('HGET', STATES, r) ~= 'away' then
      until_ms = parked_until(heir, exp, now)
    end
    if until_ms then
      redis.call('ZADD', MEMBERS, until_ms, r)
      redis.call('HSET', STATES, r, 'away')
      roster_changed(r)
    else
      if tok then
        local lo, hi = span(tok)
        lost = lost + redis.call('ZLEXCOUNT', HELD, lo, hi)
      end
      teardown(r, tok, gone[i + 1])
    end
  end
  return lost
end

-- Live members: names, states, ms left, partitions held, loads, capacities.
local function roster(now, weighted)
  local scored = redis.call('ZRANGEBYSCORE', MEMBERS, '(' .. now, '+inf', 'WITHSCORES')
  local names, lefts, helds, loads, caps, states = {}, {}, {}, {}, {}, {}
  for i = 1, #scored, 2 do
    names[#names + 1] = scored[i]
    lefts[#lefts + 1] = tonumber(scored[i + 1]) - now
  end
  if #names == 0 then return names, states, lefts, helds, loads, caps end
  local toks = redis.call('HMGET', SESSIONS, unpack(names))
  states = redis.call('HMGET', STATES, unpack(names))
  local c = redis.call('HMGET', CAPACITY, unpack(names))
  local l = {}
  if weighted then
    local tk = {}
    for k = 1, #names do tk[k] = toks[k] or '' end
    l = redis.call('HMGET', LOADS, unpack(tk))
  end
  for k = 1, #names do
    helds[k] = 0
    if toks[k] then
      local lo, hi = span(toks[k])
      helds[k] = redis.call('ZLEXCOUNT', HELD, lo, hi)
    end
    caps[k] = tonumber(c[k] or '1')
    if weighted then loads[k] = tonumber(l[k] or '0') else loads[k] = helds[k] end
  end
  return names, states, lefts, helds, loads, caps
end

-- The roster entries of members `names` as a tick sends them ('state \t capacity \t
-- held \t load'): from ROSTER, or computed (and kept there until the member changes:
-- meta.lua's roster_changed).
local function entries(names, weighted)
  local out = {}
  if #names == 0 then return out end
  local kept = redis.call('HMGET', ROSTER, unpack(names))
  local fill = {}
  for k, r in ipairs(names) do
    local e = kept[k]
    if not e then
      local tok = redis.call('HGET', SESSIONS, r)
      local held = 0
      if tok then held = redis.call('ZLEXCOUNT', HELD, span(tok)) end
      local load = held
      if weighted then load = tonumber((tok and redis.call('HGET', LOADS, tok)) or '0') end
      e = (redis.call('HGET', STATES, r) or '') .. '\t' .. (redis.call('HGET', CAPACITY, r) or '1')
        .. '\t' .. held .. '\t' .. load
      fill[#fill + 1] = r
      fill[#fill + 1] = e
    end
    out[k] = e
  end
  if #fill > 0 then redis.call('HSET', ROSTER, unpack(fill)) end
  return out
end

-- The roster for a replica that last read version `seen`, after this script's
-- changes (and its reap: every member is live): its version (the group's
-- incarnation, the granting server's lifetime and the count of changes, so that a
-- version is never repeated by a group created again or by a promoted replica that
-- missed some changes); what is sent (0: nothing, the roster is `seen`; 1: the whole
-- roster; 2: the members changed since `seen`); the names and entries of the members
-- sent, and the names of members gone since `seen`. ROSTER and CHANGES are started
-- again in another incarnation or server lifetime.
local function roster_for(m, lifetime, seen)
  local base = m.inc .. '/' .. lifetime
  local r = redis.call('HMGET', META, 'rver', 'rfloor', 'rbase')
  local rver = r[1] or '0'
  local version = base .. '/' .. rver
  if version == seen then return version, 0, {}, {}, {} end
  local floor = tonumber(r[2] or '0')
  if r[3] ~= base then
    redis.call('DEL', ROSTER, CHANGES)
    if m.exists then redis.call('HSET', META, 'rbase', base, 'rfloor', rver) end
    floor = tonumber(rver)
  end
  local from, at = string.match(seen, '^(.*)/(%d+)$')
  if from == base and tonumber(at) >= floor and tonumber(at) <= tonumber(rver) then
    local changed = redis.call('ZRANGEBYSCORE', CHANGES, '(' .. at, '+inf')
    local names, gone = {}, {}
    if #changed > 0 then
      local live = redis.call('ZMSCORE', MEMBERS, unpack(changed))
      for k, n in ipairs(changed) do
        if live[k] then names[#names + 1] = n else gone[#gone + 1] = n end
      end
    end
    return version, 2, names, entries(names, m.weighted), gone
  end
  local names = redis.call('ZRANGE', MEMBERS, 0, -1)
  return version, 1, names, entries(names, m.weighted), {}
end

-- The time left (ms) of the member whose session expires first, other than
-- `replica` (-1 if none): a replica looks again right after it, since the roster it
-- keeps may be older than this tick.
local function soonest(now, replica)
  local first = redis.call('ZRANGEBYSCORE', MEMBERS, '(' .. now, '+inf', 'WITHSCORES',
    'LIMIT', 0, 2)
  for i = 1, #first, 2 do
    if first[i] ~= replica then return tonumber(first[i + 1]) - now end
  end
  return -1
end

-- What session `tok` holds: {name, fence, weight, ...}.
local function holdings(tok)
  local lo, hi = span(tok)
  local names = names_of(tok, redis.call('ZRANGEBYLEX', HELD, lo, hi))
  local out = {}
  if #names == 0 then return out end
  local owners = redis.call('HMGET', OWNERS, unpack(names))
  local fences = redis.call('HMGET', FENCES, unpack(names))
  local ws = weights_of(names)
  for i, n in ipairs(names) do
    if owners[i] == tok then
      out[#out + 1] = n
      out[#out + 1] = fences[i] or '0'
      out[#out + 1] = ws[i]
    end
  end
  return out
end
