//! How every process of a run reaches Redis: which set-up a scenario runs on
//! (`--topology`), the servers the bench starts for it, the [`StoreSpec`] that tells
//! every process (the bench and its children) how to build the same store, and the
//! one place that store and the elector settings are built, so the child leader and
//! the in-process follower agree.

use std::error::Error;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use leasehold_election::{ElectorConfig, RedisStore};
use leasehold_testkit::{
    ClientAuth, MASTER_NAME, RedisCluster, RedisSentinelSet, RedisServer, TlsRedisServer,
};
use serde::{Deserialize, Serialize};
use tempfile::TempDir;

pub mod failover;

/// The error type of the bench: everything is reported to the user and ends the run.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// The store `spec` names, with a call timeout that suits `lease` (a third of it, at
/// most 1 s). The one place the bench and its children build a store.
///
/// # Errors
/// If a URL is malformed or a TLS file cannot be read.
///
/// # Panics
/// Outside a tokio runtime.
pub fn build_store(spec: &StoreSpec, lease: Duration) -> Result<RedisStore, BoxError> {
    let call_timeout = (lease / 3).min(Duration::from_secs(1));
    let builder = match spec {
        StoreSpec::Single { url } => RedisStore::builder(url.as_str()),
        StoreSpec::Tls {
            url,
            ca_file,
            cert_file,
            key_file,
        } => {
            let read = |path: &Path| {
                std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))
            };
            RedisStore::builder(url.as_str())
                .tls_root_ca(read(ca_file)?)
                .tls_client_cert(read(cert_file)?, read(key_file)?)
        }
        StoreSpec::Sentinel { master, sentinels } => {
            RedisStore::sentinel_builder(master.as_str(), sentinels.clone())
        }
        StoreSpec::Cluster { nodes } => RedisStore::cluster_builder(nodes.clone()),
    };
    Ok(builder.call_timeout(call_timeout).build()?)
}

/// The elector settings of `replica` on `duty`: the library defaults for `lease`.
///
/// # Errors
/// If a name or the lease is out of range.
pub fn config(duty: &str, replica: &str, lease: Duration) -> Result<ElectorConfig, BoxError> {
    acked_config(duty, replica, lease, 0)
}

/// [`config`] whose grants and renewals count once `acked` replicas have them
/// (`min_replicas_acked`; 0: off).
///
/// # Errors
/// If the lease is out of range.
pub fn acked_config(
    duty: &str,
    replica: &str,
    lease: Duration,
    acked: usize,
) -> Result<ElectorConfig, BoxError> {
    Ok(ElectorConfig::builder(duty, replica)
        .lease(lease)
        .min_replicas_acked(acked)
        .build()?)
}

/// Primaries of the cluster the bench starts (the fewest `redis-cli` accepts).
const CLUSTER_PRIMARIES: usize = 3;
/// Replicas of the Sentinel-monitored primary the bench starts.
const SENTINEL_REPLICAS: usize = 1;

/// A Redis set-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// One redis-server, plain `redis://`.
    #[default]
    Single,
    /// One redis-server over `rediss://` with mutual TLS (a test CA).
    Tls,
    /// A primary, one replica and three Sentinels; the store resolves the primary
    /// through the Sentinels.
    Sentinel,
    /// A Redis Cluster of three primaries (no replicas).
    Cluster,
}

/// Where a scenario's coordination store lives: `--topology` and `--redis-url`.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Redis set-up to start for the run (throwaway servers on loopback).
    #[arg(long, value_enum, default_value_t = Topology::Single)]
    pub topology: Topology,
    /// Use this Redis instead of starting a throwaway redis-server (`--topology single`
    /// only).
    #[arg(long)]
    pub redis_url: Option<String>,
}

/// Everything needed to build a store: what the bench passes to its children as JSON
/// (`--store`), so parent and children build the same store with
/// [`build_store`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StoreSpec {
    /// One server at `url` (`redis://` or `rediss://` with the system's roots).
    Single {
        /// Its URL.
        url: String,
    },
    /// One server at a `rediss://` `url`, trusting the CA in `ca_file` and presenting
    /// the client certificate in `cert_file` / `key_file` (all PEM files).
    Tls {
        /// Its `rediss://` URL.
        url: String,
        /// The CA certificate to trust.
        ca_file: PathBuf,
        /// The client certificate.
        cert_file: PathBuf,
        /// The client certificate's key.
        key_file: PathBuf,
    },
    /// The primary the Sentinels at `sentinels` name `master`.
    Sentinel {
        /// The master name.
        master: String,
        /// The Sentinels' URLs.
        sentinels: Vec<String>,
    },
    /// A cluster, discovered from `nodes`.
    Cluster {
        /// Seed node URLs.
        nodes: Vec<String>,
    },
}

