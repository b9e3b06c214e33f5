-- moves: a page of the ledger of moves (MOVES, written by claim.lua). Read-only.
--
-- ARGV: 1 the id of the last entry already read ('' to start at the oldest kept),
-- 2 how many at most.
--
-- Reply: {id, {field, value, ...}, id, {field, value, ...}, ...}, oldest first: the
-- entries after the one named (fields: partition, from, to, cause, old_fence,
-- new_fence, ended, started, held_since, unowned_ms; '' where unknown).
local start = '-'
if ARGV[1] ~= '' then start = '(' .. ARGV[1] end
local entries = redis.call('XRANGE', MOVES, start, '+', 'COUNT', tonumber(ARGV[2]))
local out = {}
for _, e in ipairs(entries) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2]
end
return out
