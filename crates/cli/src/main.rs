//! `leasehold`: who leads each duty and who owns each partition, read straight from
//! Redis, and the few changes an operator makes to a partition group, for the
//! operators of a fleet that uses Leasehold.
//!
//! ```text
//! leasehold status --redis-url redis://127.0.0.1:6379/ --group tenants [--json]
//! leasehold watch  --redis-url redis://127.0.0.1:6379/ --group tenants
//! leasehold owner  --redis-url redis://127.0.0.1:6379/ --group tenants tenant-7 [--json]
//! leasehold leader --redis-url redis://127.0.0.1:6379/ --duty scheduler [--json]
//! leasehold list   --redis-url redis://127.0.0.1:6379/ [--prefix leasehold] [--json]
//! leasehold partitions add|remove --redis-url ... --group tenants tenant-33 [...]
//! leasehold partitions list --redis-url ... --group tenants [--json]
//! leasehold drain|undrain --redis-url ... --group tenants --replica replica-c
//! ```
//!
//! Every Redis call runs under `--timeout-ms`. See `docs/operations.md` for the output
//! and the exit codes.

mod commands;
mod error;
mod output;
mod reads;
mod target;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::commands::Drain;
use crate::error::{EXIT_OTHER, Error};
use crate::target::Target;

const EXIT_CODES: &str = "\
Exit codes:
  0  success (also when nobody leads the duty now)
  1  any other Redis error (authentication, ACL refusal, server error)
  2  usage or invalid input: bad arguments, a malformed --redis-url, an invalid name,
     a partition named twice, already in the group, or the group's last one; a drain
     of the last replica taking part (without --force)
  3  Redis unreachable, or no answer within --timeout-ms
  4  not found: no such group, partition in it, live replica in it, or duty (never
     elected under this prefix)
  5  unexpected data: a Leasehold key of the wrong type, a lease key that does not hold
     a Leasehold lease, or a malformed reply
A refused change changes nothing in Redis.";

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
    /// Every partition of a group with its owner, fence, lease left and how long it has
    /// been held; then each live replica's state, drain, partitions owned, session left
    /// and instance (host pid); then the spread and the list version.
    #[command(after_help = EXIT_CODES)]
    Status {
        #[command(flatten)]
        group: GroupArgs,
        /// Print one JSON object instead (shape in docs/operations.md).
        #[arg(long)]
        json: bool,
    },
    /// Who leads a duty: replica, fence and lease left, or "nobody leads now" (exit 0);
    /// a duty never elected under the prefix exits 4, a lease key holding anything but
    /// a Leasehold lease exits 5. A duty's lease carries neither its holder's instance
    /// nor since when it leads, so neither is shown.
    #[command(after_help = EXIT_CODES)]
    Leader {
        #[command(flatten)]
        redis: RedisArgs,
        /// The duty.
        #[arg(long)]
        duty: String,
        /// Print one JSON object instead (shape in docs/operations.md).
        #[arg(long)]
        json: bool,
    },
    /// Print a group's status, then one line per change as it happens, until Ctrl-C:
    /// owners, replicas joining and leaving, drains, replica states, partitions added
    /// and removed, the list version.
    #[command(after_help = EXIT_CODES)]
    Watch {
        #[command(flatten)]
        group: GroupArgs,
        /// How often to read the group, in milliseconds.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
        interval_ms: u64,
    },
    /// One partition's owner: replica, its instance (host pid), fence, lease left and
    /// how long it has held the partition (since when, by this machine's clock).
    #[command(after_help = EXIT_CODES)]
    Owner {
        #[command(flatten)]
        group: GroupArgs,
        /// The partition.
        #[arg(value_name = "PARTITION")]
        partition: String,
        /// Print one JSON object instead (shape in docs/operations.md).
        #[arg(long)]
        json: bool,
    },
    /// The groups and duties under the prefix (found with SCAN, never KEYS): each
    /// group's partitions, owned ones and live replicas; each duty's leader, or none.
    #[command(after_help = EXIT_CODES)]
    List {
        #[command(flatten)]
        redis: RedisArgs,
        /// Print one JSON object instead (shape in docs/operations.md).
        #[arg(long)]
        json: bool,
    },
    /// Add, remove or list a group's partitions; every replica sees a change within
    /// one renew interval.
    #[command(subcommand)]
    Partitions(PartitionsCommand),
    /// Drain a live replica: it hands its partitions over to the others and claims
    /// nothing until undrained (the drain is about the replica id: it lasts across
    /// restarts and lost sessions). Refused if no other replica would take part.
    #[command(after_help = EXIT_CODES)]
    Drain {
        #[command(flatten)]
        replica: ReplicaArgs,
        /// Drain it even if it is the last replica taking part (every partition then
        /// stays unowned until a replica joins or one is undrained).
        #[arg(long)]
        force: bool,
    },
    /// Let a drained replica take its share again.
    #[command(after_help = EXIT_CODES)]
    Undrain(ReplicaArgs),
}

