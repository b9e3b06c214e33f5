//! Where a command reads from (and writes to): a Redis URL, a key prefix and the
//! timeout of every call.

use std::time::Duration;

use leasehold_election::RedisStore;
use leasehold_partitions::GroupAdmin;

use crate::error::{Error, check_name};

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
    /// [`Error::BadArg`] for the prefix, [`Error::Url`].
    pub fn store(&self) -> Result<RedisStore, Error> {
        self.builder()?.build().map_err(Error::Url)
    }

    /// As [`store`](Self::store), every connection named `name` (`CLIENT SETNAME`).
    ///
    /// # Errors
    /// As [`store`](Self::store).
    pub fn named_store(&self, name: &str) -> Result<RedisStore, Error> {
        self.builder()?
            .client_name(name)
            .build()
            .map_err(Error::Url)
    }

    fn builder(&self) -> Result<leasehold_election::RedisStoreBuilder, Error> {
        check_name("--prefix", "prefix", &self.prefix)?;
        Ok(RedisStore::builder(self.url.as_str()).call_timeout(self.timeout))
    }

    /// Whether the URL asks for TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        self.url
            .get(..9)
            .is_some_and(|s| s.eq_ignore_ascii_case("rediss://"))
    }

    /// The admin of `group` on `store`.
    ///
    /// # Errors
    /// [`Error::BadArg`] if the group name breaks the naming rules.
    pub fn admin(&self, store: &RedisStore, group: &str) -> Result<GroupAdmin<RedisStore>, Error> {
        check_name("--group", "group", group)?;
        GroupAdmin::new(store.clone(), group)
            .and_then(|admin| admin.with_key_prefix(&self.prefix))
            .map_err(|error| Error::Group {
                group: group.to_owned(),
                error,
            })
    }
}
