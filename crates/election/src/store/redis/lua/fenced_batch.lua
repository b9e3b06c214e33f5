-- fenced_batch: several fenced writes (and raises) that all happen or none does.
--
-- KEYS: one pair per distinct target key, guard then target (1 guard, 2 target, 3
-- guard, 4 target, ...). ARGV: 1 fence, then each operation in order as its name, the
-- number of its pair (1, 2, ...) and its arguments: SET n value, HSET n field value,
-- RPUSH n value, or RAISE n (raises the guard only).
--
-- Reads every guard first: if any holds a fence above `fence`, nothing is written.
-- Then checks, before any write, that no write will fail on its key's type (a Redis
-- script is not rolled back when a command in it fails): a key an earlier SET of the
-- batch made is a string, one an HSET made a hash, one an RPUSH made a list. Only then
-- does it write, in order, and raise every guard below `fence` to it. A retried batch
-- of SET, HSET and RAISE writes the same again; a retried RPUSH would append twice, so
-- the store never retries a batch that holds one.
--
-- Reply: {1, fence} (written) or {0, highest} (refused: a newer term has written or raised).
local fence = tonumber(ARGV[1])
local seen, high = {}, 0
for g = 1, #KEYS, 2 do
  seen[g] = tonumber(redis.call('GET', KEYS[g]) or '0')
  if seen[g] > high then high = seen[g] end
end
if fence < high then return {0, string.format('%.0f', high)} end

local ARITY = {SET = 1, HSET = 2, RPUSH = 1, RAISE = 0}
local WANTS = {HSET = 'hash', RPUSH = 'list'}
local MAKES = {SET = 'string', HSET = 'hash', RPUSH = 'list'}
local types, ops = {}, {}
local i = 2
while i <= #ARGV do
  local op, pair = ARGV[i], tonumber(ARGV[i + 1])
  local target = pair and KEYS[2 * pair]
  if ARITY[op] == nil or target == nil then
    return redis.error_reply('ERR fenced batch: bad operation ' .. tostring(op) .. ' at ' .. i)
  end
  if MAKES[op] then
    local now = types[target] or redis.call('TYPE', target)['ok']
    local want = WANTS[op]
    if want and now ~= 'none' and now ~= want then
      return redis.error_reply('WRONGTYPE fenced batch: ' .. op .. ' to ' .. target ..
        ', which holds a ' .. now)
    end
    types[target] = MAKES[op]
    ops[#ops + 1] = {op, target, i + 2}
  end
  i = i + 2 + ARITY[op]
end

for _, o in ipairs(ops) do
  local op, target, a = o[1], o[2], o[3]
  if op == 'SET' then
    redis.call('SET', target, ARGV[a])
  elseif op == 'HSET' then
    redis.call('HSET', target, ARGV[a], ARGV[a + 1])
  else
    redis.call('RPUSH', target, ARGV[a])
  end
end
for g = 1, #KEYS, 2 do
  if fence > seen[g] then redis.call('SET', KEYS[g], ARGV[1]) end
end
return {1, ARGV[1]}
