-- list: partition names by position. Read-only.
--
-- ARGV: 1 offset, 2 limit. Reply: the names at those positions.
local first = tonumber(ARGV[1])
return redis.call('ZRANGE', PARTITIONS, first, first + tonumber(ARGV[2]) - 1)
