//! `leasehold-bench`: measures Leasehold across processes.
//!
//! Single duty: each run puts the leader in a child OS process (this binary,
//! re-executed in its hidden `child` mode) and the follower in this process, on a
//! fresh duty:
//!
//! - `failover`: SIGKILL the leader at a random point of its renew cycle; report the
//!   time until the follower leads and the overshoot beyond the lease's expiry;
//! - `handover`: SIGTERM the leader, which shuts down gracefully (release plus
//!   notification); report the time until the follower leads.
//!
//! `--dedicated` runs both electors with `Elector::spawn_dedicated`. `soak` runs
//! `--replicas` child processes campaigning for one duty for `--seconds`, nobody
//! killed, optionally with busy runtimes (`--saturate`), and counts the terms that
//! ended anyway (spurious failovers), the renew round trips and the leaderless time.
//!
//! Partitions: every replica is a child OS process (hidden `partition-child` mode; or,
//! with `load --replicas-per-process K`, K replicas per process); the bench follows the group through the children's own event lines, and `rebalance`
//! also through `group_status` reads (at most every 100 ms for large groups):
//!
//! - `rebalance`: cold start, SIGKILL of one replica, join of a new one; with
//!   `--load shifting|stationary|feedback` instead, balancing by measured load against
//!   synthetic Zipf tenants whose hot ones change (or stay, with noise; or stay and are
//!   queues whose owners report the throughput they achieve, catch-ups included),
//!   beside static weights and count only: the heaviest replica's load over its share
//!   over time, moves per minute, the planned hand-offs' unowned time;
//! - `load`: cold-start convergence and the steady-state cost of a balanced group
//!   (requests, Redis CPU, script times and the tick's (`tick_us`), the roster bytes
//!   the replicas receive (`roster_bytes_per_s`), the replicas' CPU and memory), over
//!   `--runs` cold starts and lists of partition and replica counts (compared in the
//!   last line's `compare`); `--replicas-per-process K` runs K coordinators in each
//!   replica process, so a thousand replicas fit on one machine;
//! - `rolling`: every replica restarted in turn (SIGTERM, the same id started again,
//!   1 s apart), optionally sticky (a rejoin grace) or as a deploy that grows the
//!   list; owner changes, unowned spells and refusals from the children's lines;
//! - `chaos`: a seeded fault schedule against replicas doing fenced ledger writes
//!   and handing off state, then a check of every ledger and of every state offered.
//!
//! In one process: `stall`, a duty that blocks its 2-worker runtime for 2.5 leases,
//! with the default elector and with `Elector::spawn_dedicated`.
//!
//! `--topology single|tls|sentinel|cluster` (default `single`) picks the Redis set-up
//! the `failover`, `handover`, `rebalance`, `load` and `rolling` scenarios start for
//! themselves:
//! one server, one server over mutual TLS, a primary with one replica under three
//! Sentinels, or a three-primary cluster. The servers stay healthy throughout (but see
//! `--lose-writes` below): only replica processes die. Children get the store as a JSON `--store` spec and build it
//! with the same code as the bench. `--redis-url` uses an existing server instead
//! (single only).
//!
//! `--lose-writes` (`failover` and `rebalance`, with `--topology sentinel|cluster`; a
//! cluster then gets one replica per primary) kills the *primary* instead, after
//! cutting it off from its replicas so that the grants made since live on it alone;
//! the topology promotes a replica that lacks them. Each run starts a fresh topology.
//! The report counts the terms that started while an earlier holder was still entitled
//! to its own (its last successful acquire or renewal send + the lease): `overlaps`,
//! and `fence_repeats`:
//!
//! - `failover --lose-writes`: the child leader (`--one-term`: it never campaigns
//!   again, as a leader cut off from the new primary would not) acquires after the
//!   cut; the primary is killed at a random point of its renew cycle; `detection_ms`
//!   (kill → a new primary named) and `leaderless_ms` (kill → the follower leads).
//!   The servers are first left up for a lease + 2 s, or the restart hold of a young
//!   server would hide the loss;
//! - `rebalance --lose-writes`: after the cold start, the cut, then a joiner takes
//!   its share on the primary only (`grants_lost`: the owners the replica lacks);
//!   then the kill, and `kill.all_owned_ms` (kill → every partition owned again).
//!
//! Use a lease longer than the failover takes (2–4 s here): with a shorter one, the
//! old holders' deadlines pass before any replica is promoted and nothing can overlap.
//!
//! Progress goes to stderr; the last line of stdout is one JSON report, with
//! `"topology"` in the four scenarios above (`load` prints one line per run and per
//! partition and replica count before it, and `rebalance` one line per run when it makes several,
//! or always with `--lose-writes`).
//!
//! The code follows that split: `duty/` (the single-duty scenarios and the child
//! leader), `group/` (the partition scenarios and the `partition-child` replica),
//! `chaos/`, and what they share: `store.rs` (the Redis set-ups and the one place a
//! store is built; `store/failover.rs`, the servers' own failovers), `overlap.rs` (two
//! owners at once, by local deadlines), `clock.rs` (the wall clock every process of a
//! run shares), `stats.rs`, `proc_stats.rs` and `redis_stats.rs` (measuring);
//! `tables.rs` regenerates the docs' tables from the committed reports.
//!
//! ```text
//! leasehold-bench failover --lease-ms 1000 --runs 10 [--dedicated] [--topology T | --redis-url URL]
//! leasehold-bench failover --lose-writes --topology sentinel|cluster --lease-ms 10000 --runs 20
//! leasehold-bench handover --lease-ms 1000 --runs 10 [--dedicated] [--topology T | --redis-url URL]
//! leasehold-bench soak --lease-ms 250 --seconds 600 --replicas 3 [--dedicated] [--saturate]
//! leasehold-bench rebalance --partitions 64 --replicas 4 --lease-ms 2000 [--runs R] [--hand-off-bytes N] [--topology T]
//! leasehold-bench rebalance --load shifting|stationary --partitions 64 --replicas 4 --lease-ms 2000 --seconds 300 [--half-life-ms 10000] [--modes load,static-weights,count-only]
//! leasehold-bench rebalance --load feedback --partitions 64 --replicas 4 --lease-ms 2000 --seconds 300 --modes load [--report throughput|arrival] [--service-factor 4]
//! leasehold-bench rebalance --lose-writes --topology sentinel|cluster --partitions 64 --replicas 4 --lease-ms 10000 --settle-ms 2000 --runs 5
//! leasehold-bench load --partitions 1000[,10000...] --replicas 4[,200...] [--replicas-per-process K] --lease-ms 1000 --seconds 10 [--runs R] [--topology T]
//! leasehold-bench rolling --partitions 64 --replicas 4 --lease-ms 2000 [--sticky] [--add-partitions K] [--hand-off-bytes N]
//! leasehold-bench chaos --replicas 5 --partitions 32 --lease-ms 1000 --seconds 60 --seed 42 [--hand-off-bytes N]
//! leasehold-bench stall --lease-ms 1000 [--block-leases 2.5] [--topology T | --redis-url URL]
//! ```

