//! `leasehold`: who leads each duty and who owns each partition, read straight from
//! Redis, and the few changes an operator makes to a partition group, for the
//! operators of a fleet that uses Leasehold.
//!
//! ```text
//! leasehold status -u redis://127.0.0.1:6379/ -g tenants [--summary] [-o json]
//! leasehold watch  -u redis://127.0.0.1:6379/ -g tenants [--interval 500ms]
//! leasehold owner  -u redis://127.0.0.1:6379/ -g tenants tenant-7 [-o json]
//! leasehold leader -u redis://127.0.0.1:6379/ -d scheduler [-o json]
//! leasehold list   -u redis://127.0.0.1:6379/ [-p leasehold] [-o json]
//! leasehold partitions add|remove -u ... -g tenants tenant-33 [...]
//! leasehold partitions weight -u ... -g tenants tenant-7 250
//! leasehold partitions list -u ... -g tenants [-o json]
//! leasehold drain|undrain -u ... -g tenants -r replica-c
//! leasehold plan -u ... -g tenants [--add-replica ID[:CAPACITY]] [--remove-replica ID]
//!                [--drain ID] [--weight PARTITION=WEIGHT] [-o json]
//! leasehold dashboard -u ... [--listen 127.0.0.1:9470] [--allow-admin --admin-token T]
//! ```
//!
//! On Sentinel: `--sentinel MASTER -u SENTINEL_URL [-u ...] [--primary-url URL]`; on a
//! Redis Cluster: `--cluster -u NODE_URL [-u ...]`.
//!
//! Every Redis call runs under `--timeout`. Every failure is one line on stderr,
//! `leasehold: error: ...`, clap's usage errors included. See `docs/operations.md` for
//! the output and the exit codes.

mod commands;
mod dashboard;
mod error;
mod output;
mod reads;
mod target;
mod usage;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::commands::Drain;
use crate::error::{EXIT_OTHER, Error};
use crate::target::{Target, Topology};

const EXIT_CODES: &str = "\
Exit codes:
  0  success (also when nobody leads the duty now)
  1  any other Redis error (authentication, ACL refusal, server error)
  2  usage or invalid input: bad arguments, a malformed --redis-url, an invalid name,
     a partition named twice, already in the group, or the group's last one; a drain
     of the last replica taking part (without --force)
  3  Redis unreachable, or no answer within --timeout (a change may or may not have
     been applied; running it again is safe)
  4  not found: no such group, partition in it, live replica in it, or duty (never
     elected under this prefix)
  5  unexpected data: a Leasehold key of the wrong type, a lease key that does not hold
     a Leasehold lease, or a malformed reply
A refused change changes nothing in Redis. Every error is one line on stderr.";

/// What every subcommand's help ends with.
const SEE_ALSO: &str =
    "Exit codes: `leasehold --help`. Output and JSON shapes: docs/operations.md.";

