//! The server-side Lua scripts. Every key a script touches is passed in `KEYS`, and
//! the keys of one duty share a hash tag, so they run unchanged on Redis Cluster.

use std::sync::LazyLock;

/// A Lua script run with `EVALSHA`, falling back to `EVAL` of its body on `NOSCRIPT`
/// (one extra round trip, and the server caches it again). redis-rs's own fallback
/// takes two extra round trips (`SCRIPT LOAD`, then `EVALSHA`), which under latency
/// can outlast a leader's remaining budget again and again.
///
/// Run one with [`super::RedisStore::eval`]. Pass every key the script touches in
/// `KEYS`, all with one hash tag, so it also runs on Redis Cluster.
#[derive(Debug)]
pub struct LuaScript {
    code: &'static str,
    hash: String,
}

impl LuaScript {
    /// A script with this body.
    pub fn new(code: &'static str) -> Self {
        Self {
            code,
            hash: redis::Script::new(code).get_hash().to_owned(),
        }
    }

    /// The SHA1 digest `EVALSHA` names the script by.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// `EVALSHA hash numkeys keys... args...`
    pub(crate) fn evalsha(&self, keys: &[&str], args: &[&str]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.hash).arg(keys.len()).arg(keys).arg(args);
        cmd
    }

    /// `EVAL body numkeys keys... args...`
    pub(crate) fn eval(&self, keys: &[&str], args: &[&str]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(self.code).arg(keys.len()).arg(keys).arg(args);
        cmd
    }
}

/// KEYS: lease, fence, boot (optional: without it, no hold after a restart). ARGV: token,
/// lease ms, fence floor.
///
/// Free lease: take it, and issue fence = max(counter + 1, floor, server TIME in µs).
/// The TIME floor keeps fences increasing after a restart that lost the counter; the
/// caller's floor keeps them increasing even if the server clock went backwards.
///
/// **No grant for one lease after a restart.** A server that restarts may have lost
/// leases it granted (no persistence, an old snapshot, `appendfsync everysec`) whose
/// holders still believe they lead. So nothing is granted until one lease after the
/// server started: by then every lease granted before has expired on the server's
/// clock, and with it its holder's local deadline (Redlock's "delayed restart").
/// The boot marker (a hash without TTL) keeps `since`, the server's start as first
/// estimated in this server lifetime (`run_id`): `uptime_in_seconds` − 1 s before now
/// (Redis counts whole seconds of its clock, so this is never earlier than the real
/// start, and at most two seconds later). A marker that is missing or names another
/// lifetime is rewritten. A server up for longer than a lease (and those seconds) costs
/// nothing, not even for a new duty. Without permission for `INFO` the run id is empty and the count starts when
/// the marker is first missing (a new duty, or data loss).
///
/// Replies:
/// - `{1, fence, regressed}`: taken;
/// - `{3, fence, pttl}`: `token` already holds the lease (an earlier call with it took
///   the lease and its reply was lost). Confirmed, **not** extended: the caller may
///   lead only for the `pttl` left, counted from this call's send time;
/// - `{2, wait ms}`: free, but held back for `wait` after data loss;
/// - `{0, holder token, pttl, fence}`: someone else holds it.
pub(crate) static ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  return {3, redis.call('GET', KEYS[2]) or '0', redis.call('PTTL', KEYS[1])}
elseif cur then
  return {0, cur, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '0'}
end
local stored = tonumber(redis.call('GET', KEYS[2]) or '0')
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Held back for one lease after the server started (see above).
if KEYS[3] then
  local boot = redis.call('HMGET', KEYS[3], 'run_id', 'since')
  local now_ms = math.floor(now_us / 1000)
  local run_id, up_ms = '', nil
  local info = redis.pcall('INFO', 'server')
  if type(info) == 'string' then
    run_id = string.match(info, 'run_id:(%x+)') or ''
    -- Whole seconds of the server's clock since whole seconds at its start: up to one
    -- second more than has really passed, so one is taken off (never counting from
    -- before the real start).
    local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)') or '0')
    up_ms = math.max(up - 1, 0) * 1000
  end
  local since = tonumber(boot[2])
  local fresh = nil
  if run_id ~= '' and (boot[1] ~= run_id or not since) then
    fresh = now_ms - (up_ms or 0)
  elseif not since or since > now_ms then
    fresh = now_ms
  end
  if fresh then
    since = fresh
    redis.call('HSET', KEYS[3], 'run_id', run_id, 'since', string.format('%.0f', since))
  end
  local hold = since + tonumber(ARGV[2]) - now_ms
  if hold > 0 then return {2, hold} end
end
local floor = tonumber(ARGV[3])
local fence = stored + 1
local regressed = 0
if fence < floor then fence = floor; regressed = 1 end
if fence < now_us then fence = now_us end
local f = string.format('%.0f', fence)
redis.call('SET', KEYS[2], f)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, f, regressed}
"#,
    )
});

/// KEYS: lease. ARGV: token, lease ms. Compare-and-extend; replies 1 or 0.
pub(crate) static RENEW: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#,
    )
});

/// KEYS: lease. ARGV: token, channel. Compare-and-delete, then publish the lease key
/// on the channel; replies 1 or 0.
pub(crate) static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], KEYS[1])
  return 1
end
return 0
"#,
    )
});

/// KEYS: lease, fence. A consistent snapshot: `{holder token or false, pttl, fence}`.
pub(crate) static LEADER: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '0'}
"#,
    )
});

/// KEYS: guard, target. ARGV: fence, op, args...
///
/// Performs the write only if `fence` is not lower than the highest fence the guard has
/// seen, then raises the guard. The write runs first, so a failing write (wrong type)
/// leaves the guard unchanged. Replies `{1, fence}` or `{0, highest}`.
pub(crate) static FENCED_WRITE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
local high = tonumber(redis.call('GET', KEYS[1]) or '0')
local fence = tonumber(ARGV[1])
if fence < high then return {0, string.format('%.0f', high)} end
local op = ARGV[2]
if op == 'SET' then
  redis.call('SET', KEYS[2], ARGV[3])
elseif op == 'HSET' then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
elseif op == 'RPUSH' then
  redis.call('RPUSH', KEYS[2], ARGV[3])
elseif op == 'DEL' then
  redis.call('DEL', KEYS[2])
else
  return redis.error_reply('ERR unknown fenced op ' .. op)
end
if fence > high then redis.call('SET', KEYS[1], ARGV[1]) end
return {1, ARGV[1]}
"#,
    )
});
