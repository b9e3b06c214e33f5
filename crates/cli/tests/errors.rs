//! Every way `leasehold` can fail: one line on stderr, a documented exit code, never a
//! panic or a hang.

mod support;

use std::net::TcpListener;
use std::time::Duration;

use leasehold_testkit::{FaultProxy, RedisServer};
use support::{assert_failed, run};

#[tokio::test]
async fn malformed_url_is_a_usage_error() {
    for url in [
        "not a url",
        "http://127.0.0.1:6379/",
        "redis://127.0.0.1:notaport/",
    ] {
        let r = run(&["leader", "--redis-url", url, "--duty", "d"]).await;
        assert_failed(&r, 2, "invalid --redis-url");
        // It says what a URL should look like, and never repeats the given one.
        assert!(r.stderr.contains("expected redis://"), "{r:?}");
        assert!(!r.stderr.contains(url), "{r:?}");
    }
}

#[tokio::test]
async fn missing_or_invalid_arguments_are_usage_errors() {
    let r = run(&["status", "--group", "g"]).await;
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("--redis-url"), "{r:?}");

    let r = run(&[
        "leader",
        "--redis-url",
        "redis://127.0.0.1:1/",
        "--duty",
        "a{b}",
    ])
    .await;
    assert_failed(&r, 2, "duty");

    let r = run(&[
        "watch",
        "--redis-url",
        "redis://127.0.0.1:1/",
        "--group",
        "g",
        "--interval-ms",
        "0",
    ])
    .await;
    assert_eq!(r.code, Some(2), "{r:?}");
}

#[tokio::test]
async fn help_documents_the_exit_codes() {
    let r = run(&["status", "--help"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    for line in [
        "2  usage",
        "3  Redis unreachable",
        "4  not found",
        "5  unexpected data",
    ] {
        assert!(r.stdout.contains(line), "{line:?} missing: {}", r.stdout);
    }
}

#[tokio::test]
async fn unreachable_port_is_a_connection_error_well_within_the_timeout() {
    // A port nobody listens on: bind one, then free it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/");
    for args in [
        vec!["leader", "--duty", "d"],
        vec!["status", "--group", "g"],
        vec!["watch", "--group", "g"],
        vec!["owner", "--group", "g", "p0"],
        vec!["list"],
        vec!["partitions", "add", "--group", "g", "p0"],
        vec!["partitions", "remove", "--group", "g", "p0"],
        vec!["partitions", "list", "--group", "g"],
        vec!["drain", "--group", "g", "--replica", "r"],
        vec!["undrain", "--group", "g", "--replica", "r"],
    ] {
        let mut args = args;
        args.extend(["--redis-url", &url, "--timeout-ms", "1000"]);
        let r = run(&args).await;
        assert_failed(&r, 3, "cannot reach Redis");
        assert!(r.took < Duration::from_secs(3), "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn black_holed_server_times_out_after_the_timeout() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    proxy.blackhole();
    let url = proxy.url();
    for args in [
        vec!["leader", "--duty", "d"],
        vec!["status", "--group", "g"],
        vec!["list"],
        vec!["partitions", "add", "--group", "g", "p0"],
        vec!["drain", "--group", "g", "--replica", "r"],
    ] {
        let mut args = args;
        args.extend(["--redis-url", &url, "--timeout-ms", "300"]);
        let r = run(&args).await;
        assert_failed(&r, 3, "no answer from Redis within 300 ms");
        assert!(
            r.took >= Duration::from_millis(300) && r.took < Duration::from_secs(3),
            "{r:?}"
        );
    }
}

#[tokio::test]
async fn missing_group_is_not_found() {
    let redis = RedisServer::start();
    let url = redis.url();
    let r = run(&["status", "--redis-url", &url, "--group", "nope"]).await;
    assert_failed(&r, 4, "no group \"nope\" under prefix \"leasehold\"");
    let r = run(&["status", "--redis-url", &url, "--group", "nope", "--json"]).await;
    assert_failed(&r, 4, "no group");
    let r = run(&["watch", "--redis-url", &url, "--group", "nope"]).await;
    assert_failed(&r, 4, "no group");
}

#[tokio::test]
async fn keys_of_the_wrong_type_are_data_errors() {
    let redis = RedisServer::start();
    let url = redis.url();
    // The group's metadata is a hash; a string there is someone else's key.
    redis.redis_cli(&["SET", "leasehold:{tenants}:meta", "not a hash"]);
    let r = run(&["status", "--redis-url", &url, "--group", "tenants"]).await;
    assert_failed(&r, 5, "wrong type");
    let r = run(&["watch", "--redis-url", &url, "--group", "tenants"]).await;
    assert_failed(&r, 5, "wrong type");
    let r = run(&["list", "--redis-url", &url]).await;
    assert_failed(&r, 5, "wrong type");
    let r = run(&[
        "partitions",
        "add",
        "--redis-url",
        &url,
        "--group",
        "tenants",
        "p0",
    ])
    .await;
    assert_failed(&r, 5, "wrong type");

    // A duty's lease is a string; a hash there is someone else's key.
    redis.redis_cli(&["HSET", "leasehold:{scheduler}:lease", "field", "value"]);
    let r = run(&["leader", "--redis-url", &url, "--duty", "scheduler"]).await;
    assert_failed(&r, 5, "wrong type");

    // A fence that is not a number.
    redis.redis_cli(&["SET", "leasehold:{reports}:lease", "replica-a:0123"]);
    redis.redis_cli(&["SET", "leasehold:{reports}:fence", "twelve"]);
    let r = run(&["leader", "--redis-url", &url, "--duty", "reports"]).await;
    assert_failed(&r, 5, "unexpected reply");
}

#[tokio::test]
async fn refused_credentials_are_other_redis_errors() {
    let redis = RedisServer::start();
    redis.redis_cli(&["CONFIG", "SET", "requirepass", "s3cret"]);
    let port = redis.port();
    let wrong = format!("redis://:wrong@127.0.0.1:{port}/");
    let r = run(&["leader", "--redis-url", &wrong, "--duty", "d"]).await;
    assert_failed(&r, 1, "refused");
    assert!(
        !r.stderr.contains("wrong@"),
        "the URL is never echoed: {r:?}"
    );
    let none = format!("redis://127.0.0.1:{port}/");
    let r = run(&["status", "--redis-url", &none, "--group", "g"]).await;
    assert_failed(&r, 1, "refused");
}