/// Inspect Leasehold leader elections and partition groups in Redis, and change a
/// group's partitions and drains.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A group's partitions with their owners, and its live replicas.
    ///
    /// Every partition with its owner, fence, lease left and how long it has been held;
    /// then each live replica's state, drain, partitions owned, session left, instance
    /// (host pid) and the address it advertises (`-` if none); then the spread and the
    /// list version. `--summary` leaves the
    /// partitions out: one line of counts, then one line per replica.
    #[command(after_help = SEE_ALSO)]
    Status {
        #[command(flatten)]
        group: GroupArgs,
        /// Only the counts and one line per replica (for large groups).
        #[arg(short = 's', long)]
        summary: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Who leads a duty.
    ///
    /// The replica, fence and lease left, or "nobody leads now" (exit 0); a duty never
    /// elected under the prefix exits 4, a lease key holding anything but a Leasehold
    /// lease exits 5. A duty's lease carries neither its holder's instance nor since
    /// when it leads, so neither is shown.
    #[command(after_help = SEE_ALSO)]
    Leader {
        #[command(flatten)]
        redis: RedisArgs,
        /// The duty.
        #[arg(short = 'd', long)]
        duty: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// A group's status, then one line per change until Ctrl-C.
    ///
    /// Changes: owners, replicas joining and leaving, drains, replica states,
    /// partitions added and removed, weights, the list version.
    #[command(after_help = SEE_ALSO)]
    Watch {
        #[command(flatten)]
        group: GroupArgs,
        /// How often to read the group: 500ms, 2s, ...
        #[arg(
            short = 'i',
            long,
            value_name = "DURATION",
            default_value = "500ms",
            value_parser = usage::duration
        )]
        interval: Duration,
        /// The older spelling of --interval, in milliseconds.
        #[arg(
            long,
            hide = true,
            value_name = "MS",
            value_parser = clap::value_parser!(u64).range(1..),
            conflicts_with = "interval"
        )]
        interval_ms: Option<u64>,
    },
    /// One partition's owner.
    ///
    /// The replica, its instance (host pid) and the address it advertises (if any),
    /// fence, lease left and how long it has held the partition (since when, by this
    /// machine's clock).
    #[command(after_help = SEE_ALSO)]
    Owner {
        #[command(flatten)]
        group: GroupArgs,
        /// The partition.
        #[arg(value_name = "PARTITION", allow_negative_numbers = true)]
        partition: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// A group's ledger of moves: every change of owner, oldest first.
    ///
    /// One line per move: when the new term started (the Redis server's clock), the
    /// partition, from which replica to which, why the old term ended (handoff, drain,
    /// leave, removal, released, expiry; new for a first owner), the fences, and how
    /// long the partition had no owner. The ledger keeps about the last 20,000 moves.
    #[command(after_help = SEE_ALSO)]
    Moves {
        #[command(flatten)]
        group: GroupArgs,
        /// Only this partition's moves.
        #[arg(
            short = 'P',
            long,
            value_name = "PARTITION",
            allow_hyphen_values = true
        )]
        partition: Option<String>,
        /// Then print each new move as it is written, until Ctrl-C (with --json: one
        /// JSON object per line).
        #[arg(short = 'f', long)]
        follow: bool,
        /// How often --follow reads the ledger: 500ms, 2s, ...
        #[arg(
            short = 'i',
            long,
            value_name = "DURATION",
            default_value = "500ms",
            value_parser = usage::duration
        )]
        interval: Duration,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The groups and duties under the prefix.
    ///
    /// Found with SCAN, never KEYS: each group's partitions, owned ones and live
    /// replicas; each duty's leader, or none.
    #[command(after_help = SEE_ALSO)]
    List {
        #[command(flatten)]
        redis: RedisArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Add, remove, weigh, prefer or list a group's partitions.
    ///
    /// Every replica sees a change within one renew interval.
    #[command(subcommand)]
    Partitions(PartitionsCommand),
    /// Drain a live replica: it hands its partitions over to the others.
    ///
    /// It claims nothing until undrained (the drain is about the replica id: it lasts
    /// across restarts and lost sessions). Refused if no other replica would take part.
    /// A replica drained already is left as it is, and the command says so.
    #[command(after_help = SEE_ALSO)]
    Drain {
        #[command(flatten)]
        replica: ReplicaArgs,
        /// Drain it even if it is the last replica taking part (every partition then
        /// stays unowned until a replica joins or one is undrained).
        #[arg(short = 'f', long)]
        force: bool,
    },
    /// Let a drained replica take its share again.
    #[command(after_help = SEE_ALSO)]
    Undrain(ReplicaArgs),
    /// What a change would do: the moves and the loads per replica, changing nothing.
    ///
    /// Reads the group and runs the balancing rule its replicas run, round after round,
    /// as if the change were made: replicas added (with a capacity), removed (shut down)
    /// or drained, partitions given weights. Every flag may be given several times.
    /// Where the live group breaks a tie by chance (a replica balancing by count hands
    /// over partitions it picks at random; several replicas claiming the same free
    /// partitions), the planner breaks it the same way every time, and says when that
    /// could change which replicas make the moves.
    #[command(after_help = SEE_ALSO)]
    Plan {
        #[command(flatten)]
        group: GroupArgs,
        /// A replica that joins, with its capacity (default 1).
        #[arg(long, value_name = "ID[:CAPACITY]")]
        add_replica: Vec<String>,
        /// A live replica that leaves: its partitions become free.
        #[arg(long, value_name = "ID")]
        remove_replica: Vec<String>,
        /// A live replica drained: it hands everything over.
        #[arg(long, value_name = "ID")]
        drain: Vec<String>,
        /// A partition's weight (1 to 1000000).
        #[arg(long, value_name = "PARTITION=WEIGHT", allow_hyphen_values = true)]
        weight: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// A live web page of the groups and duties under the prefix.
    ///
    /// Groups and duties with their health; per group, the replicas (owned, load
    /// against share, capacity, drain, state), the partition map, weights,
    /// preferences and the ledger of moves; the alerts of docs/operations.md evaluated
    /// live. The page updates by Server-Sent Events; the dashboard reads Redis only
    /// while someone watches: a group's status at most once per its renew interval, its
    /// new moves (announced by the claims) at most once per --interval. Read-only unless
    /// --allow-admin (which needs a token). JSON: /api/groups, /api/groups/GROUP,
    /// /api/groups/GROUP/moves; events: /events?group=GROUP.
    #[command(after_help = SEE_ALSO)]
    Dashboard {
        #[command(flatten)]
        redis: RedisArgs,
        /// Address to listen on; one that is not loopback needs an admin token.
        #[arg(
            short = 'l',
            long,
            value_name = "ADDR",
            default_value = "127.0.0.1:9470"
        )]
        listen: std::net::SocketAddr,
        /// Allow drain, undrain, weight and partition changes from the page (each
        /// needs the admin token).
        #[arg(long)]
        allow_admin: bool,
        /// The admin token (at least 16 characters), sent by the page in a header;
        /// prefer the environment variable (a flag shows in `ps`).
        #[arg(
            long,
            env = "LEASEHOLD_ADMIN_TOKEN",
            hide_env_values = true,
            value_name = "TOKEN"
        )]
        admin_token: Option<String>,
        /// The shortest time between two reads of a watched group (or of the groups and
        /// duties); a group's status is read at most once per its renew interval if
        /// that is longer (its new moves, which claims announce, once per --interval):
        /// caps what a storm of notices costs; longer saves Redis reads, and delays a
        /// move on the page by up to as much.
        #[arg(
            short = 'i',
            long,
            value_name = "DURATION",
            default_value = "100ms",
            value_parser = usage::duration
        )]
        interval: Duration,
        /// The longest time between two reads of a watched group when no notice comes
        /// (a join publishes none, nor an expiry until the partitions are claimed).
        #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = usage::duration)]
        refresh: Duration,
    },
}

