-- release: gives back partitions a session's terms held, named by term, with the state
-- each term leaves for its successor.
--
-- ARGV: 1 session token, 2 channel, 3 notice, 4 state time to live (ms), 5 hold (ms),
-- 6.. name, fence, cause, state, receiver, lifetime, name, fence, ... (cause: why the
-- term ended, `handoff`, `drain`, `leave` or `released`; state: '' for none, else '='
-- then its bytes; receiver: '' for none, else the replica id the partition is handed
-- to; lifetime: the server lifetime the replica's last tick named when it decided the
-- release, '' for a term that leaves no state). KEYS[26..]: the hand-off key of each
-- term that leaves state, in order.
--
-- Gives back each partition whose current term is the session's at that fence (free
-- from now if still listed, its term's end noted for the ledger of moves, with the size
-- of its state and the server lifetime it was left in), then keeps each such term's
-- state under its hand-off key as
-- `<fence>:<bytes>` for the time to live (the next owner takes it: handoff.lua), and
-- publishes the notice once. A partition handed to a named receiver is reserved for it
-- for the hold: free from now + hold in FREE's order (claims of other replicas take
-- only partitions free since now or earlier: claim.lua), its receiver named in ENDED
-- under '\2' .. name. A late or repeated release touches nothing of a later term, and
-- writes no state and no reservation once the next term has started: safe to retry.
--
-- Reply: one flag per name: 1 if no term of the session holds it any more and no later
-- term was granted (given back now, or before), 0 if a later term holds it.
local tok = ARGV[1]
local bad = expect({META, FREE, OWNERS, HELD, REVOKED, SINCE, WEIGHTS, LOADS, ROSTER, CHANGES,
  ENDED})
if bad then return bad end
local now = clock()
local ttl = tonumber(ARGV[4])
local hold = tonumber(ARGV[5])
local names, fences, causes, sizes, states, tos = {}, {}, {}, {}, {}, {}
-- State is noted with the server lifetime the replica named, the one it saw when it
-- decided the release (a claim compares it with the server's): one left in another is
-- never offered (claim.lua), since a restart or a failover may have lost a later term
-- of the partition with its writes. Not the lifetime the group last saw: a release
-- whose reply was lost, retried by the store on a server promoted since, would note
-- the promoted server's while a later term the promotion lost ran in between (found
-- by the simulation, seed 9935).
for i = 6, #ARGV, 6 do
  local j = #names + 1
  names[j] = ARGV[i]
  fences[j] = ARGV[i + 1]
  causes[j] = ARGV[i + 2]
  tos[j] = ARGV[i + 4]
  if ARGV[i + 3] ~= '' then
    states[j] = string.sub(ARGV[i + 3], 2)
    sizes[j] = tostring(#states[j]) .. '\t' .. ARGV[i + 5]
  end
end
local out, gone = give_back(tok, names, fences, now, causes, sizes)
local k = 26
local until_s = string.format('%.0f', now + hold)
for j, n in ipairs(names) do
  if states[j] or tos[j] ~= '' then
    -- Kept only for a term whose end ENDED notes now: given back (now or by an earlier
    -- try of this release) and not yet followed by another.
    local e = out[j] == 1 and redis.call('HGET', ENDED, n)
    local last = e and string.match(e, '^[^\t]*\t([^\t]*)\t') == fences[j]
    if states[j] then
      if last then redis.call('SET', KEYS[k], fences[j] .. ':' .. states[j], 'PX', ttl) end
      k = k + 1
    end
    -- (ENDED notes the term's end only while the partition is listed and free.)
    if last and tos[j] ~= '' then
      redis.call('ZADD', FREE, 'XX', until_s, n)
      redis.call('HSET', ENDED, '\2' .. n, tos[j])
    end
  end
end
if gone > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return out
