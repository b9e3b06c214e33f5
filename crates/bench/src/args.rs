//! What the scenarios' command-line arguments share ([`LeaseArgs`], [`DutyArgs`],
//! [`GroupArgs`]), the arguments of the commands that are not scenarios (`tables`,
//! the hidden child modes), and the parsers. Each scenario's own arguments are in its
//! module under `scenarios/`.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use crate::store::{ConnArgs, TargetArgs};

/// `--lease-ms`: the lease of every elector or partition, in milliseconds, with each
/// scenario's default (`DEFAULT`) and range (`MIN..=MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseArgs<const DEFAULT: u64, const MIN: u64 = 10, const MAX: u64 = 86_400_000> {
    /// The lease, in milliseconds.
    pub lease_ms: u64,
}

const LEASE_ID: &str = "lease_ms";

impl<const DEFAULT: u64, const MIN: u64, const MAX: u64> FromArgMatches
    for LeaseArgs<DEFAULT, MIN, MAX>
{
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self {
            lease_ms: matches.get_one::<u64>(LEASE_ID).copied().unwrap_or(DEFAULT),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        if let Some(ms) = matches.get_one::<u64>(LEASE_ID) {
            self.lease_ms = *ms;
        }
        Ok(())
    }
}

impl<const DEFAULT: u64, const MIN: u64, const MAX: u64> Args for LeaseArgs<DEFAULT, MIN, MAX> {
    fn augment_args(cmd: Command) -> Command {
        // The derive's `default_value_t` keeps its text in a static, which cannot
        // depend on the const parameters: the arg is built by hand.
        let default: &'static str = Box::leak(DEFAULT.to_string().into_boxed_str());
        cmd.arg(
            Arg::new(LEASE_ID)
                .long("lease-ms")
                .value_name("LEASE_MS")
                .help("Lease of every elector or partition, in milliseconds")
                .action(ArgAction::Set)
                .default_value(default)
                .value_parser(clap::value_parser!(u64).range(MIN..=MAX)),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Options of the single-duty scenarios `failover` and `handover`.
#[derive(Debug, Args)]
pub struct DutyArgs {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs<1000>,
    /// Number of runs.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Run every elector (the child's and the follower's) with
    /// `Elector::spawn_dedicated`: on a thread and runtime of its own.
    #[arg(long)]
    pub dedicated: bool,
    /// Every elector (the child's and the follower's) with
    /// `ElectorConfigBuilder::min_replicas_acked(K)`: a grant or renewal counts once K
    /// replicas acknowledge it (0: off). For `--topology sentinel|cluster`.
    #[arg(long, default_value_t = 0)]
    pub min_replicas_acked: usize,
    /// The Redis set-up.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// What the `rebalance` scenarios share: the group and where it runs.
#[derive(Debug, Args)]
pub struct GroupArgs {
    /// Number of partitions.
    #[arg(long, default_value_t = 64, value_parser = parse_count)]
    pub partitions: usize,
    /// Replicas at the start (in `rebalance`, one more joins at the end).
    #[arg(long, default_value_t = 4, value_parser = parse_replicas)]
    pub replicas: usize,
    /// The lease of every partition.
    #[command(flatten)]
    pub lease: LeaseArgs<2000>,
    /// Settle time of a starting replica, in milliseconds. Default: one lease.
    #[arg(long)]
    pub settle_ms: Option<u64>,
    /// Run every replica at this niceness (`nice -n`, 0..=19); see `load`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub replica_nice: u8,
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
    /// `failover-lossy`: an old leader cut off from the new primary).
    #[arg(long)]
    pub one_term: bool,
    /// `ElectorConfigBuilder::min_replicas_acked(K)` (0: off).
    #[arg(long, default_value_t = 0)]
    pub min_replicas_acked: usize,
}

/// Tenant size distributions of `rebalance --weights`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WeightsArg {
    /// Zipf: a few large tenants, a long tail of small ones.
    Zipf,
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
    /// The group's move budget (`GroupConfigBuilder::move_budget(MoveBudget::Moves(K))`).
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
    /// The synthetic loads of `rebalance-load` and what is reported of them.
    #[command(flatten)]
    pub loads: ChildLoadArgs,
}

/// The hidden `partition-child` mode's options for `rebalance-load`: the loads every
/// callback reports, and the weights the coordinators take from them.
#[derive(Debug, Args)]
pub struct ChildLoadArgs {
    /// The synthetic loads of `rebalance-load`, as the JSON of a `Schedule`
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

pub fn parse_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a count in 1..=100000")),
    }
}

pub fn parse_per_process(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a count of replicas per process in 1..=1000"
        )),
    }
}

pub fn parse_added(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= 100_000 => Ok(n),
        _ => Err(format!("{s:?} is not a count in 0..=100000")),
    }
}

pub fn parse_hand_off_bytes(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= leasehold_partitions::MAX_HAND_OFF_BYTES => Ok(n),
        _ => Err(format!(
            "{s:?} is not a byte count in 0..={}",
            leasehold_partitions::MAX_HAND_OFF_BYTES
        )),
    }
}

pub fn parse_service_factor(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (1.0..=1000.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a service factor in 1..=1000")),
    }
}

pub fn parse_replicas(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (2..=100).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a replica count in 2..=100")),
    }
}
