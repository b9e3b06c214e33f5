//! Errors of the lease store, and of building one.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

/// A Leasehold component has stopped: an elector ([`crate::ElectorHandle`]'s waits), or
/// a partition coordinator (its handle's waits, and the renewals it batched for its
/// electors). Whatever needed it can never succeed. The text names the component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("the {what} has stopped")]
pub struct Stopped {
    what: &'static str,
}

impl Stopped {
    /// Leasehold's own components say which one stopped (see [`crate::ext::stopped`]).
    pub(crate) const fn new(what: &'static str) -> Self {
        Self { what }
    }

    /// Which component stopped (`elector`, `partition coordinator`, ...).
    pub fn what(&self) -> &'static str {
        self.what
    }
}

/// An error and its causes, displayed as one line for a person: the error's text, then
/// each [`source`](StdError::source) in turn, joined by `": "`.
///
/// Leasehold's errors follow the Rust API guidelines: an error's `Display` says what
/// failed at its level and its cause is returned by `source()`, never printed as well.
/// So `error.to_string()` alone leaves out the cause (the Redis client's own message,
/// for example); print `ErrorChain(&error)` wherever a person reads the error (a log
/// line, a command's message, a probe's answer).
///
/// A cause whose text the previous one already ends with is skipped, so a wrapper
/// that prints its own source (the Redis client's errors do) shows it once.
///
/// ```
/// use leasehold_election::{ErrorChain, StoreError};
/// use std::sync::Arc;
///
/// let e = StoreError::Connection(Arc::new(std::io::Error::other("connection reset")));
/// assert_eq!(e.to_string(), "redis connection failed");
/// assert_eq!(ErrorChain(&e).to_string(), "redis connection failed: connection reset");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn StdError + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut last = self.0.to_string();
        f.write_str(&last)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            let text = e.to_string();
            if !text.is_empty() && !last.ends_with(&text) {
                write!(f, ": {text}")?;
            }
            last = text;
            cause = e.source();
        }
        Ok(())
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A lease-store operation failed.
///
/// [`StoreError::is_retryable`] tells transient faults (timeouts, lost connections,
/// a server still loading) from errors that need an operator (a key of the wrong type,
/// an ACL refusal) or mean the store is gone for good ([`StoreError::Stopped`]). The
/// elector retries both kinds with backoff and reports them in its status; the
/// difference decides whether a leader steps down at once.
///
/// Errors from the Redis client keep it as their [`source`](std::error::Error::source)
/// (shared in an [`Arc`], so the error stays `Clone`).
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The call did not answer in time. Retryable.
    #[error("redis call timed out after {0:?}")]
    Timeout(Duration),
    /// The Redis client could not reach the server or lost the connection, or the
    /// server cannot serve right now (`LOADING`, `MASTERDOWN`, `TRYAGAIN`, `READONLY`
    /// from a demoted primary, `NOREPLICAS`, `CLUSTERDOWN`). Retryable.
    #[error("redis unavailable")]
    Unavailable(#[source] Arc<redis::RedisError>),
    /// A connection failure that is not the Redis client's (the connection pool's, or
    /// a store wrapping another one's), kept as the source. Retryable.
    #[error("redis connection failed")]
    Connection(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// A Leasehold key holds a value of another type (someone else wrote it).
    #[error("a leasehold key holds the wrong type of value")]
    WrongType(#[source] Arc<redis::RedisError>),
    /// The server refused the command, or a command inside a Leasehold script, for lack
    /// of ACL permission, or refused the credentials. See `docs/topologies.md` for the
    /// minimal ACL rule.
    #[error("redis refused the command (ACL)")]
    NoPermission(#[source] Arc<redis::RedisError>),
    /// The write succeeded on the primary, but fewer replicas than
    /// [`wait_for_replicas`](crate::RedisStoreBuilder::wait_for_replicas) asked
    /// for acknowledged it in time. Retryable: the acquire or renewal is not counted.
    #[error("only {acked} of {wanted} replicas acknowledged the write in time")]
    Replication {
        /// Replicas that acknowledged.
        acked: u64,
        /// Replicas required.
        wanted: u64,
    },
    /// Any other server error.
    #[error("redis error")]
    Server(#[source] Arc<redis::RedisError>),
    /// The server's reply did not have the expected shape.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// The component this store belongs to has stopped (for example the partition
    /// coordinator that batches an elector's renewals), so the call can never succeed.
    /// Not retryable.
    #[error(transparent)]
    Stopped(#[from] Stopped),
}

impl StoreError {
    /// Whether retrying the same call may succeed without anyone changing anything:
    /// [`Timeout`](Self::Timeout), [`Unavailable`](Self::Unavailable),
    /// [`Connection`](Self::Connection) and [`Replication`](Self::Replication).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Timeout(_)
                | Self::Unavailable(_)
                | Self::Connection(_)
                | Self::Replication { .. }
        )
    }

    /// Fills in the duration of a timeout reported by the client or the pool, which
    /// do not say how long they waited (they use the store's call timeout).
    pub(crate) fn timed_out_after(self, d: Duration) -> Self {
        match self {
            Self::Timeout(z) if z.is_zero() => Self::Timeout(d),
            other => other,
        }
    }

    /// A short, stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "timeout",
            Self::Unavailable(_) | Self::Connection(_) => "connection",
            Self::WrongType(_) => "wrong_type",
            Self::NoPermission(_) => "no_permission",
            Self::Replication { .. } => "replication",
            Self::Server(_) => "server",
            Self::Protocol(_) => "protocol",
            Self::Stopped(_) => "stopped",
        }
    }
}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        let text = e.to_string();
        let code = e.code().unwrap_or_default();
        if code == "WRONGTYPE" || text.contains("WRONGTYPE") {
            Self::WrongType(Arc::new(e))
        } else if matches!(code, "NOPERM" | "NOAUTH" | "WRONGPASS")
            || e.kind() == redis::ErrorKind::AuthenticationFailed
            || text.contains("NOPERM")
            || text.contains("NOAUTH")
            || text.contains("WRONGPASS")
            // An ACL refusal inside a script is a plain ERR in Redis 7.
            || text.contains("The user executing the script can't")
            // A client that has not authenticated may not send a command of more than
            // ten arguments (Redis 7 closes the connection with this protocol error
            // before it even gets to say NOAUTH).
            || text.contains("unauthenticated multibulk")
        {
            Self::NoPermission(Arc::new(e))
        } else if e.is_timeout() {
            Self::Timeout(Duration::ZERO)
        } else if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            // READONLY: the node was demoted (failover); NOREPLICAS: a primary with
            // `min-replicas-to-write` lost its replicas (it may be cut off); CLUSTERDOWN:
            // a slot has no primary until the cluster fails over.
            || matches!(
                code,
                "LOADING" | "MASTERDOWN" | "TRYAGAIN" | "READONLY" | "NOREPLICAS" | "CLUSTERDOWN"
            )
        {
            Self::Unavailable(Arc::new(e))
        } else if e.kind() == redis::ErrorKind::UnexpectedReturnType
            || e.kind() == redis::ErrorKind::Parse
        {
            Self::Protocol(text)
        } else {
            Self::Server(Arc::new(e))
        }
    }
}

