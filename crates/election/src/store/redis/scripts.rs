//! The server-side Lua scripts, one file each in `lua/`, which opens with what the
//! script takes in `KEYS` and `ARGV` and what it replies. Every key a script touches is
//! passed in `KEYS`, and the keys of one duty share a hash tag, so they run unchanged on
//! Redis Cluster.

use std::sync::LazyLock;

/// A Lua script run with `EVALSHA`, falling back to `EVAL` of its body on `NOSCRIPT`
/// (one extra round trip, and the server caches it again). redis-rs's own fallback
/// takes two extra round trips (`SCRIPT LOAD`, then `EVALSHA`), which under latency
/// can outlast a leader's remaining budget again and again.
///
/// A script is either [idempotent](Self::idempotent) (the store may send it again on a
/// fresh connection when the first attempt's connection broke, whether or not it had
/// run) or [run once](Self::run_once) (a broken connection is an error whose outcome is
/// unknown; the caller resolves it).
///
/// Run one with [`super::RedisStore::eval`]. Pass every key the script touches in
/// `KEYS`, all with one hash tag, so it also runs on Redis Cluster.
#[derive(Debug)]
pub struct LuaScript {
    code: String,
    hash: String,
    idempotent: bool,
}

impl LuaScript {
    /// A script that is safe to run twice: running it again after it ran has the same
    /// effect as running it once (a read, a compare-and-set, a request the script
    /// remembers by id). Its answer to the second run may differ (a release run again
    /// finds nothing left to release); a caller of such a script reads that as done.
    pub fn idempotent(code: impl Into<String>) -> Self {
        Self::with(code.into(), true)
    }

    /// A script that must not run twice (an append, say): never retried blindly.
    pub fn run_once(code: impl Into<String>) -> Self {
        Self::with(code.into(), false)
    }

    fn with(code: String, idempotent: bool) -> Self {
        Self {
            hash: redis::Script::new(&code).get_hash().to_owned(),
            code,
            idempotent,
        }
    }

    /// The SHA1 digest `EVALSHA` names the script by.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The script's body.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Whether the store may run it again after a broken connection.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// `EVALSHA hash numkeys keys... args...`
    pub(crate) fn evalsha(&self, keys: &[&str], args: &[impl AsRef<[u8]>]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.hash).arg(keys.len()).arg(keys);
        for a in args {
            cmd.arg(a.as_ref());
        }
        cmd
    }

    /// `EVAL body numkeys keys... args...`
    pub(crate) fn eval(&self, keys: &[&str], args: &[impl AsRef<[u8]>]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(&self.code).arg(keys.len()).arg(keys);
        for a in args {
            cmd.arg(a.as_ref());
        }
        cmd
    }
}

/// The fence of a new term, as every Leasehold script that issues one computes it
/// (`lua/fence.lua`: `next_fence(last, floor, now_us)`); a library to put in front of a
/// script's body.
pub const FENCE_LUA: &str = include_str!("lua/fence.lua");

/// The granting server's lifetime and when it began (`lua/lifetime.lua`:
/// `server_lifetime(now_ms)`), by which a script holds its grants back for one lease
/// after a restart or a failover; a library to put in front of a script's body.
pub const LIFETIME_LUA: &str = include_str!("lua/lifetime.lua");

pub(crate) static ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::idempotent([FENCE_LUA, LIFETIME_LUA, include_str!("lua/acquire.lua")].concat())
});

pub(crate) static RENEW: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("lua/renew.lua")));

pub(crate) static RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("lua/release.lua")));

pub(crate) static LEADER: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("lua/leader.lua")));

pub(crate) static SCAN: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("lua/scan.lua")));

/// Fenced `SET`, `HSET` and `DEL`: a retry writes the same again.
pub(crate) static FENCED_WRITE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("lua/fenced_write.lua")));

/// Fenced `RPUSH`: never retried (it would append twice).
pub(crate) static FENCED_PUSH: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::run_once(include_str!("lua/fenced_write.lua")));

/// A fenced batch of `SET`, `HSET` and raises: a retry writes the same again.
pub(crate) static FENCED_BATCH: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("lua/fenced_batch.lua")));

/// A fenced batch holding an `RPUSH`: never retried (it would append twice).
pub(crate) static FENCED_BATCH_ONCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::run_once(include_str!("lua/fenced_batch.lua")));
