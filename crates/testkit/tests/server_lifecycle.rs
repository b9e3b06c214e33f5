//! `RedisServer` against a real `redis-server`: start, restart, stop, pause and resume.

use std::time::{Duration, Instant};

use leasehold_testkit::RedisServer;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

async fn connect(server: &RedisServer, response_timeout: Duration) -> MultiplexedConnection {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(response_timeout));
    tokio::time::timeout(
        Duration::from_secs(10),
        server
            .client()
            .get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .expect("connecting hung")
    .expect("connecting failed")
}

async fn ping(conn: &mut MultiplexedConnection) -> redis::RedisResult<String> {
    tokio::time::timeout(
        Duration::from_secs(10),
        redis::cmd("PING").query_async(conn),
    )
    .await
    .expect("PING hung")
}

#[test]
fn starts_and_answers_ping_from_sync_code() {
    let server = RedisServer::start();
    assert!(server.port() < 55535);
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert_eq!(server.addr().port(), server.port());
    assert!(server.pid() > 0);
    assert!(server.log_path().exists());
    assert_eq!(server.redis_cli(&["PING"]), "PONG");
    assert_eq!(server.redis_cli(&["SET", "k", "v"]), "OK");
    assert_eq!(server.redis_cli(&["GET", "k"]), "v");
    assert_eq!(server.redis_cli(&["GET", "missing"]), "(nil)");
    assert_eq!(server.redis_cli(&["INCR", "n"]), "(integer) 1");
    assert!(server.redis_cli(&["NOSUCHCOMMAND"]).starts_with("(error)"));
}

#[test]
fn extra_args_reach_the_server() {
    let server = RedisServer::start_with_args(&["--maxmemory-policy", "allkeys-lru"]);
    let reply = server.redis_cli(&["CONFIG", "GET", "maxmemory-policy"]);
    assert_eq!(reply, "maxmemory-policy\nallkeys-lru");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_ping_from_async_code() {
    let server = RedisServer::try_start().expect("start redis-server");
    let mut conn = connect(&server, Duration::from_secs(5)).await;
    assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_loses_data_and_keeps_port() {
    let mut server = RedisServer::start();
    let (port, pid) = (server.port(), server.pid());
    server.redis_cli(&["SET", "k", "v"]);
    let mut old_conn = connect(&server, Duration::from_secs(2)).await;

    server.restart();

    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), pid);
    assert_eq!(server.redis_cli(&["GET", "k"]), "(nil)");
    assert!(
        ping(&mut old_conn).await.is_err(),
        "old connection survived a restart"
    );
    let mut conn = connect(&server, Duration::from_secs(5)).await;
    assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_leaves_it_down_until_restart() {
    let mut server = RedisServer::start();
    let port = server.port();

    server.stop();
    let config = AsyncConnectionConfig::new().set_connection_timeout(Some(Duration::from_secs(2)));
    let attempt = tokio::time::timeout(
        Duration::from_secs(10),
        server
            .client()
            .get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .expect("connecting to a stopped server hung");
    assert!(attempt.is_err(), "connected to a stopped server");

    server.restart();
    assert_eq!(server.port(), port);
    assert_eq!(server.redis_cli(&["PING"]), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_makes_ping_time_out_and_resume_answers_again() {
    let server = RedisServer::start();
    let mut conn = connect(&server, Duration::from_millis(500)).await;
    assert_eq!(ping(&mut conn).await.unwrap(), "PONG");

    server.pause();
    let started = Instant::now();
    let err = ping(&mut conn).await.expect_err("a paused server answered");
    assert!(err.is_timeout(), "expected a timeout, got {err}");
    assert!(started.elapsed() >= Duration::from_millis(450));

    server.resume();
    let mut fresh = connect(&server, Duration::from_secs(5)).await;
    assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
}

#[test]
fn drop_kills_the_process_even_when_paused() {
    let server = RedisServer::start();
    let pid = server.pid();
    server.pause();
    drop(server);
    // The child was reaped by `Drop`, so its pid no longer exists (or belongs to someone else).
    let status = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        !status.contains("redis-server"),
        "redis-server {pid} outlived its RedisServer"
    );
}
