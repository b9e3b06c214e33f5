-- adopt: a group seeded again from a replica's configured list (Redis lost it while
-- the replicas that had seen it were cut off, and its window passed before they were
-- back) brought to the set such a replica saw, as an operator's changes would bring it:
-- the names only the copy has added (free at once), the names it lacks removed (a held
-- one revoked: its owner gives it up, and the ledger records the removal), each name's
-- weight, the drains and preferences, the list version and digest taken from the copy.
-- Owners, fences and sessions stay: a partition both sets have does not move.
--
-- ARGV: 1 step (`begin`, `names`, `remove` or `done`), 2 the copy's life, 3 the copy's
-- set version, 4 channel, 5 notice; begin: 6 the life of the seeded group the replica
-- saw, 7 the copy's list version, 8 its digest, 9 the highest fence the replica knows,
-- 10 how many drained replica ids follow, then they, then how many preferences follow,
-- then they (partition, replica id, ...); names: 6.. name, weight, name, weight...;
-- remove: 6.. names (the set's names the copy lacks: the replica lists the set).
--
-- Begin takes a group seeded from a list (origin `seed`) that no operator has changed
-- since (`amended`), that grants (a group still in its window is restored instead:
-- restore.lua), is the one the replica saw, and is at a list version no newer than the
-- copy's (a newer list replaces the set anyway); or it goes on with an adopt of this
-- same copy (life and set version: `alife`, `asver`) that a replica left unfinished.
-- The group's origin is `adopt` until done, its drains, preferences, list version and
-- digest the copy's, and operator changes and versioned lists wait for ADOPT_HOLD
-- after each step (change_wait in meta.lua): if the replica stops midway, another
-- replica with the same copy finishes it, and after the hold an operator's change ends
-- it where it stands (origin `seed` again, amended). The group keeps its life and set
-- version until done, so that a replica reading the set midway keeps no copy that
-- looks like the one adopted. The other steps go on only while the group is adopting
-- this copy. Done gives the group the copy's life and a set version above the copy's,
-- bumps the weights version (every replica reads the set again) and sets origin
-- `restore`. Every step is safe to retry and to run twice (two replicas with the same
-- copy).
--
-- Reply {'ok'}, or {'stale', why}: `amended` (an operator changed the seeded group:
-- it keeps its set), `nogroup`, or `other` (another lifetime, origin, version or copy).
local ADOPT_HOLD = 10000
local step, life, sver = ARGV[1], ARGV[2], tonumber(ARGV[3])
local bad = expect(ALL) or expect({PREFS})
if bad then return bad end
local now = clock()
local m = meta()
if not m.exists then return {'stale', 'nogroup'} end
local mine = m.origin == 'adopt' and m.alife == life and m.asver == sver
local changed = false
if step == 'begin' then
  if not mine then
    if m.origin ~= 'seed' or m.life ~= ARGV[6] or m.life == life then
      return {'stale', 'other'}
    end
    if m.amended then return {'stale', 'amended'} end
    if restoring(m, now) or m.version > tonumber(ARGV[7]) then return {'stale', 'other'} end
    redis.call('HSET', META, 'alife', life, 'asver', sver, 'origin', 'adopt', 'version',
      ARGV[7], 'digest', ARGV[8], 'fmax', int(math.max(m.fmax, tonumber(ARGV[9]))))
    redis.call('HDEL', META, 'rcount')
    redis.call('DEL', DRAINS, PREFS)
    local nd = tonumber(ARGV[10])
    if nd > 0 then
      local d = {}
      for i = 11, 10 + nd do
        d[#d + 1] = ARGV[i]
        d[#d + 1] = 1
      end
      redis.call('HSET', DRAINS, unpack(d))
    end
    local at = 11 + nd
    local np = tonumber(ARGV[at])
    if np > 0 then
      local pr = {}
      for i = at + 1, at + 2 * np do pr[#pr + 1] = ARGV[i] end
      redis.call('HSET', PREFS, unpack(pr))
    end
    changed = true
  end
elseif not mine then
  return {'stale', 'other'}
elseif step == 'names' then
  local names, ws = {}, {}
  for i = 6, #ARGV, 2 do
    names[#names + 1] = ARGV[i]
    ws[#ws + 1] = tonumber(ARGV[i + 1])
  end
  local present, cur = {}, {}
  if #names > 0 then
    present = redis.call('ZMSCORE', PARTITIONS, unpack(names))
    cur = weights_of(names)
  end
  local new, nws = {}, {}
  for j, n in ipairs(names) do
    if present[j] then
      if cur[j] ~= ws[j] then
        set_weight(m, n, ws[j])
        changed = true
      end
    else
      new[#new + 1] = n
      nws[#nws + 1] = ws[j]
    end
  end
  changed = #add_names(m, new, nws, now) > 0 or changed
elseif step == 'remove' then
  local names = distinct(tail(6))
  local gone = {}
  if #names > 0 then
    local present = redis.call('ZMSCORE', PARTITIONS, unpack(names))
    for j, n in ipairs(names) do
      if present[j] then gone[#gone + 1] = n end
    end
  end
  remove_names(m, gone)
  changed = #gone > 0
else
  redis.call('HSET', META, 'origin', 'restore', 'life', life, 'sver', sver)
  redis.call('HDEL', META, 'adopting', 'alife', 'asver')
  redis.call('HINCRBY', META, 'wver', 1)
  bump_set()
  roster_reset()
  redis.call('PUBLISH', ARGV[4], ARGV[5])
  return {'ok'}
end
redis.call('HSET', META, 'adopting', int(now + ADOPT_HOLD))
if changed then redis.call('PUBLISH', ARGV[4], ARGV[5]) end
return {'ok'}
