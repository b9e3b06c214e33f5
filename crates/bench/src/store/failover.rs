//! Failovers of the servers themselves, for `--lose-writes`: cut a primary off from
//! its replicas (so that what it grants from then on lives on it alone), kill it, and
//! watch the topology promote a replica that lacks those writes.
//!
//! Only Sentinel sets and clusters started with replicas
//! ([`Servers::start_with`]) can do this. Every call here blocks (the testkit's
//! helpers are synchronous): call them from `tokio::task::block_in_place`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use leasehold_testkit::{MASTER_NAME, RedisServer};
use redis::Value;
use serde::Serialize;

use super::{BoxError, Processes, Servers, Topology};
use crate::clock::now_us;

/// How often [`Servers::wait_for_new_primary`] asks the topology who is primary.
const DETECT_POLL: Duration = Duration::from_millis(10);
/// Connect and read timeout of the bench's own probes of a node or a Sentinel.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);

/// One data node's copy of a key, read directly from the node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeKey {
    /// The node's index in the topology.
    pub node: usize,
    /// Whether the node says it is a primary (`ROLE`).
    pub primary: bool,
    /// Whether the key exists there.
    pub exists: bool,
}

impl Servers {
    /// The index of the data node that serves `key` now: the Sentinels' primary, or
    /// the cluster primary of its slot.
    ///
    /// # Errors
    /// On another topology, or if the topology cannot tell.
    pub fn primary_for(&self, key: &str) -> Result<usize, BoxError> {
        match &self.processes {
            Processes::Sentinel { set } => call("the Sentinels' primary", || set.primary_index()),
            Processes::Cluster { cluster } => {
                call("the primary of a slot", || cluster.primary_for_key(key))
            }
            _ => Err(not_replicated(self.topology)),
        }
    }

    /// Cuts the primary that serves `key` off from its replicas (see the testkit's
    /// `cut_replication`): from now on its writes reach it alone. Returns its index.
    ///
    /// # Errors
    /// On another topology, or if the cut fails.
    pub fn cut_replication(&self, key: &str) -> Result<usize, BoxError> {
        let primary = self.primary_for(key)?;
        match &self.processes {
            Processes::Sentinel { set } => call("cutting replication", || set.cut_replication())?,
            Processes::Cluster { cluster } => call("cutting replication", || {
                cluster.cut_replication(primary);
            })?,
            _ => return Err(not_replicated(self.topology)),
        }
        Ok(primary)
    }

    /// Kills data node `node` (SIGKILL) and waits for it to exit.
    ///
    /// # Errors
    /// On another topology, or an index out of range.
    pub fn kill_node(&mut self, node: usize) -> Result<(), BoxError> {
        let topology = self.topology;
        let nodes = match &mut self.processes {
            Processes::Sentinel { set } => set.nodes_mut(),
            Processes::Cluster { cluster } => cluster.nodes_mut(),
            _ => return Err(not_replicated(topology)),
        };
        nodes
            .get_mut(node)
            .ok_or_else(|| format!("no data node {node}"))?
            .stop();
        Ok(())
    }

    /// Polls the topology every [`DETECT_POLL`] until it names a primary for `key`
    /// other than `old` and that node answers `ROLE` as a master (what a client that
    /// asks the Sentinels, or follows the cluster's slot map, finds). Returns that
    /// node's index and when it was first seen (wall µs).
    ///
    /// # Errors
    /// On another topology, or if it does not happen within `limit`.
    pub fn wait_for_new_primary(
        &self,
        old: usize,
        key: &str,
        limit: Duration,
    ) -> Result<(usize, u64), BoxError> {
        let nodes = self.data_nodes()?;
        let slot = match &self.processes {
            Processes::Cluster { cluster } => {
                Some(call("CLUSTER KEYSLOT", || cluster.keyslot(key))?)
            }
            _ => None,
        };
        let start = Instant::now();
        let mut last = String::from("nothing asked yet");
        while start.elapsed() < limit {
            let named = match (&self.processes, slot) {
                (Processes::Sentinel { set }, _) => sentinel_primary(&set.sentinel_urls())
                    .and_then(|addr| {
                        nodes
                            .iter()
                            .position(|n| n.addr() == addr)
                            .ok_or(format!("the Sentinels name an unknown primary {addr}"))
                    }),
                (Processes::Cluster { cluster }, Some(slot)) => {
                    call("the primary of a slot", || cluster.primary_for_slot(slot))
                        .map_err(|e| e.to_string())
                }
                _ => return Err(not_replicated(self.topology)),
            };
            match named {
                Ok(i) if i != old && is_master(&nodes[i]) => return Ok((i, now_us())),
                Ok(i) if i == old => last = format!("still the old primary, node {old}"),
                Ok(i) => last = format!("node {i} is named but does not say it is a master"),
                Err(e) => last = e,
            }
            std::thread::sleep(DETECT_POLL);
        }
        Err(format!("no new primary within {limit:?}: {last}").into())
    }

