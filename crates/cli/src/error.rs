//! Why a command failed, and the one place where that becomes an exit code and a line
//! on stderr ([`Error::failure`]).

use std::io;

use leasehold_election::{BuildError, ConfigError, StoreError};
use leasehold_partitions::PartitionsError;

use crate::target::Target;

/// Exit code: any other Redis error (authentication, ACL refusal, server error).
pub const EXIT_OTHER: u8 = 1;
/// Exit code: usage or invalid input: bad arguments (clap uses it too), a malformed URL,
/// an invalid name, a change the group refuses (a partition named twice, already in the
/// group, or its last one).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: Redis unreachable, or no answer within the timeout.
pub const EXIT_CONNECTION: u8 = 3;
/// Exit code: not found: no such group, partition, live replica, or duty.
pub const EXIT_NOT_FOUND: u8 = 4;
/// Exit code: unexpected data: a Leasehold key of the wrong type, a lease that is not
/// a Leasehold lease, a reply of an unexpected shape.
pub const EXIT_DATA: u8 = 5;

/// Longest excerpt of a foreign value quoted in a message.
const QUOTE_LIMIT: usize = 64;

/// Why a command failed.
#[derive(Debug)]
pub enum Error {
    /// A name (prefix, group, duty, replica) broke the naming rules.
    Name(ConfigError),
    /// `--redis-url` is malformed.
    Url(BuildError),
    /// A Redis call failed.
    Store(StoreError),
    /// A read of `group` through the group admin failed.
    Group {
        /// The group.
        group: String,
        /// What the library said.
        error: PartitionsError,
    },
    /// A change of `group` failed: refused (and then nothing changed), or the store's
    /// error (and then it may or may not have been applied).
    Refused {
        /// The group.
        group: String,
        /// What the library said.
        error: PartitionsError,
    },
    /// No group by this name under the prefix.
    NoGroup(String),
    /// Nothing was ever elected for this duty under the prefix (it has no fence key).
    NoDuty(String),
    /// A duty's lease key holds a value that is not a Leasehold token.
    ForeignLease {
        /// The lease key.
        key: String,
        /// What it holds.
        value: String,
    },
    /// Standard output was closed (`| head`): the command ends quietly.
    StdoutClosed,
    /// Standard output could not be written.
    Stdout(io::Error),
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Self::Name(e)
    }
}

/// A failed command: an exit code and one line for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// `value` quoted and escaped, cut to [`QUOTE_LIMIT`] characters.
fn quote(value: &str) -> String {
    if value.chars().count() > QUOTE_LIMIT {
        let cut: String = value.chars().take(QUOTE_LIMIT).collect();
        format!("{cut:?}...")
    } else {
        format!("{value:?}")
    }
}

impl Error {
    /// The exit code and message of this error, for a command run against `target`.
    pub fn failure(&self, target: &Target) -> Failure {
        let prefix = &target.prefix;
        match self {
            Self::Name(e) => Failure::new(EXIT_USAGE, e.to_string()),
            // The message never repeats the URL, which may hold a password.
            Self::Url(e) => {
                let detail = match e {
                    BuildError::Url(cause) => format!(
                        "{cause} (expected redis://[user:password@]host:port[/db], or \
                         rediss:// for TLS)"
                    ),
                    other => other.to_string(),
                };
                Failure::new(EXIT_USAGE, format!("invalid --redis-url: {detail}"))
            }
            Self::Store(e) => store_failure(e, target),
            Self::Group { group, error } => group_failure(group, error, target),
            Self::Refused { group, error } => {
                let mut f = group_failure(group, error, target);
                if !matches!(error, PartitionsError::Store(_)) {
                    f.message.push_str("; nothing was changed");
                }
                f
            }
            Self::NoGroup(group) => Failure::new(
                EXIT_NOT_FOUND,
                format!(
                    "no group {group:?} under prefix {prefix:?} (no replica has created it: a \
                     group is created by its replicas, never by `partitions add`)"
                ),
            ),
            Self::NoDuty(duty) => Failure::new(
                EXIT_NOT_FOUND,
                format!(
                    "no duty {duty:?} under prefix {prefix:?}: never elected here (no key \
                     {prefix}:{{{duty}}}:fence)"
                ),
            ),
            Self::ForeignLease { key, value } => Failure::new(
                EXIT_DATA,
                format!(
                    "{key} holds {}, which is not a Leasehold lease (<replica>:<32 hex \
                     digits>): did something else write it?",
                    quote(value)
                ),
            ),
            Self::StdoutClosed => Failure::new(0, ""),
            Self::Stdout(e) => Failure::new(EXIT_OTHER, format!("cannot write to stdout: {e}")),
        }
    }
}

fn store_failure(e: &StoreError, target: &Target) -> Failure {
    match e {
        StoreError::Timeout(_) => Failure::new(
            EXIT_CONNECTION,
            format!(
                "no answer from Redis within {} ms (--timeout-ms)",
                target.timeout.as_millis()
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
                target.prefix
            ),
        ),
        e @ StoreError::Protocol(_) => Failure::new(
            EXIT_DATA,
            format!("{e} (is the URL a Redis server? did something else write the keys?)"),
        ),
        other => Failure::new(EXIT_OTHER, other.to_string()),
    }
}

