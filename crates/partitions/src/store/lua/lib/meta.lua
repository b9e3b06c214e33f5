-- The group's metadata (META) and its partitions' weights.

-- Everything META says, as a table (`exists` false if the group does not exist).
local function meta()
  local m = redis.call('HMGET', META, 'count', 'version', 'digest', 'grant_after', 'life',
    'sver', 'lease', 'fmax', 'origin', 'weighted', 'total', 'wver', 'rcount', 'inc',
    'server', 'server_after', 'rver', 'checked', 'amended', 'adopting', 'alife', 'asver')
  return {
    exists = m[1] ~= false,
    count = tonumber(m[1] or '0'),
    version = tonumber(m[2] or '0'),
    digest = m[3] or '',
    grant_after = tonumber(m[4] or '0'),
    life = m[5] or '',
    sver = tonumber(m[6] or '0'),
    lease = tonumber(m[7] or '0'),
    fmax = tonumber(m[8] or '0'),
    origin = m[9] or '',
    weighted = m[10] == '1',
    total = tonumber(m[11] or '0'),
    wver = tonumber(m[12] or '0'),
    rcount = tonumber(m[13] or '0'),
    -- This incarnation of the group: drawn anew whenever the group is created (seeded,
    -- restored, or taken over by a newer restore). Every session belongs to one.
    inc = m[14] or '',
    -- The granting server's lifetime that last wrote the group (lifetime.lua), and when
    -- claims may be granted again after it changed.
    server = m[15] or '',
    server_after = tonumber(m[16] or '0'),
    -- Bumped by every change to the roster (roster_changed).
    rver = m[17] or '0',
    -- When a script last read the server's lifetime and found it `server` (server.lua).
    checked = tonumber(m[18] or ''),
    -- An operator changed the group (answer): a copy of an earlier lifetime of it no
    -- longer replaces its set (adopt.lua).
    amended = m[19] == '1',
    -- While a replica brings the group to its copy (adopt.lua, origin `adopt`): until
    -- when operator changes wait, and the copy's life and set version.
    adopting = tonumber(m[20] or '0'),
    alife = m[21] or '',
    asver = tonumber(m[22] or '-1'),
  }
end

-- The roster (who is a member, in which state, with what capacity, holding how many
-- partitions of what load) changed for replica `r`: bumps its version once per script
-- run and notes `r` under it in CHANGES, so that every replica's next tick reads `r`
-- again (a steady tick of an unchanged roster carries none, and a tick after a change
-- carries only the members changed since the version its replica names: see
-- session.lua's roster_for). Drops `r`'s cached entry (ROSTER).
local roster_bumped = false
local function roster_changed(r)
  redis.call('HDEL', ROSTER, r)
  if not roster_bumped then
    if redis.call('HEXISTS', META, 'count') == 0 then return end
    roster_bumped = redis.call('HINCRBY', META, 'rver', 1)
  end
  redis.call('ZADD', CHANGES, roster_bumped, r)
end

-- Every member's entry may have changed (the weights did): every replica's next tick
-- reads the whole roster again.
local function roster_reset()
  redis.call('DEL', ROSTER, CHANGES)
  if redis.call('HEXISTS', META, 'count') == 0 then return end
  if not roster_bumped then roster_bumped = redis.call('HINCRBY', META, 'rver', 1) end
  redis.call('HSET', META, 'rfloor', roster_bumped)
end

-- Follows the granting server (lifetime.lua): if the group was last written in another
-- server lifetime (a restart, or a failover to a replica that may have missed the last
-- claims and ticks), nothing is claimed until one lease after this one began, when
-- every term granted before has reached its owner's local deadline (a tick extends
-- only the terms the server still lists under the session: see tick.lua). A tick
-- (`tick` true) takes the lifetime as read within a window of the last check
-- (server.lua), so ticks of the new lifetime may have extended sessions until that
-- window's end or now, whichever is first: the lease then counts from there if that is
-- later. Returns the lifetime ('' if `INFO` is refused: then nothing is held).
local function follow_server(m, now, tick)
  local fresh = m.exists and lifetime_fresh(m.checked, m.lease, now)
  if tick and fresh then return m.server end
  local lifetime, began = server_lifetime(now)
  if not m.exists or lifetime == '' then return lifetime end
  if lifetime == m.server then
    if not fresh then
      m.checked = now
      redis.call('HSET', META, 'checked', int(now))
    end
    return lifetime
  end
  -- A restarted server's ticks may have taken the lifetime as read until the last
  -- check's window ended, and none ran after now: the lease counts from the latest.
  local after = now
  if began then
    after = began
    if m.checked then
      after = math.max(began, math.min(m.checked + check_window(m.lease), now))
    end
  end
  after = after + m.lease
  if after > m.server_after then m.server_after = after end
  m.server = lifetime
  m.checked = now
  redis.call('HSET', META, 'server', lifetime, 'server_after', int(m.server_after),
    'checked', int(now))
  return lifetime
