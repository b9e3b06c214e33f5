-- report: a replica's damped loads become its partitions' weights
-- (`GroupConfigBuilder::weights_from_loads`).
--
-- ARGV: 1 session token, 2 channel, 3 notice, then per partition: name, the fence of
-- the session's term of it, weight.
--
-- Sets the weight of each named partition the session still holds in the term named
-- (its owner and last fence), that is in the set and not revoked; skips the others (a
-- term that ended: its successor reports its own). The owner's load and the total
-- follow, as for `weight`. Unlike an operator's `weight`, a report does not move the
-- set's version: only the reporter's roster entry changes (roster_changed), so every
-- other replica's next tick reads one changed member and no replica reads the set
-- again. The first weight makes the group weighted, as `weight` does (the set's
-- version then moves, once, and the notice is published). Nothing while the session is
-- not live or the group is being restored. Setting the weight a partition has changes
-- nothing: safe to retry.
--
-- Reply: one flag per partition named, 1 if its weight is now the one named.
local bad = expect({SESSIONS, MEMBERS, META, PARTITIONS, OWNERS, FENCES, REVOKED, HELD,
  WEIGHTS, LOADS, ROSTER, CHANGES})
if bad then return bad end
local tok = ARGV[1]
local count = (#ARGV - 3) / 3
local out = {}
for j = 1, count do out[j] = 0 end
local now = clock()
local m = meta()
if not m.exists or restoring(m, now) or not live(tok, now) then return out end
local names, fences, weights = {}, {}, {}
for j = 1, count do
  local i = 4 + (j - 1) * 3
  names[j], fences[j], weights[j] = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
end
local owners = redis.call('HMGET', OWNERS, unpack(names))
local last = redis.call('HMGET', FENCES, unpack(names))
local old = weights_of(names)
local switched = false
local delta = 0
for j = 1, count do
  local n, w = names[j], weights[j]
  if owners[j] == tok and tonumber(last[j] or '-1') == fences[j]
      and redis.call('HEXISTS', REVOKED, n) == 0
      and redis.call('ZSCORE', PARTITIONS, n) then
    out[j] = 1
    if w ~= old[j] then
      if not m.weighted then
        make_weighted()
        m.weighted = true
        switched = true
      end
      if w == 1 then
        redis.call('ZREM', WEIGHTS, n)
      else
        redis.call('ZADD', WEIGHTS, w, n)
      end
      delta = delta + w - old[j]
    end
  end
end
if delta ~= 0 then
  redis.call('HINCRBY', META, 'total', delta)
  if redis.call('HEXISTS', LOADS, tok) == 1 then redis.call('HINCRBY', LOADS, tok, delta) end
end
if switched then
  redis.call('HINCRBY', META, 'wver', 1)
  bump_set()
  roster_reset()
  redis.call('PUBLISH', ARGV[2], ARGV[3])
elseif delta ~= 0 then
  roster_changed(replica_of(tok))
end
return out