mod chaos;
mod clock;
mod duty;
mod group;
mod overlap;
mod proc_stats;
mod redis_stats;
mod simulate;
mod stats;
mod store;
mod tables;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;
use tracing_subscriber::EnvFilter;

use crate::duty::{Harness, child, failover, handover, lossy, soak, stall};
use crate::group::{add, load, measured, rebalance, rolling};
use crate::store::{BoxError, ConnArgs, TargetArgs};

/// Measures Leasehold's failover and hand-over across processes.
#[derive(Debug, Parser)]
#[command(name = "leasehold-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// SIGKILL the leader process; time until the follower leads.
    Failover(ScenarioArgs),
    /// SIGTERM the leader process (graceful release); time until the follower leads.
    Handover(ScenarioArgs),
    /// Replica processes campaigning for one duty for a while, nobody killed: terms
    /// that end anyway, renew round trips, leaderless time.
    Soak(SoakArgs),
    /// Partition replicas as processes: cold start, SIGKILL of one, join of another.
    Rebalance(RebalanceArgs),
    /// Cold-start convergence and steady-state cost (requests, Redis CPU, script times,
    /// replica CPU and memory) of a partition group.
    Load(LoadArgs),
    /// Restart every partition replica in turn (optionally sticky, or a deploy that
    /// grows the list): owner changes, unowned time, refusals.
    Rolling(RollingArgs),
    /// Partitions added one at a time to a running group: time until each is owned.
    Add(AddArgs),
    /// Seeded faults against replicas doing fenced writes; checks every ledger.
    Chaos(ChaosArgs),
    /// The partition group's deterministic fault simulation over many seeds.
    Simulate(simulate::SimulateArgs),
    /// Regenerates the docs' tables from the committed reports in `docs/bench/`.
    Tables(TablesArgs),
    /// A duty blocking its runtime: the default elector against the dedicated one.
    Stall(stall::StallArgs),
    /// Run one elector and report its events as JSON lines (used by the scenarios).
    #[command(hide = true)]
    Child(ChildArgs),
    /// Run one partition coordinator and report its events as JSON lines.
    #[command(hide = true)]
    PartitionChild(PartitionChildArgs),
}

