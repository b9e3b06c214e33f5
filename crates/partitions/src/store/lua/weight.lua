-- weight: sets one partition's weight.
--
-- ARGV: 1 partition, 2 weight, 3 channel, 4 notice.
--
-- The first weight set makes the group weighted (every session's load counted from
-- what it holds); the owner's load follows at once; setting the weight a partition
-- has in a weighted group changes nothing; setting the last weight that is not 1 back
-- to 1 makes the group unweighted again (loads are counts once more; replicas whose
-- capacities differ still balance by load, counted from the partitions). Waits out a
-- restore (see add.lua).
-- The reply of a weight set is kept a minute under KEYS[26], for a retry (a refusal
-- changes nothing: a retry answers anew).
--
-- Reply {'ok', old weight}, {'unknown'}, {'nogroup'}, {'restoring', ms}.
local bad = expect({SESSIONS, META, PARTITIONS, OWNERS, HELD, WEIGHTS, LOADS, ROSTER, CHANGES})
if bad then return bad end
local again = replayed()
if again then return again end
local now = clock()
local m = meta()
if not m.exists then return {'nogroup'} end
if restoring(m, now) then return {'restoring', m.grant_after - now} end
local n, w = ARGV[1], tonumber(ARGV[2])
if not redis.call('ZSCORE', PARTITIONS, n) then return {'unknown'} end
-- The weight it has already, in a weighted group: nothing changes.
if m.weighted and weights_of({n})[1] == w then return {'ok', w} end
if not m.weighted then make_weighted() end
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
else
  redis.call('HINCRBY', META, 'total', w - old)
  local o = redis.call('HGET', OWNERS, n)
  if o and redis.call('HEXISTS', LOADS, o) == 1 then
    redis.call('HINCRBY', LOADS, o, w - old)
  end
end
redis.call('HINCRBY', META, 'wver', 1)
bump_set()
roster_reset()
redis.call('PUBLISH', ARGV[3], ARGV[4])
return answer({'ok', old})
