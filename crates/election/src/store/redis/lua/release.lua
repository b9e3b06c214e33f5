-- release: compare-and-delete a duty's lease, then wake its followers.
--
-- KEYS: 1 lease. ARGV: 1 token, 2 channel. Publishes the lease key on the channel.
-- Safe to retry. Reply 1 (released) or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], KEYS[1])
  return 1
end
return 0
