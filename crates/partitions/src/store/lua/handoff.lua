-- handoff: the next owner takes the state the previous term of each partition left.
--
-- KEYS: the hand-off key of each partition. ARGV: 1 how long to keep a taken state
-- (ms), 2.. the fence of the term that must have left it, one per key.
--
-- A state kept under a key is `<fence>:<bytes>` (release.lua). If its fence is the
-- one named, it is taken: kept only a little longer, so that a retry of this script
-- (after a lost reply) takes it again, then gone. A state of an older term is never
-- offered, and deleted; one of a later term is left alone (this term is over). Safe to
-- retry.
--
-- Reply: per key, {'ok', bytes}, {'stale'} or {'gone'} (no state: its time to live
-- passed, or Redis lost it).
local keep = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  local want = tonumber(ARGV[i + 1])
  if not v then
    out[i] = {'gone'}
  else
    local colon = string.find(v, ':', 1, true)
    local fence = colon and tonumber(string.sub(v, 1, colon - 1))
    if fence == want then
      redis.call('PEXPIRE', key, keep, 'LT')
      out[i] = {'ok', string.sub(v, colon + 1)}
    else
      if fence == nil or fence < want then redis.call('DEL', key) end
      out[i] = {'stale'}
    end
  end
end
return out
