-- held: what a session holds. Read-only.
--
-- ARGV: 1 session token. Reply: {name, fence, weight, ...}.
return holdings(ARGV[1])
