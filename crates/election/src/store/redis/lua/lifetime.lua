-- The granting server: which server lifetime answers, as far as the leases it granted
-- are concerned, and since when it has been granting them.
--
-- A lease lives in the data of the server that granted it, and is lost whenever the
-- server that answers is not the one that wrote it: a restart that lost data (a new
-- `run_id`), and a failover to a replica that missed the last writes (a Sentinel or
-- Cluster promotion, `REPLICAOF NO ONE`: the promoted server starts a replication
-- history of its own, a new `master_replid`). So the lifetime is `run_id:master_replid`,
-- and a script that finds its keys written in another one holds its grants back for one
-- lease (whoever believes in a lost lease has then reached its own deadline).
--
-- Returns the lifetime ('' if `INFO` is refused: see docs/topologies.md) and when it
-- began on the server's clock (ms), if the server can tell: `uptime_in_seconds` - 1 s
-- before now for a server that has granted on its own history since it started (Redis
-- counts whole seconds of its clock, so this is never earlier than the real start), and
-- nothing (nil) for one promoted since it started, since `INFO` does not say when: the
-- caller then counts from now, the first time it sees the lifetime, which is later than
-- the promotion and so safe.
local function server_lifetime(now_ms)
  local info = redis.pcall('INFO', 'server', 'replication')
  if type(info) ~= 'string' then
    -- Servers before 7.0 take one section only; the default ones include both.
    info = redis.pcall('INFO')
  end
  if type(info) ~= 'string' then return '', nil end
  local run_id = string.match(info, 'run_id:(%x+)')
  if not run_id then return '', nil end
  local replid = string.match(info, 'master_replid:(%x+)') or ''
  local lifetime = run_id .. ':' .. replid
  -- -1 until the server takes over another's history (a promotion) in this lifetime.
  local second = string.match(info, 'second_repl_offset:(%-?%d+)') or '-1'
  if second ~= '-1' then return lifetime, nil end
  local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)') or '0')
  return lifetime, now_ms - math.max(up - 1, 0) * 1000
end
