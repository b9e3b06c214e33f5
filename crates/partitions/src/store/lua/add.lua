-- add: partitions into the set.
--
-- ARGV: 1 mode (`strict`: an operator's; `ensure`; a list version: only while the group
-- is at that version; `seed`: creates the group if it does not exist), 2 the seed's
-- life (a new group's id), 3 grant delay ms (seed), 4 lease ms (seed), 5 channel,
-- 6 notice, 7 gathering delay ms (seed), 8.. names.
--
-- Adds the names not in the set yet (free at once, unless a session still holds one
-- it was told to give up: it keeps it). Only a seed creates a group that does not
-- exist, with no grant for the grant delay (a lease: if Redis lost its data, every old
-- owner's deadline passes first), or only for the gathering delay (the replicas
-- started together join meanwhile) on a server that has granted on its own history
-- for more than a lease (lifetime.lua): every lease this server granted is in its
-- data, and every lease an earlier server granted ended before this one began, so no
-- lease of the group can have been forgotten. A seed goes on only while the group is
-- the one it created. While a group just created grants nothing yet, its set may still be
-- replaced by a restore, and while a replica brings it to its copy (adopt.lua) it is
-- being replaced: every change but the seed's waits (meta.lua's change_wait). Strict: nothing if one is
-- already there. The reply of an operator's change that changed the set is kept a
-- minute under KEYS[26], for a retry (a refusal changes nothing: a retry answers anew).
--
-- Reply {'ok', added}, {'exists', name}, {'stale'} (another list version, or another
-- seed), {'nogroup'}, {'restoring', ms}.
local mode = ARGV[1]
local bad = expect({META, PARTITIONS, FREE, OWNERS, REVOKED, WEIGHTS})
if bad then return bad end
local again = replayed()
if again then return again end
local now, now_us = clock()
local m = meta()
if mode == 'seed' then
  if not m.exists then
    local lifetime, began = server_lifetime(now)
    local delay = tonumber(ARGV[3])
    if began and began + tonumber(ARGV[4]) <= now then
      delay = math.min(delay, tonumber(ARGV[7]))
    end
    redis.call('HSET', META, 'count', 0, 'next', 0, 'version', 0, 'grant_after',
      now + delay, 'life', ARGV[2], 'sver', 0, 'lease', ARGV[4], 'fmax', 0,
      'origin', 'seed', 'inc', 's:' .. ARGV[2] .. ':' .. int(now_us),
      'server', lifetime, 'ssum', 0)
    m = meta()
  elseif m.life ~= ARGV[2] or m.origin ~= 'seed' then
    return {'stale'}
  end
elseif not m.exists then
  return {'nogroup'}
elseif change_wait(m, now) then
  return {'restoring', change_wait(m, now)}
elseif tonumber(mode) and m.version ~= tonumber(mode) then
  return {'stale'}
end
local names = distinct(tail(8))
if #names == 0 then return {'ok', 0} end
if mode == 'strict' then
  local present = redis.call('ZMSCORE', PARTITIONS, unpack(names))
  for j, n in ipairs(names) do
    if present[j] then return {'exists', n} end
  end
end
local added = add_names(m, names, nil, now)
if #added == 0 then return {'ok', 0} end
bump_set()
redis.call('PUBLISH', ARGV[5], ARGV[6])
return answer({'ok', #added})
