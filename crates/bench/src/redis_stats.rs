//! What the servers say about their own work: request counts and their server time
//! (`INFO commandstats`), the process's CPU time (`INFO cpu`), and the execution time
//! of every command (`SLOWLOG` with a threshold of 0), each summed or collected over
//! the nodes a scenario measures.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};

use crate::store::BoxError;

/// The commands a replica sends.
pub const REQUESTS: [&str; 3] = ["evalsha", "eval", "ping"];

/// Slow log settings while a scenario collects every command: a threshold of 0 logs
/// every command, and the length keeps a whole run (a group tick is one entry).
pub const SLOWLOG_MAX_LEN: u64 = 200_000;

/// Calls of a command and the server time they took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Calls.
    pub calls: u64,
    /// Server time, in µs.
    pub usec: u64,
}

/// One read of the counters of every node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSample {
    /// Each of [`REQUESTS`], summed over the nodes.
    pub requests: BTreeMap<String, Stat>,
    /// `used_cpu_user + used_cpu_sys`, summed over the nodes, in seconds.
    pub cpu_secs: f64,
}

/// Reads `INFO commandstats` and `INFO cpu` of every node `conns` reach.
///
/// # Errors
/// A connection's error, or a reply without the CPU fields.
pub async fn sample(conns: &mut [MultiplexedConnection]) -> Result<ServerSample, BoxError> {
    let mut total = ServerSample::default();
    for conn in conns {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(conn)
            .await?;
        for (name, stat) in request_calls(&info) {
            let sum = total.requests.entry(name).or_default();
            sum.calls += stat.calls;
            sum.usec += stat.usec;
        }
        let info: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
        total.cpu_secs += cpu_secs(&info).ok_or("INFO cpu has no used_cpu_user/used_cpu_sys")?;
    }
    Ok(total)
}

/// The `calls` and `usec` of each of [`REQUESTS`] in an `INFO commandstats` reply.
pub fn request_calls(info: &str) -> BTreeMap<String, Stat> {
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            if !REQUESTS.contains(&name) {
                return None;
            }
            let field = |key: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                    .and_then(|n| n.parse::<u64>().ok())
            };
            let stat = Stat {
                calls: field("calls")?,
                usec: field("usec")?,
            };
            Some((name.to_owned(), stat))
        })
        .collect()
}

/// `used_cpu_user + used_cpu_sys` (the whole server process, every thread) of an
/// `INFO cpu` reply, in seconds; `None` if either is missing.
pub fn cpu_secs(info: &str) -> Option<f64> {
    let field = |key: &str| {
        info.lines().find_map(|line| {
            let (k, v) = line.trim().split_once(':')?;
            (k == key).then(|| v.parse::<f64>().ok()).flatten()
        })
    };
    Some(field("used_cpu_user")? + field("used_cpu_sys")?)
}

/// The slow log settings of one node, to restore after a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowlogConfig {
    /// `slowlog-log-slower-than`.
    pub slower_than: String,
    /// `slowlog-max-len`.
    pub max_len: String,
}

/// How long a stats read may take: `SLOWLOG GET -1` after a cold start of 100,000
/// partitions is a reply of many megabytes, far beyond redis-rs's default 500 ms.
const STATS_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection for reading a node's statistics (`INFO`, `SLOWLOG`, `CONFIG`), with a
/// response timeout long enough for the largest of those replies.
///
/// # Errors
/// A malformed URL or a failed connection.
pub async fn connect(url: &str) -> Result<MultiplexedConnection, BoxError> {
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(STATS_RESPONSE_TIMEOUT));
    let client = redis::Client::open(url)?;
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// Makes every node log every command (threshold 0, [`SLOWLOG_MAX_LEN`] entries) and
/// empties the logs. Returns each node's previous settings for [`restore_slowlog`].
///
/// # Errors
/// A connection's error (`CONFIG` may be refused on a server the bench does not own).
pub async fn start_slowlog(
    conns: &mut [MultiplexedConnection],
) -> Result<Vec<SlowlogConfig>, BoxError> {
    let mut saved = Vec::new();
    for conn in conns.iter_mut() {
        saved.push(SlowlogConfig {
            slower_than: config_get(conn, "slowlog-log-slower-than").await?,
            max_len: config_get(conn, "slowlog-max-len").await?,
        });
    }
    for conn in conns.iter_mut() {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("slowlog-max-len")
            .arg(SLOWLOG_MAX_LEN)
            .arg("slowlog-log-slower-than")
            .arg(0)
            .exec_async(conn)
            .await?;
        redis::cmd("SLOWLOG").arg("RESET").exec_async(conn).await?;
    }
    Ok(saved)
}

