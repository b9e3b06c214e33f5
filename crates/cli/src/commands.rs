//! The three commands, and how their failures become exit codes.

use std::io::{self, Write as _};
use std::time::{Duration, SystemTime};

use leasehold_election::config::validate_name;
use leasehold_election::{BuildError, RedisStore, StoreError, current_leader};
use leasehold_partitions::{GroupStatus, PartitionsError, group_status};
use tokio::time::{MissedTickBehavior, interval};

use crate::output;

/// Exit code: any other Redis error (authentication, ACL refusal, server error).
pub const EXIT_OTHER: u8 = 1;
/// Exit code: bad arguments (clap uses it too), a malformed URL, an invalid name.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: Redis unreachable, or no answer within the timeout.
pub const EXIT_CONNECTION: u8 = 3;
/// Exit code: no such group.
pub const EXIT_NOT_FOUND: u8 = 4;
/// Exit code: a Leasehold key of the wrong type, or a reply of an unexpected shape.
pub const EXIT_DATA: u8 = 5;

/// A failed command: an exit code and one line for stderr.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// The message, one line; empty for a quiet exit (stdout closed by a pager).
    pub message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        // One line on stderr, whatever the server put in its message.
        let message = message.into().replace(['\r', '\n'], " ");
        Self { code, message }
    }
}

/// Where to read from.
#[derive(Debug, Clone)]
pub struct Target {
    /// The Redis URL.
    pub url: String,
    /// The key prefix.
    pub prefix: String,
    /// Timeout of every Redis call (and of connecting).
    pub timeout: Duration,
}

impl Target {
    fn store(&self) -> Result<RedisStore, Failure> {
        validate_name("prefix", &self.prefix)
            .map_err(|e| Failure::new(EXIT_USAGE, e.to_string()))?;
        // Only a malformed URL fails here: the store connects on first use. The message
        // never repeats the URL, which may hold a password.
        RedisStore::builder(self.url.as_str())
            .call_timeout(self.timeout)
            .build()
            .map_err(|e| {
                let detail = match e {
                    BuildError::Url(cause) => cause.to_string(),
                    other => other.to_string(),
                };
                Failure::new(EXIT_USAGE, format!("invalid --redis-url: {detail}"))
            })
    }

    fn store_error(&self, e: StoreError) -> Failure {
        match e {
            StoreError::Timeout(_) => Failure::new(
                EXIT_CONNECTION,
                format!(
                    "no answer from Redis within {} ms (--timeout-ms)",
                    self.timeout.as_millis()
                ),
            ),
            StoreError::Connection(d) => {
                Failure::new(EXIT_CONNECTION, format!("cannot reach Redis: {d}"))
            }
            StoreError::Unavailable(cause) => {
                Failure::new(EXIT_CONNECTION, format!("cannot reach Redis: {cause}"))
            }
            e @ StoreError::WrongType(_) => Failure::new(
                EXIT_DATA,
                format!(
                    "{e} (under prefix {:?}: did something else write it?)",
                    self.prefix
                ),
            ),
            e @ StoreError::Protocol(_) => Failure::new(
                EXIT_DATA,
                format!("{e} (is the URL a Redis server? did something else write the keys?)"),
            ),
            other => Failure::new(EXIT_OTHER, other.to_string()),
        }
    }

    fn partitions_error(&self, e: PartitionsError) -> Failure {
        match e {
            PartitionsError::Store(e) => self.store_error(e),
            other => Failure::new(EXIT_OTHER, other.to_string()),
        }
    }

    async fn read_group(&self, store: &RedisStore, group: &str) -> Result<GroupStatus, Failure> {
        group_status(store, &self.prefix, group)
            .await
            .map_err(|e| self.partitions_error(e))?
            .ok_or_else(|| {
                Failure::new(
                    EXIT_NOT_FOUND,
                    format!(
                        "no group {group:?} under prefix {:?} (no replica has ever joined it)",
                        self.prefix
                    ),
                )
            })
    }
}

fn name(what: &'static str, value: &str) -> Result<(), Failure> {
    validate_name(what, value).map_err(|e| Failure::new(EXIT_USAGE, e.to_string()))
}

/// Writes to stdout; a closed stdout (`| head`) ends the command quietly.
fn print(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => Failure::new(0, ""),
            _ => Failure::new(EXIT_OTHER, format!("cannot write to stdout: {e}")),
        })
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// `leasehold status`.
pub async fn status(target: &Target, group: &str, json: bool) -> Result<(), Failure> {
    name("group", group)?;
    let store = target.store()?;
    let status = target.read_group(&store, group).await?;
    print(&if json {
        output::to_json(&output::status_json(&target.prefix, group, &status))
    } else {
        output::status_text(&target.prefix, group, &status)
    })
}

/// `leasehold leader`.
pub async fn leader(target: &Target, duty: &str, json: bool) -> Result<(), Failure> {
    name("duty", duty)?;
    let store = target.store()?;
    let leader = current_leader(&store, &target.prefix, duty)
        .await
        .map_err(|e| target.store_error(e))?;
    print(&if json {
        output::to_json(&output::leader_json(&target.prefix, duty, leader.as_ref()))
    } else {
        output::leader_text(duty, leader.as_ref())
    })
}

/// `leasehold watch`: the status once, then one line per change until Ctrl-C.
///
/// The first read fails like `status`. Afterwards a failed read is reported once on
/// stderr and retried; only data of the wrong shape ends the watch.
pub async fn watch(target: &Target, group: &str, every: Duration) -> Result<(), Failure> {
    name("group", group)?;
    let store = target.store()?;
    let mut last = target.read_group(&store, group).await?;
    print(&output::status_text(&target.prefix, group, &last))?;
    print(&format!(
        "\nwatching for changes every {} ms; Ctrl-C to stop\n",
        every.as_millis()
    ))?;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.tick().await;
    let mut failing = false;
    loop {
        let read = async {
            tick.tick().await;
            target.read_group(&store, group).await
        };
        let result = tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            r = read => r,
        };
        match result {
            Ok(status) => {
                if failing {
                    failing = false;
                    eprintln!("{}  reading the group works again", now());
                }
                let at = now();
                let lines: String = output::changes(&last, &status)
                    .iter()
                    .map(|c| format!("{at}  {c}\n"))
                    .collect();
                print(&lines)?;
                last = status;
            }
            Err(e) if e.code == EXIT_DATA => return Err(e),
            Err(e) => {
                if !failing {
                    failing = true;
                    eprintln!("{}  error: {} (retrying)", now(), e.message);
                }
            }
        }
    }
}