impl StoreSpec {
    /// One plain server at `url`.
    pub fn single(url: impl Into<String>) -> Self {
        Self::Single { url: url.into() }
    }

    /// The spec as one JSON string, for a child's command line.
    ///
    /// # Errors
    /// Never in practice (serialization of strings and paths).
    pub fn to_arg(&self) -> Result<String, BoxError> {
        Ok(serde_json::to_string(self)?)
    }
}

/// Parses a `--store` argument: a [`StoreSpec`] as JSON.
///
/// # Errors
/// If it is not one.
pub fn parse_spec(s: &str) -> Result<StoreSpec, String> {
    serde_json::from_str(s).map_err(|e| format!("not a store spec: {e}"))
}

/// How a child reaches the coordination store: `--redis-url` (a plain server) or
/// `--store` (any topology), exactly one of them.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct ConnArgs {
    /// Redis URL.
    #[arg(long)]
    pub redis_url: Option<String>,
    /// The store as JSON (see the bench's `StoreSpec`).
    #[arg(long, value_parser = parse_spec)]
    pub store: Option<StoreSpec>,
}

impl ConnArgs {
    /// The store these arguments name.
    ///
    /// # Errors
    /// If neither was given (clap prevents it).
    pub fn spec(&self) -> Result<StoreSpec, BoxError> {
        match (&self.store, &self.redis_url) {
            (Some(spec), _) => Ok(spec.clone()),
            (None, Some(url)) => Ok(StoreSpec::single(url.as_str())),
            (None, None) => Err("give --redis-url or --store".into()),
        }
    }
}

/// The servers of one scenario run, killed on drop.
#[derive(Debug)]
enum Processes {
    /// A server given with `--redis-url`: nothing of ours.
    External,
    Single {
        _server: RedisServer,
    },
    Tls {
        _server: TlsRedisServer,
        _files: TempDir,
    },
    Sentinel {
        set: RedisSentinelSet,
    },
    Cluster {
        cluster: RedisCluster,
    },
}

/// The servers a scenario started for its topology, and how to reach them.
#[derive(Debug)]
pub struct Servers {
    /// The set-up.
    pub topology: Topology,
    /// How every process builds its store.
    pub spec: StoreSpec,
    /// Plain `redis://` URLs of the data nodes that serve the store's requests (for
    /// `INFO commandstats`): the server, its plain port under TLS, the primary under
    /// Sentinel, every node of a cluster.
    pub stats_urls: Vec<String>,
    processes: Processes,
}

impl Servers {
    /// Starts the servers of `target.topology`, unless `target.redis_url` names a
    /// server to use instead (single only). Blocks until they are ready.
    ///
    /// # Errors
    /// If `--redis-url` is combined with another topology, or the servers cannot start.
    pub fn start(target: &TargetArgs) -> Result<Self, BoxError> {
        Self::start_with(target, false)
    }