/// Puts back the settings [`start_slowlog`] returned, node by node.
///
/// # Errors
/// A connection's error.
pub async fn restore_slowlog(
    conns: &mut [MultiplexedConnection],
    saved: &[SlowlogConfig],
) -> Result<(), BoxError> {
    for (conn, s) in conns.iter_mut().zip(saved) {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("slowlog-log-slower-than")
            .arg(&s.slower_than)
            .arg("slowlog-max-len")
            .arg(&s.max_len)
            .exec_async(conn)
            .await?;
    }
    Ok(())
}

/// The value of one setting.
async fn config_get(conn: &mut MultiplexedConnection, name: &str) -> Result<String, BoxError> {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await?;
    pair.get(1)
        .cloned()
        .ok_or_else(|| format!("CONFIG GET {name}: no value").into())
}

/// One slow log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowEntry {
    /// Its id: grows by one per entry on a node.
    pub id: u64,
    /// Execution time, in µs.
    pub duration_us: u64,
    /// The command name, upper case.
    pub command: String,
    /// Its first argument (for `EVALSHA`, the script's digest), if any.
    pub first_arg: Option<String>,
}

impl SlowEntry {
    /// Whether it is a script run (`EVALSHA` or `EVAL`, read-only variants too).
    pub fn is_script(&self) -> bool {
        matches!(
            self.command.as_str(),
            "EVALSHA" | "EVAL" | "EVALSHA_RO" | "EVAL_RO"
        )
    }

