-- renew: compare-and-extend a duty's lease.
--
-- KEYS: 1 lease. ARGV: 1 token, 2 lease ms. Safe to retry. Reply 1 (extended) or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
