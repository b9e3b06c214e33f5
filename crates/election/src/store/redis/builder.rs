//! [`RedisStoreBuilder`]: one server, Sentinel or Cluster; TLS; replication waits.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster::ClusterClientBuilder;
use redis::{AsyncConnectionConfig, Client};

use super::conn::Target;
use super::{RedisStore, Settings};
use crate::error::BuildError;

/// Where a builder connects.
#[derive(Debug, Clone)]
enum Topology {
    Node(String),
    Sentinel {
        master: String,
        sentinels: Vec<String>,
        primary: Option<String>,
    },
    Cluster(Vec<String>),
}

/// Builder of a [`RedisStore`]: start with [`RedisStore::builder`] (one server),
/// [`RedisStore::sentinel_builder`] or [`RedisStore::cluster_builder`].
///
/// URLs are redis-rs URLs: `redis://[user:password@]host:port[/db]`, or `rediss://...`
/// for TLS (feature `tls`, on by default). See `docs/topologies.md` for ACL, TLS,
/// Sentinel and Cluster set-ups and what each means for safety.
#[derive(Clone)]
#[must_use = "a builder does nothing by itself; call .build()"]
pub struct RedisStoreBuilder {
    topology: Topology,
    call_timeout: Duration,
    pool_size: usize,
    wait_for_replicas: Option<(usize, Duration)>,
    client_name: Option<String>,
    subscription_ping: Option<Duration>,
    #[cfg(feature = "tls")]
    root_ca: Option<Vec<u8>>,
    #[cfg(feature = "tls")]
    client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // URLs may carry passwords and keys are secret: print neither.
        let topology = match &self.topology {
            Topology::Node(_) => "node",
            Topology::Sentinel { .. } => "sentinel",
            Topology::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStoreBuilder")
            .field("topology", &topology)
            .field("call_timeout", &self.call_timeout)
            .field("pool_size", &self.pool_size)
            .field("wait_for_replicas", &self.wait_for_replicas)
            .field("client_name", &self.client_name)
            .field("subscription_ping", &self.subscription_ping)
            .finish_non_exhaustive()
    }
}

impl RedisStoreBuilder {
    fn new(topology: Topology) -> Self {
        Self {
            topology,
            call_timeout: Duration::from_secs(1),
            pool_size: 4,
            wait_for_replicas: None,
            client_name: None,
            subscription_ping: None,
            #[cfg(feature = "tls")]
            root_ca: None,
            #[cfg(feature = "tls")]
            client_cert: None,
        }
    }

    pub(super) fn node(url: String) -> Self {
        Self::new(Topology::Node(url))
    }

    pub(super) fn sentinel(master: String, sentinels: Vec<String>) -> Self {
        Self::new(Topology::Sentinel {
            master,
            sentinels,
            primary: None,
        })
    }

    pub(super) fn cluster(nodes: Vec<String>) -> Self {
        Self::new(Topology::Cluster(nodes))
    }

    /// Timeout of each Redis call, connection set-up and pool checkout. Default: 1 s.
    /// Electors cap their own calls further by the time left on their lease.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How often the store's pub/sub connection is checked with a `PING` when nothing
    /// arrives on it, so that a link that stopped answering is noticed and replaced.
    /// Default: every second, or every call timeout if that is longer: a follower
    /// waiting for a release must hear of a dead link well within a lease. A process
    /// that keeps no lease, only listens (a [`Router`] of a partition group, a
    /// dashboard), can check far less often: one `PING` a minute costs Redis next to
    /// nothing per client, and thousands of such clients stay cheap. Never less than
    /// the call timeout.
    ///
    /// [`Router`]: https://docs.rs/leasehold-partitions/latest/leasehold_partitions/struct.Router.html
    pub fn subscription_ping(mut self, every: Duration) -> Self {
        self.subscription_ping = Some(every);
        self
    }

    /// Largest number of pooled connections. Default: 4. The store multiplexes every
    /// call over one connection and takes another from the pool only after a fault.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Sentinel only: how to talk to the primary Sentinel names. The URL's scheme
    /// (`rediss://` for TLS), user, password and database are used; its host and port
    /// are replaced by the primary's address. Default: `redis://` without credentials,
    /// database 0.
    ///
    /// Sentinels' own credentials go in their URLs.
    pub fn primary_url(mut self, url: impl Into<String>) -> Self {
        if let Topology::Sentinel { primary, .. } = &mut self.topology {
            *primary = Some(url.into());
        }
        self
    }

