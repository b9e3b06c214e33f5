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
async fn help_documents_the_exit_codes_once() {
    let r = run(&["--help"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    for line in [
        "2  usage",
        "3  Redis unreachable",
        "4  not found",
        "5  unexpected data",
    ] {
        assert!(r.stdout.contains(line), "{line:?} missing: {}", r.stdout);
    }
    // A command's help points there instead of repeating the table.
    for args in [&["status", "--help"][..], &["partitions", "add", "-h"]] {
        let r = run(args).await;
        assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""), "{r:?}");
        assert!(!r.stdout.contains("3  Redis unreachable"), "{r:?}");
        assert!(r.stdout.contains("Exit codes: `leasehold --help`"), "{r:?}");
    }
}

#[tokio::test]
async fn usage_errors_are_one_line_but_help_and_version_are_as_usual() {
    let url = "redis://127.0.0.1:1/";
    for (args, contains) in [
        (vec!["status", "--group", "g"], "--redis-url <URL>"),
        (vec!["statsu"], "a similar subcommand exists: 'status'"),
        (vec![], "`leasehold` needs a command: status, leader"),
        (
            vec!["partitions"],
            "needs a command: add, remove, weight, prefer, list",
        ),
        (
            vec!["leader", "-u", url, "-d", "d", "-o", "yaml"],
            "possible values: table, json",
        ),
        (
            vec!["list", "-u", url, "--timeout", "2000"],
            "time unit needed",
        ),
        (
            vec!["list", "-u", url, "--timeout", "0s"],
            "must be above zero",
        ),
        (
            vec!["list", "-u", url, "--timeout", "1s", "--timeout-ms", "9"],
            "cannot be used with",
        ),
        (
            vec!["watch", "-u", url, "-g", "g", "--interval-ms", "0"],
            "--interval-ms",
        ),
        (
            vec!["partitions", "weight", "-u", url, "-g", "g", "p0", "x"],
            "'x' for '<WEIGHT>'",
        ),
        (
            vec!["partitions", "add", "-u", url, "-g", "g", "-dash"],
            "unexpected argument '-dash' found; tip: to pass '-dash' as a value, use '-- -dash' \
             (`leasehold partitions add --help` for usage)",
        ),
    ] {
        let r = run(&args).await;
        assert_failed(&r, 2, contains);
    }
    let r = run(&["--version"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            Some(0),
            concat!("leasehold ", env!("CARGO_PKG_VERSION"), "\n"),
            ""
        ),
        "{r:?}"
    );
    let r = run(&["help", "status"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stdout.contains("Usage: leasehold status"), "{r:?}");
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
        args.extend(["--redis-url", &url, "--timeout", "300ms"]);
        let r = run(&args).await;
        assert_failed(&r, 3, "no answer from Redis within 300ms (--timeout)");
        assert!(!r.stderr.contains("TLS"), "{r:?}");
        assert!(
            r.took >= Duration::from_millis(300) && r.took < Duration::from_secs(3),
            "{r:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_with_no_answer_may_or_may_not_have_been_applied() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    proxy.blackhole();
    let url = proxy.url();
    for (args, again) in [
        (
            vec!["partitions", "add", "-g", "g", "p0"],
            "refused as already in the group",
        ),
        (
            vec!["partitions", "remove", "-g", "g", "p0"],
            "refused as not in the group",
        ),
        (
            vec!["partitions", "weight", "-g", "g", "p0", "3"],
            "it sets the same weight",
        ),
    ] {
        let mut args = args;
        args.extend(["-u", &url, "-t", "300ms"]);
        let r = run(&args).await;
        assert_failed(
            &r,
            3,
            "no answer from Redis within 300ms (--timeout); the change may or may not have \
             been applied (look with `partitions list` or `status`): running it again is safe",
        );
        assert!(r.stderr.contains(again), "{r:?}");
    }
    // A read changes nothing, and says nothing of the kind.
    let r = run(&["partitions", "list", "-g", "g", "-u", &url, "-t", "300ms"]).await;
    assert_failed(&r, 3, "no answer from Redis within 300ms");
    assert!(!r.stderr.contains("applied"), "{r:?}");
}

#[tokio::test]
async fn rediss_against_a_plain_port_says_it_may_be_tls_against_a_plain_port() {
    let redis = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}/", redis.port());
    for args in [
        vec!["leader", "-d", "d"],
        vec!["status", "-g", "g"],
        vec!["partitions", "add", "-g", "g", "p0"],
    ] {
        let mut args = args;
        args.extend(["-u", &url, "-t", "500ms"]);
        let r = run(&args).await;
        assert_failed(
            &r,
            3,
            "the URL is rediss:// (TLS): is this a plain, non-TLS port? Then use redis://",
        );
        assert!(!r.stderr.contains(&url), "the URL is never echoed: {r:?}");
        assert!(r.took < Duration::from_secs(3), "{r:?}");
    }
    // The same server with redis:// answers.
    let r = run(&["leader", "-d", "d", "-u", &redis.url()]).await;
    assert_failed(&r, 4, "never elected here");
}

#[tokio::test]
async fn a_duty_key_of_the_wrong_type_is_named_with_its_type() {
    let redis = RedisServer::start();
    let url = redis.url();
    redis.redis_cli(&["HSET", "leasehold:{scheduler}:lease", "field", "value"]);
    redis.redis_cli(&["RPUSH", "leasehold:{reports}:fence", "1"]);
    redis.redis_cli(&[
        "SET",
        "leasehold:{billing}:lease",
        "replica-a:0123456789abcdef0123456789abcdef",
    ]);
    redis.redis_cli(&["SADD", "leasehold:{billing}:fence", "1"]);
    for (duty, message) in [
        (
            "scheduler",
            "leasehold:{scheduler}:lease holds a hash, not a lease (a string): did something \
             else write it?",
        ),
        (
            "reports",
            "leasehold:{reports}:fence holds a list, not a fence (a string)",
        ),
        (
            "billing",
            "leasehold:{billing}:fence holds a set, not a fence",
        ),
    ] {
        for json in [false, true] {
            let mut args = vec!["leader", "-u", &url, "-d", duty];
            if json {
                args.push("--json");
            }
            let r = run(&args).await;
            assert_failed(&r, 5, message);
            // Neither the script's SHA nor its line: nothing an operator can use.
            assert!(!r.stderr.contains("user_script"), "{r:?}");
            assert!(!r.stderr.contains("script:"), "{r:?}");
        }
    }
    // `list` shows them as foreign, with the rest.
    let r = run(&["list", "-u", &url]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_or_duty_not_found_suggests_a_close_name_or_lists_them() {
    let redis = RedisServer::start();
    let url = redis.url();
    let r = run(&["status", "-u", &url, "-g", "tenants"]).await;
    assert_failed(
        &r,
        4,
        "never by `partitions add`); there are no groups under prefix \"leasehold\" (is \
         --prefix right?)",
    );
    support::create_group(&support::store(&redis), "leasehold", "tenants", 2).await;
    redis.redis_cli(&["SET", "leasehold:{reports}:fence", "7"]);
    for args in [
        vec!["status", "-g", "tenant"],
        vec!["watch", "-g", "tenant"],
        vec!["partitions", "list", "-g", "tenant"],
        vec!["partitions", "add", "-g", "tenant", "p9"],
        vec!["partitions", "remove", "-g", "tenant", "p0"],
        vec!["drain", "-g", "tenant", "-r", "r"],
        vec!["owner", "-g", "tenant", "p0"],
    ] {
        let mut args = args;
        args.extend(["-u", &url]);
        let r = run(&args).await;
        assert_failed(&r, 4, "no group \"tenant\" under prefix \"leasehold\"");
        assert!(r.stderr.ends_with("; did you mean \"tenants\"?\n"), "{r:?}");
    }
    let r = run(&["status", "-u", &url, "-g", "billing"]).await;
    assert_failed(
        &r,
        4,
        "; the only group under prefix \"leasehold\": \"tenants\"",
    );
    let r = run(&["leader", "-u", &url, "-d", "reprots"]).await;
    assert_failed(
        &r,
        4,
        "no duty \"reprots\" under prefix \"leasehold\": never elected here (no key \
         leasehold:{reprots}:fence); did you mean \"reports\"?",
    );
    let r = run(&["leader", "-u", &url, "-d", "scheduler"]).await;
    assert_failed(
        &r,
        4,
        "; the only duty under prefix \"leasehold\": \"reports\"",
    );
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
    assert_failed(
        &r,
        5,
        "leasehold:{scheduler}:lease holds a hash, not a lease",
    );

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
