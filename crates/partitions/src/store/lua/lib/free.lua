-- Giving partitions back: the one place a partition stops being held.

-- How many entries the ledger of moves (MOVES) keeps, about (`MAXLEN ~`).
local LEDGER_LEN = 20000

-- Gives back `names` held by session `tok` (if `fences` is given, only those whose
-- current term is that fence), free since `at` if still listed; forgets what their
-- owner had (revocation, claim time) and subtracts their weights from the session's
-- load. `cause` says why the terms ended (one for all, or a table with one per name:
-- `handoff`, `drain`, `leave`, `released`, `expiry`); a partition still listed keeps
-- how its term ended in ENDED, for the claim that starts its next term to write the
-- move (claim.lua), with the size of the state the term left for its successor if
-- `sizes` names one (release.lua). Returns one flag per name: 1 if no term of this
-- session holds it any more and no later term was granted (given back now, or
-- before), 0 if it is not this term's; and how many it gave back now.
local function give_back(tok, names, fences, at, cause, sizes)
  local out = {}
  if #names == 0 then return out, 0 end
  local owners = redis.call('HMGET', OWNERS, unpack(names))
  local current = redis.call('HMGET', FENCES, unpack(names))
  local listed = redis.call('ZMSCORE', PARTITIONS, unpack(names))
  local since = redis.call('HMGET', SINCE, unpack(names))
  local ws = weights_of(names)
  local gone, entries, back, unlisted, seen, ended = {}, {}, {}, {}, {}, {}
  local who = replica_of(tok) or ''
  local at_s = string.format('%.0f', at)
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
        local why = cause
        if type(cause) == 'table' then why = cause[j] end
        ended[#ended + 1] = n
        local e = who .. '\t' .. (current[j] or '') .. '\t' .. why .. '\t' .. at_s .. '\t' ..
          (since[j] or at_s)
        if sizes and sizes[j] then e = e .. '\t' .. sizes[j] end
        ended[#ended + 1] = e
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
    if #back > 0 then
      redis.call('ZADD', FREE, unpack(back))
      redis.call('HSET', ENDED, unpack(ended))
    end
    if #unlisted > 0 then redis.call('ZREM', WEIGHTS, unpack(unlisted)) end
  end
  return out, #gone
end

-- Frees up to `budget` partitions of ended sessions (free since the end of their
-- session, ended for the cause the session's end noted in ENDED, `expiry` if none);
-- returns the ended sessions that still hold partitions.
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
      local why = redis.call('HGET', ENDED, '\1' .. tok) or 'expiry'
      if #entries < left then
        redis.call('ZREM', DEAD, tok)
        redis.call('HDEL', LOADS, tok)
        redis.call('HDEL', ENDED, '\1' .. tok)
      else
        left_over[#left_over + 1] = tok
      end
      if #entries > 0 then
        give_back(tok, names, nil, ended, why)
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

-- Writes to the ledger one move per partition in `names` just granted to `replica`'s
-- session in terms `fences` at `now` (server ms): from the term ENDED says ended last
-- (its replica, fence, cause, end and start, and the bytes of state it left; none:
-- `new`, the partition's first owner known to this group), and forgets that term.
-- Returns {cause, ms unowned or -1, previous fence or '', state bytes (-1: none; -2:
-- left in another server lifetime than `server`, never offered), ...}, four slots
-- per name.
local function record_moves(replica, names, fences, now, server)
  local info, last_id = {}, nil
  if #names == 0 then return info, last_id end
  local last = redis.call('HMGET', ENDED, unpack(names))
  local now_s = string.format('%.0f', now)
  for j, n in ipairs(names) do
    local from, fence, cause, ended, since, size, life = '', '', 'new', '', '', '', ''
    if last[j] then
      from, fence, cause, ended, since, size, life = string.match(last[j],
        '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t?([^\t]*)\t?([^\t]*)$')
    end
    local unowned = ''
    if ended and ended ~= '' then
      unowned = string.format('%.0f', math.max(0, now - tonumber(ended)))
    end
    last_id = redis.call('XADD', MOVES, 'MAXLEN', '~', LEDGER_LEN, '*', 'partition', n,
      'from', from or '', 'to', replica, 'cause', cause or 'new', 'old_fence', fence or '',
      'new_fence', fences[j], 'ended', ended or '', 'started', now_s, 'held_since',
      since or '', 'unowned_ms', unowned, 'state_bytes', size or '')
    info[#info + 1] = cause or 'new'
    info[#info + 1] = tonumber(unowned) or -1
    info[#info + 1] = fence or ''
    if tonumber(size) and life ~= server then
      info[#info + 1] = -2
    else
      info[#info + 1] = tonumber(size) or -1
    end
  end
  -- With the reservations of those handed to a named receiver (release.lua).
  local fields = {}
  for _, n in ipairs(names) do
    fields[#fields + 1] = n
    fields[#fields + 1] = '\2' .. n
  end
  redis.call('HDEL', ENDED, unpack(fields))
  return info, last_id
end

-- How many free partitions a look for reservations reads (those held back longest
-- first; ReservedScan in store/ops/claim.rs).
local RESERVED_SCAN = 256

-- The free partitions reserved for `replica` at `now` (release.lua: a partition handed
-- to a named receiver is free in FREE's order only from the end of its hold, its
-- receiver named in ENDED under '\2' .. name), in FREE's order, among the first
-- RESERVED_SCAN held back; and whether any partition is held back at all.
local function reserved_for(replica, now)
  local held = redis.call('ZRANGE', FREE, '(' .. string.format('%.0f', now), '+inf', 'BYSCORE',
    'LIMIT', 0, RESERVED_SCAN)
  local mine = {}
  if #held == 0 then return mine, false end
  local fields = {}
  for j, n in ipairs(held) do fields[j] = '\2' .. n end
  local to = redis.call('HMGET', ENDED, unpack(fields))
  for j, n in ipairs(held) do
    if to[j] == replica then mine[#mine + 1] = n end
  end
  return mine, true
end
