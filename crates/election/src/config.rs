//! Elector configuration: a validated builder with documented defaults.

use std::time::Duration;

use thiserror::Error;

use crate::validate::{validate_lease, validate_name};

/// Shortest lease accepted by [`ElectorConfig::builder`].
pub const MIN_LEASE: Duration = Duration::from_millis(10);
/// Longest lease accepted by [`ElectorConfig::builder`].
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest duty name or replica id, in bytes.
pub const MAX_NAME_LEN: usize = 256;
/// Key prefix used when none is configured.
pub const DEFAULT_KEY_PREFIX: &str = "leasehold";

/// A configuration value was rejected by [`ElectorConfigBuilder::build`].
///
/// Every variant is a programming or deployment error: fix the value, do not retry.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A name (duty, replica id, key prefix or partition) is empty.
    #[error("{what} must not be empty")]
    EmptyName {
        /// Which name.
        what: &'static str,
    },
    /// A name is longer than [`MAX_NAME_LEN`] bytes.
    #[error("{what} is {len} bytes long; the limit is {max}")]
    NameTooLong {
        /// Which name.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A name contains a control character (which would corrupt logs and keys).
    #[error("{what} contains the control character {ch:?}")]
    ControlCharacter {
        /// Which name.
        what: &'static str,
        /// The offending character.
        ch: char,
    },
    /// A name contains `{` or `}`, which would break the Redis Cluster hash tag.
    #[error("{what} contains {ch:?}, which is reserved for Redis Cluster hash tags")]
    HashTagCharacter {
        /// Which name.
        what: &'static str,
        /// The offending character.
        ch: char,
    },
    /// The lease is shorter than [`MIN_LEASE`] or longer than [`MAX_LEASE`].
    #[error("lease must be between {min:?} and {max:?}, got {got:?}")]
    LeaseOutOfRange {
        /// The configured lease.
        got: Duration,
        /// [`MIN_LEASE`].
        min: Duration,
        /// [`MAX_LEASE`].
        max: Duration,
    },
    /// An interval must be greater than zero and shorter than the lease.
    #[error("{what} must be greater than zero and shorter than the lease ({lease:?}), got {got:?}")]
    IntervalOutOfRange {
        /// Which interval.
        what: &'static str,
        /// The configured value.
        got: Duration,
        /// The lease it is checked against.
        lease: Duration,
    },
    /// The safety margin must be shorter than the renew interval, or a leader could
    /// never renew before its own deadline.
    #[error("safety margin ({margin:?}) must be shorter than the renew interval ({renew:?})")]
    MarginTooLarge {
        /// The configured margin.
        margin: Duration,
        /// The renew interval.
        renew: Duration,
    },
    /// A renewal sent one renew interval after the last could not finish (or time out)
    /// before the leader's own deadline: `renew_interval + call_timeout` must be
    /// shorter than `lease - safety_margin`. Otherwise a single slow renewal makes the
    /// leader step down although its lease was never in danger.
    #[error(
        "renew interval ({renew:?}) + call timeout ({call_timeout:?}) must be shorter than \
         lease ({lease:?}) - safety margin ({margin:?}), so that a renewal ends before the \
         leader's own deadline"
    )]
    RenewalOutlastsDeadline {
        /// The renew interval.
        renew: Duration,
        /// The call timeout.
        call_timeout: Duration,
        /// The lease.
        lease: Duration,
        /// The safety margin.
        margin: Duration,
    },
    /// A duration that must be positive is zero.
    #[error("{what} must be greater than zero")]
    ZeroDuration {
        /// Which duration.
        what: &'static str,
    },
    /// A duration that may be long is longer than [`MAX_LEASE`] (a day): a grace, a
    /// backoff or a follower jitter that long is a mistake, and a deadline that far
    /// away does not fit the clock.
    #[error("{what} must be at most {max:?}, got {got:?}")]
    TooLong {
        /// Which duration.
        what: &'static str,
        /// The configured value.
        got: Duration,
        /// The limit ([`MAX_LEASE`]).
        max: Duration,
    },
    /// The initial backoff is longer than the maximum backoff.
    #[error("initial backoff ({initial:?}) must not exceed the maximum backoff ({max:?})")]
    BackoffInverted {
        /// Initial backoff.
        initial: Duration,
        /// Maximum backoff.
        max: Duration,
    },
}

