-- set_page: the set, page by page, as a replica keeps it (to restore the group if
-- Redis loses it). Read-only.
--
-- ARGV: 1 offset, 2 limit.
--
-- Reply: false if the group does not exist, else {life, set version, list version,
-- list digest, lease ms, highest fence, weighted (1/0), weights version,
-- {drained replica, ...}, {name, weight, ...} with the partitions at those positions,
-- count, checksum of the names ('' if the group keeps none: meta.lua's count_names),
-- {partition, preferred replica id, ...} (every preference, on the first page only)}.
local m = meta()
if not m.exists then return false end
local first = tonumber(ARGV[1])
local names = redis.call('ZRANGE', PARTITIONS, first, first + tonumber(ARGV[2]) - 1)
local ws = weights_of(names)
local page = {}
for i, n in ipairs(names) do
  page[#page + 1] = n
  page[#page + 1] = ws[i]
end
local prefs = {}
if first == 0 then prefs = redis.call('HGETALL', PREFS) end
return {m.life, m.sver, m.version, m.digest, m.lease, int(m.fmax), m.weighted and 1 or 0,
  m.wver, fields(DRAINS), page, m.count, redis.call('HGET', META, 'ssum') or '', prefs}