#[derive(Debug, Subcommand)]
enum PartitionsCommand {
    /// Add partitions to a group its replicas created. Refused, changing nothing, if
    /// one is in the group already or named twice, or the group does not exist (an add
    /// never creates a group: after a Redis restart that lost it, the replicas restore
    /// the set they saw).
    #[command(after_help = EXIT_CODES)]
    Add {
        #[command(flatten)]
        group: GroupArgs,
        /// No longer used (an add never creates a group); accepted so that old scripts
        /// still run, with a warning.
        #[arg(long, hide = true)]
        grant_delay_ms: Option<u64>,
        /// The partitions to add.
        #[arg(value_name = "PARTITION", required = true)]
        partitions: Vec<String>,
    },
    /// Remove partitions from a group; an owned one is handed back by its owner.
    /// Refused, changing nothing, if one is not in the group, is named twice, or the
    /// group would be left without partitions.
    #[command(after_help = EXIT_CODES)]
    Remove {
        #[command(flatten)]
        group: GroupArgs,
        /// The partitions to remove.
        #[arg(value_name = "PARTITION", required = true)]
        partitions: Vec<String>,
    },
    /// Set a partition's weight (1 to 1000000; every partition starts at 1). From the
    /// first weight set on, the group balances by load: every replica holds its
    /// capacity share of the total weight, give or take the largest weight.
    #[command(after_help = EXIT_CODES)]
    Weight {
        #[command(flatten)]
        group: GroupArgs,
        /// The partition.
        #[arg(value_name = "PARTITION")]
        partition: String,
        /// Its weight.
        #[arg(value_name = "WEIGHT")]
        weight: u64,
    },
    /// Every partition of a group, one per line, in the order they were added.
    #[command(after_help = EXIT_CODES)]
    List {
        #[command(flatten)]
        group: GroupArgs,
        /// Print one JSON object instead (shape in docs/operations.md).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct RedisArgs {
    // Not a doc comment: rustdoc would read `[:password@]` as a link.
    #[arg(
        long,
        env = "REDIS_URL",
        hide_env_values = true,
        value_name = "URL",
        help = "Redis URL: redis://[user:password@]host:6379/0, or rediss://... for TLS"
    )]
    redis_url: String,
    /// Key prefix the fleet was configured with.
    #[arg(long, default_value = "leasehold")]
    prefix: String,
    /// Timeout of each Redis call, and of connecting, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
}

#[derive(Debug, Args)]
struct GroupArgs {
    #[command(flatten)]
    redis: RedisArgs,
    /// The partition group.
    #[arg(long)]
    group: String,
}

#[derive(Debug, Args)]
struct ReplicaArgs {
    #[command(flatten)]
    group: GroupArgs,
    /// The replica id.
    #[arg(long)]
    replica: String,
}

impl RedisArgs {
    fn target(&self) -> Target {
        Target {
            url: self.redis_url.clone(),
            prefix: self.prefix.clone(),
            timeout: Duration::from_millis(self.timeout_ms),
        }
    }
}

impl Command {
    fn redis(&self) -> &RedisArgs {
        match self {
            Self::Leader { redis, .. } | Self::List { redis, .. } => redis,
            Self::Status { group, .. } | Self::Watch { group, .. } | Self::Owner { group, .. } => {
                &group.redis
            }
            Self::Drain { replica: r, .. } | Self::Undrain(r) => &r.group.redis,
            Self::Partitions(
                PartitionsCommand::Add { group, .. }
                | PartitionsCommand::Remove { group, .. }
                | PartitionsCommand::Weight { group, .. }
                | PartitionsCommand::List { group, .. },
            ) => &group.redis,
        }
    }
}

async fn run(target: &Target, command: Command) -> Result<(), Error> {
    match command {
        Command::Status { group, json } => commands::status(target, &group.group, json).await,
        Command::Leader { duty, json, .. } => commands::leader(target, &duty, json).await,
        Command::Watch { group, interval_ms } => {
            let every = Duration::from_millis(interval_ms);
            commands::watch(target, &group.group, every).await
        }
        Command::Owner {
            group,
            partition,
            json,
        } => commands::owner(target, &group.group, &partition, json).await,
        Command::List { json, .. } => commands::list(target, json).await,
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
        Command::Partitions(PartitionsCommand::List { group, json }) => {
            commands::list_partitions(target, &group.group, json).await
        }
        Command::Drain { replica: r, force } => {
            let how = if force { Drain::Forced } else { Drain::On };
            commands::drain(target, &r.group.group, &r.replica, how).await
        }
        Command::Undrain(r) => {
            commands::drain(target, &r.group.group, &r.replica, Drain::Off).await
        }
    }
}

fn main() -> ExitCode {
    // Usage errors exit with code 2 from here.
    let cli = Cli::parse();
    let target = cli.command.redis().target();
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
    let result = runtime.block_on(run(&target, cli.command));
    // Do not wait for a connection attempt (a DNS lookup on a blocking thread) that
    // outlived its timeout.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let f = e.failure(&target);
            if !f.message.is_empty() {
                eprintln!("leasehold: error: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn partitions_take_names_after_the_group() {
        let cli = Cli::try_parse_from([
            "leasehold",
            "partitions",
            "add",
            "--redis-url",
            "redis://h/",
            "--group",
            "g",
            "p1",
            "p2",
        ])
        .unwrap();
        let Command::Partitions(PartitionsCommand::Add {
            group,
            grant_delay_ms,
            partitions,
        }) = cli.command
        else {
            panic!("not an add: {cli:?}");
        };
        assert_eq!(group.group, "g");
        assert_eq!(grant_delay_ms, None);
        assert_eq!(partitions, ["p1", "p2"]);
        // At least one name.
        let none = Cli::try_parse_from([
            "leasehold",
            "partitions",
            "remove",
            "--redis-url",
            "redis://h/",
            "--group",
            "g",
        ]);
        assert!(none.is_err());
    }
}