/// Options of the `failover` and `handover` scenarios.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// Lease of every elector, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Number of runs.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Run every elector (the child's and the follower's) with
    /// `Elector::spawn_dedicated`: on a thread and runtime of its own.
    #[arg(long)]
    pub dedicated: bool,
    /// `failover` only, with `--topology sentinel|cluster`: instead of the leader
    /// process, kill the primary after cutting it off from its replicas, so the
    /// promoted replica lacks the leader's grant; count followers that lead before the
    /// old leader's local deadline (`overlaps`) and fence repeats. A fresh topology per
    /// run; use a lease longer than the failover takes (e.g. 10000).
    #[arg(long)]
    pub lose_writes: bool,
    /// Every elector (the child's and the follower's) with
    /// `ElectorConfigBuilder::min_replicas_acked(K)`: a grant or renewal counts once K
    /// replicas acknowledge it (0: off). For `--topology sentinel|cluster`.
    #[arg(long, default_value_t = 0)]
    pub min_replicas_acked: usize,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the `soak` scenario.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Lease of every elector, in milliseconds.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// How long the replicas run, in seconds.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Replica processes campaigning for the one duty.
    #[arg(long, default_value_t = 3, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Every elector with `Elector::spawn_dedicated`.
    #[arg(long)]
    pub dedicated: bool,
    /// Keep every replica's application runtime busy: a CPU-bound task on every worker
    /// (computing 5 ms between yields), and a duty that blocks its worker for two
    /// leases every 3 s.
    #[arg(long)]
    pub saturate: bool,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the hidden `child` mode.
#[derive(Debug, Args)]
pub struct ChildArgs {
    /// The coordination store.
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Duty to campaign for.
    #[arg(long)]
    pub duty: String,
    /// Replica id.
    #[arg(long)]
    pub replica: String,
    /// Lease in milliseconds.
    #[arg(long)]
    pub lease_ms: u64,
    /// `Elector::spawn_dedicated` instead of `Elector::spawn`.
    #[arg(long)]
    pub dedicated: bool,
    /// Keep the application runtime busy (see `soak --saturate`).
    #[arg(long)]
    pub saturate: bool,
    /// Report term ends and, after the shutdown, renew round trips (for `soak`).
    #[arg(long)]
    pub soak: bool,
    /// Win one term, never campaign again, and report the term's end (for
    /// `failover --lose-writes`: an old leader cut off from the new primary).
    #[arg(long)]
    pub one_term: bool,
    /// `ElectorConfigBuilder::min_replicas_acked(K)` (0: off).
    #[arg(long, default_value_t = 0)]
    pub min_replicas_acked: usize,
}

