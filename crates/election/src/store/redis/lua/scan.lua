-- scan: one step of a SCAN over the key space. Read-only.
--
-- ARGV: 1 cursor, 2 MATCH pattern, 3 COUNT hint.
--
-- Reply: {next cursor, keys[]}: the cursor of the next step ('0' once done) and the
-- keys this step found.
return redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
