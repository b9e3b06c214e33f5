//! Picks the store: `REDIS_URL`, else a private redis-server, else the in-memory store.

use std::io;
use std::time::Duration;

use leasehold_election::DEFAULT_KEY_PREFIX;
use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, MemoryGroupStore};

use leasehold_testkit::RedisServer;

use crate::BoxError;

/// How long the first round trip to a given `REDIS_URL` may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The store the replicas share.
#[derive(Debug)]
pub(crate) enum Store {
    /// The embedded store: replicas are tasks in this process.
    Memory(MemoryGroupStore),
    /// A Redis server; each replica gets its own `RedisStore` (connection pool).
    Redis {
        /// `redis://...`.
        url: String,
        /// Our private server, killed when dropped.
        _server: Option<RedisServer>,
    },
}

/// A store and the line that says which one it is.
#[derive(Debug)]
pub(crate) struct Chosen {
    /// The store.
    pub(crate) store: Store,
    /// e.g. `private redis-server on 127.0.0.1:41234`.
    pub(crate) description: String,
    /// The same without addresses, for the plot's title (a private port means
    /// nothing to its reader): e.g. `private redis-server`.
    pub(crate) kind: String,
}

/// `--memory` wins, then `redis_url` (checked with one round trip), then a private
/// redis-server if one is installed, then the in-memory store. Prints one line per slow
/// step and one line saying which store runs. A private server is given `lease` (and a
/// second, its uptime's unit) to age before the fleet starts, as a Redis that has been
/// running for a while has: on a server younger than a lease a new group holds its
/// grants back for a lease (docs/guarantees.md), and the demo shows the usual start.
///
/// # Errors
/// If `redis_url` is malformed or unreachable (a given URL is never silently replaced).
pub(crate) async fn choose(
    memory: bool,
    redis_url: Option<String>,
    lease: Duration,
) -> Result<Chosen, BoxError> {
    if memory {
        println!(
            "using the embedded in-memory store (--memory): replicas are tasks in this process"
        );
        return Ok(memory_store("in-memory store"));
    }
    if let Some(url) = redis_url {
        println!("connecting to {url} ...");
        let store = RedisStore::builder(url.as_str())
            .call_timeout(CONNECT_TIMEOUT)
            .build()?;
        tokio::time::timeout(CONNECT_TIMEOUT, async {
            GroupAdmin::new(store.clone(), "leasehold-demo-ping")?
                .with_key_prefix(DEFAULT_KEY_PREFIX)?
                .status()
                .await
        })
        .await
        .map_err(|_| format!("no answer from {url} within {CONNECT_TIMEOUT:?}"))?
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
        println!(
            "using Redis at {url}: replicas are tasks in this process, each with its own connection pool"
        );
        return Ok(Chosen {
            description: format!("Redis at {url}"),
            kind: "Redis (REDIS_URL)".to_owned(),
            store: Store::Redis { url, _server: None },
        });
    }
    println!("starting a private redis-server on a free loopback port ...");
    match tokio::task::spawn_blocking(RedisServer::try_start).await? {
        Ok(server) => {
            let addr = server.addr();
            let age = lease + Duration::from_secs(1);
            println!(
                "letting the new server run for {:.1} s: a new group on a server younger than a lease holds its grants back for a lease (a Redis that has been up for a while needs no wait)",
                age.as_secs_f64()
            );
            tokio::time::sleep(age).await;
            println!(
                "using a private redis-server on {addr}: replicas are tasks in this process, each with its own connection pool"
            );
            Ok(Chosen {
                description: format!("private redis-server on {addr}"),
                kind: "private redis-server".to_owned(),
                store: Store::Redis {
                    url: server.url(),
                    _server: Some(server),
                },
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            println!(
                "redis-server not found: running on the embedded in-memory store instead (replicas are tasks in this process; install redis-server or set REDIS_URL for real Redis)"
            );
            Ok(memory_store("in-memory store (no redis-server installed)"))
        }
        Err(e) => {
            let first = e.to_string();
            let first = first.lines().next().unwrap_or_default();
            println!(
                "redis-server did not start ({first}): running on the embedded in-memory store instead"
            );
            Ok(memory_store(
                "in-memory store (redis-server failed to start)",
            ))
        }
    }
}

fn memory_store(description: &str) -> Chosen {
    Chosen {
        store: Store::Memory(MemoryGroupStore::new()),
        description: description.to_owned(),
        kind: "in-memory store".to_owned(),
    }
}
