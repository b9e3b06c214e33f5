-- drain: an operator's drain (or undrain) of a replica id.
--
-- ARGV: 1 replica, 2 on (1/0), 3 force (1/0), 4 channel, 5 notice.
--
-- A drain is about the replica id, not one of its sessions: it lasts until undrained,
-- also across restarts and lost sessions (and a Redis restart that lost the group: the
-- replicas restore it). Draining needs a live replica, and is refused if no other live
-- replica would take part any more (unless forced). Undraining a replica that is not
-- drained is not an error if it is live. Waits out a restore (see add.lua: a restore
-- rewrites the drains). Safe to retry: the reply of a drain or undrain that was done
-- is kept a minute under KEYS[26] (a retry of an undrain of a replica that is not live
-- would otherwise find it neither drained nor live).
--
-- Reply {'ok'}, {'unknown'} (not live, and not drained), {'last'}, {'nogroup'},
-- {'restoring', ms}.
local replica, on = ARGV[1], ARGV[2] == '1'
local bad = expect({MEMBERS, STATES, META, DRAINS})
if bad then return bad end
local again = replayed()
if again then return again end
local now = clock()
local m = meta()
if not m.exists then return {'nogroup'} end
local wait = change_wait(m, now)
if wait then return {'restoring', wait} end
local exp = redis.call('ZSCORE', MEMBERS, replica)
local is_live = exp and tonumber(exp) > now
if not on then
  local was = redis.call('HDEL', DRAINS, replica)
  if was == 0 and not is_live then return {'unknown'} end
  if was == 1 then
    bump_set()
    redis.call('PUBLISH', ARGV[4], ARGV[5])
  end
  return answer({'ok'})
end
if not is_live then return {'unknown'} end
if ARGV[3] ~= '1' and redis.call('HEXISTS', DRAINS, replica) == 0 then
  -- Would anyone else still take part?
  local others = 0
  local scored = redis.call('ZRANGEBYSCORE', MEMBERS, '(' .. now, '+inf')
  for _, r in ipairs(scored) do
    local s = redis.call('HGET', STATES, r)
    if r ~= replica and s ~= 'leaving' and s ~= 'draining'
      and redis.call('HEXISTS', DRAINS, r) == 0 then
      others = others + 1
    end
  end
  if others == 0 then return {'last'} end
end
if redis.call('HSET', DRAINS, replica, 1) == 1 then bump_set() end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return answer({'ok'})