#[derive(Debug, Subcommand)]
enum PartitionsCommand {
    /// Add partitions to a group its replicas created.
    ///
    /// Refused, changing nothing, if one is in the group already or named twice, or the
    /// group does not exist (an add never creates a group: after a Redis restart that
    /// lost it, the replicas restore the set they saw).
    #[command(after_help = SEE_ALSO)]
    Add {
        #[command(flatten)]
        group: GroupArgs,
        /// No longer used (an add never creates a group); accepted so that old scripts
        /// still run, with a warning.
        #[arg(long, hide = true)]
        grant_delay_ms: Option<u64>,
        /// The partitions to add (put `--` before a name that starts with `-`).
        #[arg(
            value_name = "PARTITION",
            required = true,
            allow_negative_numbers = true
        )]
        partitions: Vec<String>,
    },
    /// Remove partitions from a group; an owned one is handed back by its owner.
    ///
    /// Refused, changing nothing, if one is not in the group, is named twice, or the
    /// group would be left without partitions.
    #[command(after_help = SEE_ALSO)]
    Remove {
        #[command(flatten)]
        group: GroupArgs,
        /// The partitions to remove (put `--` before a name that starts with `-`).
        #[arg(
            value_name = "PARTITION",
            required = true,
            allow_negative_numbers = true
        )]
        partitions: Vec<String>,
    },
    /// Set a partition's weight (1 to 1000000; every partition starts at 1).
    ///
    /// From the first weight set on, the group balances by load: every replica holds its
    /// capacity share of the total weight, give or take the largest weight.
    #[command(after_help = SEE_ALSO)]
    Weight {
        #[command(flatten)]
        group: GroupArgs,
        /// The partition.
        #[arg(value_name = "PARTITION", allow_negative_numbers = true)]
        partition: String,
        /// Its weight.
        #[arg(value_name = "WEIGHT", allow_negative_numbers = true)]
        weight: i64,
    },
    /// Prefer a partition on a replica (or, with `--remove`, remove its preference).
    ///
    /// The replica claims it before any other, the others leave it to it, and whoever
    /// holds it hands it back when the balance bound allows. Nothing waits for a replica
    /// that is not live, drained, leaving or full: the partition goes where the rule
    /// puts it. The replica need not be live.
    #[command(after_help = SEE_ALSO)]
    Prefer {
        #[command(flatten)]
        group: GroupArgs,
        /// The partition.
        #[arg(value_name = "PARTITION", allow_negative_numbers = true)]
        partition: String,
        /// The replica id it is preferred on.
        #[arg(
            value_name = "REPLICA",
            required_unless_present = "remove",
            conflicts_with = "remove"
        )]
        replica: Option<String>,
        /// Remove the partition's preference instead.
        #[arg(long)]
        remove: bool,
    },
    /// Every partition of a group, one per line, in the order they were added.
    #[command(after_help = SEE_ALSO)]
    List {
        #[command(flatten)]
        group: GroupArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// How a command prints what it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Tables and lines, for people.
    Table,
    /// One pretty-printed JSON object, for scripts.
    Json,
}

