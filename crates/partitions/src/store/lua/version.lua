-- version: the steps of applying a versioned partition list.
--
-- ARGV: 1 version, 2 `begin` or `done`, 3 digest.
--
-- Begin: takes the version if the group's is older (its digest empty until done), or
-- goes on with one still being applied; not while the group is being adopted (a
-- replica brings it to its copy: adopt.lua). Done: records the digest if the group is
-- still at that version. Safe to retry. Reply 1/0.
local bad = expect({META})
if bad then return bad end
local m = meta()
if not m.exists then return 0 end
local v = tonumber(ARGV[1])
if ARGV[2] == 'begin' then
  -- Not while a replica brings the group to its copy (adopt.lua): that sets the
  -- version too. The replica tries again at a later tick.
  if m.origin == 'adopt' then return 0 end
  if m.version < v then
    redis.call('HSET', META, 'version', ARGV[1], 'digest', '')
    bump_set()
    return 1
  end
  if m.version == v and m.digest == '' then return 1 end
  return 0
end
if m.version == v then
  if m.digest ~= ARGV[3] then
    redis.call('HSET', META, 'digest', ARGV[3])
    bump_set()
  end
  return 1
end
return 0
