//! Errors of the lease store.

use std::time::Duration;

use thiserror::Error;

/// A lease-store operation failed.
///
/// [`StoreError::is_retryable`] tells transient faults (timeouts, lost connections,
/// a server still loading) from errors that need an operator (a key of the wrong type,
/// an ACL refusal). The elector retries both with backoff and reports them in its
/// status; the difference decides whether a leader steps down at once.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The call did not answer in time.
    #[error("redis call timed out after {0:?}")]
    Timeout(Duration),
    /// Could not reach the server, or the connection broke.
    #[error("redis connection failed: {0}")]
    Connection(String),
    /// A Leasehold key holds a value of another type (someone else wrote it).
    #[error("a leasehold key holds the wrong type of value: {0}")]
    WrongType(String),
    /// The server refused the command, or a command inside a Leasehold script, for lack
    /// of ACL permission, or refused the credentials. See `docs/topologies.md` for the
    /// minimal ACL rule.
    #[error("redis refused the command (ACL): {0}")]
    NoPermission(String),
    /// The write succeeded on the primary, but fewer replicas than
    /// [`wait_for_replicas`](crate::store::RedisStoreBuilder::wait_for_replicas) asked
    /// for acknowledged it in time. Retryable: the acquire or renewal is not counted.
    #[error("only {acked} of {wanted} replicas acknowledged the write in time")]
    Replication {
        /// Replicas that acknowledged.
        acked: u64,
        /// Replicas required.
        wanted: u64,
    },
    /// A [`RedisStoreBuilder`](crate::store::RedisStoreBuilder) setting is invalid.
    #[error("invalid redis store configuration: {0}")]
    InvalidConfig(String),
    /// Any other server error.
    #[error("redis error: {0}")]
    Server(String),
    /// The server's reply did not have the expected shape.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
}

impl StoreError {
    /// Whether retrying the same call may succeed without anyone changing anything.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Timeout(_) | Self::Connection(_) | Self::Replication { .. }
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
            Self::Connection(_) => "connection",
            Self::WrongType(_) => "wrong_type",
            Self::NoPermission(_) => "no_permission",
            Self::Replication { .. } => "replication",
            Self::InvalidConfig(_) => "invalid_config",
            Self::Server(_) => "server",
            Self::Protocol(_) => "protocol",
        }
    }
}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        let text = e.to_string();
        let code = e.code().unwrap_or_default();
        if code == "WRONGTYPE" || text.contains("WRONGTYPE") {
            Self::WrongType(text)
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
            Self::NoPermission(text)
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
            Self::Connection(text)
        } else if e.kind() == redis::ErrorKind::UnexpectedReturnType
            || e.kind() == redis::ErrorKind::Parse
        {
            Self::Protocol(text)
        } else {
            Self::Server(text)
        }
    }
}

impl From<deadpool::managed::PoolError<redis::RedisError>> for StoreError {
    fn from(e: deadpool::managed::PoolError<redis::RedisError>) -> Self {
        match e {
            deadpool::managed::PoolError::Backend(e) => e.into(),
            deadpool::managed::PoolError::Timeout(_) => Self::Timeout(Duration::ZERO),
            other => Self::Connection(other.to_string()),
        }
    }
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
            StoreError::Connection("x".into()).timed_out_after(Duration::from_secs(1)),
            StoreError::Connection(_)
        ));
    }
}
