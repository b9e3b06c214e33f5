-- routes: what a Router reads (router.rs, ops/routes.rs). Read-only.
--
-- ARGV: 1 '' for the whole table, or the id of the ledger entry a router read last,
-- 2 (with an id) how many entries after it at most.
--
-- Reply: false if the group does not exist; else {life, the ledger's newest id or '',
-- {replica, INFO value, ...}, then: for the whole table, {partition, replica, fence,
-- ...} of every partition with a live owner; after an id, 'gap' if the ledger no
-- longer holds that entry or holds more than the limit after it, else {partition,
-- replica, fence, id, ...} of every entry after it, oldest first}.
local m = meta()
if not m.exists then return false end
local newest = redis.call('XREVRANGE', MOVES, '+', '-', 'COUNT', 1)
local last = ''
if #newest > 0 then last = newest[1][1] end
local info = redis.call('HGETALL', INFO)
if ARGV[1] == '' then
  local now = clock()
  local owners = redis.call('HGETALL', OWNERS)
  local fences = {}
  local all = redis.call('HGETALL', FENCES)
  for i = 1, #all, 2 do fences[all[i]] = all[i + 1] end
  local free = {}
  for _, n in ipairs(redis.call('ZRANGE', FREE, 0, -1)) do free[n] = true end
  local alive = {}
  local out = {}
  for i = 1, #owners, 2 do
    local n, tok = owners[i], owners[i + 1]
    if alive[tok] == nil then alive[tok] = live(tok, now) and true or false end
    if not free[n] and alive[tok] and fences[n] then
      out[#out + 1] = n
      out[#out + 1] = replica_of(tok)
      out[#out + 1] = fences[n]
    end
  end
  return {m.life, last, info, out}
end
local limit = tonumber(ARGV[2])
local entries = redis.call('XRANGE', MOVES, ARGV[1], '+', 'COUNT', limit + 1)
if #entries == 0 or entries[1][1] ~= ARGV[1] then return {m.life, last, info, 'gap'} end
if #entries == limit + 1 and entries[#entries][1] ~= last then
  return {m.life, last, info, 'gap'}
end
local out = {}
for i = 2, #entries do
  local id, f = entries[i][1], entries[i][2]
  local e = {}
  for j = 1, #f, 2 do e[f[j]] = f[j + 1] end
  out[#out + 1] = e.partition
  out[#out + 1] = e.to
  out[#out + 1] = e.new_fence
  out[#out + 1] = id
end
return {m.life, last, info, out}
