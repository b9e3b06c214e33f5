-- moves: a page of the ledger of moves (MOVES, written by claim.lua). Read-only.
--
-- ARGV: 1 the id of the last entry already read ('' to start at the oldest kept),
-- 2 how many at most, 3 (optional) 'newest': the newest entries instead (ARGV 1
-- unused).
--
-- Reply: {id, {field, value, ...}, id, {field, value, ...}, ...}, oldest first: the
-- entries after the one named, or the newest (fields: partition, from, to, cause, old_fence,
-- new_fence, ended, started, held_since, unowned_ms; '' where unknown).
local entries
if ARGV[3] == 'newest' then
  local newest = redis.call('XREVRANGE', MOVES, '+', '-', 'COUNT', tonumber(ARGV[2]))
  entries = {}
  for i = #newest, 1, -1 do entries[#entries + 1] = newest[i] end
else
  local start = '-'
  if ARGV[1] ~= '' then start = '(' .. ARGV[1] end
  entries = redis.call('XRANGE', MOVES, start, '+', 'COUNT', tonumber(ARGV[2]))
end
local out = {}
for _, e in ipairs(entries) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2]
end
return out
