-- owner: one partition's owner. Read-only.
--
-- ARGV: 1 partition.
--
-- Reply: false if it is not in the set, else {owner replica or '', fence, ms left or
-- -1, ms held or -1, weight}.
local now = clock()
local n = ARGV[1]
if not redis.call('ZSCORE', PARTITIONS, n) then return false end
local o = redis.call('HGET', OWNERS, n)
local fence = redis.call('HGET', FENCES, n) or '0'
local weight = weights_of({n})[1]
if o then
  local exp = live(o, now)
  if exp then
    local since = tonumber(redis.call('HGET', SINCE, n) or '-1')
    local held = -1
    if since >= 0 then held = now - since end
    return {replica_of(o), fence, exp - now, held, weight}
  end
end
return {'', fence, -1, -1, weight}