impl From<deadpool::managed::PoolError<redis::RedisError>> for StoreError {
    fn from(e: deadpool::managed::PoolError<redis::RedisError>) -> Self {
        match e {
            deadpool::managed::PoolError::Backend(e) => e.into(),
            deadpool::managed::PoolError::Timeout(_) => Self::Timeout(Duration::ZERO),
            other => Self::Connection(Arc::new(other)),
        }
    }
}

/// A [`RedisStoreBuilder`](crate::RedisStoreBuilder) (or
/// [`RedisStore::connect`](crate::RedisStore::connect)) was given settings it cannot
/// use. Not retryable: fix the settings.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A URL is malformed; the Redis client's error says how.
    #[error("invalid redis url")]
    Url(#[source] Arc<redis::RedisError>),
    /// A `rediss://` URL, but this build of leasehold-election has no `tls` feature.
    #[error("rediss:// urls need leasehold-election's `tls` feature")]
    TlsNotEnabled,
    /// A Sentinel or Cluster builder was given no URL.
    #[error("no {0} url given")]
    NoUrls(&'static str),
    /// [`wait_for_replicas`](crate::RedisStoreBuilder::wait_for_replicas) asks
    /// for no replica, or its timeout is zero or not below the call timeout.
    #[error(
        "wait_for_replicas({replicas}, {timeout:?}) needs at least one replica and a timeout \
         above zero and below the call timeout ({call_timeout:?})"
    )]
    ReplicaWait {
        /// Replicas asked for.
        replicas: usize,
        /// The wait's timeout.
        timeout: Duration,
        /// The store's call timeout.
        call_timeout: Duration,
    },
    /// [`client_name`](crate::RedisStoreBuilder::client_name) is empty, or has a
    /// character Redis refuses in a client name (a space, a newline, anything but
    /// printable ASCII).
    #[error("invalid client name {0:?}: use printable ASCII without spaces")]
    ClientName(String),
    /// The connection pool refused its settings.
    #[error("the connection pool refused its settings")]
    Pool(#[source] Arc<deadpool::managed::BuildError>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_timeout_reports_the_stores_call_timeout() {
        let e = StoreError::Timeout(Duration::ZERO).timed_out_after(Duration::from_millis(250));
        assert_eq!(e.to_string(), "redis call timed out after 250ms");
        // A measured timeout and other errors are left alone.
        let measured =
            StoreError::Timeout(Duration::from_millis(80)).timed_out_after(Duration::from_secs(1));
        assert!(matches!(measured, StoreError::Timeout(d) if d == Duration::from_millis(80)));
        assert!(matches!(
            StoreError::Connection(Arc::new(std::io::Error::other("x")))
                .timed_out_after(Duration::from_secs(1)),
            StoreError::Connection(_)
        ));
    }

    #[test]
    fn client_errors_keep_their_cause() {
        use std::error::Error as _;
        let refused = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        let e = StoreError::from(refused);
        assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
        assert!(e.is_retryable());
        assert!(e.source().is_some(), "the client error is the source");
        let wrong = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "WRONGTYPE",
            "Operation against a key holding the wrong kind of value".to_owned(),
        ));
        let e = StoreError::from(wrong);
        assert!(matches!(e, StoreError::WrongType(_)), "{e:?}");
        assert!(!e.is_retryable() && e.source().is_some());
    }

    /// The Redis client's error prints its own source (an I/O error) as its text: the
    /// chain shows it once.
    #[test]
    fn a_chain_skips_a_cause_its_wrapper_printed() {
        let refused = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused by the test",
        ));
        let e = StoreError::from(refused);
        assert_eq!(e.to_string(), "redis unavailable");
        let text = ErrorChain(&e).to_string();
        assert_eq!(text, "redis unavailable: refused by the test");
        let end = crate::TermEndReason::BackendError(e);
        assert_eq!(
            end.to_string(),
            "backend error: redis unavailable: refused by the test"
        );
    }

    #[test]
    fn a_stopped_component_is_not_retryable() {
        let e = StoreError::from(Stopped::new("partition coordinator"));
        assert!(!e.is_retryable());
        assert_eq!(e.kind(), "stopped");
        assert_eq!(e.to_string(), "the partition coordinator has stopped");
    }
}
