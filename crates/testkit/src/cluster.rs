//! A Redis Cluster on loopback.

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use redis::Value;

use crate::replication;
use crate::server::RedisServer;
use crate::tools::{poll, redis_cli};

/// How long creating the cluster, or a failover, may take before it is reported as failed.
const SETTLE: Duration = Duration::from_secs(30);

/// `primaries` primaries with `replicas` replicas each, joined into one cluster with
/// `redis-cli --cluster create` (`cluster-node-timeout` 1000 ms, so a killed primary is
/// replaced by its replica in about 2–3 s).
///
/// Each node is a [`RedisServer`] with its own directory; [`RedisServer::stop`] on one
/// is a node crash. Dropping the value kills every node.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts the nodes, creates the cluster and waits until every node reports
    /// `cluster_state:ok`, agrees on the slot map and every replica is in sync.
    ///
    /// # Panics
    ///
    /// If `redis-server` or `redis-cli` is missing (with installation guidance), or the
    /// cluster does not form within 30 s.
    pub fn start(primaries: usize, replicas: usize) -> Self {
        Self::start_with_args(primaries, replicas, &[])
    }

    /// Like [`start`](Self::start), passing `extra` to every node (e.g. `--user` rules;
    /// `redis-cli` and the helpers connect as the default user, so leave it enabled).
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with_args(primaries: usize, replicas: usize, extra: &[&str]) -> Self {
        assert!(primaries >= 3, "redis-cli needs at least 3 primaries");
        let cli = redis_cli().unwrap_or_else(|e| panic!("{e}"));
        let nodes: Vec<RedisServer> = (0..primaries * (1 + replicas))
            .map(|_| {
                let mut args = vec![
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    // Any replica may be promoted, however long it was disconnected.
                    "--cluster-replica-validity-factor",
                    "0",
                ];
                args.extend_from_slice(&replication::NODE_ARGS);
                args.extend_from_slice(extra);
                RedisServer::start_with_args(&args)
            })
            .collect();
        let cluster = Self { nodes };
        let addrs: Vec<String> = cluster.nodes.iter().map(|n| n.addr().to_string()).collect();
        poll("redis-cli --cluster create", SETTLE, || {
            let log = cluster.nodes[0]
                .log_path()
                .with_file_name("cluster-create.log");
            let out = File::create(&log).map_err(|e| e.to_string())?;
            let status = Command::new(&cli)
                .arg("--cluster")
                .arg("create")
                .args(&addrs)
                .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
                .stdin(Stdio::null())
                .stdout(out.try_clone().map_err(|e| e.to_string())?)
                .stderr(out)
                .status()
                .map_err(|e| e.to_string())?;
            status.success().then_some(()).ok_or_else(|| {
                format!(
                    "{status}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            })
        })
        .unwrap_or_else(|e| panic!("{e}"));
        cluster.wait_until_healthy();
        cluster
    }

    /// Waits until every running node reports `cluster_state:ok` and the same slot map,
    /// every slot is served, and every replica's link to its primary is up.
    ///
    /// # Panics
    ///
    /// If that does not happen within 30 s.
    pub fn wait_until_healthy(&self) {
        poll("a healthy cluster", SETTLE, || {
            let mut maps = Vec::new();
            for node in self.running() {
                let info = node.redis_cli(&["CLUSTER", "INFO"]);
                if !info.contains("cluster_state:ok") {
                    return Err(format!("{}: not ok", node.addr()));
                }
                let role = node.redis_cli(&["ROLE"]);
                if role.starts_with("slave") && !role.contains("connected") {
                    return Err(format!("{}: replica not in sync: {role}", node.addr()));
                }
                maps.push(slot_map(node).map_err(|e| e.to_string())?);
            }
            let first = maps.first().ok_or("no node is running")?;
            if maps.iter().any(|m| m != first) {
                return Err("nodes disagree on the slot map".into());
            }
            let covered: u32 = first.iter().map(|(a, b, _)| u32::from(b - a) + 1).sum();
            (covered == 16384)
                .then_some(())
                .ok_or(format!("{covered} slots served"))
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// `redis://127.0.0.1:PORT/` of every node (primaries and replicas), in node order.
    pub fn node_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The nodes, mutably (to stop, pause or restart one).
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of a running node).
    ///
    /// # Panics
    ///
    /// If no node is running or the reply is not an integer.
    pub fn keyslot(&self, key: &str) -> u16 {
        let node = self.running().next().expect("no node is running");
        let reply = node.redis_cli(&["CLUSTER", "KEYSLOT", key]);
        reply
            .strip_prefix("(integer) ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("CLUSTER KEYSLOT replied {reply}"))
    }

    /// The index in [`nodes`](Self::nodes) of the primary serving `slot`, according to
    /// the first running node.
    ///
    /// # Panics
    ///
    /// If no node is running or the slot is not served by a known node.
    pub fn primary_for_slot(&self, slot: u16) -> usize {
        let node = self.running().next().expect("no node is running");
        let map = slot_map(node).unwrap_or_else(|e| panic!("CLUSTER SLOTS: {e}"));
        let addr = map
            .iter()
            .find(|(a, b, _)| (*a..=*b).contains(&slot))
            .map(|(_, _, addr)| *addr)
            .unwrap_or_else(|| panic!("slot {slot} is not served"));
        self.nodes
            .iter()
            .position(|n| n.addr() == addr)
            .unwrap_or_else(|| panic!("slot {slot} is served by an unknown node {addr}"))
    }

    /// The index of the primary serving `key`.
    ///
    /// # Panics
    ///
    /// As [`primary_for_slot`](Self::primary_for_slot).
    pub fn primary_for_key(&self, key: &str) -> usize {
        self.primary_for_slot(self.keyslot(key))
    }

    /// Moves `slot` to primary `to` (an index in [`nodes`](Self::nodes)) the way
    /// `redis-cli --cluster reshard` does: `IMPORTING` on the target, `MIGRATING` on the
    /// source, then `MIGRATE` one key at a time with `pause` between keys (while clients
    /// keep working: a multi-key command whose keys are split between the two nodes
    /// gets `TRYAGAIN`, one whose keys have all moved gets `ASK`), and finally
    /// `SETSLOT NODE` on every primary. Returns how many keys moved.
    ///
    /// # Panics
    ///
    /// If `to` already serves the slot, or a step fails.
    pub fn migrate_slot(&self, slot: u16, to: usize, pause: Duration) -> usize {
        let from = self.primary_for_slot(slot);
        assert_ne!(from, to, "node {to} already serves slot {slot}");
        let id = |i: usize| {
            let id = self.nodes[i].redis_cli(&["CLUSTER", "MYID"]);
            id.trim_matches('"').to_owned()
        };
        let (from_id, to_id) = (id(from), id(to));
        let slot_arg = slot.to_string();
        let ok = |node: usize, args: &[&str]| {
            let reply = self.nodes[node].redis_cli(args);
            assert!(
                reply == "OK" || reply == "\"OK\"",
                "{args:?} on node {node}: {reply}"
            );
        };
        ok(
            to,
            &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from_id],
        );
        ok(
            from,
            &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to_id],
        );
        let mut conn = self.nodes[from]
            .client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("a connection to the source");
        conn.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("set read timeout");
        let target = self.nodes[to].addr();
        let mut moved = 0;
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(1)
                .query(&mut conn)
                .expect("CLUSTER GETKEYSINSLOT");
            let Some(key) = keys.first() else { break };
            let _: Value = redis::cmd("MIGRATE")
                .arg(target.ip().to_string())
                .arg(target.port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(key)
                .query(&mut conn)
                .unwrap_or_else(|e| panic!("MIGRATE {key}: {e}"));
            moved += 1;
            std::thread::sleep(pause);
        }
        // The target first, then the source, then everyone else (as redis-cli does).
        ok(to, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]);
        ok(from, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]);
        for (i, node) in self.nodes.iter().enumerate() {
            if i != to
                && i != from
                && node.is_running()
                && !node.redis_cli(&["ROLE"]).starts_with("slave")
            {
                ok(i, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]);
            }
        }
        moved
    }

    /// Cuts primary `primary` (an index in [`nodes`](Self::nodes)) off from its
    /// replicas: from now on it acknowledges writes for its slots that no replica
    /// receives (replicas authenticate as a user of their own, which this disables on
    /// the primary; their connections are killed). The cluster bus is untouched, so
    /// killing the primary now makes the cluster promote a replica that lacks every
    /// write since this call: a failover that loses writes. Returns once every replica
    /// of it reports its link down. [`mend_replication`](Self::mend_replication) undoes
    /// it.
    ///
    /// # Panics
    ///
    /// If the node refuses the commands, or a replica still reports its link up after
    /// 10 s.
    pub fn cut_replication(&self, primary: usize) {
        let addr = self.nodes[primary].addr();
        let replicas: Vec<&RedisServer> = self
            .running()
            .filter(|n| {
                let info = n.redis_cli(&["INFO", "replication"]);
                let has = |line: String| info.lines().any(|l| l.trim() == line);
                has(format!("master_host:{}", addr.ip()))
                    && has(format!("master_port:{}", addr.port()))
            })
            .collect();
        replication::cut(&self.nodes[primary], &replicas);
    }

    /// Lets the replicas of primary `primary` connect to it again.
    ///
    /// # Panics
    ///
    /// If the node refuses the command.
    pub fn mend_replication(&self, primary: usize) {
        replication::mend(&self.nodes[primary]);
    }

    fn running(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| n.is_running())
    }
}

