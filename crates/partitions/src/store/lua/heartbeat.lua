-- heartbeat: a quiet tick, answered by a script of its own (after the lifetime's
-- libraries, lifetime.lua and server.lua, put in front of it).
--
-- KEYS: 1 MEMBERS, 2 SESSIONS, 3 STATES, 4 META, 5 FREE, 6 DEAD, 7 REVOKED, 8 DRAINS,
-- 9 WEIGHTS, 10 HOLDERS (keys.lua names them). ARGV: 1 replica, 2 process token,
-- 3 session token, 4 state, 5 ttl ms, 6 the group's incarnation, 7 the server lifetime
-- and 8 the roster version the replica's last tick reply named.
--
-- Most ticks are quiet: an extension of a live session that changes nothing but its
-- expiry, in the incarnation and server lifetime the replica named, with nothing
-- expired, ended or revoked, no free partition held back for a named receiver, and a
-- roster the replica has already read. A replica whose
-- last tick changed nothing sends this script first: it reads what decides that (one
-- read of each key it touches, before its one write, so a key of the wrong type fails
-- a read and nothing is written), and if the tick is quiet it extends the session
-- (and notes the lifetime's check, once a window: server.lua) and replies what the
-- whole tick would, in a short form; else it changes nothing and replies 0, and the
-- replica sends the whole tick (tick.lua). Its own small set of keys and arguments,
-- and a reply without the roster's slots, is most of what it saves: a script's cost
-- on the server is mostly in turning its arguments and its reply into Lua values and
-- back (docs/partitions.md, the cost of a tick).
--
-- Reply: 0 (not quiet), or one value per slot, each filled by name (`r[SLOT.<name>]`):
-- META's fields as quiet() reads them, partitions without a live owner, drained (1/0),
-- largest weight, ms left of the session that expires first other than this replica's
-- (-1 if none), ms before anything is granted. The slots and the META fields read are
-- named once, in Rust (`HeartbeatSlot` and `MetaField` in ops/tick.rs), which puts
-- `SLOT`, `FIELD` (each field's index) and `META_FIELDS` (the fields in order) in front
-- of this script. The test `a_heartbeat_replies_what_the_whole_tick_does` compares it
-- with the whole tick's reply.
local function quiet()
  local replica, process, session, state = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
  if state == 'away' then return nil end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local m = redis.call('HMGET', KEYS[4], unpack(META_FIELDS))
  if not m[FIELD.count] or (m[FIELD.inc] or '') ~= ARGV[6]
      or (m[FIELD.server] or '') ~= ARGV[7] then
    return nil
  end
  -- The lifetime, read only if the last check is older than a window (server.lua).
  local fresh = lifetime_fresh(tonumber(m[FIELD.checked] or ''),
    tonumber(m[FIELD.lease] or '0'), now)
  if not fresh and server_lifetime(now) ~= m[FIELD.server] then return nil end
  if ARGV[6] .. '/' .. ARGV[7] .. '/' .. (m[FIELD.rver] or '0') ~= ARGV[8] then
    return nil
  end
  -- The two sessions that expire first: none may have expired, and the first other
  -- than this replica's is the reply's soonest (this tick moves only its own).
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'WITHSCORES',
    'LIMIT', 0, 2)
  if #first > 0 and tonumber(first[2]) <= now then return nil end
  local cur = redis.call('HGET', KEYS[2], replica)
  local holder = redis.call('HGET', KEYS[10], replica) or cur
  if cur ~= session or holder ~= process then return nil end
  if redis.call('HGET', KEYS[3], replica) ~= state then return nil end
  if redis.call('ZCARD', KEYS[6]) > 0 or redis.call('HLEN', KEYS[7]) > 0 then
    return nil
  end
  local drained = redis.call('HEXISTS', KEYS[8], replica)
  local free = redis.call('ZCARD', KEYS[5])
  -- A partition held back for a named receiver (release.lua) may be this replica's:
  -- the whole tick says so.
  local now_s = string.format('%.0f', now)
  if free > 0 and
      #redis.call('ZRANGE', KEYS[5], '(' .. now_s, '+inf', 'BYSCORE', 'LIMIT', 0, 1) > 0 then
    return nil
  end
  local wmax = 1
  if m[FIELD.weighted] == '1' then
    local top = redis.call('ZREVRANGE', KEYS[9], 0, 0, 'WITHSCORES')
    if #top == 2 and tonumber(top[2]) > 1 then wmax = tonumber(top[2]) end
  end
  if not fresh then redis.call('HSET', KEYS[4], 'checked', string.format('%.0f', now)) end
  redis.call('ZADD', KEYS[1], 'GT', now + tonumber(ARGV[5]), replica)
  local soonest = -1
  for i = 1, #first, 2 do
    if first[i] ~= replica then
      soonest = tonumber(first[i + 1]) - now
      break
    end
  end
  local wait = tonumber(m[FIELD.grant_after] or '0') - now
  if wait < 0 then wait = 0 end
  local r = {}
  r[SLOT.meta] = m
  r[SLOT.unowned] = free
  r[SLOT.drained] = drained
  r[SLOT.max_weight] = wmax
  r[SLOT.soonest] = soonest
  r[SLOT.grant_wait] = wait
  return r
end
local read, reply = pcall(quiet)
if read and reply then return reply end
return 0
