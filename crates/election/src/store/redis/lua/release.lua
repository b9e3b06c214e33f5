-- release: compare-and-delete a duty's lease, then wake its followers.
--
-- KEYS: 1 lease. ARGV: 1 token, 2 channel. Publishes the lease key on the channel.
-- Safe to retry.
--
-- Reply: 1 (released) or 0 (the token did not hold the lease).
local LEASE = KEYS[1]
local token, channel = ARGV[1], ARGV[2]
if redis.call('GET', LEASE) == token then
  redis.call('DEL', LEASE)
  redis.call('PUBLISH', channel, LEASE)
  return 1
end
return 0
