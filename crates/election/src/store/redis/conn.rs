//! How a [`super::RedisStore`] reaches Redis: one server, the primary Sentinel names, or a
//! Redis Cluster. The pool's [`Manager`] makes connections for all three.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, RedisError, Value};

/// Where the data lives.
pub(super) enum Target {
    /// One server (or a proxy in front of one): deadpool-redis's own manager makes and
    /// health-checks its connections.
    Node {
        /// For the release subscription.
        client: Client,
        /// Creates connections (with the call timeouts) and recycles them with PING.
        manager: deadpool_redis::Manager,
    },
    /// The primary a quorum of Sentinels names, resolved on every (re)connect.
    Sentinel {
        /// The monitored master's name.
        master: String,
        /// One client per Sentinel, asked in order.
        sentinels: Vec<Client>,
        /// Scheme, credentials, database and TLS settings for the primary; its address
        /// is replaced by the one Sentinel reports.
        primary: ConnectionInfo,
    },
    /// A Redis Cluster: requests are routed by their first key.
    Cluster {
        /// Builds a cluster connection (it discovers the slot map itself).
        client: ClusterClient,
        /// The seed nodes, for the release subscription (a `PUBLISH` reaches every
        /// node of a Redis 7 cluster, so any node will do).
        seeds: Vec<Client>,
    },
}

impl Target {
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }

    /// A client for the release subscription; `attempt` rotates through the candidates
    /// so a dead seed is skipped on the next try.
    pub(super) async fn pubsub_client(
        &self,
        attempt: usize,
        config: &AsyncConnectionConfig,
    ) -> Result<Client, RedisError> {
        match self {
            Self::Node { client, .. } => Ok(client.clone()),
            Self::Sentinel {
                master,
                sentinels,
                primary,
            } => {
                let (client, _) = resolve_primary(master, sentinels, primary, config).await?;
                Ok(client)
            }
            Self::Cluster { seeds, .. } => Ok(seeds[attempt % seeds.len()].clone()),
        }
    }
}

/// A connection of the store's pool.
#[derive(Clone)]
pub(super) enum Conn {
    /// To one server (directly or through Sentinel).
    Node(MultiplexedConnection),
    /// To a cluster (one multiplexed connection per node inside).
    Cluster(ClusterConnection),
}

impl Conn {
    /// How long calls on this handle wait for their reply (a cluster connection keeps
    /// the timeout it was built with).
    pub(super) fn set_response_timeout(&mut self, timeout: Duration) {
        if let Self::Node(c) = self {
            c.set_response_timeout(timeout);
        }
    }

