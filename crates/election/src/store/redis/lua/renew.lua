-- renew: compare-and-extend a duty's lease.
--
-- KEYS: 1 lease. ARGV: 1 token, 2 lease ms. Safe to retry.
--
-- Reply: 1 (extended) or 0 (the token does not hold the lease).
local LEASE = KEYS[1]
local token, lease_ms = ARGV[1], ARGV[2]
if redis.call('GET', LEASE) == token then
  return redis.call('PEXPIRE', LEASE, lease_ms)
end
return 0
