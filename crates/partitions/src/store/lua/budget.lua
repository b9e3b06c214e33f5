-- budget: takes moves out of the group's move budget for this window.
--
-- ARGV: 1 window ms, 2 budget (moves per window), 3 moves wanted.
--
-- Windows are counted on the server's clock (`floor(now / window)`); META keeps the
-- current one and how many moves were taken in it (`bwin`, `bused`). Grants what is
-- left of the budget in this window, up to what is wanted, and counts it as taken. A
-- retry (after a lost reply) takes again: it may waste budget, never exceed it.
--
-- Reply: how many moves may be made (0 if none is left, or the group does not exist).
local bad = expect({META})
if bad then return bad end
local now = clock()
local window = math.max(1, tonumber(ARGV[1]))
local budget, want = tonumber(ARGV[2]), tonumber(ARGV[3])
local m = redis.call('HMGET', META, 'count', 'bwin', 'bused')
if not m[1] then return 0 end
local win = math.floor(now / window)
local used = 0
if tonumber(m[2] or '-1') == win then used = tonumber(m[3] or '0') end
local grant = math.max(0, math.min(want, budget - used))
if grant > 0 then
  redis.call('HSET', META, 'bwin', string.format('%.0f', win), 'bused', used + grant)
end
return grant