end

-- Until when nothing is granted (ms, server clock): the group's creation window, or the
-- hold after the server changed.
local function grants_after(m)
  return math.max(m.grant_after, m.server_after)
end

-- Whether the group was just created (seeded from a replica's list, or restored from
-- the set a replica saw) and grants nothing yet: its set may still be replaced by a
-- replica that saw a newer one, so an operator's change waits.
local function restoring(m, now)
  return m.exists and m.grant_after > now
end

-- How long (ms) an operator's change (or a versioned list's) must wait, if it must
-- (nil: it need not): while the group grants nothing yet (`restoring`), or while a
-- replica brings it to its copy of an earlier lifetime (adopt.lua).
local function change_wait(m, now)
  if restoring(m, now) then return m.grant_after - now end
  if m.origin == 'adopt' and m.adopting > now then return m.adopting - now end
  return nil
end

-- The set's checksum (`ssum`): the sum, modulo 2^52, of the first 52 bits of each
-- name's SHA-1, kept by every script that adds or removes names, so that a replica
-- whose configured list has the same names (the same checksum and count) takes it as
-- its copy of the set instead of reading every page (list.rs). A group created by an
-- older version of the protocol has none: its set is always read.
local SUM_MOD = 4503599627370496
local function count_names(names, sign)
  local cur = redis.call('HGET', META, 'ssum')
  if not cur or #names == 0 then return end
  local s = tonumber(cur)
  for _, n in ipairs(names) do
    s = (s + sign * tonumber(string.sub(redis.sha1hex(n), 1, 13), 16)) % SUM_MOD
  end
  redis.call('HSET', META, 'ssum', string.format('%.0f', s))
end

-- Every change to the set (names, weights, drains, list version) bumps its version, so
-- replicas know to read it again; a restore is over once the set changes.
local function bump_set()
  redis.call('HINCRBY', META, 'sver', 1)
  redis.call('HDEL', META, 'rcount')
end

-- The weights of `names` (1 unless set).
local function weights_of(names)
  local w = {}
  if #names == 0 then return w end
  local s = redis.call('ZMSCORE', WEIGHTS, unpack(names))
  for j = 1, #names do w[j] = tonumber(s[j] or '1') end
  return w
end

-- The weights of the set: weighted (1/0), total, largest, version of the last change.
local function weight_info(m)
  if not m.weighted then return 0, m.count, 1, m.wver end
  local top = redis.call('ZREVRANGE', WEIGHTS, 0, 0, 'WITHSCORES')
  local wmax = 1
  if #top == 2 and tonumber(top[2]) > 1 then wmax = tonumber(top[2]) end
  return 1, m.total, wmax, m.wver
end

-- Makes the group weighted (its first weight): every session's load is counted from
-- what it holds, and the total from the set (every weight is 1 until set).
local function make_weighted()
  redis.call('HSET', META, 'weighted', 1, 'total', redis.call('ZCARD', PARTITIONS))
  for _, tok in ipairs(redis.call('HVALS', SESSIONS)) do
    local lo, hi = span(tok)
    redis.call('HSET', LOADS, tok, redis.call('ZLEXCOUNT', HELD, lo, hi))
  end
end

-- An operator's change answered before (the same request retried): its reply.
local function replayed()
  if not OP then return nil end
  local r = redis.call('GET', OP)
  if r then return cjson.decode(r) end
  return nil
end

-- Keeps an operator's reply a minute for a retry of the same request, and returns it.
-- The group is then amended: a replica's copy of an earlier lifetime no longer
-- replaces its set, and an adopt left unfinished past its wait is over (adopt.lua).
local function answer(reply)
  if OP then
    redis.call('SET', OP, cjson.encode(reply), 'PX', 60000)
    redis.call('HSET', META, 'amended', 1)
    if redis.call('HGET', META, 'origin') == 'adopt' then
      redis.call('HSET', META, 'origin', 'seed')
      redis.call('HDEL', META, 'adopting', 'alife', 'asver')
    end
  end
  return reply
end
