-- prefer: an operator's preference of a partition for a replica id, or its removal.
--
-- ARGV: 1 partition, 2 replica id ('': remove the preference), 3 channel, 4 notice.
--
-- Sets (or removes) the partition's entry in PREFS. A preference only changes which
-- free partitions replicas claim first and which they hand over first (claim.lua and
-- the replicas' rule): it never takes a partition by itself. The replica need not be
-- live. A change bumps the set's version, so that every replica reads the preferences
-- again with the set (a steady tick carries none), and publishes the notice. Setting
-- the preference a partition has changes nothing. Waits out a restore (see add.lua).
-- The reply of a change is kept a minute under KEYS[26], for a retry (a refusal
-- changes nothing: a retry answers anew).
--
-- Reply {'ok', the replica id preferred before or ''}, {'unknown'}, {'nogroup'},
-- {'restoring', ms}.
local bad = expect({META, PARTITIONS, PREFS})
if bad then return bad end
local again = replayed()
if again then return again end
local now = clock()
local m = meta()
if not m.exists then return {'nogroup'} end
local wait = change_wait(m, now)
if wait then return {'restoring', wait} end
local n, r = ARGV[1], ARGV[2]
if not redis.call('ZSCORE', PARTITIONS, n) then return {'unknown'} end
local old = redis.call('HGET', PREFS, n) or ''
if old == r then return answer({'ok', old}) end
if r == '' then
  redis.call('HDEL', PREFS, n)
else
  redis.call('HSET', PREFS, n, r)
end
bump_set()
redis.call('PUBLISH', ARGV[3], ARGV[4])
return answer({'ok', old})
