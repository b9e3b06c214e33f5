//! Every scenario of `leasehold-bench`, registered in one place: `registry!` below,
//! one line each.
//!
//! A scenario is a module of this directory holding its arguments (`Args`, a
//! `clap::Args`), its entry point (`run(Args)`, which prints its JSON lines, the last
//! one being the summary), its typed report (`Report`; `Deserialize` too where its
//! tables read the committed reports, through `tables::Bench::last_as`) and
//! the generators of the docs' tables made from its committed reports (`TABLES`).
//! The registry line makes it a subcommand (its name is the variant's, in kebab case)
//! and gives `tables` its generators.

use std::future::Future;

use clap::Subcommand;

use crate::store::BoxError;
use crate::tables::Table;

/// Declares the scenario modules, the [`Command`] enum (one subcommand per scenario,
/// plus `tables` and the hidden child modes), its dispatch and [`TABLES`].
macro_rules! registry {
    ($($(#[doc = $doc:literal])* $variant:ident => $module:ident,)*) => {
        $(pub mod $module;)*

        /// The subcommands.
        #[derive(Debug, Subcommand)]
        pub enum Command {
            $($(#[doc = $doc])* $variant($module::Args),)*
            /// Regenerates the docs' tables from the committed reports in `docs/bench/`.
            Tables(crate::args::TablesArgs),
            /// Run one elector and report its events as JSON lines (used by the scenarios).
            #[command(hide = true)]
            Child(crate::args::ChildArgs),
            /// Run one partition coordinator and report its events as JSON lines.
            #[command(hide = true)]
            PartitionChild(crate::args::PartitionChildArgs),
            /// Run one replica of `route`: `examples/router.rs`'s `serve`.
            #[command(hide = true)]
            RouteReplica(crate::route::ReplicaArgs),
            /// Run routers and requests through them for `route`.
            #[command(hide = true)]
            RouteClient(crate::route::client::ClientArgs),
        }

        impl Command {
            /// Runs the command.
            ///
            /// # Errors
            /// Whatever the scenario fails with.
            pub fn run(self) -> Result<(), BoxError> {
                match self {
                    $(Self::$variant(args) => $module::run(args),)*
                    Self::Tables(args) => crate::tables::check(&args),
                    Self::Child(args) => block_on(crate::duty::child::run(&args)),
                    Self::PartitionChild(args) => block_on(crate::group::child::run(&args)),
                    Self::RouteReplica(args) => block_on(crate::route::replica(&args)),
                    Self::RouteClient(args) => block_on(crate::route::client::run(&args)),
                }
            }
        }

        /// Every scenario's table generators.
        pub const TABLES: &[&[Table]] = &[$($module::TABLES,)*];
    };
}

registry! {
    /// SIGKILL the leader process; time until the follower leads.
    Failover => failover,
    /// Kill the primary after cutting it off from its replicas (the grant lost), with
    /// `--topology sentinel|cluster`: overlapping terms and fence repeats.
    FailoverLossy => failover_lossy,
    /// SIGTERM the leader process (graceful release); time until the follower leads.
    Handover => handover,
    /// Replica processes campaigning for one duty for a while, nobody killed: terms
    /// that end anyway, renew round trips, leaderless time.
    Soak => soak,
    /// Partition replicas as processes: cold start, SIGKILL of one, join of another.
    Rebalance => rebalance,
    /// Balancing by measured load against synthetic tenants, beside static weights and
    /// count only.
    RebalanceLoad => rebalance_load,
    /// A primary failover that loses a joiner's grants, with `--topology
    /// sentinel|cluster`: partitions owned twice, time until all are owned again.
    RebalanceLossy => rebalance_lossy,
    /// Cold-start convergence and steady-state cost (requests, Redis CPU, script times,
    /// replica CPU and memory) of a partition group.
    Load => load,
    /// Restart every partition replica in turn (optionally sticky, or a deploy that
    /// grows the list): owner changes, unowned time, refusals.
    Rolling => rolling,
    /// Partitions added one at a time to a running group: time until each is owned.
    Add => add,
    /// Seeded faults against replicas doing fenced writes; checks every ledger.
    Chaos => chaos,
    /// The partition group's deterministic fault simulation over many seeds.
    Simulate => simulate,
    /// A duty blocking its runtime: the default elector against the dedicated one.
    Stall => stall,
    /// Routers in client processes and requests through them to the replicas that own
    /// the tenants, through a kill, a join, a leave and a rolling restart: lookup cost,
    /// staleness, requests served, a still group's cost per router.
    Route => route,
}

/// The group settings of the `rebalance` scenarios' shared options.
pub fn group_settings(args: &crate::args::GroupArgs) -> crate::group::GroupSettings {
    crate::group::GroupSettings {
        partitions: args.partitions,
        replicas: args.replicas,
        lease_ms: args.lease.lease_ms,
        settle_ms: args.settle_ms,
        replica_nice: args.replica_nice,
        target: args.target.clone(),
    }
}

/// The single-duty settings of `failover`'s and `handover`'s shared options.
pub fn duty_settings(args: &crate::args::DutyArgs) -> crate::duty::harness::Settings {
    crate::duty::harness::Settings {
        lease_ms: args.lease.lease_ms,
        dedicated: args.dedicated,
        min_replicas_acked: args.min_replicas_acked,
        target: args.target.clone(),
    }
}

/// Runs `scenario` on a multi-threaded runtime of its own.
///
/// # Errors
/// A runtime that cannot start, or the scenario's error.
pub fn block_on(scenario: impl Future<Output = Result<(), BoxError>>) -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(scenario)
}