    /// The group script's name (by its digest, from `names`), `eval` for a script sent
    /// as its body, `None` for anything that is not a script.
    pub fn script_name<'a>(&self, names: &'a [(&'static str, String)]) -> Option<&'a str> {
        if !self.is_script() {
            return None;
        }
        if !self.command.starts_with("EVALSHA") {
            return Some("eval");
        }
        let sha = self.first_arg.as_deref()?;
        Some(
            names
                .iter()
                .find(|(_, h)| h.eq_ignore_ascii_case(sha))
                .map_or("other", |(n, _)| n),
        )
    }
}

/// The id of the newest slow log entry of each node (0 if a log is empty): entries
/// with a higher id came later.
///
/// # Errors
/// A connection's error or an unexpected reply.
pub async fn slowlog_marks(conns: &mut [MultiplexedConnection]) -> Result<Vec<u64>, BoxError> {
    let mut marks = Vec::new();
    for conn in conns {
        let reply: Value = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(1)
            .query_async(conn)
            .await?;
        marks.push(parse_slowlog(&reply)?.first().map_or(0, |e| e.id));
    }
    Ok(marks)
}

/// Every entry of each node's slow log (`SLOWLOG GET -1`), newest first.
///
/// # Errors
/// A connection's error or an unexpected reply.
pub async fn slowlog_entries(
    conns: &mut [MultiplexedConnection],
) -> Result<Vec<Vec<SlowEntry>>, BoxError> {
    let mut all = Vec::new();
    for conn in conns {
        let reply: Value = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(-1)
            .query_async(conn)
            .await?;
        all.push(parse_slowlog(&reply)?);
    }
    Ok(all)
}

/// The entries of a `SLOWLOG GET` reply: each an array of id, timestamp, duration
/// (µs), the arguments (the command name first), and since Redis 4 the client's
/// address and name.
///
/// # Errors
/// If the reply does not have that shape.
pub fn parse_slowlog(reply: &Value) -> Result<Vec<SlowEntry>, String> {
    let Value::Array(entries) = reply else {
        return Err(format!("SLOWLOG GET: not an array: {reply:?}"));
    };
    entries
        .iter()
        .map(|entry| {
            let bad = || format!("SLOWLOG GET: unexpected entry {entry:?}");
            let Value::Array(fields) = entry else {
                return Err(bad());
            };
            let int = |i: usize| match fields.get(i) {
                Some(Value::Int(n)) => u64::try_from(*n).ok(),
                _ => None,
            };
            let text = |v: &Value| match v {
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                Value::SimpleString(s) => Some(s.clone()),
                _ => None,
            };
            let Some(Value::Array(args)) = fields.get(3) else {
                return Err(bad());
            };
            let command = args.first().and_then(text).ok_or_else(bad)?.to_uppercase();
            Ok(SlowEntry {
                id: int(0).ok_or_else(bad)?,
                duration_us: int(2).ok_or_else(bad)?,
                command,
                first_arg: args.get(1).and_then(text),
            })
        })
        .collect()
}

/// Waits until every node `urls` name has granted on its own history for at least
/// `lease`, as `lifetime.lua` tells it (whole seconds of `uptime_in_seconds`, less one):
/// a new group on such a server grants after one renew interval instead of a lease.
/// Returns the youngest node's uptime then, in ms (whole seconds).
///
/// # Errors
/// A node that cannot be read, or one that does not reach that age in a lease and 10 s.
pub async fn await_server_age(urls: &[String], lease: Duration) -> Result<u64, BoxError> {
    let deadline = tokio::time::Instant::now() + lease + Duration::from_secs(10);
    let mut conns = Vec::new();
    for url in urls {
        conns.push(connect(url).await?);
    }
    loop {
        let mut youngest = u64::MAX;
        for conn in &mut conns {
            let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
            let up = info
                .lines()
                .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or("INFO server has no uptime_in_seconds")?;
            youngest = youngest.min(up);
        }
        if youngest.saturating_sub(1).saturating_mul(1000)
            >= u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
        {
            return Ok(youngest * 1000);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(
                format!("the server is {youngest} s old, not older than the lease yet").into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_only_the_commands_clients_send() {
        let info = "# Commandstats\r\n\
            cmdstat_evalsha:calls=100,usec=5,usec_per_call=0.05,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_eval:calls=3,usec=1,usec_per_call=0.3,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_ping:calls=7,usec=1,usec_per_call=0.1,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_pexpire:calls=9000,usec=1,usec_per_call=0.1,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_info:calls=2,usec=1,usec_per_call=0.1,rejected_calls=0,failed_calls=0\r\n";
        let stats = request_calls(info);
        assert_eq!(stats.values().map(|s| s.calls).sum::<u64>(), 110);
        assert_eq!(
            stats["evalsha"],
            Stat {
                calls: 100,
                usec: 5
            }
        );
    }

    #[test]
    fn cpu_is_user_plus_sys_of_the_whole_process() {
        let info = "# CPU\r\n\
            used_cpu_sys:1.250000\r\n\
            used_cpu_user:0.500000\r\n\
            used_cpu_sys_children:9.000000\r\n\
            used_cpu_user_children:9.000000\r\n\
            used_cpu_sys_main_thread:1.000000\r\n\
            used_cpu_user_main_thread:0.400000\r\n";
        assert_eq!(cpu_secs(info), Some(1.75));
        assert_eq!(cpu_secs("# CPU\r\nused_cpu_sys:1.0\r\n"), None);
        assert_eq!(cpu_secs("used_cpu_sys:x\r\nused_cpu_user:1\r\n"), None);
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn entry(id: i64, us: i64, args: &[&str]) -> Value {
        Value::Array(vec![
            Value::Int(id),
            Value::Int(1_700_000_000),
            Value::Int(us),
            Value::Array(args.iter().map(|a| bulk(a)).collect()),
            bulk("127.0.0.1:5000"),
            bulk(""),
        ])
    }

    #[test]
    fn slowlog_entries_keep_id_duration_and_command() {
        let reply = Value::Array(vec![
            entry(9, 1500, &["evalsha", "abc", "1", "k"]),
            entry(8, 3, &["PING"]),
            entry(7, 40, &["EVAL", "return 1", "0"]),
        ]);
        let entries = parse_slowlog(&reply).expect("parses");
        assert_eq!(
            entries[0],
            SlowEntry {
                id: 9,
                duration_us: 1500,
                command: "EVALSHA".into(),
                first_arg: Some("abc".into()),
            }
        );
        let names = [("tick", "ABC".to_owned())];
        assert_eq!(
            entries[0].script_name(&names),
            Some("tick"),
            "digests match in any case"
        );
        assert_eq!(entries[1].script_name(&names), None);
        assert_eq!(entries[2].script_name(&names), Some("eval"));
        let scripts: Vec<u64> = entries
            .iter()
            .filter(|e| e.is_script())
            .map(|e| e.id)
            .collect();
        assert_eq!(scripts, [9, 7]);
        assert_eq!(parse_slowlog(&Value::Array(vec![])), Ok(vec![]));
    }

    #[test]
    fn malformed_slowlog_replies_are_errors() {
        assert!(parse_slowlog(&Value::Nil).is_err());
        assert!(parse_slowlog(&Value::Array(vec![Value::Int(1)])).is_err());
        let no_args = Value::Array(vec![Value::Array(vec![
            Value::Int(1),
            Value::Int(2),
            Value::Int(3),
            Value::Array(vec![]),
        ])]);
        assert!(parse_slowlog(&no_args).is_err());
        let negative = Value::Array(vec![entry(1, -5, &["EVAL"])]);
        assert!(parse_slowlog(&negative).is_err());
    }
}
