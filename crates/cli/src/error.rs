//! Why a command failed, and the one place where that becomes an exit code and a line
//! on stderr ([`Error::failure`]).

use std::io;

use leasehold_election::ext::validate_name;
use leasehold_election::{BuildError, ConfigError, ErrorChain, StoreError};
use leasehold_partitions::{MAX_WEIGHT, PartitionsError};

use crate::target::Target;

/// Exit code: any other Redis error (authentication, ACL refusal, server error).
pub const EXIT_OTHER: u8 = 1;
/// Exit code: usage or invalid input: bad arguments (clap uses it too), a malformed URL,
/// an invalid name, a change the group refuses (a partition named twice, already in the
/// group, or its last one).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: Redis unreachable, or no answer within the timeout (a change may then
/// have been applied or not).
pub const EXIT_CONNECTION: u8 = 3;
/// Exit code: not found: no such group, partition, live replica, or duty.
pub const EXIT_NOT_FOUND: u8 = 4;
/// Exit code: unexpected data: a Leasehold key of the wrong type, a lease that is not
/// a Leasehold lease, a reply of an unexpected shape.
pub const EXIT_DATA: u8 = 5;

/// Longest excerpt of a foreign value quoted in a message.
const QUOTE_LIMIT: usize = 64;

/// A change the CLI makes to a group: what a failure of it says about retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// `partitions add`.
    Add,
    /// `partitions remove`.
    Remove,
    /// `partitions weight`.
    Weight,
    /// `partitions prefer` (with or without `--remove`).
    Prefer,
    /// `drain` (with or without `--force`).
    Drain,
    /// `undrain`.
    Undrain,
}

impl Change {
    /// What running the same command again does if the first one was applied after
    /// all (each is safe to run again: see `docs/operations.md`).
    fn rerun(self) -> &'static str {
        match self {
            Self::Add => {
                "running it again is safe (if it was applied, it is refused as already in \
                 the group)"
            }
            Self::Remove => {
                "running it again is safe (if it was applied, it is refused as not in the \
                 group)"
            }
            Self::Weight => "running it again is safe (it sets the same weight)",
            Self::Prefer => "running it again is safe (it sets the same preference)",
            Self::Drain => "running it again is safe (a drained replica stays drained)",
            Self::Undrain => "running it again is safe (an undrained replica stays undrained)",
        }
    }
}

