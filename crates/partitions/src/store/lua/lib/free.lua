-- Giving partitions back: the one place a partition stops being held.

-- Gives back `names` held by session `tok` (if `fences` is given, only those whose
-- current term is that fence), free since `at` if still listed; forgets what their
-- owner had (revocation, claim time) and subtracts their weights from the session's
-- load. Returns one flag per name: 1 if no term of this session holds it any more and
-- no later term was granted (given back now, or before), 0 if it is not this term's;
-- and how many it gave back now.
local function give_back(tok, names, fences, at)
  local out = {}
  if #names == 0 then return out, 0 end
  local owners = redis.call('HMGET', OWNERS, unpack(names))
  local current = redis.call('HMGET', FENCES, unpack(names))
  local listed = redis.call('ZMSCORE', PARTITIONS, unpack(names))
  local ws = weights_of(names)
  local gone, entries, back, unlisted, seen = {}, {}, {}, {}, {}
  local load = 0
  for j, n in ipairs(names) do
    local f = fences and fences[j]
    local ours = (not f) or current[j] == f
    if owners[j] == tok and ours and not seen[n] then
      seen[n] = true
      out[j] = 1
      gone[#gone + 1] = n
      entries[#entries + 1] = entry(tok, n)
      load = load + ws[j]
      if listed[j] then
        back[#back + 1] = at
        back[#back + 1] = n
      else
        unlisted[#unlisted + 1] = n
      end
    elseif (seen[n] or not owners[j]) and f and current[j] == f then
      out[j] = 1
    else
      out[j] = 0
    end
  end
  if #gone > 0 then
    roster_changed(replica_of(tok))
    if load > 0 and redis.call('HEXISTS', LOADS, tok) == 1 then
      redis.call('HINCRBY', LOADS, tok, -load)
    end
    redis.call('HDEL', OWNERS, unpack(gone))
    redis.call('ZREM', HELD, unpack(entries))
    redis.call('HDEL', REVOKED, unpack(gone))
    redis.call('HDEL', SINCE, unpack(gone))
    if #back > 0 then redis.call('ZADD', FREE, unpack(back)) end
    if #unlisted > 0 then redis.call('ZREM', WEIGHTS, unpack(unlisted)) end
  end
  return out, #gone
end

-- Frees up to `budget` partitions of ended sessions (free since the end of their
-- session); returns the ended sessions that still hold partitions.
local function free_ended(budget)
  local dead = redis.call('ZRANGE', DEAD, 0, -1, 'WITHSCORES')
  local left_over = {}
  local moved = 0
  for i = 1, #dead, 2 do
    local tok, ended = dead[i], dead[i + 1]
    local left = budget - moved
    if left <= 0 then
      left_over[#left_over + 1] = tok
    else
      local lo, hi = span(tok)
      local entries = redis.call('ZRANGEBYLEX', HELD, lo, hi, 'LIMIT', 0, left)
      local names = names_of(tok, entries)
      if #entries < left then
        redis.call('ZREM', DEAD, tok)
        redis.call('HDEL', LOADS, tok)
      else
        left_over[#left_over + 1] = tok
      end
      if #entries > 0 then
        give_back(tok, names, nil, ended)
        -- An entry whose partition another session owns now is stale: drop it too.
        redis.call('ZREM', HELD, unpack(entries))
        moved = moved + #entries
      end
    end
  end
  return left_over
end

-- Partitions without a live owner: free, or held by ended sessions.
local function unowned(dead)
  local n = redis.call('ZCARD', FREE)
  for _, tok in ipairs(dead) do
    local lo, hi = span(tok)
    n = n + redis.call('ZLEXCOUNT', HELD, lo, hi)
  end
  return n
end
