//! Test support for Leasehold (dev-dependency only).
//!
//! - [`RedisServer`] runs a throwaway `redis-server` child process on a free loopback port,
//!   with its own temporary directory and no persistence. Tests can [`restart`],
//!   [`stop`], [`pause`] and [`resume`] it. It is never skipped: if `redis-server` is
//!   missing, starting one panics with installation guidance.
//! - [`FaultProxy`] is an in-process tokio TCP relay placed between a client and Redis that
//!   can add latency, black-hole traffic (a healable partition) or reset connections.
//! - Production topologies, each from real processes:
//!   - [`TlsRedisServer`]: a server with a TLS port and certificates from a throwaway
//!     [`TestCa`] (generated with `rcgen`);
//!   - [`RedisSentinelSet`]: a primary, replicas and three Sentinels;
//!   - [`RedisCluster`]: a Redis Cluster created with `redis-cli --cluster create`.
//!
//!   Each panics with an installation hint if a binary it needs (`redis-server`,
//!   `redis-cli`) is missing. ACL users need no helper: pass `--user` rules to
//!   [`RedisServer::start_with_args`], one rule per argument.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use leasehold_testkit::{FaultProxy, RedisServer};
//!
//! let redis = RedisServer::start();
//! let proxy = FaultProxy::start(redis.addr()).await?;
//! let client = redis::Client::open(proxy.url()).unwrap();
//! proxy.blackhole(); // requests through `client` now hang until `proxy.pass()`
//! # Ok(())
//! # }
//! ```
//!
//! [`restart`]: RedisServer::restart
//! [`stop`]: RedisServer::stop
//! [`pause`]: RedisServer::pause
//! [`resume`]: RedisServer::resume

mod acl;
mod cluster;
mod proxy;
mod sentinel;
mod server;
mod tls;
mod tools;

pub use acl::{
    MINIMAL_ACL_COMMANDS, MINIMAL_ACL_PATTERNS, acl_user_args, minimal_acl_rule,
    minimal_acl_user_args,
};
pub use cluster::RedisCluster;
pub use proxy::FaultProxy;
pub use sentinel::{MASTER_NAME, RedisSentinelSet};
pub use server::{REDIS_SERVER_ENV, RedisServer};
pub use tls::{ClientAuth, TestCa, TlsRedisServer};
pub use tools::REDIS_CLI_ENV;
