//! A primary, its replicas and three Sentinels on loopback.

use std::fs::{self, File};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::replication;
use crate::server::{RedisServer, free_port, ping};
use crate::tools::{poll, sentinel_command};

/// The master name the Sentinels monitor.
pub const MASTER_NAME: &str = "leasehold";

/// How long starting the set, or a failover, may take before it is reported as failed.
const SETTLE: Duration = Duration::from_secs(30);

/// A primary, `replicas` replicas (`--replicaof`) and three Sentinels, all on loopback,
/// monitoring the primary as [`MASTER_NAME`] with quorum 2, `down-after-milliseconds`
/// 1000 and `failover-timeout` 5000: a killed primary is replaced in about 2–4 s.
///
/// Sentinels run as `redis-sentinel <conf>` if it is on `PATH`, else as
/// `redis-server <conf> --sentinel`. Dropping the value kills every process.
#[derive(Debug)]
pub struct RedisSentinelSet {
    /// Data nodes; index 0 starts as the primary. Entries are never removed, so an index
    /// names the same node (and port) for the life of the set.
    nodes: Vec<RedisServer>,
    sentinels: Vec<SentinelProcess>,
}

impl RedisSentinelSet {
    /// Starts one primary, `replicas` replicas and three Sentinels, and waits until every
    /// replica is in sync and every Sentinel knows the replicas and the other Sentinels.
    ///
    /// # Panics
    ///
    /// If `redis-server` is missing (with installation guidance) or the set does not
    /// settle within 30 s.
    pub fn start(replicas: usize) -> Self {
        Self::start_with_args(replicas, &[])
    }

    /// Like [`start`](Self::start), passing `extra` to every data node (e.g. `--user`
    /// rules). Sentinels connect as the default user, so leave it enabled.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with_args(replicas: usize, extra: &[&str]) -> Self {
        let mut node_args = replication::NODE_ARGS.to_vec();
        node_args.extend_from_slice(extra);
        let primary = RedisServer::start_with_args(&node_args);
        let primary_port = primary.port().to_string();
        let mut nodes = vec![primary];
        for _ in 0..replicas {
            let mut args = vec!["--replicaof", "127.0.0.1", &primary_port];
            args.extend_from_slice(&node_args);
            nodes.push(RedisServer::start_with_args(&args));
        }
        for replica in &nodes[1..] {
            poll("replica in sync", SETTLE, || {
                let info = replica.redis_cli(&["INFO", "replication"]);
                info.contains("master_link_status:up")
                    .then_some(())
                    .ok_or(info)
            })
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let sentinels: Vec<_> = (0..3)
            .map(|_| SentinelProcess::start(nodes[0].port()).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let set = Self { nodes, sentinels };
        for s in &set.sentinels {
            poll("sentinels discover each other", SETTLE, || {
                let info = s.master_info()?;
                let field = |name: &str| {
                    info.windows(2)
                        .find(|w| w[0] == name)
                        .map(|w| w[1].clone())
                        .unwrap_or_default()
                };
                let (others, seen) = (field("num-other-sentinels"), field("num-slaves"));
                (others == "2" && seen == replicas.to_string())
                    .then_some(())
                    .ok_or(format!("other sentinels {others}, replicas {seen}"))
            })
            .unwrap_or_else(|e| panic!("{e}"));
        }
        set
    }

    /// `redis://127.0.0.1:PORT/` of each Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}/", s.port))
            .collect()
    }

    /// The data nodes: index 0 started as the primary, the others as its replicas.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The data nodes, mutably (to stop, pause or restart one).
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The primary's address as the first Sentinel that answers reports it.
    ///
    /// # Panics
    ///
    /// If no Sentinel answers.
    pub fn primary_addr(&self) -> SocketAddr {
        self.sentinels
            .iter()
            .find_map(|s| s.primary_addr().ok())
            .expect("no sentinel answered")
    }

    /// The index in [`nodes`](Self::nodes) of the node the Sentinels call primary.
    ///
    /// # Panics
    ///
    /// If no Sentinel answers or the primary is not one of the nodes.
    pub fn primary_index(&self) -> usize {
        let addr = self.primary_addr();
        self.nodes
            .iter()
            .position(|n| n.addr() == addr)
            .unwrap_or_else(|| panic!("sentinel reports an unknown primary {addr}"))
    }

