-- acquire: takes a duty's lease if it is free, and issues the term's fence.
--
-- KEYS: 1 lease, 2 fence, 3 boot marker (optional: without it, no hold after a
-- restart). ARGV: 1 token, 2 lease ms, 3 fence floor.
--
-- Free lease: take it, with fence = next_fence(counter, floor, server µs) (fence.lua).
--
-- No grant for one lease after a restart. A server that restarts may have lost leases
-- it granted (no persistence, an old snapshot, `appendfsync everysec`) whose holders
-- still believe they lead. So nothing is granted until one lease after the server
-- started: by then every lease granted before has expired on the server's clock, and
-- with it its holder's local deadline (Redlock's "delayed restart"). The boot marker (a
-- hash without TTL) keeps `since`, the server's start as first estimated in this server
-- lifetime (`run_id`): `uptime_in_seconds` - 1 s before now (Redis counts whole seconds
-- of its clock, so this is never earlier than the real start, and at most two seconds
-- later). A marker that is missing or names another lifetime is rewritten. A server up
-- for longer than a lease (and those seconds) costs nothing, not even for a new duty.
-- Without permission for `INFO` the run id is empty and the count starts when the
-- marker is first missing (a new duty, or data loss).
--
-- Safe to retry: a second call with the token that holds the lease confirms it
-- without extending it.
--
-- Reply, one of:
--   {1, fence, regressed}: taken (regressed: the floor raised the fence);
--   {3, fence, pttl}: the token already holds the lease (an earlier call with it took
--     it, and its reply was lost). Confirmed, not extended: the caller may lead only
--     for the pttl left, counted from this call's send time;
--   {2, wait ms}: free, but held back for `wait` after data loss;
--   {0, holder token, pttl, fence}: someone else holds it.
local LEASE, FENCE, BOOT = KEYS[1], KEYS[2], KEYS[3]
local token, lease_ms, floor = ARGV[1], ARGV[2], tonumber(ARGV[3])
local cur = redis.call('GET', LEASE)
if cur == token then
  return {3, redis.call('GET', FENCE) or '0', redis.call('PTTL', LEASE)}
elseif cur then
  return {0, cur, redis.call('PTTL', LEASE), redis.call('GET', FENCE) or '0'}
end
local stored = tonumber(redis.call('GET', FENCE) or '0')
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
if BOOT then
  local boot = redis.call('HMGET', BOOT, 'run_id', 'since')
  local now_ms = math.floor(now_us / 1000)
  local run_id, up_ms = '', nil
  local info = redis.pcall('INFO', 'server')
  if type(info) == 'string' then
    run_id = string.match(info, 'run_id:(%x+)') or ''
    -- Whole seconds of the server's clock since whole seconds at its start: up to one
    -- second more than has really passed, so one is taken off (never counting from
    -- before the real start).
    local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)') or '0')
    up_ms = math.max(up - 1, 0) * 1000
  end
  local since = tonumber(boot[2])
  local fresh = nil
  if run_id ~= '' and (boot[1] ~= run_id or not since) then
    fresh = now_ms - (up_ms or 0)
  elseif not since or since > now_ms then
    fresh = now_ms
  end
  if fresh then
    since = fresh
    redis.call('HSET', BOOT, 'run_id', run_id, 'since', string.format('%.0f', since))
  end
  local hold = since + tonumber(lease_ms) - now_ms
  if hold > 0 then return {2, hold} end
end
local fence, regressed = next_fence(stored, floor, now_us)
local f = string.format('%.0f', fence)
redis.call('SET', FENCE, f)
redis.call('SET', LEASE, token, 'PX', lease_ms)
return {1, f, regressed and 1 or 0}