/// `CLUSTER SLOTS` of one node as sorted (first slot, last slot, primary address).
fn slot_map(node: &RedisServer) -> io::Result<Vec<(u16, u16, SocketAddr)>> {
    let mut conn = node
        .client()
        .get_connection_with_timeout(Duration::from_secs(2))
        .map_err(io::Error::other)?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(io::Error::other)?;
    let reply: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut conn)
        .map_err(io::Error::other)?;
    let bad = || {
        io::Error::other(format!(
            "unexpected CLUSTER SLOTS reply from {}",
            node.addr()
        ))
    };
    let Value::Array(ranges) = reply else {
        return Err(bad());
    };
    let mut map = Vec::new();
    for range in ranges {
        let Value::Array(items) = range else {
            return Err(bad());
        };
        let (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(primary))) =
            (items.first(), items.get(1), items.get(2))
        else {
            return Err(bad());
        };
        let (Some(Value::BulkString(host)), Some(Value::Int(port))) =
            (primary.first(), primary.get(1))
        else {
            return Err(bad());
        };
        let addr: SocketAddr = format!("{}:{port}", String::from_utf8_lossy(host))
            .parse()
            .map_err(|_| bad())?;
        let slot = |v: i64| u16::try_from(v).map_err(|_| bad());
        map.push((slot(*a)?, slot(*b)?, addr));
    }
    map.sort_unstable();
    Ok(map)
}
