-- status_head: the group without its partitions, for operators. Read-only.
--
-- Reply: false if the group does not exist, else {count, list version, list digest,
-- names[], states[], ms left[], held[], instances[], {drained replica, ...}, loads[],
-- capacities[], weighted (1/0), total weight, largest weight, weights version,
-- {partition, preferred replica id, ...}} of the live members (drained: every drained
-- replica id, live or not; the preferences: all of them).
local now = clock()
local m = meta()
if not m.exists then return false end
local names, states, lefts, helds, loads, caps = roster(now, m.weighted)
local instances = {}
if #names > 0 then instances = redis.call('HMGET', INFO, unpack(names)) end
local w, total, wmax, wver = weight_info(m)
return {m.count, m.version, m.digest, names, states, lefts, helds, instances,
  fields(DRAINS), loads, caps, w, total, wmax, wver, redis.call('HGETALL', PREFS)}
