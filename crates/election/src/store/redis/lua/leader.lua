-- leader: a duty's lease and fence as they are. Read-only.
--
-- KEYS: 1 lease, 2 fence.
--
-- Reply (one consistent snapshot): {lease value, pttl, fence}: the lease key's value
-- (a holder's token, or someone else's data) or false, its PTTL, and the last fence
-- issued or false (never elected).
local LEASE, FENCE = KEYS[1], KEYS[2]
return {redis.call('GET', LEASE), redis.call('PTTL', LEASE), redis.call('GET', FENCE)}
