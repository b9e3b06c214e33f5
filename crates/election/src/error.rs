//! Errors of the lease store, and of building one.

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
    #[error("redis unavailable: {0}")]
    Unavailable(#[source] Arc<redis::RedisError>),
    /// A connection failure that is not the Redis client's (the connection pool's, or
    /// a store wrapping another one's), kept as the source. Retryable.
    #[error("redis connection failed: {0}")]
    Connection(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// A Leasehold key holds a value of another type (someone else wrote it).
    #[error("a leasehold key holds the wrong type of value: {0}")]
    WrongType(#[source] Arc<redis::RedisError>),
    /// The server refused the command, or a command inside a Leasehold script, for lack
    /// of ACL permission, or refused the credentials. See `docs/topologies.md` for the
    /// minimal ACL rule.
    #[error("redis refused the command (ACL): {0}")]
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
    #[error("redis error: {0}")]
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
    #[error("invalid redis url: {0}")]
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
    #[error("the connection pool refused its settings: {0}")]
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

    #[test]
    fn a_stopped_component_is_not_retryable() {
        let e = StoreError::from(Stopped::new("partition coordinator"));
        assert!(!e.is_retryable());
        assert_eq!(e.kind(), "stopped");
        assert_eq!(e.to_string(), "the partition coordinator has stopped");
    }
}
