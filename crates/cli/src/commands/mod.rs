//! The commands. Each returns a typed [`Error`]; `main` maps it to an exit code and a
//! message ([`Error::failure`]).

mod duty;
mod group;

use std::io::{self, Write as _};
use std::time::SystemTime;

use leasehold_election::RedisStore;
use leasehold_partitions::PartitionsError;

pub use self::duty::leader;
pub use self::group::{owner, status, watch};
use crate::error::Error;
use crate::reads;
use crate::target::Target;

/// Writes to stdout; a closed stdout (`| head`) ends the command quietly.
fn print(text: &str) -> Result<(), Error> {
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

/// The error of an admin call on `group`. The admin cannot tell a missing group from
/// a missing partition in it: then whether the group exists decides.
async fn group_error(
    target: &Target,
    store: &RedisStore,
    group: &str,
    error: PartitionsError,
) -> Error {
    if matches!(error, PartitionsError::UnknownPartition(_)) {
        match reads::group_exists(store, &target.prefix, group).await {
            Ok(false) => return Error::NoGroup(group.to_owned()),
            Ok(true) => {}
            Err(e) => return Error::Store(e),
        }
    }
    Error::Group {
        group: group.to_owned(),
        error,
    }
}
