//! Test support for Leasehold (dev-dependency only).
//!
//! - [`RedisServer`] runs a throwaway `redis-server` child process on a free loopback port,
//!   with its own temporary directory and no persistence. Tests can [`restart`],
//!   [`stop`], [`pause`] and [`resume`] it. It is never skipped: if `redis-server` is
//!   missing, starting one panics with installation guidance.
//! - [`FaultProxy`] is an in-process tokio TCP relay placed between a client and Redis that
//!   can add latency, black-hole traffic (a healable partition) or reset connections.
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

mod proxy;
mod server;

pub use proxy::FaultProxy;
pub use server::{REDIS_SERVER_ENV, RedisServer};