/// Options of the `rebalance` scenario.
#[derive(Debug, Args)]
pub struct RebalanceArgs {
    /// Number of partitions.
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Replicas at the start (one more joins at the end).
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Settle time of a starting replica, in milliseconds. Default: one lease.
    #[arg(long)]
    pub settle_ms: Option<u64>,
    /// Run every replica at this niceness (`nice -n`, 0..=19); see `load`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
    /// Tenant sizes: `zipf` draws each partition's weight from a Zipf law (the k-th
    /// largest weighs 1000 / k^s), seeded, and sets it in the group before the cold
    /// start. The report gains a `load` section and the join's `moved_weight`.
    #[arg(long, value_enum)]
    pub weights: Option<WeightsArg>,
    /// The Zipf exponent s of `--weights zipf`.
    #[arg(long, default_value_t = 1.1, requires = "weights")]
    pub zipf_s: f64,
    /// The seed of `--weights zipf`.
    #[arg(long, default_value_t = 1, requires = "weights")]
    pub weight_seed: u64,
    /// With `--weights`: draw the same weights but do not tell the library (it balances
    /// by count), to compare the loads a count-only group ends with.
    #[arg(long, requires = "weights")]
    pub count_only: bool,
    /// Each starting replica's capacity, in order (as many as `--replicas`; the joiner
    /// has capacity 1).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub capacities: Option<Vec<u32>>,
    /// Runs of the whole scenario, each on a fresh group: one report line per run,
    /// then a last line with the last run's report and `over_runs` {min, median, max}
    /// of its times and moves.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub runs: u64,
    /// With `--topology sentinel|cluster`: after the cold start, cut the group's
    /// primary off from its replicas, let a joiner take its share (grants on the
    /// primary only), then kill the primary; count partition terms that start before
    /// an earlier owner's local deadline (`overlaps`) and time until every partition
    /// is owned again (`kill.all_owned_ms`). A fresh topology per run; use a lease
    /// longer than the failover takes (e.g. 10000).
    #[arg(long, conflicts_with_all = ["weights", "capacities"])]
    pub lose_writes: bool,
    /// Every replica runs with this move budget
    /// (`GroupConfigBuilder::max_moves_per_interval`): at most K hand-offs to even
    /// out the group per renew interval. The report gains `move_budget` and
    /// `max_moves_per_interval` (the most hand-offs released in one renew interval,
    /// from the ledger's server times).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "lose_writes")]
    pub move_budget: Option<u32>,
    /// Every partition callback hands off N bytes of state when its term ends
    /// (`Ownership::hand_off`: a header naming the term, padded to N; 0: none, at
    /// most 1 MiB). The report's `hand_offs` counts the planned moves whose new term
    /// got exactly the previous term's state, and the ledger check its `state_bytes`.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_hand_off_bytes, conflicts_with = "lose_writes")]
    pub hand_off_bytes: usize,
    /// Warm moves (`GroupConfigBuilder::prepare_moves`): a replica handing a
    /// partition to a named receiver asks it to prepare first and waits one renew
    /// interval (lease / 3; `--prepare-ms` sets the wait) for it; each receiver
    /// prepares by sleeping `--prepare-work-ms`. The report gains `warm`: the
    /// hand-offs whose receiver prepared before the old term ended, those that timed
    /// out, and the time without an owner across them.
    #[arg(long, conflicts_with_all = ["lose_writes", "load"])]
    pub prepare: bool,
    /// Warm moves (as `--prepare`) waiting this long for the receiver, in
    /// milliseconds.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=86_400_000), conflicts_with_all = ["lose_writes", "load"])]
    pub prepare_ms: Option<u64>,
    /// With `--prepare`: how long each receiver's preparation takes (a sleep), in
    /// milliseconds.
    #[arg(long, value_name = "M", default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    pub prepare_work_ms: u64,
    /// Balancing by measured load instead of the kill and join: synthetic tenants
    /// whose loads follow a Zipf law (`--load-zipf-s`, the largest 1000), `shifting`
    /// (the `--hot` top ranks go to other tenants every `--shift-secs`) or
    /// `stationary` (never reassigned, `--noise-percent` noise every second), reported
    /// by the callbacks (`Ownership::report_load`) and damped into weights
    /// (`--half-life-ms`); then the same loads with static weights and by count only
    /// (`--modes`), each on a fresh group for `--seconds`. The report gives each
    /// mode's `load.max_over_share` {p50, p95, max} over time and `moves_per_min`.
    /// `feedback`: the stationary loads are arrival rates into per-tenant queues that
    /// each owner serves at up to `--service-factor` times the rate, backlog first, and
    /// the callbacks report what they achieve (`--report`), so a move's catch-up shows
    /// in the reports.
    #[arg(long, value_enum, conflicts_with_all = ["lose_writes", "weights", "capacities", "move_budget", "hand_off_bytes", "runs"])]
    pub load: Option<group::tenants::LoadMode>,
    /// `--load`: length of each mode's measured window, in seconds.
    #[arg(long, default_value_t = 300, requires = "load", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: u64,
    /// `--load`: spawn → the measured window, in seconds (the cold start must be over
    /// by then).
    #[arg(long, default_value_t = 30, requires = "load", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub settle_secs: u64,
    /// `--load`: the balancing modes to run, in order: `load` (weights from the
    /// reports, the mode under test), `static-weights` (weights set to the loads at
    /// the start, never updated), `count-only` (no weights).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "load,static-weights,count-only",
        requires = "load"
    )]
    pub modes: Vec<measured::Mode>,
    /// `--load`: the seed of the tenants' ranks, shifts and noise.
    #[arg(long, default_value_t = 42, requires = "load")]
    pub seed: u64,
    /// `--load`: the Zipf exponent s (rank k carries 1000 / k^s).
    #[arg(long, default_value_t = 1.0, requires = "load")]
    pub load_zipf_s: f64,
    /// `--load shifting`: how many top ranks go to other tenants at each shift.
    #[arg(long, default_value_t = 8, requires = "load")]
    pub hot: usize,
    /// `--load shifting`: time between shifts, in seconds.
    #[arg(long, default_value_t = 60, requires = "load", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub shift_secs: u64,
    /// `--load`: every load is scaled by a factor in 1 ± this % drawn every second.
    /// Default: 0 for `shifting`, 20 for `stationary`.
    #[arg(long, requires = "load", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub noise_percent: Option<u32>,
    /// `--load`: the damping's half-life (`LoadDamping::half_life`), in milliseconds.
    #[arg(long, default_value_t = 10_000, requires = "load", value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub half_life_ms: u64,
    /// `--load`: the damping's threshold (`LoadDamping::threshold_percent`).
    #[arg(long, default_value_t = 10, requires = "load", value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub threshold_percent: u32,
    /// `--load`: how often every callback reports its load, in milliseconds.
    #[arg(long, default_value_t = 500, requires = "load", value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub report_every_ms: u64,
    /// `--load`: how often the placement is sampled, in milliseconds.
    #[arg(long, default_value_t = 1000, requires = "load", value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub sample_ms: u64,
    /// `--load`: the `load` mode starts from weight 1 (its reports bring the weights
    /// up, over a few half-lives: give it a longer `--settle-secs`) instead of weights
    /// set to the loads at the start.
    #[arg(long, requires = "load")]
    pub unseeded: bool,
    /// `--load`: every mode's report gains `series`, the sampled
    /// `max_over_share` in order.
    #[arg(long, requires = "load")]
    pub series: bool,
    /// `--load feedback`: what the callbacks report, `throughput` (entries processed
    /// per second, catch-ups included: what a naive consumer reports) or `arrival`
    /// (entries arrived per second). Default: `throughput`.
    #[arg(long, value_enum, requires = "load")]
    pub report: Option<group::feedback::Report>,
    /// `--load feedback`: an owner serves a tenant's queue at most this many times the
    /// tenant's mean arrival rate (the cap of a catch-up).
    #[arg(long, default_value_t = 4.0, requires = "load", value_parser = parse_service_factor)]
    pub service_factor: f64,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Tenant size distributions of `rebalance --weights`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WeightsArg {
    /// Zipf: a few large tenants, a long tail of small ones.
    Zipf,
}

