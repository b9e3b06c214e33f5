//! An ACL user restricted to the Leasehold key prefix and channel: the minimal rule in
//! `docs/topologies.md` is enough for electing, release notifications and fenced writes,
//! and a user with fewer rights gets a typed `NoPermission` error in the elector's status.

mod support;

use std::time::Duration;

use leasehold_election::{
    Elector, Fence, FencedWriter, Leadership, LeaseStore, RedisStore, StoreError, current_leader,
};
use leasehold_testkit::{
    MASTER_NAME, MINIMAL_ACL_COMMANDS as MINIMAL_COMMANDS, MINIMAL_ACL_PATTERNS, RedisCluster,
    RedisSentinelSet, RedisServer, acl_user_args as user_args, minimal_acl_user_args,
};
use support::{Terms, config, recheck_now, slow_to_recheck, store};
use tokio::time::{Instant, timeout};

const WAIT: Duration = Duration::from_secs(10);

fn acl_server() -> RedisServer {
    let mut args = minimal_acl_user_args();
    // Everything, but on other keys.
    args.extend(user_args("stranger", "~other:* &other:*", "+@all"));
    // The minimal rule without scripting.
    let no_scripts = MINIMAL_COMMANDS
        .replace(" +evalsha", "")
        .replace(" +eval", "");
    args.extend(user_args("noscripts", MINIMAL_ACL_PATTERNS, &no_scripts));
    // The minimal rule without the commands the scripts call.
    args.extend(user_args(
        "nowrites",
        MINIMAL_ACL_PATTERNS,
        "-@all +evalsha +eval +ping +subscribe",
    ));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    RedisServer::start_with_args(&args)
}

fn url_as(redis: &RedisServer, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}/", redis.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_acl_user_elects_hands_over_by_notification_and_writes_fenced() {
    let redis = acl_server();
    let url = url_as(&redis, "leasehold", "secret");
    let terms = Terms::default();
    let a = terms.spawn(store(&url), config("job", "a", 3_000));
    let fence = timeout(WAIT, a.wait_until_leader())
        .await
        .expect("a leads")
        .unwrap();
    // b re-checks only when a's lease runs out: it can take over quickly only through
    // the release notification.
    let b = terms.spawn(store(&url), slow_to_recheck("job", "b", 3_000));

    // The self-check needs `config|get`, which the rule leaves out: it degrades to
    // "cannot tell" without an error.
    assert_eq!(store(&url).self_check().await.unwrap(), vec![]);

    // Fenced writes to a key under the prefix; its guard key shares the hash tag.
    let writer = FencedWriter::new(store(&url));
    writer
        .rpush("leasehold:{ledger}", "entry", fence)
        .await
        .unwrap();
    writer
        .set("leasehold:{ledger}:state", "x", fence)
        .await
        .unwrap();
    assert!(
        writer
            .set("leasehold:{ledger}:state", "y", Fence(fence.get() - 1))
            .await
            .is_err()
    );
    // A raise, and a batch (which checks its keys' types with TYPE before writing).
    writer
        .raise("leasehold:{ledger}:cursor", fence)
        .await
        .unwrap();
    writer
        .batch()
        .rpush("leasehold:{ledger}", "entry-2")
        .set("leasehold:{ledger}:cursor", "2")
        .hset("leasehold:{ledger}:meta", "by", "a")
        .commit(fence)
        .await
        .unwrap();
    assert_eq!(
        redis.redis_cli(&["LLEN", "leasehold:{ledger}"]),
        "(integer) 2"
    );

    let leader = current_leader(&store(&url), "leasehold", "job")
        .await
        .unwrap()
        .expect("a holds the lease");
    assert_eq!(leader.replica_id, "a");

    // b is woken by the release PUBLISH (inside the release script) over its
    // subscription: both need the channel pattern and the pub/sub commands. A first
    // notification makes b re-check now, so its own timer is then 2 s away or more.
    tokio::time::sleep(Duration::from_millis(300)).await;
    recheck_now(&redis, "job");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let start = Instant::now();
    a.shutdown().await;
    timeout(WAIT, b.wait_until_leader())
        .await
        .expect("b leads")
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "hand-over took {:?}: the release notification did not arrive",
        start.elapsed()
    );
    b.shutdown().await;
    terms.assert_no_overlap();

    // Nothing but the optional self-check was refused.
    let log = redis.redis_cli(&["ACL", "LOG"]);
    let refused: Vec<&str> = log
        .lines()
        .zip(log.lines().skip(1))
        .filter(|(k, _)| *k == "object")
        .map(|(_, v)| v)
        .collect();
    assert!(
        refused.iter().all(|o| *o == "config|get"),
        "refused: {refused:?}\n{log}"
    );
}

