-- status_page: partitions with their owners, for operators. Read-only.
--
-- ARGV: 1 offset, 2 limit.
--
-- Reply: {name, owner replica or '', fence, ms left or -1, ms held or -1, weight} for
-- the partitions at those positions.
local now = clock()
local first = tonumber(ARGV[1])
local names = redis.call('ZRANGE', PARTITIONS, first, first + tonumber(ARGV[2]) - 1)
local out = {}
if #names == 0 then return out end
local owners = redis.call('HMGET', OWNERS, unpack(names))
local fences = redis.call('HMGET', FENCES, unpack(names))
local sinces = redis.call('HMGET', SINCE, unpack(names))
local ws = weights_of(names)
local seen = {}
for j, n in ipairs(names) do
  local who, left, held = '', -1, -1
  local o = owners[j]
  if o then
    if seen[o] == nil then seen[o] = live(o, now) or false end
    if seen[o] then
      who = replica_of(o)
      left = seen[o] - now
      if sinces[j] then held = now - tonumber(sinces[j]) end
    end
  end
  out[j] = {n, who, fences[j] or '0', left, held, ws[j]}
end
return out
