-- restore: a group that Redis lost, created again from the set a live replica saw.
--
-- ARGV: 1 step (`begin` or `add`), 2 the set's life, 3 the set's version, 4 grant
-- delay ms, 5 how many partitions the set has; begin: 6 list version, 7 list digest,
-- 8 lease ms, 9 highest fence, 10 weighted (1/0), 11 weights version, 12 how many
-- drained replica ids follow, then they, then how many preferences follow, then they
-- (partition, replica id, ...), then name, weight, name, weight... (the first chunk);
-- add: 6.. name, weight, name, weight...
--
-- Begin creates the group if it does not exist, with the set's life and version, no
-- grant for the delay, the drains, preferences and highest fence it had, and the first
-- chunk of its
-- partitions (a set of up to one chunk is restored in one step). It also takes over a
-- group created again but not granting yet (its window open) if that group was seeded
-- from a replica's configured list, or restored from an older version of this set:
-- the newest set any live replica saw wins. Add puts more names in, while the group is
-- this restore's. META's `rcount` keeps how many the set has, so that another replica
-- with the same copy completes a restore whose replica died midway. Every begin that
-- creates the group draws a new incarnation (so no session of the group it replaces
-- lives on). Safe to retry.
--
-- Reply {'ok'} or {'stale'} (another restore or seed won, or the group is granting).
local step, life, sver = ARGV[1], ARGV[2], tonumber(ARGV[3])
local bad = expect(ALL) or expect({PREFS})
if bad then return bad end
local now, now_us = clock()
local m = meta()
local first = 6
if step == 'begin' then
  if m.exists then
    local same = m.origin == 'restore' and m.life == life and m.sver == sver
    if same then return {'ok'} end
    local older = m.origin == 'seed' or (m.origin == 'restore' and m.life == life and m.sver < sver)
    if not (restoring(m, now) and older) then return {'stale'} end
    redis.call('DEL', PARTITIONS, FREE, WEIGHTS, REVOKED)
  end
  -- A group of another server lifetime keeps its hold (meta.lua's follow_server).
  local lifetime = follow_server(m, now)
  local after = math.max(m.grant_after, now + tonumber(ARGV[4]))
  redis.call('HSET', META, 'count', 0, 'next', 0, 'version', ARGV[6], 'digest', ARGV[7],
    'grant_after', after, 'life', life, 'sver', sver, 'lease', ARGV[8],
    'fmax', int(math.max(m.fmax, tonumber(ARGV[9]))), 'origin', 'restore', 'total', 0,
    'wver', ARGV[11], 'rcount', ARGV[5],
    'inc', 'r:' .. life .. ':' .. sver .. ':' .. int(now_us), 'server', lifetime, 'ssum', 0)
  redis.call('HDEL', META, 'amended', 'adopting', 'alife', 'asver')
  if ARGV[10] == '1' then
    redis.call('HSET', META, 'weighted', 1)
  else
    redis.call('HDEL', META, 'weighted')
  end
  redis.call('DEL', DRAINS)
  local ndrains = tonumber(ARGV[12])
  if ndrains > 0 then
    local d = {}
    for i = 13, 12 + ndrains do
      d[#d + 1] = ARGV[i]
      d[#d + 1] = 1
    end
    redis.call('HSET', DRAINS, unpack(d))
  end
  local at = 13 + ndrains
  local nprefs = tonumber(ARGV[at])
  redis.call('DEL', PREFS)
  if nprefs > 0 then
    local pr = {}
    for i = at + 1, at + 2 * nprefs do pr[#pr + 1] = ARGV[i] end
    redis.call('HSET', PREFS, unpack(pr))
  end
  first = at + 1 + 2 * nprefs
elseif not (m.exists and m.origin == 'restore' and m.life == life and m.sver == sver) then
  return {'stale'}
end
local names, ws = {}, {}
for i = first, #ARGV, 2 do
  names[#names + 1] = ARGV[i]
  ws[#ws + 1] = tonumber(ARGV[i + 1])
end
if #names == 0 then return {'ok'} end
local present = redis.call('ZMSCORE', PARTITIONS, unpack(names))
local nxt = tonumber(redis.call('HGET', META, 'next') or '0')
local pos, free, heavy, new = {}, {}, {}, {}
local added, total = 0, 0
for j, n in ipairs(names) do
  if not present[j] then
    pos[#pos + 1] = nxt
    pos[#pos + 1] = n
    nxt = nxt + 1
    free[#free + 1] = now
    free[#free + 1] = n
    if ws[j] ~= 1 then
      heavy[#heavy + 1] = ws[j]
      heavy[#heavy + 1] = n
    end
    added = added + 1
    new[added] = n
    total = total + ws[j]
  end
end
if added > 0 then
  redis.call('ZADD', PARTITIONS, unpack(pos))
  redis.call('ZADD', FREE, unpack(free))
  if #heavy > 0 then redis.call('ZADD', WEIGHTS, unpack(heavy)) end
  redis.call('HINCRBY', META, 'count', added)
  redis.call('HINCRBY', META, 'total', total)
  redis.call('HSET', META, 'next', nxt)
  count_names(new, 1)
end
return {'ok'}
