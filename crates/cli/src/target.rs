//! Where a command reads from (and writes to): a Redis URL, a key prefix and the
//! timeout of every call.

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_election::ext::validate_name;
use leasehold_partitions::GroupAdmin;

use crate::error::Error;

/// Where to read from.
#[derive(Debug, Clone)]
pub struct Target {
    /// The Redis URL.
    pub url: String,
    /// The key prefix.
    pub prefix: String,
    /// Timeout of every Redis call (and of connecting).
    pub timeout: Duration,
}

impl Target {
    /// A store for the URL, every call under the timeout. Only a malformed URL or an
    /// invalid prefix fails here: the store connects on first use.
    ///
    /// # Errors
    /// [`Error::Name`] for the prefix, [`Error::Url`].
    pub fn store(&self) -> Result<RedisStore, Error> {
        validate_name("prefix", &self.prefix)?;
        RedisStore::builder(self.url.as_str())
            .call_timeout(self.timeout)
            .build()
            .map_err(Error::Url)
    }

    /// The admin of `group` on `store`.
    ///
    /// # Errors
    /// [`Error::Name`] if the group name breaks the naming rules.
    pub fn admin(&self, store: &RedisStore, group: &str) -> Result<GroupAdmin<RedisStore>, Error> {
        validate_name("group", group)?;
        GroupAdmin::new(store.clone(), &self.prefix, group).map_err(|error| Error::Group {
            group: group.to_owned(),
            error,
        })
    }
}
