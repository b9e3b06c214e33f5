#![doc = include_str!("../README.md")]

mod acl;
mod cluster;
mod lua;
mod proxy;
mod replication;
mod sentinel;
mod server;
#[cfg(feature = "tls")]
mod tls;
mod tools;

pub use acl::{
    MINIMAL_ACL_COMMANDS, MINIMAL_ACL_PATTERNS, acl_user_args, minimal_acl_rule,
    minimal_acl_user_args,
};
pub use cluster::RedisCluster;
pub use lua::{documented_reply_shapes, reply_of};
pub use proxy::FaultProxy;
pub use sentinel::{MASTER_NAME, RedisSentinelSet};
pub use server::{REDIS_SERVER_ENV, RedisServer};
#[cfg(feature = "tls")]
pub use tls::{ClientAuth, TestCa, TlsRedisServer};
pub use tools::REDIS_CLI_ENV;
