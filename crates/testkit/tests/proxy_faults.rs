//! `FaultProxy` between a `redis` client and a real `redis-server`.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use leasehold_testkit::{FaultProxy, RedisServer};
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

const HUNG: Duration = Duration::from_secs(10);

async fn connect(
    url: &str,
    response_timeout: Duration,
) -> redis::RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(response_timeout));
    let client = redis::Client::open(url)?;
    tokio::time::timeout(
        HUNG,
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .expect("connecting hung")
}

async fn get(conn: &mut MultiplexedConnection, key: &str) -> redis::RedisResult<Option<String>> {
    tokio::time::timeout(HUNG, redis::cmd("GET").arg(key).query_async(conn))
        .await
        .expect("GET hung")
}

async fn setup() -> (RedisServer, FaultProxy) {
    let server = RedisServer::start();
    server.redis_cli(&["SET", "k", "v"]);
    let proxy = FaultProxy::start(server.addr()).await.expect("start proxy");
    (server, proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_forwards_both_ways() {
    let (_server, proxy) = setup().await;
    assert_eq!(
        proxy.url(),
        format!("redis://127.0.0.1:{}/", proxy.addr().port())
    );
    let mut conn = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));
    assert_eq!(proxy.connection_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_delays_each_direction() {
    let (_server, proxy) = setup().await;
    let mut conn = connect(&proxy.url(), Duration::from_secs(10))
        .await
        .unwrap();
    let delay = Duration::from_millis(200);

    proxy.latency(delay);
    let started = Instant::now();
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));
    let elapsed = started.elapsed();
    assert!(elapsed >= 2 * delay, "round trip took only {elapsed:?}");
    assert!(
        elapsed < 2 * delay + Duration::from_secs(3),
        "round trip took {elapsed:?}"
    );

    proxy.pass();
    let started = Instant::now();
    get(&mut conn, "k").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_holds_replies_until_pass() {
    let (_server, proxy) = setup().await;
    let mut conn = connect(&proxy.url(), Duration::from_secs(30))
        .await
        .unwrap();

    proxy.blackhole();
    let mut request = {
        let mut conn = conn.clone();
        tokio::spawn(async move { get(&mut conn, "k").await })
    };
    let early = tokio::time::timeout(Duration::from_millis(500), &mut request).await;
    assert!(early.is_err(), "a reply crossed the blackhole");
    assert_eq!(
        proxy.connection_count(),
        1,
        "blackhole must not close connections"
    );

    proxy.pass();
    let reply = tokio::time::timeout(HUNG, request)
        .await
        .expect("held reply never arrived");
    assert_eq!(reply.unwrap().unwrap().as_deref(), Some("v"));
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_times_out_requests_and_delivers_held_bytes_in_order() {
    let (_server, proxy) = setup().await;
    // A raw socket shows exactly which bytes arrive, without client-side request matching.
    let addr = proxy.addr();
    tokio::task::spawn_blocking(move || {
        let mut socket = std::net::TcpStream::connect(addr).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        socket.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut reply = [0u8; 7];
        socket.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"+PONG\r\n");

        proxy.blackhole();
        socket
            .write_all(b"*2\r\n$4\r\nECHO\r\n$1\r\na\r\n*2\r\n$4\r\nECHO\r\n$1\r\nb\r\n")
            .unwrap();
        let err = socket
            .read(&mut reply)
            .expect_err("a reply crossed the blackhole");
        assert!(matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ));

        proxy.pass();
        socket.set_read_timeout(Some(HUNG)).unwrap();
        let mut replies = [0u8; 14];
        socket.read_exact(&mut replies).unwrap();
        assert_eq!(&replies, b"$1\r\na\r\n$1\r\nb\r\n");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_connections_breaks_open_connections_only() {
    let (_server, proxy) = setup().await;
    let mut conn = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));

    proxy.reset_connections();
    assert!(
        get(&mut conn, "k").await.is_err(),
        "request succeeded on a reset connection"
    );
    wait_for_count(&proxy, 0).await;

    let mut fresh = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();
    assert_eq!(get(&mut fresh, "k").await.unwrap().as_deref(), Some("v"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_closes_new_connections() {
    let (_server, proxy) = setup().await;
    let mut open = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();

    proxy.refuse();
    assert!(connect(&proxy.url(), Duration::from_secs(5)).await.is_err());
    assert_eq!(get(&mut open, "k").await.unwrap().as_deref(), Some("v"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_proxy_closes_its_connections() {
    let (_server, proxy) = setup().await;
    let mut conn = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));

    drop(proxy);
    assert!(
        get(&mut conn, "k").await.is_err(),
        "connection outlived the proxy"
    );
}

async fn wait_for_count(proxy: &FaultProxy, expected: usize) {
    tokio::time::timeout(HUNG, async {
        while proxy.connection_count() != expected {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("connection count stuck at {}", proxy.connection_count()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_reply_runs_the_command_and_resets_the_connection() {
    let (server, proxy) = setup().await;
    let mut conn = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));
    proxy.cut_replies(1);
    let cut: redis::RedisResult<i64> = tokio::time::timeout(
        HUNG,
        redis::cmd("INCR").arg("counter").query_async(&mut conn),
    )
    .await
    .expect("INCR hung");
    let e = cut.expect_err("the reply was cut");
    assert!(
        e.is_connection_dropped() || e.is_io_error(),
        "the client sees the connection drop: {e:?}"
    );
    assert_eq!(proxy.cuts_left(), 0);
    // The command ran; the next reply (on a new connection) is delivered.
    assert_eq!(server.redis_cli(&["GET", "counter"]).trim(), "1");
    let mut again = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();
    assert_eq!(get(&mut again, "k").await.unwrap().as_deref(), Some("v"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_replies_containing_the_needle_are_cut() {
    let (_server, proxy) = setup().await;
    let mut conn = connect(&proxy.url(), Duration::from_secs(5)).await.unwrap();
    proxy.cut_replies_containing(1, b"needle");
    assert_eq!(get(&mut conn, "k").await.unwrap().as_deref(), Some("v"));
    assert_eq!(proxy.cuts_left(), 1, "a reply without the needle passes");
    let _: () = redis::cmd("SET")
        .arg("n")
        .arg("a needle")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(get(&mut conn, "n").await.is_err(), "this one is cut");
    assert_eq!(proxy.cuts_left(), 0);
}