async fn first_error(store: RedisStore, duty: &str) -> StoreError {
    let elector = Elector::new(
        store,
        config(duty, "a", 1_000),
        |lead: Leadership| async move {
            lead.cancelled().await;
            Ok(())
        },
    )
    .spawn();
    let mut rx = elector.subscribe();
    let status = timeout(WAIT, rx.wait_for(|s| s.last_error.is_some()))
        .await
        .expect("an error is reported")
        .unwrap()
        .clone();
    assert!(!status.is_leader());
    elector.shutdown().await;
    status.last_error.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_without_rights_get_no_permission_in_the_status() {
    let redis = acl_server();
    for (user, password, why) in [
        ("stranger", "secret", "keys outside its patterns"),
        ("noscripts", "secret", "no EVALSHA"),
        ("nowrites", "secret", "scripts calling commands it lacks"),
        ("leasehold", "wrong", "a wrong password"),
    ] {
        let err = first_error(store(&url_as(&redis, user, password)), "job").await;
        assert!(
            matches!(err, StoreError::NoPermission(_)),
            "{user} ({why}): {err:?}"
        );
        assert!(!err.is_retryable(), "{err}");
        assert_eq!(err.kind(), "no_permission");
    }
}

/// The users of the topology tests: `leasehold` with the minimal rule plus `extra`,
/// `lacking` with the minimal rule only.
fn topology_users(extra: &str) -> Vec<String> {
    let mut args = user_args(
        "leasehold",
        MINIMAL_ACL_PATTERNS,
        &format!("{MINIMAL_COMMANDS} {extra}"),
    );
    args.extend(user_args("lacking", MINIMAL_ACL_PATTERNS, MINIMAL_COMMANDS));
    args
}

async fn leads(store: RedisStore) {
    let elector = Elector::new(
        store,
        config("job", "a", 1_000),
        |lead: Leadership| async move {
            lead.cancelled().await;
            Ok(())
        },
    )
    .spawn();
    timeout(WAIT, elector.wait_until_leader())
        .await
        .expect("leads")
        .unwrap();
    elector.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_needs_role_and_replication_waits_need_wait() {
    let users = topology_users("+role +wait");
    let users: Vec<&str> = users.iter().map(String::as_str).collect();
    let set = tokio::task::block_in_place(|| RedisSentinelSet::start_with_args(1, &users));
    let sentinel_store = |user: &str| {
        RedisStore::sentinel_builder(MASTER_NAME, set.sentinel_urls())
            .primary_url(format!("redis://{user}:secret@primary/"))
            .call_timeout(Duration::from_millis(300))
            .wait_for_replicas(1, Duration::from_millis(100))
            .build()
            .unwrap()
    };
    leads(sentinel_store("leasehold")).await;
    // Without `role` the store cannot check that the node Sentinel names is a primary.
    let err = first_error(sentinel_store("lacking"), "job").await;
    assert!(matches!(err, StoreError::NoPermission(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_needs_cluster_slots() {
    let users = topology_users("+cluster|slots +asking");
    let users: Vec<&str> = users.iter().map(String::as_str).collect();
    let cluster = tokio::task::block_in_place(|| RedisCluster::start_with_args(3, 0, &users));
    let cluster_store = |user: &str| {
        let urls = cluster
            .nodes()
            .iter()
            .map(|n| format!("redis://{user}:secret@127.0.0.1:{}/", n.port()));
        RedisStore::cluster_builder(urls)
            .call_timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    leads(cluster_store("leasehold")).await;
    // Without `cluster|slots` the client cannot learn the slot map.
    let err = first_error(cluster_store("lacking"), "job").await;
    assert!(matches!(err, StoreError::NoPermission(_)), "{err:?}");
}
