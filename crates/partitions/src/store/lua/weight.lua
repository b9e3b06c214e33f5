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
local wait = change_wait(m, now)
if wait then return {'restoring', wait} end
local n, w = ARGV[1], tonumber(ARGV[2])
if not redis.call('ZSCORE', PARTITIONS, n) then return {'unknown'} end
local old, changed = set_weight(m, n, w)
if not changed then return {'ok', old} end
redis.call('HINCRBY', META, 'wver', 1)
bump_set()
roster_reset()
redis.call('PUBLISH', ARGV[3], ARGV[4])
return answer({'ok', old})