    /// After every acquire or renewal that succeeds, send `WAIT replicas timeout` on the
    /// same connection, and count the operation only if at least `replicas` replicas
    /// acknowledged it. Otherwise the call fails with the retryable
    /// [`StoreError::Replication`](crate::StoreError::Replication): an elector
    /// releases the lease that acquire took and campaigns again with a new token, or,
    /// when leading, lets its deadline run down as for any failed renewal. Default: off.
    ///
    /// This narrows, but does not close, the window in which a Sentinel or Cluster
    /// failover loses a fresh lease (`WAIT` is not a consensus protocol: a replica that
    /// acknowledged may still not be the one promoted). Fences keep the resource safe
    /// either way. Costs one round trip to the replicas per acquire and renewal, and a
    /// `WAIT` blocks the store's multiplexed connection until it returns, so `timeout`
    /// must be well below [`call_timeout`](Self::call_timeout). Partition-group ticks
    /// (batched renewals) do not wait.
    pub fn wait_for_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.wait_for_replicas = Some((replicas, timeout));
        self
    }

    /// Names every connection the store opens (`CLIENT SETNAME`): the pool's, its
    /// replacements, and the release subscription's, so that `CLIENT LIST` tells this
    /// process's connections apart. Default: unnamed.
    ///
    /// Best effort: a connection whose `CLIENT SETNAME` is refused (an ACL without
    /// `client|setname`) stays unnamed; the subscription is named only on Redis 6 or
    /// later (it subscribes over RESP3 to name itself first); on a cluster, a node the
    /// cluster client connects to later than the pool's connection stays unnamed.
    ///
    /// ```
    /// use leasehold_election::RedisStore;
    ///
    /// let store = RedisStore::builder("redis://127.0.0.1:6379/")
    ///     .client_name("billing-scheduler")
    ///     .build()?;
    /// # Ok::<(), leasehold_election::BuildError>(())
    /// ```
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// Trust this CA (PEM, one or more certificates) instead of the system's roots for
    /// `rediss://` connections.
    #[cfg(feature = "tls")]
    pub fn tls_root_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_ca = Some(pem.into());
        self
    }

    /// Present this client certificate and key (PEM) on `rediss://` connections, for
    /// servers with `tls-auth-clients yes` (Redis's default).
    #[cfg(feature = "tls")]
    pub fn tls_client_cert(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.client_cert = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Creates the pool. Connects lazily: a server that is down now is not an error, and
    /// neither is building outside a tokio runtime (the connections and the release
    /// subscription start on the runtime of the first call).
    ///
    /// # Errors
    /// [`BuildError::Url`] if a URL is malformed, [`BuildError::TlsNotEnabled`] for a
    /// `rediss://` URL without the `tls` feature, [`BuildError::NoUrls`] if no Sentinel
    /// or Cluster node is given, [`BuildError::ReplicaWait`] if the replication wait
    /// does not fit in the call timeout, [`BuildError::ClientName`] for a client name
    /// Redis would refuse (empty, or with spaces or other than printable ASCII).
    pub fn build(self) -> Result<RedisStore, BuildError> {
        if let Some((replicas, timeout)) = self.wait_for_replicas
            && (replicas == 0 || timeout.is_zero() || timeout >= self.call_timeout)
        {
            return Err(BuildError::ReplicaWait {
                replicas,
                timeout,
                call_timeout: self.call_timeout,
            });
        }
        if let Some(name) = &self.client_name
            && (name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(BuildError::ClientName(name.clone()));
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.call_timeout))
            .set_response_timeout(Some(self.call_timeout));
        let target = match &self.topology {
            Topology::Node(url) => {
                let client = self.client(url)?;
                // The connection info carries the TLS certificates, if any.
                let manager = deadpool_redis::Manager::new_with_config(
                    client.get_connection_info().clone(),
                    config.clone(),
                )
                .map_err(url_error)?;
                Target::Node { client, manager }
            }
            Topology::Sentinel {
                master,
                sentinels,
                primary,
            } => {
                if sentinels.is_empty() {
                    return Err(BuildError::NoUrls("sentinel"));
                }
                let primary = self.client(primary.as_deref().unwrap_or("redis://localhost/"))?;
                Target::Sentinel {
                    master: master.clone(),
                    sentinels: sentinels
                        .iter()
                        .map(|u| self.client(u))
                        .collect::<Result<_, _>>()?,
                    primary: primary.get_connection_info().clone(),
                }
            }
            Topology::Cluster(nodes) => {
                if nodes.is_empty() {
                    return Err(BuildError::NoUrls("cluster node"));
                }
                let seeds: Vec<Client> = nodes
                    .iter()
                    .map(|u| self.client(u))
                    .collect::<Result<_, _>>()?;
                #[allow(unused_mut)]
                let mut builder = ClusterClientBuilder::new(
                    seeds.iter().map(|c| c.get_connection_info().clone()),
                )
                .connection_timeout(self.call_timeout)
                .response_timeout(self.call_timeout);
                #[cfg(feature = "tls")]
                if let Some(certs) = self.certificates() {
                    builder = builder.certs(certs);
                }
                let client = builder.build().map_err(url_error)?;
                Target::Cluster { client, seeds }
            }
        };
        RedisStore::new(
            Settings {
                target: Arc::new(target),
                config,
                pool_size: self.pool_size,
                call_timeout: self.call_timeout,
                wait_for_replicas: self.wait_for_replicas,
                client_name: self.client_name.as_deref().map(Arc::from),
                subscription_ping: self
                    .subscription_ping
                    .unwrap_or(Duration::from_secs(1))
                    .max(self.call_timeout),
            },
            Arc::default(),
        )
    }

    /// A client for `url`, with the builder's TLS settings if it is a `rediss://` URL.
    fn client(&self, url: &str) -> Result<Client, BuildError> {
        #[cfg(feature = "tls")]
        if url.starts_with("rediss://") {
            ensure_crypto_provider();
            if let Some(certs) = self.certificates() {
                return Client::build_with_tls(url, certs).map_err(url_error);
            }
        }
        if url.starts_with("rediss://") && !cfg!(feature = "tls") {
            return Err(BuildError::TlsNotEnabled);
        }
        Client::open(url).map_err(url_error)
    }

    #[cfg(feature = "tls")]
    fn certificates(&self) -> Option<redis::TlsCertificates> {
        if self.root_ca.is_none() && self.client_cert.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self
                .client_cert
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.root_ca.clone(),
        })
    }
}

fn url_error(e: redis::RedisError) -> BuildError {
    BuildError::Url(Arc::new(e))
}

/// rustls needs a process-wide crypto provider. If the application has installed one,
/// it is used; otherwise ring's is installed (once, on the first `rediss://` store).
#[cfg(feature = "tls")]
fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing one is fine: any provider will do.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