    /// Waits until the Sentinels report a primary other than `old` and that node answers
    /// `ROLE` as a master; returns its index in [`nodes`](Self::nodes).
    ///
    /// # Panics
    ///
    /// If that does not happen within 30 s.
    pub fn wait_for_new_primary(&self, old: usize) -> usize {
        poll("a promoted primary", SETTLE, || {
            let addr = self
                .sentinels
                .iter()
                .find_map(|s| s.primary_addr().ok())
                .ok_or("no sentinel answered")?;
            let index = self
                .nodes
                .iter()
                .position(|n| n.addr() == addr)
                .ok_or(format!("unknown primary {addr}"))?;
            if index == old {
                return Err("still the old primary".to_owned());
            }
            let role = self.nodes[index].redis_cli(&["ROLE"]);
            role.starts_with("master")
                .then_some(index)
                .ok_or(format!("{addr} says {role}"))
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }
}

impl RedisSentinelSet {
    /// Cuts the current primary off from its replicas: from now on it acknowledges
    /// writes that no replica receives (replicas authenticate as a user of their own,
    /// which this disables on the primary; their connections are killed). Sentinels
    /// still reach every node, so killing the primary now makes them promote a replica
    /// that lacks every write since this call: a failover that loses writes. Returns
    /// once every replica reports its link down. [`mend_replication`] undoes it.
    ///
    /// [`mend_replication`]: Self::mend_replication
    ///
    /// # Panics
    ///
    /// If no Sentinel answers, the primary refuses the commands, or a replica still
    /// reports its link up after 10 s.
    pub fn cut_replication(&self) {
        let primary = self.primary_index();
        let replicas: Vec<&RedisServer> = (0..self.nodes.len())
            .filter(|&i| i != primary && self.nodes[i].is_running())
            .map(|i| &self.nodes[i])
            .collect();
        replication::cut(&self.nodes[primary], &replicas);
    }

    /// Lets the replicas of the current primary connect to it again.
    ///
    /// # Panics
    ///
    /// If no Sentinel answers or the primary refuses the command.
    pub fn mend_replication(&self) {
        replication::mend(&self.nodes[self.primary_index()]);
    }
}

/// One Sentinel process with its own directory and config file.
#[derive(Debug)]
struct SentinelProcess {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl SentinelProcess {
    fn start(primary_port: u16) -> io::Result<Self> {
        let mut last = None;
        for _ in 0..5 {
            match Self::try_start(primary_port) {
                Ok(s) => return Ok(s),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("an attempt"))
    }

    fn try_start(primary_port: u16) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("leasehold-sentinel-")
            .tempdir()?;
        let port = free_port()?;
        let conf: PathBuf = dir.path().join("sentinel.conf");
        let log = dir.path().join("sentinel.log");
        fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {log}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = dir.path().display(),
                log = log.display(),
            ),
        )?;
        let stdio = File::create(dir.path().join("stdio.log"))?;
        let mut child = sentinel_command(&conf)?
            .stdin(Stdio::null())
            .stdout(stdio.try_clone()?)
            .stderr(stdio)
            .spawn()?;
        let ready = poll("sentinel answers PING", Duration::from_secs(10), || {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("sentinel exited with {status}"));
            }
            ping(port).map_err(|e| e.to_string())
        });
        match ready {
            Ok(()) => Ok(Self {
                child,
                port,
                _dir: dir,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                let tail = fs::read_to_string(&log).unwrap_or_default();
                Err(io::Error::new(e.kind(), format!("{e}\n{tail}")))
            }
        }
    }

    fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("valid url")
    }

    fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, String> {
        let mut conn = self
            .client()
            .get_connection_with_timeout(Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))
            .map_err(|e| e.to_string())?;
        cmd.query(&mut conn).map_err(|e| e.to_string())
    }

    fn master_info(&self) -> Result<Vec<String>, String> {
        self.query(redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME))
    }

    fn primary_addr(&self) -> Result<SocketAddr, String> {
        let (host, port): (String, u16) = self.query(
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME),
        )?;
        let ip: Ipv4Addr = host.parse().map_err(|_| format!("not an IPv4: {host}"))?;
        Ok(SocketAddr::from((ip, port)))
    }
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
