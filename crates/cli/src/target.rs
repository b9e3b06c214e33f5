//! Where a command reads from (and writes to): a Redis URL, a key prefix and the
//! timeout of every call.

use std::time::Duration;

use leasehold_election::{RedisStore, RedisStoreBuilder};
use leasehold_partitions::GroupAdmin;

use crate::error::{Error, check_name};

/// Where to read from. Its `Debug` prints no URL (a URL may carry a password).
#[derive(Clone)]
pub struct Target {
    /// The Redis URL: the server's; with [`Topology::Sentinel`] a Sentinel's; with
    /// [`Topology::Cluster`] a seed node's.
    pub url: String,
    /// More Sentinels, or more seed nodes.
    pub more_urls: Vec<String>,
    /// One server, Sentinel or a Cluster.
    pub topology: Topology,
    /// The key prefix.
    pub prefix: String,
    /// Timeout of every Redis call (and of connecting).
    pub timeout: Duration,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &"<redacted>")
            .field("more_urls", &self.more_urls.len())
            .field("topology", &self.topology)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// How the URLs reach the data. Its `Debug` prints no URL.
#[derive(Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server (or a proxy in front of one).
    Node,
    /// The primary these Sentinels name `master`, followed across failovers.
    Sentinel {
        /// The monitored master's name.
        master: String,
        /// The primary's URL for its scheme, credentials and database.
        primary_url: Option<String>,
    },
    /// A Redis Cluster, from these seed nodes.
    Cluster,
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Node => f.write_str("Node"),
            Self::Sentinel {
                master,
                primary_url,
            } => f
                .debug_struct("Sentinel")
                .field("master", master)
                .field("primary_url", &primary_url.as_ref().map(|_| "<redacted>"))
                .finish(),
            Self::Cluster => f.write_str("Cluster"),
        }
    }
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

    fn urls(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.url.as_str()).chain(self.more_urls.iter().map(String::as_str))
    }

    fn builder(&self) -> Result<RedisStoreBuilder, Error> {
        check_name("--prefix", "prefix", &self.prefix)?;
        let builder = match &self.topology {
            Topology::Node if !self.more_urls.is_empty() => {
                return Err(Error::Topology(
                    "--redis-url given more than once: add --sentinel MASTER (the URLs are \
                     Sentinels) or --cluster (the URLs are seed nodes)"
                        .to_owned(),
                ));
            }
            Topology::Node => RedisStore::builder(self.url.as_str()),
            Topology::Sentinel {
                master,
                primary_url,
            } => {
                let b = RedisStore::sentinel_builder(master.as_str(), self.urls());
                match primary_url {
                    Some(url) => b.primary_url(url.as_str()),
                    None => b,
                }
            }
            Topology::Cluster => RedisStore::cluster_builder(self.urls()),
        };
        Ok(builder.call_timeout(self.timeout))
    }

    /// Whether a URL asks for TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        let primary = match &self.topology {
            Topology::Sentinel {
                primary_url: Some(url),
                ..
            } => Some(url.as_str()),
            _ => None,
        };
        self.urls().chain(primary).any(|url| {
            url.get(..9)
                .is_some_and(|s| s.eq_ignore_ascii_case("rediss://"))
        })
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
