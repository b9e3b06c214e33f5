-- fenced_write: a write that only a current term may make.
--
-- KEYS: 1 guard, 2 target. ARGV: 1 fence, 2 op (SET, HSET, RPUSH, DEL), 3.. its args.
--
-- Performs the write only if `fence` is not lower than the highest fence the guard has
-- seen, then raises the guard. The write runs first, so a failing write (wrong type)
-- leaves the guard unchanged. A retried SET, HSET or DEL changes nothing more; a
-- retried RPUSH would append twice, so the store never retries one.
--
-- Reply: {1, fence} (written) or {0, highest} (refused: a newer term has written).
local GUARD, TARGET = KEYS[1], KEYS[2]
local high = tonumber(redis.call('GET', GUARD) or '0')
local fence = tonumber(ARGV[1])
if fence < high then return {0, string.format('%.0f', high)} end
local op = ARGV[2]
if op == 'SET' then
  redis.call('SET', TARGET, ARGV[3])
elseif op == 'HSET' then
  redis.call('HSET', TARGET, ARGV[3], ARGV[4])
elseif op == 'RPUSH' then
  redis.call('RPUSH', TARGET, ARGV[3])
elseif op == 'DEL' then
  redis.call('DEL', TARGET)
else
  return redis.error_reply('ERR unknown fenced op ' .. op)
end
if fence > high then redis.call('SET', GUARD, ARGV[1]) end
return {1, ARGV[1]}
