//! The commands. Each returns a typed [`Error`]; `main` maps it to an exit code and a
//! message ([`Error::failure`]).

mod admin;
mod duty;
mod group;
mod moves;
mod plan;

use std::collections::HashSet;
use std::io::{self, Write as _};
use std::time::{Duration, SystemTime};

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, PartitionsError};

pub use self::admin::{Drain, add, drain, list_partitions, prefer, remove, set_weight};
pub use self::duty::{leader, list, read_inventory_each};
pub use self::group::{owner, status, watch};
pub use self::moves::{moves, read_after};
pub use self::plan::{PlanArgs, plan};
use tokio::time::{MissedTickBehavior, interval};

use crate::error::{Change, EXIT_DATA, Error, check_name};
use crate::target::Target;

/// Writes to stdout; a closed stdout (`| head`) ends the command quietly.
pub fn print(text: &str) -> Result<(), Error> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => Error::StdoutClosed,
            _ => Error::Stdout(e),
        })
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Runs `read` every `every` until Ctrl-C, handing each result to `show`. A failed
/// read is reported once on stderr and retried (and its recovery said: `reading
/// {what} works again`); only data of the wrong shape, or a failing `show` (stdout
/// closed), ends the loop.
async fn poll_until_ctrl_c<T>(
    target: &Target,
    every: Duration,
    what: &str,
    mut read: impl AsyncFnMut() -> Result<T, Error>,
    mut show: impl FnMut(T) -> Result<(), Error>,
) -> Result<(), Error> {
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.tick().await;
    let mut failing = false;
    loop {
        let next = async {
            tick.tick().await;
            read().await
        };
        let result = tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            r = next => r,
        };
        match result {
            Ok(value) => {
                if failing {
                    failing = false;
                    eprintln!("{}  reading {what} works again", now());
                }
                show(value)?;
            }
            Err(e) => {
                let failure = e.failure(target);
                if failure.code == EXIT_DATA {
                    return Err(e);
                }
                if !failing {
                    failing = true;
                    eprintln!("{}  error: {} (retrying)", now(), failure.message);
                }
            }
        }
    }
}

/// Checks partition names before anything is sent: each follows the naming rules, and
/// none is named twice (the admin checks the same; checking first makes bad input a
/// usage error whatever the state of Redis). A bad name is named by its place among
/// several (`PARTITION 2 of 3`).
fn partition_names(group: &str, names: &[String], change: Change) -> Result<(), Error> {
    let mut seen = HashSet::new();
    for (i, n) in names.iter().enumerate() {
        let arg = if names.len() == 1 {
            "PARTITION".to_owned()
        } else {
            format!("PARTITION {} of {}", i + 1, names.len())
        };
        check_name(&arg, "partition name", n)?;
        if !seen.insert(n.as_str()) {
            return Err(Error::Refused {
                group: group.to_owned(),
                error: PartitionsError::DuplicatePartition(n.clone()),
                change,
            });
        }
    }
    Ok(())
}

/// The error of an admin call on `group` (`change`: of a change, else of a read).
/// The admin cannot tell a missing group from a missing partition or replica in it:
/// for those, whether the group exists decides.
pub async fn group_error(
    target: &Target,
    store: &RedisStore,
    group: &str,
    error: PartitionsError,
    change: Option<Change>,
) -> Error {
    let missing_inside = matches!(
        error,
        PartitionsError::UnknownPartition(_) | PartitionsError::UnknownReplica(_)
    );
    if missing_inside {
        let exists = match GroupAdmin::new(store.clone(), group)
            .and_then(|a| a.with_key_prefix(&target.prefix))
        {
            Ok(admin) => admin.exists().await,
            Err(e) => Err(e),
        };
        match exists {
            Ok(false) => return Error::NoGroup(group.to_owned()),
            Ok(true) => {}
            Err(PartitionsError::Store(e)) => return Error::Store(e),
            Err(other) => {
                return Error::Group {
                    group: group.to_owned(),
                    error: other,
                };
            }
        }
    }
    let group = group.to_owned();
    match change {
        Some(change) => Error::Refused {
            group,
            error,
            change,
        },
        None => Error::Group { group, error },
    }
}