#[derive(Debug, Args)]
struct OutputArgs {
    /// Output format (the JSON shapes are in docs/operations.md).
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        value_name = "FORMAT",
        default_value_t = Format::Table
    )]
    output: Format,
    /// The same as `-o json`.
    #[arg(long, conflicts_with = "output")]
    json: bool,
}

impl OutputArgs {
    fn json(&self) -> bool {
        self.json || self.output == Format::Json
    }
}

#[derive(Debug, Args)]
struct RedisArgs {
    // Not a doc comment: rustdoc would read `[:password@]` as a link.
    #[arg(
        short = 'u',
        long,
        env = "REDIS_URL",
        hide_env_values = true,
        required = true,
        value_name = "URL",
        help = "Redis URL: redis://[user:password@]host:6379/0, or rediss://... for TLS; \
                with --sentinel a Sentinel's, with --cluster a node's (repeat for more)"
    )]
    redis_url: Vec<String>,
    /// The --redis-url are Sentinels: reach the primary they name MASTER, and follow it
    /// across failovers.
    #[arg(long, value_name = "MASTER", conflicts_with = "cluster")]
    sentinel: Option<String>,
    /// With --sentinel: the primary's URL, for its scheme (rediss:// for TLS), user,
    /// password and database (its host and port come from the Sentinels).
    #[arg(long, value_name = "URL", requires = "sentinel")]
    primary_url: Option<String>,
    /// The --redis-url are nodes of a Redis Cluster: each call goes to the node that
    /// owns its keys, and `list` and the dashboard scan every primary.
    #[arg(long)]
    cluster: bool,
    /// Key prefix the fleet was configured with.
    #[arg(short = 'p', long, default_value = "leasehold")]
    prefix: String,
    /// Timeout of connecting and of each Redis call: 2s, 500ms, ...
    #[arg(
        short = 't',
        long,
        value_name = "DURATION",
        default_value = "2s",
        value_parser = usage::duration
    )]
    timeout: Duration,
    /// The older spelling of --timeout, in milliseconds.
    #[arg(
        long,
        hide = true,
        value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..),
        conflicts_with = "timeout"
    )]
    timeout_ms: Option<u64>,
}

#[derive(Debug, Args)]
struct GroupArgs {
    #[command(flatten)]
    redis: RedisArgs,
    /// The partition group.
    #[arg(short = 'g', long)]
    group: String,
}

#[derive(Debug, Args)]
struct ReplicaArgs {
    #[command(flatten)]
    group: GroupArgs,
    /// The replica id.
    #[arg(short = 'r', long)]
    replica: String,
}

impl RedisArgs {
    fn target(&self) -> Target {
        let topology = match (&self.sentinel, self.cluster) {
            (Some(master), _) => Topology::Sentinel {
                master: master.clone(),
                primary_url: self.primary_url.clone(),
            },
            (None, true) => Topology::Cluster,
            (None, false) => Topology::Node,
        };
        let (url, more) = self.redis_url.split_first().map_or_else(
            || (String::new(), Vec::new()),
            |(first, more)| (first.clone(), more.to_vec()),
        );
        Target {
            url,
            more_urls: more,
            topology,
            prefix: self.prefix.clone(),
            timeout: self.timeout_ms.map_or(self.timeout, Duration::from_millis),
        }
    }
}

impl Command {
    fn redis(&self) -> &RedisArgs {
        match self {
            Self::Leader { redis, .. }
            | Self::List { redis, .. }
            | Self::Dashboard { redis, .. } => redis,
            Self::Status { group, .. }
            | Self::Watch { group, .. }
            | Self::Owner { group, .. }
            | Self::Moves { group, .. }
            | Self::Plan { group, .. } => &group.redis,
            Self::Drain { replica: r, .. } | Self::Undrain(r) => &r.group.redis,
            Self::Partitions(
                PartitionsCommand::Add { group, .. }
                | PartitionsCommand::Remove { group, .. }
                | PartitionsCommand::Weight { group, .. }
                | PartitionsCommand::Prefer { group, .. }
                | PartitionsCommand::List { group, .. },
            ) => &group.redis,
        }
    }

    /// Whether the command changes a group (then a refused argument says that nothing
    /// was changed).
    fn is_change(&self) -> bool {
        matches!(
            self,
            Self::Drain { .. }
                | Self::Undrain(_)
                | Self::Partitions(
                    PartitionsCommand::Add { .. }
                        | PartitionsCommand::Remove { .. }
                        | PartitionsCommand::Weight { .. }
                        | PartitionsCommand::Prefer { .. }
                )
        )
    }
}