/// Why a command failed.
#[derive(Debug)]
pub enum Error {
    /// An argument (`--prefix`, `--group`, `--duty`, `--replica`, a partition) broke the
    /// naming rules; checked before anything is sent.
    BadArg {
        /// The argument as `--help` names it: `--group`, `PARTITION`, `PARTITION 2 of 3`.
        arg: String,
        /// What was given.
        value: String,
        /// The rule it broke.
        error: ConfigError,
        /// Whether the command was a change (its message then says nothing changed).
        change: bool,
    },
    /// A weight outside 1 ..= `MAX_WEIGHT`; checked before anything is sent.
    BadWeight(i64),
    /// A `plan` flag that does not have its form (`--weight PARTITION=WEIGHT`).
    BadPlanArg {
        /// The flag.
        arg: String,
        /// What was given.
        value: String,
        /// The form it should have.
        expected: &'static str,
    },
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
        /// The change.
        change: Change,
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
    /// A duty's key holds a value of another type than Leasehold writes there.
    DutyKeyType {
        /// The duty's keys, lease then fence.
        keys: [String; 2],
        /// The one found holding the wrong type, and that type (`TYPE`'s answer); `None`
        /// if asking did not tell.
        found: Option<(usize, String)>,
    },
    /// `error`, plus a hint for the end of its line (a name that is close to the one
    /// not found, or the names that exist).
    Hinted {
        /// The error.
        error: Box<Error>,
        /// The hint.
        hint: String,
    },
    /// The connection flags do not make one topology (several URLs without
    /// `--sentinel` or `--cluster`).
    Topology(String),
    /// `leasehold dashboard` refused its options (a non-loopback `--listen` without a
    /// token, `--allow-admin` without one); checked before anything listens.
    Unsafe(String),
    /// `leasehold dashboard` could not listen on its address (in use, not permitted).
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why not.
        error: io::Error,
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

/// Checks `value`, given as argument `arg`, against the naming rules (`what` names it
/// in the rule's message).
///
/// # Errors
/// [`Error::BadArg`] (as a read's: see [`Error::in_change`]).
pub fn check_name(arg: &str, what: &'static str, value: &str) -> Result<(), Error> {
    validate_name(what, value).map_err(|error| Error::BadArg {
        arg: arg.to_owned(),
        value: value.to_owned(),
        error,
        change: false,
    })
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
pub fn quote(value: &str) -> String {
    if value.chars().count() > QUOTE_LIMIT {
        let cut: String = value.chars().take(QUOTE_LIMIT).collect();
        format!("{cut:?}...")
    } else {
        format!("{value:?}")
    }
}

/// What Leasehold writes in a duty's lease and fence keys.
const DUTY_KEY_TYPES: [&str; 2] = ["a lease", "a fence"];

impl Error {
    /// This error as the error of a change: an invalid argument then says that nothing
    /// was changed.
    #[must_use]
    pub fn in_change(self) -> Self {
        match self {
            Self::BadArg {
                arg, value, error, ..
            } => Self::BadArg {
                arg,
                value,
                error,
                change: true,
            },
            other => other,
        }
    }

    /// The group or duty this error did not find: `(true, group)` or `(false, duty)`.
    pub fn not_found(&self) -> Option<(bool, &str)> {
        match self {
            Self::NoGroup(g)
            | Self::Group {
                error: PartitionsError::UnknownGroup(g),
                ..
            }
            | Self::Refused {
                error: PartitionsError::UnknownGroup(g),
                ..
            } => Some((true, g)),
            Self::NoDuty(d) => Some((false, d)),
            _ => None,
        }
    }

    /// The exit code and message of this error, for a command run against `target`.
    pub fn failure(&self, target: &Target) -> Failure {
        let prefix = &target.prefix;
        match self {
            Self::BadArg {
                arg,
                value,
                error,
                change,
            } => {
                let mut message = format!("invalid {arg} {}: {error}", quote(value));
                if *change {
                    message.push_str("; nothing was changed");
                }
                Failure::new(EXIT_USAGE, message)
            }
            Self::BadWeight(w) => Failure::new(
                EXIT_USAGE,
                format!(
                    "invalid WEIGHT {w}: a partition weight must be between 1 and {MAX_WEIGHT}; \
                     nothing was changed"
                ),
            ),
            Self::BadPlanArg {
                arg,
                value,
                expected,
            } => Failure::new(
                EXIT_USAGE,
                format!("invalid {arg} {}: expected {expected}", quote(value)),
            ),
            // The message never repeats the URL, which may hold a password.
            Self::Url(e) => {
                let detail = match e {
                    BuildError::Url(cause) => format!(
                        "{cause} (expected redis://[user:password@]host:port[/db], or \
                         rediss:// for TLS)"
                    ),
                    other => ErrorChain(other).to_string(),
                };
                Failure::new(EXIT_USAGE, format!("invalid --redis-url: {detail}"))
            }
            Self::Store(e) => store_failure(e, target),
            Self::Group { group, error } => group_failure(group, error, target),
            Self::Refused {
                group,
                error,
                change,
            } => {
                let mut f = group_failure(group, error, target);
                let sent = !matches!(error, PartitionsError::Store(e) if refused_connection(e));
                if f.code == EXIT_CONNECTION && sent {
                    f.message.push_str("; the change may or may not have been applied (look with `partitions list` or `status`): ");
                    f.message.push_str(change.rerun());
                } else if !matches!(error, PartitionsError::Store(_)) {
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
            Self::DutyKeyType { keys, found } => Failure::new(
                EXIT_DATA,
                match found {
                    Some((i, kind)) => format!(
                        "{} holds a {kind}, not {} (a string): did something else write it?",
                        keys[*i], DUTY_KEY_TYPES[*i]
                    ),
                    None => format!(
                        "{} or {} holds the wrong type of value (a duty's lease and fence are \
                         strings): did something else write it?",
                        keys[0], keys[1]
                    ),
                },
            ),
            Self::Hinted { error, hint } => {
                let mut f = error.failure(target);
                f.message.push_str("; ");
                f.message.push_str(hint);
                f
            }
            Self::Unsafe(why) | Self::Topology(why) => Failure::new(EXIT_USAGE, why.clone()),
            Self::Listen { addr, error } => {
                Failure::new(EXIT_OTHER, format!("cannot listen on {addr}: {error}"))
            }
            Self::StdoutClosed => Failure::new(0, ""),
            Self::Stdout(e) => Failure::new(EXIT_OTHER, format!("cannot write to stdout: {e}")),
        }
    }
}

/// Whether `e` is a connection refused: the command was never sent.
fn refused_connection(e: &StoreError) -> bool {
    match e {
        StoreError::Unavailable(cause) => cause.is_connection_refusal(),
        StoreError::Connection(d) => d.to_string().contains("refused"),
        _ => false,
    }
}

/// The hint of a failure to reach Redis with a `rediss://` URL: a TLS client talking to
/// a plain port waits for a handshake that never comes.
fn tls_hint(target: &Target) -> &'static str {
    if target.is_tls() {
        "; the URL is rediss:// (TLS): is this a plain, non-TLS port? Then use redis://"
    } else {
        ""
    }
}

fn store_failure(e: &StoreError, target: &Target) -> Failure {
    match e {
        StoreError::Timeout(_) => Failure::new(
            EXIT_CONNECTION,
            format!(
                "no answer from Redis within {} (--timeout){}",
                humantime::format_duration(target.timeout),
                tls_hint(target)
            ),
        ),
        StoreError::Connection(d) => {
            let hint = if refused_connection(e) {
                ""
            } else {
                tls_hint(target)
            };
            Failure::new(
                EXIT_CONNECTION,
                format!("cannot reach Redis: {}{hint}", ErrorChain(&**d)),
            )
        }
        StoreError::Unavailable(cause) => {
            let hint = if refused_connection(e) {
                ""
            } else {
                tls_hint(target)
            };
            Failure::new(
                EXIT_CONNECTION,
                format!("cannot reach Redis: {}{hint}", ErrorChain(&**cause)),
            )
        }
        // Redis names neither the key nor the type, but the script and its line: useless
        // to an operator, left out.
        StoreError::WrongType(_) => Failure::new(
            EXIT_DATA,
            format!(
                "a key under prefix {:?} holds the wrong type of value: did something else \
                 write it?",
                target.prefix
            ),
        ),
        e @ StoreError::Protocol(_) => Failure::new(
            EXIT_DATA,
            format!("{e} (is the URL a Redis server? did something else write the keys?)"),
        ),
        other => Failure::new(EXIT_OTHER, ErrorChain(other).to_string()),
    }
}

fn group_failure(group: &str, e: &PartitionsError, target: &Target) -> Failure {
    match e {
        PartitionsError::Store(StoreError::WrongType(_)) => Failure::new(
            EXIT_DATA,
            format!(
                "a key of group {group:?} ({}:{{{group}}}:*) holds the wrong type of value: \
                 did something else write it?",
                target.prefix
            ),
        ),
        PartitionsError::Store(e) => store_failure(e, target),
        PartitionsError::Config(e) => Failure::new(EXIT_USAGE, ErrorChain(e).to_string()),
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
        PartitionsError::InvalidWeight(_) | PartitionsError::InvalidWhatIf(_) => {
            Failure::new(EXIT_USAGE, e.to_string())
        }
        other => Failure::new(EXIT_OTHER, ErrorChain(other).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn target() -> Target {
        Target {
            url: "redis://127.0.0.1:1/".to_owned(),
            more_urls: Vec::new(),
            topology: crate::target::Topology::Node,
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
            change: Change::Add,
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
    fn a_change_that_timed_out_may_have_been_applied_and_is_safe_to_run_again() {
        for (change, again) in [
            (Change::Add, "refused as already in the group"),
            (Change::Remove, "refused as not in the group"),
            (Change::Weight, "sets the same weight"),
            (Change::Drain, "stays drained"),
            (Change::Undrain, "stays undrained"),
        ] {
            let f = Error::Refused {
                group: "tenants".to_owned(),
                error: PartitionsError::Store(StoreError::Timeout(Duration::ZERO)),
                change,
            }
            .failure(&target());
            assert_eq!(f.code, EXIT_CONNECTION, "{f:?}");
            assert!(
                f.message.starts_with(
                    "no answer from Redis within 300ms (--timeout); the change may or may \
                     not have been applied (look with `partitions list` or `status`): \
                     running it again is safe ("
                ),
                "{f:?}"
            );
            assert!(f.message.contains(again), "{f:?}");
        }
    }

    #[test]
    fn invalid_names_say_which_argument_and_for_a_change_that_nothing_changed() {
        let read = check_name("--group", "group", "a{b}").unwrap_err();
        assert_eq!(
            read.failure(&target()),
            Failure {
                code: EXIT_USAGE,
                message: "invalid --group \"a{b}\": group contains '{', which is reserved \
                          for Redis Cluster hash tags"
                    .to_owned()
            }
        );
        let change = check_name("PARTITION 2 of 2", "partition name", "a\tb")
            .unwrap_err()
            .in_change()
            .failure(&target());
        assert_eq!(
            change.message,
            "invalid PARTITION 2 of 2 \"a\\tb\": partition name contains the control \
             character '\\t'; nothing was changed"
        );
        let long = "x".repeat(300);
        let f = check_name("PARTITION", "partition name", &long)
            .unwrap_err()
            .in_change()
            .failure(&target());
        assert!(f.message.contains("is 300 bytes long"), "{f:?}");
        assert!(f.message.len() < 200, "the name is cut: {f:?}");
        assert_eq!(
            Error::BadWeight(-5).failure(&target()).message,
            "invalid WEIGHT -5: a partition weight must be between 1 and 1000000; nothing \
             was changed"
        );
    }

    #[test]
    fn tls_against_a_plain_port_is_suggested_only_for_rediss_urls() {
        let timeout = Error::Store(StoreError::Timeout(Duration::ZERO));
        assert!(!timeout.failure(&target()).message.contains("TLS"));
        let mut tls = target();
        tls.url = "rediss://127.0.0.1:1/".to_owned();
        let f = timeout.failure(&tls);
        assert_eq!(f.code, EXIT_CONNECTION);
        assert!(
            f.message.ends_with(
                "(--timeout); the URL is rediss:// (TLS): is this a plain, non-TLS port? \
                 Then use redis://"
            ),
            "{f:?}"
        );
        let refused = Error::Store(StoreError::Connection(std::sync::Arc::new(
            std::io::Error::other("Connection refused"),
        )));
        assert!(!refused.failure(&tls).message.contains("TLS"));
    }

    #[test]
    fn a_duty_key_of_the_wrong_type_is_named() {
        let keys = ["lh:{d}:lease".to_owned(), "lh:{d}:fence".to_owned()];
        let f = Error::DutyKeyType {
            keys: keys.clone(),
            found: Some((1, "list".to_owned())),
        }
        .failure(&target());
        assert_eq!(
            (f.code, f.message.as_str()),
            (
                EXIT_DATA,
                "lh:{d}:fence holds a list, not a fence (a string): did something else write it?"
            )
        );
        let f = Error::DutyKeyType { keys, found: None }.failure(&target());
        assert!(
            f.message
                .starts_with("lh:{d}:lease or lh:{d}:fence holds the wrong type")
        );
        let f = Error::Group {
            group: "tenants".into(),
            error: PartitionsError::Store(StoreError::Protocol("x".into())),
        }
        .failure(&target());
        assert_eq!(f.code, EXIT_DATA);
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
        assert_eq!(f.message, "no answer from Redis within 300ms (--timeout)");
    }
}
