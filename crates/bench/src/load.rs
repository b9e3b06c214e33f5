//! `load`: the steady-state request rate of a balanced group, from Redis's own
//! `INFO commandstats`.
//!
//! The replicas run as separate OS processes. Once the group is balanced (and one more
//! lease has passed), the bench reads the `calls` of `evalsha`, `eval` and `ping` (the
//! commands a replica sends; the commands a script runs inside Redis are counted
//! separately and are not requests) at the start and end of the window, without
//! polling the group in between.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::LoadArgs;
use crate::event::{now_us, span_ms};
use crate::fleet::Fleet;
use crate::group::{balanced, describe};
use crate::setup::BoxError;
use crate::stats::round3;

/// The commands a replica sends.
const REQUESTS: [&str; 3] = ["evalsha", "eval", "ping"];

/// The final report of `load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// Always `load`.
    pub scenario: &'static str,
    /// Partition count.
    pub partitions: usize,
    /// Replica count.
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// Length of the window.
    pub seconds: u64,
    /// Requests per second, all replicas together.
    pub requests_per_sec: f64,
    /// `requests_per_sec` / replicas.
    pub per_replica_per_sec: f64,
    /// Share of one core the server spent executing those requests (scripts included),
    /// in percent, from `INFO commandstats` `usec`.
    pub redis_cpu_pct: f64,
}

/// Runs the scenario.
///
/// # Errors
/// If the group does not balance in time, or Redis cannot be read.
pub async fn run(args: &LoadArgs) -> Result<LoadReport, BoxError> {
    let mut fleet = Fleet::start(
        args.redis_url.as_deref(),
        "load",
        args.partitions,
        args.lease_ms,
        None,
        Duration::from_millis(50),
    )?;
    let result = measure(&mut fleet, args).await;
    let stopped = fleet.shutdown().await;
    let report = result?;
    stopped?;
    Ok(report)
}

async fn measure(fleet: &mut Fleet, args: &LoadArgs) -> Result<LoadReport, BoxError> {
    let lease = fleet.lease();
    let start_us = now_us();
    for i in 1..=args.replicas {
        fleet.spawn(&format!("replica-{i}"))?;
    }
    let live = fleet.live();
    let limit = Duration::from_secs(30) + lease * 30;
    let (status, at) = fleet
        .watch
        .poll_until("balanced", limit, |s| balanced(s, &live))
        .await?;
    eprintln!(
        "balanced after {:.1} ms ({}); measuring for {} s",
        span_ms(start_us, at),
        describe(&status),
        args.seconds
    );
    tokio::time::sleep(lease).await;

    let client = redis::Client::open(fleet.url.as_str())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let (before, t0) = (requests(&mut conn).await?, now_us());
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let (after, t1) = (requests(&mut conn).await?, now_us());

    let status = fleet.watch.status().await?.ok_or("the group is gone")?;
    if !balanced(&status, &live) {
        return Err(format!(
            "the group was not balanced at the end of the window: {}",
            describe(&status)
        )
        .into());
    }
    let secs = span_ms(t0, t1) / 1000.0;
    let delta = |name: &str| {
        let at = |m: &BTreeMap<String, Stat>| m.get(name).copied().unwrap_or_default();
        let (a, b) = (at(&before), at(&after));
        Stat {
            calls: b.calls.saturating_sub(a.calls),
            usec: b.usec.saturating_sub(a.usec),
        }
    };
    let total: u64 = REQUESTS.iter().map(|c| delta(c).calls).sum();
    let usec: u64 = REQUESTS.iter().map(|c| delta(c).usec).sum();
    let each: Vec<String> = REQUESTS
        .iter()
        .map(|c| {
            let d = delta(c);
            format!(
                "{c} {:.1}/s ({:.0} µs each)",
                d.calls as f64 / secs,
                d.usec as f64 / d.calls.max(1) as f64
            )
        })
        .collect();
    eprintln!("requests over {secs:.3} s: {}", each.join(", "));
    let rate = total as f64 / secs;
    let replicas = args.replicas;
    Ok(LoadReport {
        scenario: "load",
        partitions: args.partitions,
        replicas,
        lease_ms: args.lease_ms,
        seconds: args.seconds,
        requests_per_sec: round3(rate),
        per_replica_per_sec: round3(rate / replicas as f64),
        redis_cpu_pct: round3(usec as f64 / (secs * 1e6) * 100.0),
    })
}

/// Calls of a command and the server time they took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Stat {
    calls: u64,
    usec: u64,
}

/// Each request command's stats so far, from `INFO commandstats`.
async fn requests(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Result<BTreeMap<String, Stat>, BoxError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(request_calls(&info))
}

/// The `calls` and `usec` of each of [`REQUESTS`] in an `INFO commandstats` reply.
fn request_calls(info: &str) -> BTreeMap<String, Stat> {
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

#[cfg(test)]
mod tests {
    use super::{Stat, request_calls};

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
}