    /// Like [`Servers::start`]; with `replicated`, a cluster gets one replica per
    /// primary (as a Sentinel set always has), so that a primary can fail over
    /// (`--lose-writes`, [`failover`]).
    ///
    /// # Errors
    /// As [`Servers::start`].
    pub fn start_with(target: &TargetArgs, replicated: bool) -> Result<Self, BoxError> {
        let topology = target.topology;
        if let Some(url) = &target.redis_url {
            if topology != Topology::Single {
                return Err(format!(
                    "--redis-url works with --topology single only (got --topology {}): the \
                     other topologies start their own servers",
                    topology_name(topology)
                )
                .into());
            }
            return Ok(Self {
                topology,
                spec: StoreSpec::single(url.as_str()),
                stats_urls: vec![url.clone()],
                processes: Processes::External,
            });
        }
        match topology {
            Topology::Single => {
                let server = RedisServer::try_start()?;
                Ok(Self {
                    topology,
                    spec: StoreSpec::single(server.url()),
                    stats_urls: vec![server.url()],
                    processes: Processes::Single { _server: server },
                })
            }
            Topology::Tls => {
                let server = testkit("a TLS redis-server", || {
                    TlsRedisServer::start(ClientAuth::Required)
                })?;
                let dir = tempfile::Builder::new()
                    .prefix("leasehold-bench-tls-")
                    .tempdir()?;
                let write = |name: &str, pem: &str| -> Result<PathBuf, BoxError> {
                    let path = dir.path().join(name);
                    std::fs::write(&path, pem)?;
                    Ok(path)
                };
                let spec = StoreSpec::Tls {
                    url: server.url(),
                    ca_file: write("ca.crt", server.ca().ca_pem())?,
                    cert_file: write("client.crt", server.ca().client_cert_pem())?,
                    key_file: write("client.key", server.ca().client_key_pem())?,
                };
                Ok(Self {
                    topology,
                    spec,
                    stats_urls: vec![server.server().url()],
                    processes: Processes::Tls {
                        _server: server,
                        _files: dir,
                    },
                })
            }
            Topology::Sentinel => {
                let set = testkit("a Sentinel set", || {
                    RedisSentinelSet::start(SENTINEL_REPLICAS)
                })?;
                let primary = testkit("the Sentinels' primary", || {
                    set.nodes()[set.primary_index()].url()
                })?;
                Ok(Self {
                    topology,
                    spec: StoreSpec::Sentinel {
                        master: MASTER_NAME.to_owned(),
                        sentinels: set.sentinel_urls(),
                    },
                    stats_urls: vec![primary],
                    processes: Processes::Sentinel { set },
                })
            }
            Topology::Cluster => {
                let cluster = testkit("a Redis Cluster", || {
                    RedisCluster::start(CLUSTER_PRIMARIES, usize::from(replicated))
                })?;
                Ok(Self {
                    topology,
                    spec: StoreSpec::Cluster {
                        nodes: cluster.node_urls(),
                    },
                    stats_urls: cluster.node_urls(),
                    processes: Processes::Cluster { cluster },
                })
            }
        }
    }
}

/// The `--topology` value of `topology`.
pub fn topology_name(topology: Topology) -> &'static str {
    match topology {
        Topology::Single => "single",
        Topology::Tls => "tls",
        Topology::Sentinel => "sentinel",
        Topology::Cluster => "cluster",
    }
}

/// Runs a testkit start-up (which panics on failure) and turns a panic into an error.
fn testkit<T>(what: &str, start: impl FnOnce() -> T) -> Result<T, BoxError> {
    catch_unwind(AssertUnwindSafe(start)).map_err(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        format!("starting {what} failed: {why}").into()
    })
}

/// What `--lose-writes` needs: servers the bench starts itself, with a replica to
/// promote (Sentinel or Cluster).
///
/// # Errors
/// With `--redis-url`, or another topology.
pub fn check_lossy_target(target: &TargetArgs) -> Result<(), BoxError> {
    if target.redis_url.is_some() {
        return Err(
            "failover-lossy and rebalance-lossy start their own servers: drop --redis-url".into(),
        );
    }
    if !matches!(target.topology, Topology::Sentinel | Topology::Cluster) {
        return Err(format!(
            "failover-lossy and rebalance-lossy need --topology sentinel or cluster (got {}): a failover needs \
             a replica to promote",
            topology_name(target.topology)
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{StoreSpec, parse_spec};

    #[test]
    fn specs_round_trip_through_json() {
        let specs = [
            StoreSpec::single("redis://127.0.0.1:1/"),
            StoreSpec::Tls {
                url: "rediss://127.0.0.1:2/".into(),
                ca_file: "/tmp/ca.crt".into(),
                cert_file: "/tmp/client.crt".into(),
                key_file: "/tmp/client.key".into(),
            },
            StoreSpec::Sentinel {
                master: "leasehold".into(),
                sentinels: vec!["redis://127.0.0.1:3/".into(), "redis://127.0.0.1:4/".into()],
            },
            StoreSpec::Cluster {
                nodes: vec!["redis://127.0.0.1:5/".into()],
            },
        ];
        for spec in specs {
            let arg = spec.to_arg().expect("serializes");
            assert_eq!(parse_spec(&arg), Ok(spec));
        }
        assert!(parse_spec(r#"{"kind":"nope"}"#).is_err());
    }
}
