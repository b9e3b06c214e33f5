//! Settings both ends use, so the child leader and the in-process follower agree.

use std::error::Error;
use std::time::Duration;

use leasehold_election::{ElectorConfig, RedisStore};

/// The error type of the bench: everything is reported to the user and ends the run.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// A store on `url` whose call timeout suits `lease` (a third of it, at most 1 s).
///
/// # Errors
/// If the URL is malformed.
///
/// # Panics
/// Outside a tokio runtime.
pub fn store(url: &str, lease: Duration) -> Result<RedisStore, BoxError> {
    let call_timeout = (lease / 3).min(Duration::from_secs(1));
    Ok(RedisStore::builder(url)
        .call_timeout(call_timeout)
        .build()?)
}

/// The elector settings of `replica` on `duty`: the library defaults for `lease`.
///
/// # Errors
/// If a name or the lease is out of range.
pub fn config(duty: &str, replica: &str, lease: Duration) -> Result<ElectorConfig, BoxError> {
    Ok(ElectorConfig::builder(duty, replica).lease(lease).build()?)
}
