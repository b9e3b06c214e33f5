//! `load`: the steady-state request rate of a balanced group, from Redis's own
//! `INFO commandstats`.
//!
//! The replicas run as separate OS processes. Once the group is balanced (and one more
//! lease has passed), the bench reads the `calls` of `evalsha`, `eval` and `ping` (the
//! commands a replica sends; the commands a script runs inside Redis are counted
//! separately and are not requests) at the start and end of the window, without
//! polling the group in between. A window of the same length before any replica
//! starts measures the servers' own traffic (the Sentinels' `PING`s), which is
//! subtracted. On a cluster it sums the stats of every node; under
//! Sentinel it reads the primary; under TLS, the server's plain port.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::LoadArgs;
use crate::event::{now_us, span_ms};
use crate::fleet::Fleet;
use crate::group::{balanced, describe};
use crate::setup::BoxError;
use crate::stats::round3;
use crate::topology::Topology;

/// The commands a replica sends.
const REQUESTS: [&str; 3] = ["evalsha", "eval", "ping"];

/// The final report of `load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// Always `load`.
    pub scenario: &'static str,
    /// The Redis set-up.
    pub topology: Topology,
    /// Partition count.
    pub partitions: usize,
    /// Replica count.
    pub replicas: usize,
    /// The lease.
    pub lease_ms: u64,
    /// Length of the window.
    pub seconds: u64,
    /// Requests per second, all replicas together: the window's rate minus
    /// `background_per_sec`.
    pub requests_per_sec: f64,
    /// `requests_per_sec` / replicas.
    pub per_replica_per_sec: f64,
    /// Share of one core the server spent executing those requests (scripts included),
    /// in percent, from `INFO commandstats` `usec` (background subtracted).
    pub redis_cpu_pct: f64,
    /// Requests per second the servers saw over a window of the same length before any
    /// replica started: the Sentinels' `PING`s under Sentinel, 0 elsewhere.
    pub background_per_sec: f64,
}

/// Runs the scenario.
///
/// # Errors
/// If the group does not balance in time, or Redis cannot be read.
pub async fn run(args: &LoadArgs) -> Result<LoadReport, BoxError> {
    let mut fleet = Fleet::start(
        &args.target,
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
    let window = Duration::from_secs(args.seconds);
    let mut conns = Vec::new();
    for url in &fleet.servers.stats_urls {
        let client = redis::Client::open(url.as_str())?;
        conns.push(client.get_multiplexed_async_connection().await?);
    }
    // What the servers see before any replica runs (the Sentinels' PINGs, say): not
    // the replicas' traffic, so it is subtracted below.
    let background = Window::measure(&mut conns, window).await?;
    eprintln!(
        "background before any replica, over {:.3} s: {}",
        background.secs,
        background.describe()
    );

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

    let measured = Window::measure(&mut conns, window).await?;
    let status = fleet.watch.status().await?.ok_or("the group is gone")?;
    if !balanced(&status, &live) {
        return Err(format!(
            "the group was not balanced at the end of the window: {}",
            describe(&status)
        )
        .into());
    }
    eprintln!(
        "requests over {:.3} s: {}",
        measured.secs,
        measured.describe()
    );
    let background_rate = background.calls_per_sec();
    let rate = (measured.calls_per_sec() - background_rate).max(0.0);
    let cpu = (measured.usec_per_sec() - background.usec_per_sec()).max(0.0);
    let replicas = args.replicas;
    Ok(LoadReport {
        scenario: "load",
        topology: fleet.servers.topology,
        partitions: args.partitions,
        replicas,
        lease_ms: args.lease_ms,
        seconds: args.seconds,
        requests_per_sec: round3(rate),
        per_replica_per_sec: round3(rate / replicas as f64),
        redis_cpu_pct: round3(cpu / 1e6 * 100.0),
        background_per_sec: round3(background_rate),
    })
}

/// The request stats of one measurement window.
#[derive(Debug, Clone)]
struct Window {
    /// Each of [`REQUESTS`]: calls and server time during the window.
    delta: BTreeMap<String, Stat>,
    /// Its length.
    secs: f64,
}

impl Window {
    /// Reads the stats, waits `length`, reads them again.
    async fn measure(
        conns: &mut [redis::aio::MultiplexedConnection],
        length: Duration,
    ) -> Result<Self, BoxError> {
        let (before, t0) = (requests(conns).await?, now_us());
        tokio::time::sleep(length).await;
        let (after, t1) = (requests(conns).await?, now_us());
        let delta = REQUESTS
            .iter()
            .map(|&name| {
                let at = |m: &BTreeMap<String, Stat>| m.get(name).copied().unwrap_or_default();
                let (a, b) = (at(&before), at(&after));
                let d = Stat {
                    calls: b.calls.saturating_sub(a.calls),
                    usec: b.usec.saturating_sub(a.usec),
                };
                (name.to_owned(), d)
            })
            .collect();
        Ok(Self {
            delta,
            secs: span_ms(t0, t1) / 1000.0,
        })
    }

    fn calls_per_sec(&self) -> f64 {
        self.delta.values().map(|d| d.calls).sum::<u64>() as f64 / self.secs
    }

    fn usec_per_sec(&self) -> f64 {
        self.delta.values().map(|d| d.usec).sum::<u64>() as f64 / self.secs
    }

    /// Per command: calls per second and server time per call.
    fn describe(&self) -> String {
        let each: Vec<String> = REQUESTS
            .iter()
            .map(|&c| {
                let d = self.delta.get(c).copied().unwrap_or_default();
                format!(
                    "{c} {:.1}/s ({:.0} µs each)",
                    d.calls as f64 / self.secs,
                    d.usec as f64 / d.calls.max(1) as f64
                )
            })
            .collect();
        each.join(", ")
    }
}

/// Calls of a command and the server time they took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Stat {
    calls: u64,
    usec: u64,
}

/// Each request command's stats so far, from `INFO commandstats`, summed over the
/// nodes `conns` reach.
async fn requests(
    conns: &mut [redis::aio::MultiplexedConnection],
) -> Result<BTreeMap<String, Stat>, BoxError> {
    let mut total: BTreeMap<String, Stat> = BTreeMap::new();
    for conn in conns {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(conn)
            .await?;
        for (name, stat) in request_calls(&info) {
            let sum = total.entry(name).or_default();
            sum.calls += stat.calls;
            sum.usec += stat.usec;
        }
    }
    Ok(total)
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
