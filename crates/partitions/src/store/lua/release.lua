-- release: gives back partitions a session's terms held, named by term.
--
-- ARGV: 1 session token, 2 channel, 3 notice, 4.. name, fence, cause, name, fence,
-- cause... (cause: why the term ended, `handoff`, `drain`, `leave` or `released`).
--
-- Gives back each partition whose current term is the session's at that fence (free
-- from now if still listed, its term's end noted for the ledger of moves), then
-- publishes the notice once. A late or repeated
-- release touches nothing of a later term: safe to retry.
--
-- Reply: one flag per name: 1 if no term of the session holds it any more and no later
-- term was granted (given back now, or before), 0 if a later term holds it.
local tok = ARGV[1]
local bad = expect({META, FREE, OWNERS, HELD, REVOKED, SINCE, WEIGHTS, LOADS, ROSTER, CHANGES,
  ENDED})
if bad then return bad end
local now = clock()
local names, fences, causes = {}, {}, {}
for i = 4, #ARGV, 3 do
  names[#names + 1] = ARGV[i]
  fences[#fences + 1] = ARGV[i + 1]
  causes[#causes + 1] = ARGV[i + 2]
end
local out, gone = give_back(tok, names, fences, now, causes)
if gone > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return out