fn group_failure(group: &str, e: &PartitionsError, target: &Target) -> Failure {
    match e {
        PartitionsError::Store(e) => store_failure(e, target),
        PartitionsError::Config(e) => Failure::new(EXIT_USAGE, e.to_string()),
        PartitionsError::DuplicatePartition(p) => Failure::new(
            EXIT_USAGE,
            format!("partition {p:?} is named more than once"),
        ),
        PartitionsError::AlreadyPresent(p) => Failure::new(
            EXIT_USAGE,
            format!("partition {p:?} is already in group {group:?}"),
        ),
        PartitionsError::LastPartition => Failure::new(
            EXIT_USAGE,
            format!(
                "a group keeps at least one partition: that would leave group {group:?} \
                 empty"
            ),
        ),
        PartitionsError::UnknownPartition(p) => Failure::new(
            EXIT_NOT_FOUND,
            format!("no partition {p:?} in group {group:?}"),
        ),
        PartitionsError::UnknownReplica(r) => Failure::new(
            EXIT_NOT_FOUND,
            format!(
                "replica {r:?} is not live in group {group:?} (only a heartbeating replica \
                 can be drained; undrain takes a live or a drained one)"
            ),
        ),
        PartitionsError::LastActiveReplica(r) => Failure::new(
            EXIT_USAGE,
            format!(
                "replica {r:?} is the last one taking part in group {group:?}: draining it \
                 would leave every partition unowned (drain --force does it anyway)"
            ),
        ),
        PartitionsError::UnknownGroup(g) => Error::NoGroup(g.clone()).failure(target),
        PartitionsError::InvalidWeight(_) => Failure::new(EXIT_USAGE, e.to_string()),
        other => Failure::new(EXIT_OTHER, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn target() -> Target {
        Target {
            url: "redis://127.0.0.1:1/".to_owned(),
            prefix: "lh".to_owned(),
            timeout: Duration::from_millis(300),
        }
    }

    fn group(error: PartitionsError) -> Failure {
        Error::Group {
            group: "tenants".to_owned(),
            error,
        }
        .failure(&target())
    }

    fn refused(error: PartitionsError) -> Failure {
        Error::Refused {
            group: "tenants".to_owned(),
            error,
        }
        .failure(&target())
    }

    #[test]
    fn refused_changes_say_nothing_changed() {
        for f in [
            refused(PartitionsError::AlreadyPresent("p1".into())),
            refused(PartitionsError::DuplicatePartition("p1".into())),
            refused(PartitionsError::LastPartition),
        ] {
            assert_eq!(f.code, EXIT_USAGE, "{f:?}");
            assert!(f.message.ends_with("; nothing was changed"), "{f:?}");
        }
        let f = refused(PartitionsError::AlreadyPresent("p1".into()));
        assert_eq!(
            f.message,
            "partition \"p1\" is already in group \"tenants\"; nothing was changed"
        );
        // A read changes nothing anyway; a change that timed out may have been applied.
        let f = group(PartitionsError::UnknownPartition("p9".into()));
        assert_eq!(f.message, "no partition \"p9\" in group \"tenants\"");
        let f = refused(PartitionsError::Store(StoreError::Timeout(Duration::ZERO)));
        assert!(!f.message.contains("nothing"), "{f:?}");
    }

    #[test]
    fn unknown_things_are_not_found() {
        for f in [
            group(PartitionsError::UnknownPartition("p9".into())),
            refused(PartitionsError::UnknownReplica("r".into())),
            group(PartitionsError::UnknownGroup("tenants".into())),
            Error::NoDuty("reports".into()).failure(&target()),
        ] {
            assert_eq!(f.code, EXIT_NOT_FOUND, "{f:?}");
        }
        assert_eq!(
            Error::NoDuty("reports".into()).failure(&target()).message,
            "no duty \"reports\" under prefix \"lh\": never elected here (no key \
             lh:{reports}:fence)"
        );
    }

    #[test]
    fn a_foreign_lease_is_data_quoted_on_one_line() {
        let f = Error::ForeignLease {
            key: "lh:{d}:lease".into(),
            value: format!("x\ny{}", "z".repeat(100)),
        }
        .failure(&target());
        assert_eq!(f.code, EXIT_DATA);
        assert!(!f.message.contains('\n'), "{f:?}");
        assert!(f.message.starts_with("lh:{d}:lease holds \"x\\ny"), "{f:?}");
        assert!(f.message.contains("...,"), "cut: {f:?}");
        assert!(f.message.contains("not a Leasehold lease"), "{f:?}");
    }

    #[test]
    fn timeouts_name_the_flag() {
        let f = Error::Store(StoreError::Timeout(Duration::ZERO)).failure(&target());
        assert_eq!(f.code, EXIT_CONNECTION);
        assert_eq!(
            f.message,
            "no answer from Redis within 300 ms (--timeout-ms)"
        );
    }
}
