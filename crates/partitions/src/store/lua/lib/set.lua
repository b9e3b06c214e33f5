-- Changes to the partition set, shared by the operator's scripts (add, remove, weight)
-- and by adopt (a seeded group brought to a replica's copy of an earlier lifetime).

-- Adds the `names` not in the set yet (distinct), each free at once unless a session
-- still holds it (a removed one its owner was told to give up: it keeps it), with
-- weight `ws[j]` if given (else the weight it has: 1, unless one removed while held is
-- back with its weight). Returns the names added.
local function add_names(m, names, ws, now)
  if #names == 0 then return {} end
  local present = redis.call('ZMSCORE', PARTITIONS, unpack(names))
  local owners = redis.call('HMGET', OWNERS, unpack(names))
  local nxt = tonumber(redis.call('HGET', META, 'next') or '0')
  local pos, free, added, heavy = {}, {}, {}, {}
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
      if ws and ws[j] ~= 1 then
        heavy[#heavy + 1] = ws[j]
        heavy[#heavy + 1] = n
      end
    end
  end
  if #added == 0 then return added end
  if #heavy > 0 and not m.weighted then
    make_weighted()
    m.weighted = true
  end
  if ws then
    -- The weights given: a removed-while-held one back with another weight changes
    -- its owner's load.
    local old = weights_of(added)
    local o = redis.call('HMGET', OWNERS, unpack(added))
    local wi = {}
    for j, n in ipairs(names) do wi[n] = ws[j] end
    for k, n in ipairs(added) do
      if old[k] ~= wi[n] and o[k] and redis.call('HEXISTS', LOADS, o[k]) == 1 then
        redis.call('HINCRBY', LOADS, o[k], wi[n] - old[k])
      end
      if wi[n] == 1 then redis.call('ZREM', WEIGHTS, n) end
    end
    if #heavy > 0 then redis.call('ZADD', WEIGHTS, unpack(heavy)) end
  end
  redis.call('ZADD', PARTITIONS, unpack(pos))
  if #free > 0 then redis.call('ZADD', FREE, unpack(free)) end
  redis.call('HDEL', REVOKED, unpack(added))
  redis.call('HINCRBY', META, 'count', #added)
  redis.call('HSET', META, 'next', nxt)
  count_names(added, 1)
  if m.weighted then
    redis.call('HINCRBY', META, 'total', sum(weights_of(added)))
  end
  return added
end

-- Removes `gone` (distinct names in the set) and their preferences: a held one stays
-- with its owner, who is told to give it up (REVOKED) and does (a resumed session
-- never regrants it); a free one goes at once.
local function remove_names(m, gone)
  if #gone == 0 then return end
  redis.call('ZREM', PARTITIONS, unpack(gone))
  redis.call('ZREM', FREE, unpack(gone))
  redis.call('HDEL', ENDED, unpack(gone))
  local reserved = {}
  for j, n in ipairs(gone) do reserved[j] = '\2' .. n end
  redis.call('HDEL', ENDED, unpack(reserved))
  redis.call('HDEL', PREFS, unpack(gone))
  local owners = redis.call('HMGET', OWNERS, unpack(gone))
  local revoke, unheld = {}, {}
  for j, n in ipairs(gone) do
    if owners[j] then
      revoke[#revoke + 1] = n
      revoke[#revoke + 1] = 'removed'
    else
      unheld[#unheld + 1] = n
    end
  end
  if #revoke > 0 then redis.call('HSET', REVOKED, unpack(revoke)) end
  if m.weighted then
    -- A held one keeps its weight (in its owner's load) until it is given back.
    redis.call('HINCRBY', META, 'total', -sum(weights_of(gone)))
  end
  if #unheld > 0 then redis.call('ZREM', WEIGHTS, unpack(unheld)) end
  redis.call('HINCRBY', META, 'count', -#gone)
  count_names(gone, -1)
end

-- Sets partition `n`'s weight to `w` (`n` in the set). The first weight makes the group
-- weighted (every session's load counted from what it holds); the owner's load
-- follows at once; the last weight that is not 1 set back to 1 makes the group
-- unweighted again. Returns the old weight, and whether anything changed (the weight
-- it has already, in a weighted group, changes nothing).
local function set_weight(m, n, w)
  if m.weighted and weights_of({n})[1] == w then return w, false end
  if not m.weighted then
    make_weighted()
    m.weighted = true
  end
  local old = weights_of({n})[1]
  if w == 1 then
    redis.call('ZREM', WEIGHTS, n)
  else
    redis.call('ZADD', WEIGHTS, w, n)
  end
  if w == 1 and redis.call('ZCARD', WEIGHTS) == 0 then
    -- Every weight is 1 again (also those removed but still held): unweighted.
    redis.call('HDEL', META, 'weighted', 'total')
    redis.call('DEL', LOADS)
    m.weighted = false
  else
    redis.call('HINCRBY', META, 'total', w - old)
    local o = redis.call('HGET', OWNERS, n)
    if o and redis.call('HEXISTS', LOADS, o) == 1 then
      redis.call('HINCRBY', LOADS, o, w - old)
    end
  end
  return old, true
end