/// Options of the `load` scenario.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Number of partitions; a comma-separated list (`1000,10000`) runs the scenario for
    /// each count in turn and compares them.
    #[arg(long, default_value = "1000", value_delimiter = ',', value_parser = parse_count)]
    pub partitions: Vec<usize>,
    /// Number of replicas (coordinators, N); a comma-separated list (`10,200`) runs the
    /// scenario for each count in turn and compares them. With lists of both, every
    /// pair runs (each partition count with each replica count, in that order), and
    /// the comparison has one entry per pair.
    #[arg(long, default_value = "4", value_delimiter = ',', value_parser = parse_count)]
    pub replicas: Vec<usize>,
    /// Coordinators per replica process (K): N / K processes each run K coordinators,
    /// each with its own session, store connection and replica id, so that N = 1000
    /// fits on one machine (`--replicas 1000 --replicas-per-process 10`: 100
    /// processes). Every count of `--replicas` must be a multiple of K.
    #[arg(long, default_value_t = 1, value_parser = parse_per_process)]
    pub replicas_per_process: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Length of the measurement window, in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Cold starts per partition count, each on a fresh redis-server and fresh replicas.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub runs: u64,
    /// Longest a cold start may take to balance, in seconds. Default: 30 s + 30 leases
    /// + 1 ms per partition.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub limit_secs: Option<u64>,
    /// Run every replica at this niceness (`nice -n`, 0..=19). On a machine where the
    /// replicas share the cores with the Redis server, 10 keeps them from preempting
    /// the server in the middle of a script, as a server on its own core would be.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the `rolling` scenario.