    /// `WAIT replicas timeout` on the node that holds `key` (the node that ran the last
    /// write to it on this connection). Replies the number of replicas that acknowledged.
    pub(super) async fn wait(
        &mut self,
        key: &str,
        replicas: usize,
        timeout: Duration,
    ) -> Result<Value, RedisError> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(
            u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        );
        match self {
            Self::Node(c) => cmd.query_async(c).await,
            // Without a route the cluster client would send WAIT to every primary and
            // reply the minimum.
            Self::Cluster(c) => {
                let route = Route::new(key_slot(key), SlotAddr::Master);
                c.route_command(
                    cmd,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
        }
    }

    /// `cmd` on the `index`-th primary (by address, in order; the one server when not
    /// a cluster): its reply, `None` past the last primary, and how many there are.
    pub(super) async fn on_primary(
        &mut self,
        index: usize,
        cmd: &redis::Cmd,
    ) -> Result<(Option<Value>, usize), RedisError> {
        let Self::Cluster(c) = self else {
            let reply = (index == 0).then_some(self.query_one_node(cmd).await?);
            return Ok((reply, 1));
        };
        let slots: Value = c
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
            )
            .await?;
        let primaries = primaries(&slots);
        let Some((host, port)) = primaries.get(index).cloned() else {
            return Ok((None, primaries.len()));
        };
        let reply = c
            .route_command(
                cmd.clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port }),
            )
            .await?;
        Ok((Some(reply), primaries.len()))
    }

    /// A command without keys, sent to one node (a random primary on a cluster).
    pub(super) async fn query_one_node(&mut self, cmd: &redis::Cmd) -> Result<Value, RedisError> {
        match self {
            Self::Node(c) => cmd.query_async(c).await,
            Self::Cluster(c) => {
                c.route_command(
                    cmd.clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
                )
                .await
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        match self {
            Self::Node(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Node(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Node(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

/// Makes and health-checks the pool's connections.
pub(super) struct Manager {
    pub(super) target: Arc<Target>,
    pub(super) config: AsyncConnectionConfig,
    /// What each new connection is named (`CLIENT SETNAME`), if anything.
    pub(super) client_name: Option<Arc<str>>,
}

/// Names `conn` `name` (`CLIENT SETNAME`; on a cluster, its connection to every node
/// it knows now). Best effort: a server or ACL that refuses leaves it unnamed.
pub(super) async fn set_name(conn: &mut impl ConnectionLike, name: &str) {
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg("SETNAME").arg(name);
    if let Err(e) = cmd.query_async::<Value>(conn).await {
        tracing::debug!(error = %crate::ErrorChain(&e), "CLIENT SETNAME refused; the connection stays unnamed");
    }
}

impl deadpool::managed::Manager for Manager {
    type Type = Conn;
    type Error = RedisError;

    async fn create(&self) -> Result<Conn, RedisError> {
        let mut conn = match &*self.target {
            Target::Node { manager, .. } => deadpool::managed::Manager::create(manager)
                .await
                .map(Conn::Node),
            Target::Sentinel {
                master,
                sentinels,
                primary,
            } => resolve_primary(master, sentinels, primary, &self.config)
                .await
                .map(|(_, conn)| Conn::Node(conn)),
            Target::Cluster { client, .. } => {
                client.get_async_connection().await.map(Conn::Cluster)
            }
        }?;
        if let Some(name) = &self.client_name {
            set_name(&mut conn, name).await;
        }
        Ok(conn)
    }

    async fn recycle(
        &self,
        conn: &mut Conn,
        metrics: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<RedisError> {
        match (conn, &*self.target) {
            (Conn::Node(c), Target::Node { manager, .. }) => manager.recycle(c, metrics).await,
            (Conn::Node(c), _) => {
                redis::cmd("PING").query_async::<Value>(c).await?;
                Ok(())
            }
            // A cluster connection reconnects to nodes and refreshes its slot map by
            // itself; the store discards it after a fault rather than handing it back.
            (Conn::Cluster(_), _) => Ok(()),
        }
    }
}

/// Asks each Sentinel in turn for the primary of `master`, connects to it and checks with
/// `ROLE` that it is a primary (a Sentinel on the wrong side of a partition may name a
/// demoted one). Returns the primary's client and the verified connection.
async fn resolve_primary(
    master: &str,
    sentinels: &[Client],
    primary: &ConnectionInfo,
    config: &AsyncConnectionConfig,
) -> Result<(Client, MultiplexedConnection), RedisError> {
    let mut last = None;
    for sentinel in sentinels {
        let attempt = async {
            let mut conn = sentinel
                .get_multiplexed_async_connection_with_config(config)
                .await?;
            let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(master)
                .query_async(&mut conn)
                .await?;
            let Some((host, port)) = addr else {
                return Err(RedisError::from((
                    redis::ErrorKind::MasterNameNotFoundBySentinel,
                    "sentinel does not monitor this master",
                    master.to_owned(),
                )));
            };
            let client = Client::open(with_addr(primary, host, port))?;
            let mut conn = client
                .get_multiplexed_async_connection_with_config(config)
                .await?;
            let role: Vec<Value> = redis::cmd("ROLE").query_async(&mut conn).await?;
            match role.first() {
                Some(Value::BulkString(r)) if r == b"master" => Ok((client, conn)),
                other => Err(RedisError::from((
                    redis::ErrorKind::Client,
                    "the node sentinel names is not a primary (yet)",
                    format!("{other:?}"),
                ))),
            }
        };
        match attempt.await {
            Ok(found) => return Ok(found),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        RedisError::from((redis::ErrorKind::InvalidClientConfig, "no sentinel given"))
    }))
}

/// `template` with its host and port replaced, keeping TLS settings and credentials.
fn with_addr(template: &ConnectionInfo, host: String, port: u16) -> ConnectionInfo {
    let addr = match template.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    template.clone().set_addr(addr)
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (the part
/// between the first `{` and the next `}`, if not empty) or of the whole key, mod 16384.
pub(super) fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = bytes
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&len| len > 0)
                .map(|len| &rest[..len])
        })
        .unwrap_or(bytes);
    crc16(hashed) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The primaries' addresses in a `CLUSTER SLOTS` reply (each range's first node),
/// sorted and without repeats.
fn primaries(slots: &Value) -> Vec<(String, u16)> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let mut out: Vec<(String, u16)> = match slots {
        Value::Array(ranges) => ranges
            .iter()
            .filter_map(|range| match range {
                Value::Array(r) => match r.get(2) {
                    Some(Value::Array(node)) => {
                        let host = node.first().and_then(text)?;
                        let port = match node.get(1) {
                            Some(Value::Int(p)) => u16::try_from(*p).ok(),
                            _ => None,
                        }?;
                        Some((host, port))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::key_slot;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.0.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("123456789"), 12739);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("a{}b"), key_slot("a{}b"));
        assert_ne!(key_slot("{}foo"), key_slot("foo"));
        assert_eq!(
            key_slot("leasehold:{jobs}:lease"),
            key_slot("leasehold:{jobs}:fence")
        );
    }

    #[test]
    fn the_primaries_of_a_slot_map_are_each_ranges_first_node_once() {
        use redis::Value;
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let range = |a: i64, b: i64, nodes: Vec<Value>| {
            let mut r = vec![Value::Int(a), Value::Int(b)];
            r.extend(nodes);
            Value::Array(r)
        };
        let slots = Value::Array(vec![
            range(
                0,
                5000,
                vec![node("10.0.0.2", 7001), node("10.0.0.5", 7004)],
            ),
            range(5001, 10000, vec![node("10.0.0.1", 7000)]),
            range(10001, 12000, vec![node("10.0.0.2", 7001)]),
            range(12001, 16383, vec![node("10.0.0.3", 7002)]),
        ]);
        assert_eq!(
            super::primaries(&slots),
            [
                ("10.0.0.1".to_owned(), 7000),
                ("10.0.0.2".to_owned(), 7001),
                ("10.0.0.3".to_owned(), 7002)
            ]
        );
        assert!(super::primaries(&Value::Nil).is_empty());
    }
}
