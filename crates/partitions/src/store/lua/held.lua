-- held: what a session holds. Read-only.
--
-- ARGV: 1 session token. Reply: {name, fence, weight, ...}.
local tok = ARGV[1]
local lo, hi = span(tok)
local names = names_of(tok, redis.call('ZRANGEBYLEX', HELD, lo, hi))
local out = {}
if #names == 0 then return out end
local owners = redis.call('HMGET', OWNERS, unpack(names))
local fences = redis.call('HMGET', FENCES, unpack(names))
local ws = weights_of(names)
for i, n in ipairs(names) do
  if owners[i] == tok then
    out[#out + 1] = n
    out[#out + 1] = fences[i] or '0'
    out[#out + 1] = ws[i]
  end
end
return out