#[derive(Debug, Args)]
pub struct RollingArgs {
    /// Number of partitions (P: the old list).
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Number of replicas.
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Every process runs with a rejoin grace: a restart keeps its partitions for
    /// the same replica id.
    #[arg(long)]
    pub sticky: bool,
    /// The rejoin grace of `--sticky`, in milliseconds. Default: 10 leases.
    #[arg(long, requires = "sticky", value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub rejoin_grace_ms: Option<u64>,
    /// K: the restarted ("new version") processes run with P + K partitions at list
    /// version 2, the old ones with P at version 1. Default 0: no list change (and no
    /// list versions).
    #[arg(long, default_value_t = 0, value_parser = parse_added)]
    pub add_partitions: usize,
    /// Pause after each restart before the next SIGTERM, in milliseconds (not with
    /// `--paced`, which waits for readiness instead).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub gap_ms: u64,
    /// Deploy as an orchestrator paced by readiness would (Kubernetes' `maxSurge: 1`,
    /// `maxUnavailable: 0` with the `/readyz` of `examples/kubernetes/`): for each old
    /// replica, start its replacement (a new replica id), wait until the replacement is
    /// ready in the group's sense (`CoordinatorHandle::readiness`), then SIGTERM the old
    /// one and wait for its exit.
    #[arg(long, conflicts_with_all = ["sticky", "add_partitions"])]
    pub paced: bool,
    /// Settle time of a starting replica, in milliseconds. Default: one lease.
    #[arg(long)]
    pub settle_ms: Option<u64>,
    /// Longest the group may take to balance after the last restart, in seconds (then
    /// the report says what was seen). Default: 30 s + 30 leases + 1 ms per partition.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub limit_secs: Option<u64>,
    /// Every partition callback hands off N bytes of state when its term ends
    /// (`Ownership::hand_off`: a header naming the term, padded to N; 0: none, at
    /// most 1 MiB). The report's `hand_offs` counts the planned moves whose new term
    /// got exactly the previous term's state, and the ledger check its `state_bytes`.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_hand_off_bytes)]
    pub hand_off_bytes: usize,
    /// Every replica leaves with `CoordinatorHandle::shutdown_within` this many
    /// milliseconds on SIGTERM (as under a pod's `terminationGracePeriodSeconds`), not
    /// `shutdown()`; the report's `leave_ms` says how long the longest leave took.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub leave_within_ms: Option<u64>,
    /// Run every replica at this niceness (`nice -n`, 0..=19); see `load`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the `add` scenario.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// Number of partitions before the additions.
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Number of replicas.
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub lease_ms: u64,
    /// Partitions to add, one at a time.
    #[arg(long, default_value_t = 20, value_parser = parse_count)]
    pub adds: usize,
    /// Pause after each addition is owned, in milliseconds.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub gap_ms: u64,
    /// Run every replica at this niceness (`nice -n`, 0..=19); see `load`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Options of the `chaos` scenario (it always starts its own two redis-servers).
#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// Number of replicas.
    #[arg(long, default_value_t = 5, value_parser = parse_replicas)]
    pub replicas: usize,
    /// Number of partitions.
    #[arg(long, default_value_t = 32, value_parser = parse_count)]
    pub partitions: usize,
    /// Lease of every partition, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub lease_ms: u64,
    /// Length of the fault schedule, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Seed of the fault schedule: the same seed gives the same schedule.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How often each partition callback appends a ledger record, in milliseconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub write_every_ms: u64,
    /// Every partition callback hands off N bytes of state when its term ends
    /// (`Ownership::hand_off`: a header naming the term, padded to N; 0: none, at
    /// most 1 MiB). Whatever the terms are offered is checked over the whole run: state
    /// that is not the previous term's is a violation (`hand_offs.stale`).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = parse_hand_off_bytes)]
    pub hand_off_bytes: usize,
}

