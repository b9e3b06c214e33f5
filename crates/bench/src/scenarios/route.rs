//! `route`: routers of a partition group in client processes, requests through them to
//! the replicas' HTTP servers (`examples/router.rs`), through a kill, a join, a
//! graceful leave and a paced rolling restart: lookup cost, how stale the routers'
//! tables get, requests served, and what a still group costs per router.

use clap::Args as ClapArgs;

use crate::args::{LeaseArgs, parse_count, parse_replicas};
use crate::print_last;
use crate::scenarios::block_on;
use crate::store::BoxError;
use crate::tables::Table;

/// Options of `route`.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Number of partitions (the example's tenants, `tenant-00`, ...).
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Number of replica processes at the start.
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<2000>,
    /// Number of routers, each with a store (a subscription) of its own, spread over
    /// client processes.
    #[arg(long, default_value_t = 100, value_parser = parse_count)]
    pub routers: usize,
    /// Routers per client process.
    #[arg(long, default_value_t = 250, value_parser = parse_count)]
    pub routers_per_process: usize,
    /// Length of the run under load, in seconds (the faults at 10 %, 30 %, 50 % and
    /// 65 % of it).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(10..=3600))]
    pub seconds: u64,
    /// Requests per second, over every router and tenant.
    #[arg(long, default_value_t = 400.0)]
    pub requests_per_s: f64,
    /// Length of the still window at the end (no requests, no moves), in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub still_seconds: u64,
    /// A request whose tenant has no known owner waits up to this long for the router
    /// to learn one (`Caller::await_route`) before it counts as unavailable. Default: 0.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub await_route_ms: u64,
}

impl Args {
    /// The settings `crate::route` runs with.
    pub fn settings(&self) -> crate::route::Settings {
        crate::route::Settings {
            partitions: self.partitions,
            replicas: self.replicas,
            lease_ms: self.lease.lease_ms,
            routers: self.routers,
            routers_per_process: self.routers_per_process,
            seconds: self.seconds,
            requests_per_s: self.requests_per_s,
            still_seconds: self.still_seconds,
            await_route_ms: self.await_route_ms,
        }
    }
}

/// The report.
pub use crate::route::RouteReport as Report;

/// Runs the routers and the faults and prints the report.
///
/// # Errors
/// A replica or client process that does not start or report, or a group that does
/// not settle.
pub fn run(args: Args) -> Result<(), BoxError> {
    block_on(async move {
        let report: Report = crate::route::run(&args.settings()).await?;
        print_last(&report)
    })
}

/// No generated tables: docs/benchmarks.md quotes the reports by hand.
pub const TABLES: &[Table] = &[];
