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
local wait = change_wait(m, now)
if wait then return {'restoring', wait} end
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
remove_names(m, gone)
bump_set()
redis.call('PUBLISH', ARGV[2], ARGV[3])
return answer({'ok', #gone})