/// Validated settings of one elector. Build it with [`ElectorConfig::builder`]; read
/// it back with the getters (a built configuration cannot be changed, so it stays
/// valid).
///
/// The timing rules, with `sent` the instant the last successful acquire or renew was
/// *sent*:
/// - the leader believes it leads only until `sent + lease - safety_margin`;
/// - it renews every `renew_interval`, and that renewal must be able to finish before
///   the deadline: `renew_interval + call_timeout < lease - safety_margin` (checked);
/// - a follower re-checks at the holder's expiry, and at least every `retry_interval`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ElectorConfig {
    /// The duty this elector campaigns for.
    pub(crate) duty: String,
    /// This replica's id; it appears in the lease value so operators see who leads.
    pub(crate) replica_id: String,
    /// Lease time-to-live in Redis. Default: 10 s.
    pub(crate) lease: Duration,
    /// How often a leader renews. Default: lease / 3.
    pub(crate) renew_interval: Duration,
    /// Longest a follower sleeps between attempts. Default: lease / 3.
    pub(crate) retry_interval: Duration,
    /// Clock-drift allowance subtracted from the leader's local deadline.
    /// Default: lease / 100 + 2 ms (at most half the renew interval).
    pub(crate) safety_margin: Duration,
    /// How long a stepping-down duty may run after its cancellation fires, before it is
    /// aborted. Never extends past the validity deadline. Default: 5 s.
    pub(crate) grace: Duration,
    /// Timeout of each Redis call (a leader's calls are further capped by the time left
    /// on its lease). Default: the renew interval, at most 2 s, and short enough that
    /// `renew_interval + call_timeout < lease - safety_margin` (which the builder
    /// checks).
    pub(crate) call_timeout: Duration,
    /// First backoff after a Redis error or a failed duty. Default: 50 ms.
    pub(crate) backoff_initial: Duration,
    /// Cap of the exponential backoff. Default: 2 s.
    pub(crate) backoff_max: Duration,
    /// Upper bound of the random delay a follower adds to the holder's expiry, so that
    /// followers do not all hit Redis in the same millisecond. Default: 2 ms, at most
    /// the retry interval / 4.
    pub(crate) follower_jitter: Duration,
    /// Prefix of every Redis key and channel. Default: `leasehold`.
    pub(crate) key_prefix: String,
    /// Replicas that must acknowledge a grant or renewal before it counts (`WAIT k
    /// timeout` after it, timeout half the call timeout): a failover to any of them
    /// then keeps the lease, and a primary cut off from its replicas cannot keep a
    /// leader. Default: none (see docs/topologies.md).
    pub(crate) min_replicas_acked: Option<usize>,
}

macro_rules! getter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $name(&self) -> $ty {
            self.$name
        }
    };
}

impl ElectorConfig {
    /// The duty this elector campaigns for.
    pub fn duty(&self) -> &str {
        &self.duty
    }

    /// This replica's id; it appears in the lease value so operators see who leads.
    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    /// Prefix of every Redis key and channel.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    getter!(
        /// Lease time-to-live in Redis.
        lease: Duration
    );
    getter!(
        /// How often a leader renews.
        renew_interval: Duration
    );
    getter!(
        /// Longest a follower sleeps between attempts.
        retry_interval: Duration
    );
    getter!(
        /// Clock-drift allowance subtracted from the leader's local deadline.
        safety_margin: Duration
    );
    getter!(
        /// How long a stepping-down duty may run after its cancellation fires.
        grace: Duration
    );
    getter!(
        /// Timeout of each Redis call.
        call_timeout: Duration
    );
    getter!(
        /// First backoff after a Redis error or a failed duty.
        backoff_initial: Duration
    );
    getter!(
        /// Cap of the exponential backoff.
        backoff_max: Duration
    );
    getter!(
        /// Upper bound of the random delay a follower adds to the holder's expiry.
        follower_jitter: Duration
    );
    getter!(
        /// Replicas that must acknowledge a grant or renewal before it counts.
        min_replicas_acked: Option<usize>
    );

    /// Starts a builder for `duty` on replica `replica_id`.
    pub fn builder(duty: impl Into<String>, replica_id: impl Into<String>) -> ElectorConfigBuilder {
        ElectorConfigBuilder {
            duty: duty.into(),
            replica_id: replica_id.into(),
            lease: Duration::from_secs(10),
            renew_interval: None,
            retry_interval: None,
            safety_margin: None,
            grace: Duration::from_secs(5),
            call_timeout: None,
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
            follower_jitter: None,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            min_replicas_acked: None,
        }
    }
}

/// Builder of [`ElectorConfig`]; unset values take the defaults documented there.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing by itself; call .build()"]
pub struct ElectorConfigBuilder {
    duty: String,
    replica_id: String,
    lease: Duration,
    renew_interval: Option<Duration>,
    retry_interval: Option<Duration>,
    safety_margin: Option<Duration>,
    grace: Duration,
    call_timeout: Option<Duration>,
    backoff_initial: Duration,
    backoff_max: Duration,
    follower_jitter: Option<Duration>,
    key_prefix: String,
    min_replicas_acked: Option<usize>,
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty => $wrap:expr) => {
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.$name = $wrap(value);
            self
        }
    };
}

