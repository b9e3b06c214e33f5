-- Sessions: a replica's membership, and everything its partitions hang off.

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
  roster_changed()
  redis.call('ZREM', MEMBERS, r)
  redis.call('HDEL', SESSIONS, r)
  redis.call('HDEL', STATES, r)
  redis.call('HDEL', INFO, r)
  redis.call('HDEL', CAPACITY, r)
  redis.call('HDEL', HOLDERS, r)
  if holder then redis.call('HDEL', ACKS, holder) end
  if tok then redis.call('ZADD', DEAD, ended, tok) end
end

-- Ends every session whose expiry has passed, and returns how many partitions they
-- held. A sticky replica's session whose replica id is knocking (another process of
-- it was refused while the session lived: a restart after a crash) is kept for the
-- knocker instead: parked (`away`) for one more of its leases, so it resumes it.
local function reap(now)
  local gone = redis.call('ZRANGEBYSCORE', MEMBERS, '-inf', now, 'WITHSCORES')
  local lost = 0
  for i = 1, #gone, 2 do
    local r, exp = gone[i], gone[i + 1]
    local tok = redis.call('HGET', SESSIONS, r)
    local heir = redis.call('HGET', HEIRS, r)
    redis.call('HDEL', HEIRS, r)
    local until_ms, ttl
    if heir then
      until_ms, ttl = string.match(heir, '^[^\t]*\t(%d+)\t(%d+)$')
    end
    if tok and until_ms and tonumber(until_ms) > now then
      redis.call('ZADD', MEMBERS, now + tonumber(ttl), r)
      redis.call('HSET', STATES, r, 'away')
      roster_changed()
    else
      if tok then
        local lo, hi = span(tok)
        lost = lost + redis.call('ZLEXCOUNT', HELD, lo, hi)
      end
      teardown(r, tok, exp)
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
