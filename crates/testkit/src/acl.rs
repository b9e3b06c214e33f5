//! The minimal ACL rule for a Leasehold user, shared by every test that checks it.

/// The commands of the minimal rule, exactly as `docs/topologies.md` prints it: enough
/// for elections, partition groups, release notifications and fenced writes.
pub const MINIMAL_ACL_COMMANDS: &str = "-@all +evalsha +eval +get +set +del +pexpire +pttl +time +info +publish +zadd +zrem +zcard +zscore +zrange +zrangebyscore +zrangebylex +zlexcount +zpopmin +zmscore +zrevrange +hget +hset +hdel +hmget +hlen +hgetall +hvals +hexists +hincrby +type +xadd +xrange +xrevrange +rpush +ping +subscribe";

/// The key and channel patterns of the minimal rule.
pub const MINIMAL_ACL_PATTERNS: &str = "~leasehold:* &leasehold:*";

/// The whole documented rule for user `leasehold` with password `secret`.
pub fn minimal_acl_rule() -> String {
    format!("user leasehold on >secret resetchannels {MINIMAL_ACL_PATTERNS} {MINIMAL_ACL_COMMANDS}")
}

/// `redis-server` arguments (`--user ...`) defining `name` with password `secret`.
pub fn acl_user_args(name: &str, patterns: &str, commands: &str) -> Vec<String> {
    let rule = format!("{name} on >secret resetchannels {patterns} {commands}");
    std::iter::once("--user")
        .chain(rule.split_whitespace())
        .map(str::to_owned)
        .collect()
}

/// `redis-server` arguments defining the `leasehold` user with the minimal rule.
pub fn minimal_acl_user_args() -> Vec<String> {
    acl_user_args("leasehold", MINIMAL_ACL_PATTERNS, MINIMAL_ACL_COMMANDS)
}
