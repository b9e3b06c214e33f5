//! Replication that can be cut: every replica of a [`RedisSentinelSet`] or a
//! [`RedisCluster`] authenticates to its primary as its own user, so a test can refuse
//! that user on the primary and drop its connections. The primary then goes on
//! acknowledging writes that no replica receives, which is the window a failover to a
//! replica loses: the tests of failover safety open it on purpose.
//!
//! [`RedisSentinelSet`]: crate::RedisSentinelSet
//! [`RedisCluster`]: crate::RedisCluster

use std::time::Duration;

use crate::server::RedisServer;
use crate::tools::poll;

/// The user replicas authenticate to their primary as.
pub(crate) const USER: &str = "leasehold-replication";

/// Arguments every data node starts with: the replication user, and the credentials a
/// replica presents to its primary.
pub(crate) const NODE_ARGS: [&str; 11] = [
    "--user",
    USER,
    "on",
    ">replication",
    "~*",
    "&*",
    "+@all",
    "--masteruser",
    USER,
    "--masterauth",
    "replication",
];

/// How long a replica may take to notice that its link is down.
const NOTICE: Duration = Duration::from_secs(10);

/// Cuts `primary` off from its replicas: the replication user is disabled on it and its
/// connections killed, so replicas cannot resynchronise, and every write from now on
/// lives on `primary` only. Returns once every one of `replicas` reports its link down.
///
/// # Panics
///
/// If `primary` refuses the commands or a replica still reports its link up after 10 s.
pub(crate) fn cut(primary: &RedisServer, replicas: &[&RedisServer]) {
    let off = primary.redis_cli(&["ACL", "SETUSER", USER, "off"]);
    assert_eq!(off, "OK", "ACL SETUSER {USER} off: {off}");
    primary.redis_cli(&["CLIENT", "KILL", "USER", USER]);
    for replica in replicas {
        poll("a replica cut off from its primary", NOTICE, || {
            let info = replica.redis_cli(&["INFO", "replication"]);
            info.contains("master_link_status:down")
                .then_some(())
                .ok_or(info)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Lets replicas of `primary` connect again (after [`cut`]).
///
/// # Panics
///
/// If `primary` refuses the command.
pub(crate) fn mend(primary: &RedisServer) {
    let on = primary.redis_cli(&["ACL", "SETUSER", USER, "on"]);
    assert_eq!(on, "OK", "ACL SETUSER {USER} on: {on}");
}
