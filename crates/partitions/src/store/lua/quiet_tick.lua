-- quiet tick: the start of tick.lua, before the libraries, that answers a quiet tick
-- on its own (ARGV and reply: see tick.lua).
--
-- Most ticks are quiet: an extension of a live session that changes nothing but its
-- expiry, in the incarnation and server lifetime the replica named, with nothing
-- expired, ended or revoked and a roster the replica has already read. This part reads
-- what decides that (one read of each key it touches, before its writes, so a key of
-- the wrong type fails a read and nothing is written), and if the tick is quiet it
-- extends the session (and notes the lifetime's check, once a window: server.lua) and
-- replies exactly what the whole script would (the test
-- `a_quiet_tick_replies_what_the_whole_script_does` compares them). Else the whole
-- script runs, with the server lifetime read here if it was (`quiet_lifetime`): it
-- reads `INFO` again only if the lifetime changed. Everything here lives in one block,
-- so the libraries define only what a tick that is not quiet needs, and a quiet tick
-- defines none of them (but the lifetime's two, put in front of it).
local quiet_lifetime
do
  local function quiet()
    local replica, process, session, state = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
    if ARGV[4] == '1' or state == 'away' then return nil end
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    -- META's fields as meta.lua's meta() names them.
    local m = redis.call('HMGET', KEYS[4], 'count', 'version', 'digest', 'grant_after',
      'life', 'sver', 'lease', 'fmax', 'origin', 'weighted', 'total', 'wver', 'rcount',
      'inc', 'server', 'rver', 'checked')
    if not m[1] or (m[14] or '') ~= ARGV[13] or (m[15] or '') ~= ARGV[14] then
      return nil
    end
    -- The two sessions that expire first: none may have expired, and the first other
    -- than this replica's is the reply's soonest (this tick moves only its own).
    local first = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'WITHSCORES',
      'LIMIT', 0, 2)
    if #first > 0 and tonumber(first[2]) <= now then return nil end
    local cur = redis.call('HGET', KEYS[2], replica)
    local holder = redis.call('HGET', KEYS[18], replica) or cur
    if cur ~= session or holder ~= process then return nil end
    if redis.call('HGET', KEYS[3], replica) ~= state then return nil end
    if redis.call('ZCARD', KEYS[10]) > 0 or redis.call('HLEN', KEYS[11]) > 0 then
      return nil
    end
    local drained = redis.call('HEXISTS', KEYS[12], replica)
    local free = redis.call('ZCARD', KEYS[6])
    local weighted, total, wmax = 0, tonumber(m[1]), 1
    if m[10] == '1' then
      weighted, total = 1, tonumber(m[11] or '0')
      local top = redis.call('ZREVRANGE', KEYS[15], 0, 0, 'WITHSCORES')
      if #top == 2 and tonumber(top[2]) > 1 then wmax = tonumber(top[2]) end
    end
    -- The lifetime, read only if the last check is older than a window (server.lua).
    local lifetime = m[15] or ''
    local fresh = lifetime_fresh(tonumber(m[17] or ''), tonumber(m[7] or '0'), now)
    if not fresh then
      lifetime = server_lifetime(now)
      quiet_lifetime = lifetime
      if lifetime ~= (m[15] or '') then return nil end
    end
    local rver = (m[14] or '') .. '/' .. lifetime .. '/' .. (m[16] or '0')
    if rver ~= ARGV[15] then return nil end
    if not fresh then redis.call('HSET', KEYS[4], 'checked', string.format('%.0f', now)) end
    redis.call('ZADD', KEYS[1], 'GT', now + tonumber(ARGV[6]), replica)
    local soonest = -1
    for i = 1, #first, 2 do
      if first[i] ~= replica then
        soonest = tonumber(first[i + 1]) - now
        break
      end
    end
    local wait = tonumber(m[4] or '0') - now
    if wait < 0 then wait = 0 end
    return {'live', '', 1, tonumber(m[1]), tonumber(m[2] or '0'), m[3] or '', {}, {}, {},
      free, wait, 0, drained, {}, 0, weighted, total, wmax, tonumber(m[12] or '0'),
      m[5] or '', tonumber(m[6] or '0'),
      string.format('%.0f', tonumber(m[8] or '0')), m[9] or '', tonumber(m[7] or '0'),
      tonumber(m[13] or '0'), m[14] or '', lifetime, 0, rver, 0, soonest}
  end
  local read, reply = pcall(quiet)
  if read and reply then return reply end
end