impl ElectorConfigBuilder {
    setter!(
        /// Lease time-to-live (10 ms ..= 1 day).
        lease: Duration => std::convert::identity
    );
    setter!(
        /// Renew interval (0 < renew < lease).
        renew_interval: Duration => Some
    );
    setter!(
        /// Follower retry interval (0 < retry < lease).
        retry_interval: Duration => Some
    );
    setter!(
        /// Safety margin (< renew interval, and renew interval + call timeout <
        /// lease − margin).
        safety_margin: Duration => Some
    );
    setter!(
        /// Grace a stepping-down duty gets before it is aborted.
        grace: Duration => std::convert::identity
    );
    setter!(
        /// Timeout of each Redis call (renew interval + call timeout < lease − margin).
        call_timeout: Duration => Some
    );
    setter!(
        /// First backoff after an error.
        backoff_initial: Duration => std::convert::identity
    );
    setter!(
        /// Cap of the exponential backoff.
        backoff_max: Duration => std::convert::identity
    );
    setter!(
        /// Follower jitter bound.
        follower_jitter: Duration => Some
    );

    /// Prefix of every Redis key and channel.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Counts a grant or renewal only once `replicas` replicas acknowledge it (see
    /// [`ElectorConfig::min_replicas_acked`]); 0 turns it off.
    ///
    /// ```
    /// # use leasehold_election::ElectorConfig;
    /// let config = ElectorConfig::builder("billing", "replica-1")
    ///     .min_replicas_acked(1)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.min_replicas_acked(), Some(1));
    /// ```
    pub fn min_replicas_acked(mut self, replicas: usize) -> Self {
        self.min_replicas_acked = (replicas > 0).then_some(replicas);
        self
    }

    /// Validates every value and fills in the defaults.
    ///
    /// # Errors
    /// The first [`ConfigError`] found.
    pub fn build(self) -> Result<ElectorConfig, ConfigError> {
        validate_name("duty name", &self.duty)?;
        validate_name("replica id", &self.replica_id)?;
        validate_name("key prefix", &self.key_prefix)?;
        validate_lease(self.lease)?;
        let lease = self.lease;
        let renew_interval = self.renew_interval.unwrap_or(lease / 3);
        let retry_interval = self.retry_interval.unwrap_or(lease / 3);
        for (what, got) in [
            ("renew interval", renew_interval),
            ("retry interval", retry_interval),
        ] {
            if got.is_zero() || got >= lease {
                return Err(ConfigError::IntervalOutOfRange { what, got, lease });
            }
        }
        let safety_margin = self
            .safety_margin
            .unwrap_or_else(|| (lease / 100 + Duration::from_millis(2)).min(renew_interval / 2));
        if safety_margin >= renew_interval {
            return Err(ConfigError::MarginTooLarge {
                margin: safety_margin,
                renew: renew_interval,
            });
        }
        // What is left of the lease after one renew interval: a renewal must end in it.
        let slack = lease
            .saturating_sub(safety_margin)
            .saturating_sub(renew_interval);
        let call_timeout = self.call_timeout.unwrap_or_else(|| {
            renew_interval
                .min(Duration::from_secs(2))
                .min(slack.saturating_sub(Duration::from_millis(1)))
                .max(Duration::from_millis(1))
        });
        if !call_timeout.is_zero()
            && renew_interval.saturating_add(call_timeout) >= lease - safety_margin
        {
            return Err(ConfigError::RenewalOutlastsDeadline {
                renew: renew_interval,
                call_timeout,
                lease,
                margin: safety_margin,
            });
        }
        for (what, d) in [
            ("call timeout", call_timeout),
            ("initial backoff", self.backoff_initial),
            ("maximum backoff", self.backoff_max),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroDuration { what });
            }
        }
        for (what, got) in [
            ("grace", self.grace),
            ("maximum backoff", self.backoff_max),
            ("follower jitter", self.follower_jitter.unwrap_or_default()),
        ] {
            if got > MAX_LEASE {
                return Err(ConfigError::TooLong {
                    what,
                    got,
                    max: MAX_LEASE,
                });
            }
        }
        if self.backoff_initial > self.backoff_max {
            return Err(ConfigError::BackoffInverted {
                initial: self.backoff_initial,
                max: self.backoff_max,
            });
        }
        let follower_jitter = self
            .follower_jitter
            .unwrap_or_else(|| Duration::from_millis(2).min(retry_interval / 4));
        Ok(ElectorConfig {
            duty: self.duty,
            replica_id: self.replica_id,
            lease,
            renew_interval,
            retry_interval,
            safety_margin,
            grace: self.grace,
            call_timeout,
            backoff_initial: self.backoff_initial,
            backoff_max: self.backoff_max,
            follower_jitter,
            key_prefix: self.key_prefix,
            min_replicas_acked: self.min_replicas_acked,
        })
    }
}