    /// Whether `key` exists on each running data node that serves or replicates its
    /// slot, and which of them say they are primaries: to check that a grant really
    /// lives on the primary only.
    ///
    /// # Errors
    /// On another topology, or if a node does not answer.
    pub fn key_on_nodes(&self, key: &str) -> Result<Vec<NodeKey>, BoxError> {
        let mut out = Vec::new();
        for (node, server) in self.data_nodes()?.iter().enumerate() {
            if !server.is_running() {
                continue;
            }
            let mut conn = connect_reading(&server.url())?;
            let exists: bool = match redis::cmd("EXISTS").arg(key).query(&mut conn) {
                Ok(exists) => exists,
                // A cluster node that neither serves nor replicates the key's slot.
                Err(e) if e.code() == Some("MOVED") => continue,
                Err(e) => return Err(e.into()),
            };
            out.push(NodeKey {
                node,
                primary: is_master(server),
                exists,
            });
        }
        Ok(out)
    }

    /// The hash at `key` on data node `node`, read directly from it (`HGETALL`).
    ///
    /// # Errors
    /// On another topology, or if the node does not answer.
    pub fn hash_on(&self, node: usize, key: &str) -> Result<HashMap<String, String>, BoxError> {
        let server = self
            .data_nodes()?
            .get(node)
            .ok_or_else(|| format!("no data node {node}"))?;
        let mut conn = connect_reading(&server.url())?;
        Ok(redis::cmd("HGETALL").arg(key).query(&mut conn)?)
    }

    /// The running data nodes that replicate from `primary` (`INFO replication`).
    ///
    /// # Errors
    /// On another topology, or if a node does not answer.
    pub fn replicas_of(&self, primary: usize) -> Result<Vec<usize>, BoxError> {
        let nodes = self.data_nodes()?;
        let addr = nodes
            .get(primary)
            .ok_or_else(|| format!("no data node {primary}"))?
            .addr();
        let mut out = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            if i == primary || !n.is_running() {
                continue;
            }
            let mut conn = connect(&n.url())?;
            let info: String = redis::cmd("INFO").arg("replication").query(&mut conn)?;
            let has = |line: String| info.lines().any(|l| l.trim() == line);
            if has(format!("master_host:{}", addr.ip()))
                && has(format!("master_port:{}", addr.port()))
            {
                out.push(i);
            }
        }
        Ok(out)
    }

    fn data_nodes(&self) -> Result<&[RedisServer], BoxError> {
        match &self.processes {
            Processes::Sentinel { set } => Ok(set.nodes()),
            Processes::Cluster { cluster } => Ok(cluster.nodes()),
            _ => Err(not_replicated(self.topology)),
        }
    }
}

fn not_replicated(topology: Topology) -> BoxError {
    format!(
        "failover-lossy and rebalance-lossy need --topology sentinel or cluster (got {}): a failover needs a \
         replica to promote",
        super::topology_name(topology)
    )
    .into()
}

/// Runs a testkit call (which panics on failure) and turns a panic into an error.
fn call<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, BoxError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        format!("{what} failed: {why}").into()
    })
}

fn connect(url: &str) -> Result<redis::Connection, BoxError> {
    let client = redis::Client::open(url)?;
    let conn = client.get_connection_with_timeout(PROBE_TIMEOUT)?;
    conn.set_read_timeout(Some(PROBE_TIMEOUT))?;
    conn.set_write_timeout(Some(PROBE_TIMEOUT))?;
    Ok(conn)
}

/// A connection that may read from a cluster replica (`READONLY`; refused, and not
/// needed, outside a cluster).
fn connect_reading(url: &str) -> Result<redis::Connection, BoxError> {
    let mut conn = connect(url)?;
    let _: redis::RedisResult<Value> = redis::cmd("READONLY").query(&mut conn);
    Ok(conn)
}

/// Whether `server` answers `ROLE` as a master (false if it does not answer).
fn is_master(server: &RedisServer) -> bool {
    if !server.is_running() {
        return false;
    }
    let Ok(mut conn) = connect(&server.url()) else {
        return false;
    };
    match redis::cmd("ROLE").query::<Value>(&mut conn) {
        Ok(Value::Array(items)) => matches!(
            items.first(),
            Some(Value::BulkString(role)) if role.as_slice() == b"master"
        ),
        _ => false,
    }
}

/// The primary the first Sentinel that answers names.
fn sentinel_primary(sentinels: &[String]) -> Result<SocketAddr, String> {
    let mut last = String::from("no Sentinel");
    for url in sentinels {
        let reply = connect(url).map_err(|e| e.to_string()).and_then(|mut c| {
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query::<(String, u16)>(&mut c)
                .map_err(|e| e.to_string())
        });
        match reply {
            Ok((host, port)) => {
                return format!("{host}:{port}")
                    .parse()
                    .map_err(|_| format!("a Sentinel names {host}:{port}"));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}
