-- key_types: the type of each key (TYPE): string, hash, list, ..., none.
--
-- Read-only; the CLI runs it only after a read failed with WRONGTYPE, to name the key
-- (Redis does not).
--
-- Reply: one type name per key, in KEYS order.
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('TYPE', key).ok end
return out
