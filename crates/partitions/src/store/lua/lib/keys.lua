-- The keys of a group, named once, in the order `GroupKeys::all` passes them in KEYS
-- (every key carries the group's hash tag: one Redis Cluster slot). See
-- docs/key-layout.md for what each holds.
local MEMBERS, SESSIONS, STATES, META, PARTITIONS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FREE, OWNERS, FENCES, HELD, DEAD = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local REVOKED, DRAINS, SINCE, INFO, WEIGHTS = KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15]
local LOADS, CAPACITY, HOLDERS, HEIRS, ACKS = KEYS[16], KEYS[17], KEYS[18], KEYS[19], KEYS[20]
local ROSTER, CHANGES, ENDED, MOVES = KEYS[21], KEYS[22], KEYS[23], KEYS[24]
-- Preferences (partition -> replica id): not in ALL, so that a script that never reads
-- them (a tick) does not check their type either.
local PREFS = KEYS[25]
-- An admin change's reply, kept a minute for a retry of the same request (KEYS[26],
-- passed by the admin scripts only).
local OP = KEYS[26]

-- Every key with the type the group keeps in it.
local TYPES = {
  [MEMBERS] = 'zset', [SESSIONS] = 'hash', [STATES] = 'hash', [META] = 'hash',
  [PARTITIONS] = 'zset', [FREE] = 'zset', [OWNERS] = 'hash', [FENCES] = 'hash',
  [HELD] = 'zset', [DEAD] = 'zset', [REVOKED] = 'hash', [DRAINS] = 'hash',
  [SINCE] = 'hash', [INFO] = 'hash', [WEIGHTS] = 'zset', [LOADS] = 'hash',
  [CAPACITY] = 'hash', [HOLDERS] = 'hash', [HEIRS] = 'hash', [ACKS] = 'hash',
  [ROSTER] = 'hash', [CHANGES] = 'zset', [ENDED] = 'hash', [MOVES] = 'stream',
  [PREFS] = 'hash',
}
local ALL = {
  MEMBERS, SESSIONS, STATES, META, PARTITIONS, FREE, OWNERS, FENCES, HELD, DEAD,
  REVOKED, DRAINS, SINCE, INFO, WEIGHTS, LOADS, CAPACITY, HOLDERS, HEIRS, ACKS,
  ROSTER, CHANGES, ENDED, MOVES,
}

-- Refuses to run (before any write) if one of `keys` holds another type than the group
-- keeps there, so that a foreign value in a group key is a typed error naming the key,
-- and never half an update.
local function expect(keys)
  for _, key in ipairs(keys) do
    local t = redis.call('TYPE', key).ok
    if t ~= 'none' and t ~= TYPES[key] then
      return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. t .. ', not a ' .. TYPES[key])
    end
  end
  return nil
end
