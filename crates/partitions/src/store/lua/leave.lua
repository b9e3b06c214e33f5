-- leave: ends a session gracefully.
--
-- ARGV: 1 replica, 2 process token, 3 session token, 4 channel, 5 notice, 6 budget.
--
-- Ends the session if it is the replica's current one and this process holds it,
-- frees what it still holds (up to the budget; ticks free the rest) and publishes the
-- notice. Safe to retry. Reply: 1.
local replica, process, session = ARGV[1], ARGV[2], ARGV[3]
local bad = expect(ALL)
if bad then return bad end
local now = clock()
local holder = redis.call('HGET', HOLDERS, replica) or session
if redis.call('HGET', SESSIONS, replica) == session and holder == process then
  teardown(replica, session, now)
  -- What the session still holds is freed as left, not expired (free.lua).
  redis.call('HSET', ENDED, '\1' .. session, 'leave')
  free_ended(tonumber(ARGV[6]))
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return 1
