//! The scenarios' command-line arguments, and their parsers.

use clap::Args;

use crate::group::{self, measured};
use crate::store::{ConnArgs, TargetArgs};

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
