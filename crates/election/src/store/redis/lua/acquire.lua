-- acquire: takes a duty's lease if it is free, and issues the term's fence.
--
-- KEYS: 1 lease, 2 fence, 3 boot marker (optional: without it, no hold after a
-- restart). ARGV: 1 token, 2 lease ms, 3 fence floor.
--
-- Free lease: take it, with fence = next_fence(counter, floor, server µs) (fence.lua).
--
-- No grant for one lease after the granting server changed. A server that restarts
-- may have lost leases it granted (no persistence, an old snapshot, `appendfsync
-- everysec`), and a replica promoted by a failover may never have received the last
-- ones; their holders still believe they lead. So nothing is granted until one lease
-- after the server that answers began granting (lifetime.lua): by then every lease
-- granted before has expired, and with it its holder's local deadline (Redlock's
-- "delayed restart", extended to failovers). The boot marker (a hash without TTL) keeps
-- `server`, the lifetime that wrote the duty's keys, and `since`, when it began as
-- first estimated: a server up for longer than a lease (and those seconds) costs
-- nothing, not even for a new duty, unless it was promoted since it started: then it
-- counts from the first acquire that finds the marker missing or from another lifetime.
-- A marker that is missing or names another lifetime is rewritten. Without permission
-- for `INFO` the lifetime is unknown and the count starts when the marker is first
-- missing (a new duty, or data loss).
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
  local boot = redis.call('HMGET', BOOT, 'server', 'since')
  local now_ms = math.floor(now_us / 1000)
  local lifetime, began = server_lifetime(now_ms)
  local since = tonumber(boot[2])
  local fresh = nil
  if lifetime ~= '' and (boot[1] ~= lifetime or not since) then
    fresh = began or now_ms
  elseif not since or since > now_ms then
    fresh = now_ms
  end
  if fresh then
    since = fresh
    redis.call('DEL', BOOT)
    redis.call('HSET', BOOT, 'server', lifetime, 'since', string.format('%.0f', since))
  end
  local hold = since + tonumber(lease_ms) - now_ms
  if hold > 0 then return {2, hold} end
end
local fence, regressed = next_fence(stored, floor, now_us)
local f = string.format('%.0f', fence)
redis.call('SET', FENCE, f)
redis.call('SET', LEASE, token, 'PX', lease_ms)
return {1, f, regressed and 1 or 0}