/// Options of `tables`.
#[derive(Debug, Args)]
pub struct TablesArgs {
    /// Rewrite the docs (without it, only check that they match the reports and fail
    /// if one does not).
    #[arg(long)]
    pub write: bool,
    /// The repository's root.
    #[arg(long, default_value = ".")]
    pub root: std::path::PathBuf,
}

/// Options of the hidden `partition-child` mode.
#[derive(Debug, Args)]
pub struct PartitionChildArgs {
    /// The coordination store.
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Group name.
    #[arg(long)]
    pub group: String,
    /// Number of partitions (named `p0000`, `p0001`, ...).
    #[arg(long, value_parser = parse_count)]
    pub partitions: usize,
    /// Replica id; a comma-separated list runs one coordinator per id in this process
    /// (each its own session and store connection), and every line names its replica.
    #[arg(long, required = true, value_delimiter = ',')]
    pub replica: Vec<String>,
    /// Lease in milliseconds.
    #[arg(long)]
    pub lease_ms: u64,
    /// Settle time in milliseconds. Default: one lease.
    #[arg(long)]
    pub settle_ms: Option<u64>,
    /// Redis URL of a resource store: each partition callback appends fenced ledger
    /// records there.
    #[arg(long)]
    pub ledger_url: Option<String>,
    /// How often a callback appends a ledger record, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub write_every_ms: u64,
    /// Version of this process's partition list (`GroupConfigBuilder::list_version`):
    /// 0 only seeds a new group; a version newer than the group's replaces its set.
    #[arg(long, default_value_t = 0)]
    pub list_version: u64,
    /// Keep this replica's partitions for this long across a graceful restart
    /// (`GroupConfigBuilder::rejoin_grace`), in milliseconds. Default: none (a
    /// shutdown hands everything over).
    #[arg(long)]
    pub rejoin_grace_ms: Option<u64>,
    /// The replica's capacity (see `GroupConfigBuilder::capacity`).
    #[arg(long, default_value_t = 1)]
    pub capacity: u32,
    /// The group's move budget (`GroupConfigBuilder::max_moves_per_interval`).
    #[arg(long)]
    pub move_budget: Option<u32>,
    /// Bytes of state every callback hands off when its term ends (0: none).
    #[arg(long, default_value_t = 0, value_parser = parse_hand_off_bytes)]
    pub hand_off_bytes: usize,
    /// On SIGTERM, leave with `CoordinatorHandle::shutdown_within` this many
    /// milliseconds (default: `shutdown()`).
    #[arg(long)]
    pub leave_within_ms: Option<u64>,
    /// Warm moves (`GroupConfigBuilder::prepare_moves`), waiting one renew interval
    /// (lease / 3) for the receiver; each receiver prepares by sleeping
    /// `--prepare-work-ms` and prints a `prepared` line.
    #[arg(long)]
    pub prepare: bool,
    /// Warm moves waiting this long for the receiver, in milliseconds (implies
    /// `--prepare`).
    #[arg(long)]
    pub prepare_ms: Option<u64>,
    /// With `--prepare`: how long each preparation takes, in milliseconds.
    #[arg(long, default_value_t = 20)]
    pub prepare_work_ms: u64,
    /// The synthetic loads of `rebalance --load`, as the JSON of a `Schedule`
    /// (`group/tenants.rs`): every callback reports its partition's load
    /// (`Ownership::report_load`) every `--report-every-ms`.
    #[arg(long, requires = "half_life_ms")]
    pub load_schedule: Option<String>,
    /// How often a callback reports its load, in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub report_every_ms: u64,
    /// Weights from the reported loads (`GroupConfigBuilder::weights_from_loads`) with
    /// this half-life, in milliseconds.
    #[arg(long)]
    pub half_life_ms: Option<u64>,
    /// The damping's `threshold_percent` (with `--half-life-ms`).
    #[arg(long, default_value_t = 10)]
    pub threshold_percent: u32,
    /// With `--load-schedule`: the schedule's loads are arrival rates into queues the
    /// callbacks serve, reporting what they achieve, handing their queue to the next
    /// owner and committing it to a file; the JSON of a `Feedback`
    /// (`group/feedback.rs`).
    #[arg(long, requires = "load_schedule", conflicts_with = "hand_off_bytes")]
    pub feedback: Option<String>,
}

fn parse_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a count in 1..=100000")),
    }
}

