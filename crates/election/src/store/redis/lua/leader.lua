-- leader: who holds a duty's lease. Read-only.
--
-- KEYS: 1 lease, 2 fence. Reply (one consistent snapshot): {holder token or false,
-- pttl, fence}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '0'}