async fn run(target: &Target, command: Command) -> Result<(), Error> {
    match command {
        Command::Status {
            group,
            summary,
            output,
        } => commands::status(target, &group.group, output.json(), summary).await,
        Command::Leader { duty, output, .. } => {
            commands::leader(target, &duty, output.json()).await
        }
        Command::Watch {
            group,
            interval,
            interval_ms,
        } => {
            let every = interval_ms.map_or(interval, Duration::from_millis);
            commands::watch(target, &group.group, every).await
        }
        Command::Owner {
            group,
            partition,
            output,
        } => commands::owner(target, &group.group, &partition, output.json()).await,
        Command::Moves {
            group,
            partition,
            follow,
            interval,
            output,
        } => {
            let follow = follow.then_some(interval);
            commands::moves(
                target,
                &group.group,
                partition.as_deref(),
                output.json(),
                follow,
            )
            .await
        }
        Command::List { output, .. } => commands::list(target, output.json()).await,
        Command::Partitions(PartitionsCommand::Add {
            group,
            grant_delay_ms,
            partitions,
        }) => {
            if grant_delay_ms.is_some() {
                eprint!("{}", output::grant_delay_unused());
            }
            commands::add(target, &group.group, &partitions).await
        }
        Command::Partitions(PartitionsCommand::Remove { group, partitions }) => {
            commands::remove(target, &group.group, &partitions).await
        }
        Command::Partitions(PartitionsCommand::Weight {
            group,
            partition,
            weight,
        }) => commands::set_weight(target, &group.group, &partition, weight).await,
        Command::Partitions(PartitionsCommand::Prefer {
            group,
            partition,
            replica,
            ..
        }) => commands::prefer(target, &group.group, &partition, replica.as_deref()).await,
        Command::Partitions(PartitionsCommand::List { group, output }) => {
            commands::list_partitions(target, &group.group, output.json()).await
        }
        Command::Drain { replica: r, force } => {
            let how = if force { Drain::Forced } else { Drain::On };
            commands::drain(target, &r.group.group, &r.replica, how).await
        }
        Command::Undrain(r) => {
            commands::drain(target, &r.group.group, &r.replica, Drain::Off).await
        }
        Command::Plan {
            group,
            add_replica,
            remove_replica,
            drain,
            weight,
            output,
        } => {
            let args = commands::PlanArgs {
                add: add_replica,
                remove: remove_replica,
                drain,
                weights: weight,
            };
            commands::plan(target, &group.group, &args, output.json()).await
        }
        Command::Dashboard {
            listen,
            allow_admin,
            admin_token,
            interval,
            refresh,
            ..
        } => {
            let options = dashboard::Options {
                listen,
                allow_admin,
                admin_token,
                interval,
                refresh,
            };
            dashboard::run(target, options).await
        }
    }
}

/// How many SCAN steps (of a thousand keys) a "did you mean" may take.
const HINT_SCAN_STEPS: usize = 100;

/// `error`, with the names under the prefix if it is a group or duty not found (a
/// close one, or the ones there are): a scan, only on this path. If the scan fails, the
/// error goes without.
async fn with_hint(target: &Target, error: Error) -> Error {
    let Some((is_group, name)) = error.not_found() else {
        return error;
    };
    let Ok(store) = target.store() else {
        return error;
    };
    let Ok((found, complete)) =
        reads::inventory_within(&store, &target.prefix, HINT_SCAN_STEPS).await
    else {
        return error;
    };
    let (kind, names) = if is_group {
        (("group", "groups"), &found.groups)
    } else {
        (("duty", "duties"), &found.duties)
    };
    match reads::not_found_hint(kind, name, names, &target.prefix, complete) {
        Some(hint) => Error::Hinted {
            error: Box::new(error),
            hint,
        },
        None => error,
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version as usual; any other usage error in one line, exit code 2.
        Err(e) => return usage::fail(&e),
    };
    let target = cli.command.redis().target();
    let change = cli.command.is_change();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasehold: error: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_OTHER);
        }
    };
    let result = runtime.block_on(async {
        match run(&target, cli.command).await {
            Err(e) => Err(with_hint(&target, e).await),
            ok => ok,
        }
    });
    // Do not wait for a connection attempt (a DNS lookup on a blocking thread) that
    // outlived its timeout.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let e = if change { e.in_change() } else { e };
            let f = e.failure(&target);
            if !f.message.is_empty() {
                eprintln!("leasehold: error: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests;