fn parse_per_process(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a count of replicas per process in 1..=1000"
        )),
    }
}

fn parse_added(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= 100_000 => Ok(n),
        _ => Err(format!("{s:?} is not a count in 0..=100000")),
    }
}

fn parse_hand_off_bytes(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= leasehold_partitions::MAX_HAND_OFF_BYTES => Ok(n),
        _ => Err(format!(
            "{s:?} is not a byte count in 0..={}",
            leasehold_partitions::MAX_HAND_OFF_BYTES
        )),
    }
}

fn parse_service_factor(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (1.0..=1000.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a service factor in 1..=1000")),
    }
}

fn parse_replicas(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (2..=100).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a replica count in 2..=100")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every elector warns at start that the throwaway server has no persistence; that is
    // expected here, so the elector's own warnings are off unless RUST_LOG asks for them.
    // Partition replicas under faults warn about every failed tick: errors only.
    let default_filter = match cli.command {
        Command::PartitionChild(_) => "error",
        // Thousands of simulated replicas under faults: their logs are noise.
        Command::Simulate(_) => "off",
        _ => "warn,leasehold_election::elector=error",
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    if let Command::Simulate(args) = &cli.command {
        // Every seed runs on a runtime of its own, on threads of this process.
        return match simulate::run(args) {
            Ok((report, passed)) => match print_last(&report) {
                Ok(()) if passed => ExitCode::SUCCESS,
                Ok(()) => {
                    eprintln!("leasehold-bench: {} violations", report.violations);
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("leasehold-bench: {e}");
                    ExitCode::FAILURE
                }
            },
            Err(e) => {
                eprintln!("leasehold-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(BoxError::from)
        .and_then(|rt| rt.block_on(dispatch(cli.command)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leasehold-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> Result<(), BoxError> {
    match command {
        Command::Child(args) => child::run(&args).await,
        Command::PartitionChild(args) => group::child::run(&args).await,
        Command::Tables(args) => {
            let files: Vec<std::path::PathBuf> = tables::DOCS.iter().map(Into::into).collect();
            let stale = tables::run(&args.root, &files, args.write)?;
            match (stale.is_empty(), args.write) {
                (true, _) => Ok(()),
                (false, true) => {
                    for f in &stale {
                        eprintln!("rewrote the tables of {}", f.display());
                    }
                    Ok(())
                }
                (false, false) => Err(format!(
                    "tables out of date with docs/bench/*.json in {}: run `leasehold-bench tables --write`",
                    stale
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                .into()),
            }
        }
        Command::Rebalance(args) if args.load.is_some() => {
            let mode = args.load.ok_or("no --load")?;
            print_last(&measured::run(&args, mode).await?)
        }
        Command::Rebalance(args) if args.lose_writes => {
            print_last(&group::lossy::run(&args).await?)
        }
        Command::Rebalance(args) => rebalance::run_all(&args).await,
        Command::Add(args) => print_last(&add::run(&args).await?),
        Command::Load(args) => load::run(&args).await,
        Command::Rolling(args) => print_last(&rolling::run(&args).await?),
        Command::Chaos(args) => {
            let report = chaos::run(&args).await?;
            print_last(&report)?;
            match report.violations {
                0 => Ok(()),
                n => Err(format!("{n} violations (seed {})", args.seed).into()),
            }
        }
        Command::Stall(args) => print_last(&stall::run(&args).await?),
        Command::Simulate(_) => unreachable!("run before the runtime starts"),
        Command::Failover(args) if args.lose_writes => print_last(&lossy::run(&args).await?),
        Command::Failover(args) => {
            let harness = Harness::start(&args)?;
            print_last(&failover::run(&harness, runs(&args)?).await?)
        }
        Command::Handover(args) if args.lose_writes => {
            Err("--lose-writes is for failover and rebalance".into())
        }
        Command::Handover(args) => {
            let harness = Harness::start(&args)?;
            print_last(&handover::run(&harness, runs(&args)?).await?)
        }
        Command::Soak(args) => print_last(&soak::run(&args).await?),
    }
}

fn runs(args: &ScenarioArgs) -> Result<usize, BoxError> {
    Ok(usize::try_from(args.runs)?)
}

/// Prints the report as one line of stdout (the last one, unless more follow).
fn print_last(report: &impl Serialize) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string(report)?);
    Ok(())
}
