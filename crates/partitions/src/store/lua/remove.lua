-- remove: partitions out of the set.
--
-- ARGV: 1 mode (`strict`: an operator's; `ensure`; a list version: only while the group
-- is at that version), 2 channel, 3 notice, 4.. names.
--
-- Removes the names that are in the set, and their preferences; a held one stays with its owner, who is told
-- to give it up (REVOKED) and does (and a resumed session never regrants it). Strict:
-- nothing if one is unknown, or if the set would be empty. Waits out a restore (see
-- add.lua). The reply of an operator's change that changed the set is kept a minute
-- under KEYS[26], for a retry (a refusal changes nothing: a retry answers anew).
--
-- Reply {'ok', removed}, {'unknown', name}, {'last'}, {'stale'}, {'nogroup'},
-- {'restoring', ms}.
local mode = ARGV[1]
local bad = expect({META, PARTITIONS, FREE, OWNERS, REVOKED, WEIGHTS, ENDED, PREFS})
if bad then return bad end
local again = replayed()
if again then return again end
local now = clock()
local m = meta()
if not m.exists then return {'nogroup'} end
if restoring(m, now) then return {'restoring', m.grant_after - now} end
if tonumber(mode) and m.version ~= tonumber(mode) then return {'stale'} end
local names = distinct(tail(4))
if #names == 0 then return {'ok', 0} end
local present = redis.call('ZMSCORE', PARTITIONS, unpack(names))
local strict = mode == 'strict'
local gone = {}
for j, n in ipairs(names) do
  if present[j] then
    gone[#gone + 1] = n
  elseif strict then
    return {'unknown', n}
  end
end
if strict and #gone >= m.count then return {'last'} end
if #gone == 0 then return {'ok', 0} end
redis.call('ZREM', PARTITIONS, unpack(gone))
redis.call('ZREM', FREE, unpack(gone))
redis.call('HDEL', ENDED, unpack(gone))
local reserved = {}
for j, n in ipairs(gone) do reserved[j] = '\2' .. n end
redis.call('HDEL', ENDED, unpack(reserved))
redis.call('HDEL', PREFS, unpack(gone))
local owners = redis.call('HMGET', OWNERS, unpack(gone))
local revoke, unheld = {}, {}
for j, n in ipairs(gone) do
  if owners[j] then
    revoke[#revoke + 1] = n
    revoke[#revoke + 1] = 'removed'
  else
    unheld[#unheld + 1] = n
  end
end
if #revoke > 0 then redis.call('HSET', REVOKED, unpack(revoke)) end
if m.weighted then
  -- A held one keeps its weight (in its owner's load) until it is given back.
  redis.call('HINCRBY', META, 'total', -sum(weights_of(gone)))
end
if #unheld > 0 then redis.call('ZREM', WEIGHTS, unpack(unheld)) end
redis.call('HINCRBY', META, 'count', -#gone)
count_names(gone, -1)
bump_set()
redis.call('PUBLISH', ARGV[2], ARGV[3])
return answer({'ok', #gone})
