//! The naming and lease rules every name and lease of Leasehold obeys. Reached
//! through [`crate::ext`] by Leasehold's sibling crates.

use std::time::Duration;

use crate::config::{ConfigError, MAX_LEASE, MAX_NAME_LEN, MIN_LEASE};

/// Checks a duty name, replica id, partition or group name.
///
/// Names are non-empty, at most [`MAX_NAME_LEN`] bytes, and contain no control
/// characters and no `{`/`}` (they are embedded in Redis Cluster hash tags).
///
/// # Errors
/// The [`ConfigError`] naming the first rule the name breaks.
pub fn validate_name(what: &'static str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::EmptyName { what });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(ConfigError::NameTooLong {
            what,
            len: name.len(),
            max: MAX_NAME_LEN,
        });
    }
    if let Some(ch) = name.chars().find(|c| c.is_control()) {
        return Err(ConfigError::ControlCharacter { what, ch });
    }
    if let Some(ch) = name.chars().find(|c| matches!(c, '{' | '}')) {
        return Err(ConfigError::HashTagCharacter { what, ch });
    }
    Ok(())
}

/// Checks a lease duration against [`MIN_LEASE`] and [`MAX_LEASE`].
///
/// # Errors
/// [`ConfigError::LeaseOutOfRange`].
pub fn validate_lease(lease: Duration) -> Result<(), ConfigError> {
    if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
        return Err(ConfigError::LeaseOutOfRange {
            got: lease,
            min: MIN_LEASE,
            max: MAX_LEASE,
        });
    }
    Ok(())
}
