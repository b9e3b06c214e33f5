//! `leasehold`: who leads each duty and who owns each partition, read straight from
//! Redis, for the operators of a fleet that uses Leasehold.
//!
//! ```text
//! leasehold status --redis-url redis://127.0.0.1:6379/ --group tenants [--json]
//! leasehold leader --redis-url redis://127.0.0.1:6379/ --duty scheduler [--json]
//! leasehold watch  --redis-url redis://127.0.0.1:6379/ --group tenants
//! ```
//!
//! It only reads (one or two Lua scripts per refresh), every call under `--timeout-ms`.
//! See `docs/operations.md` for the output and the exit codes.

mod commands;
mod output;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::commands::{Failure, Target};

const EXIT_CODES: &str = "\
Exit codes:
  0  success (also when nobody leads the duty)
  1  any other Redis error (authentication, ACL refusal, server error)
  2  usage: bad arguments, a malformed --redis-url, an invalid name
  3  Redis unreachable, or no answer within --timeout-ms
  4  not found: no such group (no replica has ever joined it)
  5  unexpected data: a Leasehold key of the wrong type, or a malformed reply";

/// Inspect Leasehold leader elections and partition groups in Redis.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every partition of a group with its owner, fence and lease left; then the
    /// partitions owned per live replica, and the spread.
    #[command(after_help = EXIT_CODES)]
    Status {
        #[command(flatten)]
        redis: RedisArgs,
        /// The partition group.
        #[arg(long)]
        group: String,
        /// Print one JSON object instead (shape in docs/operations.md).
        #[arg(long)]
        json: bool,
    },
    /// Who leads a duty: replica, fence and lease left, or "nobody".
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
    /// Print a group's status, then one line per change of owner as it happens, until
    /// Ctrl-C.
    #[command(after_help = EXIT_CODES)]
    Watch {
        #[command(flatten)]
        redis: RedisArgs,
        /// The partition group.
        #[arg(long)]
        group: String,
        /// How often to read the group, in milliseconds.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
        interval_ms: u64,
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

impl RedisArgs {
    fn target(self) -> Target {
        Target {
            url: self.redis_url,
            prefix: self.prefix,
            timeout: Duration::from_millis(self.timeout_ms),
        }
    }
}

async fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Status { redis, group, json } => {
            commands::status(&redis.target(), &group, json).await
        }
        Command::Leader { redis, duty, json } => {
            commands::leader(&redis.target(), &duty, json).await
        }
        Command::Watch {
            redis,
            group,
            interval_ms,
        } => commands::watch(&redis.target(), &group, Duration::from_millis(interval_ms)).await,
    }
}

fn main() -> ExitCode {
    // Usage errors exit with code 2 from here.
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasehold: error: cannot start the runtime: {e}");
            return ExitCode::from(commands::EXIT_OTHER);
        }
    };
    let result = runtime.block_on(run(cli.command));
    // Do not wait for a connection attempt (a DNS lookup on a blocking thread) that
    // outlived its timeout.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
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
}
