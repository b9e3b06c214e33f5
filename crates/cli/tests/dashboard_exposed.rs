//! `leasehold dashboard` on a shared network, against the requests a hostile client
//! would send: reads without a token, another site's name or page, made-up groups to
//! fill the reader slots, huge `?limit=`, admin bodies without a token, silent and
//! slow connections, too many of them, guessed tokens; and HTTPS.

mod support;

use std::sync::Arc;
use std::time::Duration;

use leasehold_testkit::{RedisServer, TestCa};
use support::http::{Events, get, request};
use support::{Dashboard, create_group, store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

const TOKEN: &str = "a-test-token-of-some-length";
const READ_TOKEN: &str = "a-read-token-of-some-length";

/// Starts the dashboard on every address (so: not loopback), in plain HTTP.
async fn exposed(url: &str, extra: &[&str]) -> Dashboard {
    let mut args = vec!["--insecure-http"];
    args.extend(extra);
    Dashboard::start_on("0.0.0.0:0", url, "100ms", "300ms", &args).await
}

fn error(r: &support::http::Response) -> String {
    r.json()["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_every_read_needs_the_token_and_the_right_host() {
    let redis = RedisServer::start();
    let store = store(&redis);
    create_group(&store, "leasehold", "tenants", 3).await;
    let d = exposed(
        &redis.url(),
        &[
            "--admin-token",
            TOKEN,
            "--read-token",
            READ_TOKEN,
            "--allow-host",
            "dash.example",
        ],
    )
    .await;
    assert!(
        d.line.contains(
            "reachable from other machines in plain HTTP (--insecure-http: TLS must end in \
             front of it); reads need a token; read-only"
        ),
        "{}",
        d.line
    );
    let data = [
        "/api/groups",
        "/api/groups/tenants",
        "/api/groups/tenants/partitions",
        "/api/groups/tenants/moves",
        "/events",
        "/events?group=tenants",
    ];
    for (i, path) in data.iter().enumerate() {
        let r = get(&d.addr, path).await;
        assert_eq!(r.status, 401, "{path}: {r:?}");
        assert!(error(&r).contains("needs a token to read"), "{r:?}");
        // A few wrong ones (more would have to wait: see the next test).
        if i < 3 {
            let r = request(&d.addr, "GET", path, &[("X-Leasehold-Token", "wrong")], "").await;
            assert_eq!(r.status, 401, "{path}: {r:?}");
        }
    }
    // The page holds no data: it opens without a token, to ask for one.
    assert_eq!(get(&d.addr, "/").await.status, 200);
    // The read token, the admin token, as a header or a bearer.
    let bearer = format!("Bearer {READ_TOKEN}");
    for header in [
        ("X-Leasehold-Token", READ_TOKEN),
        ("X-Leasehold-Token", TOKEN),
        ("Authorization", &*bearer),
    ] {
        let r = request(&d.addr, "GET", "/api/groups", &[header], "").await;
        assert_eq!(r.status, 200, "{header:?}: {r:?}");
    }
    let mut events =
        Events::open_with(&d.addr, "/events", &[("X-Leasehold-Token", READ_TOKEN)]).await;
    assert_eq!(events.next().await.0, "overview");
    // Another site's name (DNS rebinding), even with the token; an allowed name.
    let with = |host: &'static str| [("Host", host), ("X-Leasehold-Token", READ_TOKEN)];
    for host in ["evil.example", "evil.example:9470", "dash.example.evil"] {
        for path in ["/", "/api/groups", "/events"] {
            let r = request(&d.addr, "GET", path, &with(host), "").await;
            assert_eq!(r.status, 403, "{host}{path}: {r:?}");
            assert!(error(&r).contains("--allow-host"), "{r:?}");
        }
    }
    let r = request(
        &d.addr,
        "GET",
        "/api/groups",
        &with("DASH.example:9470"),
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    // Another site's page, with the token (a leaked one, or a browser that adds it).
    for header in [
        ("Sec-Fetch-Site", "cross-site"),
        ("Sec-Fetch-Site", "same-site"),
        ("Origin", "http://evil.example"),
        ("Origin", "null"),
    ] {
        let headers = [header, ("X-Leasehold-Token", READ_TOKEN)];
        let r = request(&d.addr, "GET", "/api/groups", &headers, "").await;
        assert_eq!(r.status, 403, "{header:?}: {r:?}");
    }
    // The read token changes nothing; nor does the admin token without --allow-admin.
    for token in [READ_TOKEN, TOKEN] {
        let headers = [
            ("X-Leasehold-Token", token),
            ("Content-Type", "application/json"),
        ];
        let body = r#"{"replica": "r"}"#;
        let r = request(&d.addr, "POST", "/api/groups/tenants/drain", &headers, body).await;
        assert_eq!(r.status, 403, "{r:?}");
        assert!(error(&r).contains("read-only"), "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_signs_in_for_a_cookie_and_guesses_cost_a_growing_wait() {
    let redis = RedisServer::start();
    let d = exposed(&redis.url(), &["--admin-token", TOKEN]).await;
    let json = ("Content-Type", "application/json");
    let r = get(&d.addr, "/api/session").await;
    assert_eq!(r.json()["token_needed"], true, "{r:?}");
    assert_eq!(r.json()["signed_in"], false, "{r:?}");
    let right = format!(r#"{{"token": "{TOKEN}"}}"#);
    let r = request(&d.addr, "POST", "/api/session", &[json], &right).await;
    assert_eq!(r.status, 200, "{r:?}");
    let set = r.header("set-cookie").unwrap().to_owned();
    for part in [
        "leasehold_session=",
        "HttpOnly",
        "SameSite=Strict",
        "Path=/",
    ] {
        assert!(set.contains(part), "{set}");
    }
    assert!(!set.contains(TOKEN), "the cookie is not the token: {set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    let r = request(&d.addr, "GET", "/api/groups", &[("Cookie", &cookie)], "").await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = request(&d.addr, "GET", "/api/session", &[("Cookie", &cookie)], "").await;
    assert_eq!(r.json()["signed_in"], true, "{r:?}");
    let mut events = Events::open_with(&d.addr, "/events", &[("Cookie", &cookie)]).await;
    assert_eq!(events.next().await.0, "overview");
    // A made-up session is not one.
    let fake = format!("leasehold_session={}", "0".repeat(64));
    let r = request(&d.addr, "GET", "/api/groups", &[("Cookie", &fake)], "").await;
    assert_eq!(r.status, 401, "{r:?}");
    // Guesses: a few are free, then each one waits longer; the right token waits too.
    let wrong = r#"{"token": "not-the-token-at-all"}"#;
    for _ in 0..5 {
        let r = request(&d.addr, "POST", "/api/session", &[json], wrong).await;
        assert_eq!(r.status, 401, "{r:?}");
    }
    let r = request(&d.addr, "POST", "/api/session", &[json], &right).await;
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    let r = request(
        &d.addr,
        "GET",
        "/api/groups",
        &[("X-Leasehold-Token", TOKEN)],
        "",
    )
    .await;
    assert_eq!(r.status, 429, "the same wait for every route: {r:?}");
    // A session already open is not a guess.
    let r = request(&d.addr, "GET", "/api/groups", &[("Cookie", &cookie)], "").await;
    assert_eq!(r.status, 200, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_groups_take_no_reader_slot_and_limits_are_a_400() {
    let redis = RedisServer::start();
    let store = store(&redis);
    create_group(&store, "leasehold", "tenants", 5).await;
    let d = Dashboard::start(&redis.url(), "100ms", "300ms", &[]).await;
    for i in 0..70 {
        let r = get(&d.addr, &format!("/events?group=junk{i:03}")).await;
        assert_eq!(r.status, 404, "{r:?}");
    }
    let mut events = Events::open(&d.addr, "/events?group=tenants").await;
    events.until("group", |g| g["group"] == "tenants").await;
    for (path, says) in [
        ("/api/groups/tenants/moves?limit=0", "between 1 and 20000"),
        (
            "/api/groups/tenants/moves?limit=20001",
            "between 1 and 20000",
        ),
        (
            "/api/groups/tenants/moves?limit=18446744073709551615",
            "between 1 and 20000",
        ),
        (
            "/api/groups/tenants/moves?limit=99999999999999999999999",
            "limit",
        ),
        ("/api/groups/tenants/moves?limit=-1", "limit"),
        (
            "/api/groups/tenants/partitions?limit=0",
            "between 1 and 10000",
        ),
        (
            "/api/groups/tenants/partitions?limit=10001",
            "between 1 and 10000",
        ),
        ("/api/groups/tenants/partitions?offset=-1", "offset"),
    ] {
        let r = get(&d.addr, path).await;
        assert_eq!(r.status, 400, "{path}: {r:?}");
        assert!(error(&r).contains(says), "{path}: {r:?}");
    }
    let r = get(&d.addr, "/api/groups/tenants/moves?limit=20000").await;
    assert_eq!(r.status, 200, "{r:?}");
    // A page of partitions.
    let page = get(&d.addr, "/api/groups/tenants/partitions?offset=3&limit=10").await;
    let page = page.json();
    assert_eq!(page["total"], 5, "{page}");
    assert_eq!(page["offset"], 3, "{page}");
    let names: Vec<_> = page["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["partition"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["p3", "p4"], "{page}");
    let past = get(&d.addr, "/api/groups/tenants/partitions?offset=99")
        .await
        .json();
    assert_eq!(past["partitions"], serde_json::json!([]), "{past}");
    assert_eq!(
        get(&d.addr, "/api/groups/nope/partitions").await.status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_the_security_headers() {
    let redis = RedisServer::start();
    let d = Dashboard::start(&redis.url(), "100ms", "300ms", &[]).await;
    for path in [
        "/",
        "/app.js",
        "/api/groups",
        "/api/groups/nope",
        "/nothing",
    ] {
        let r = get(&d.addr, path).await;
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {r:?}");
        assert!(csp.contains("script-src 'self'"), "{path}: {r:?}");
        assert!(!csp.contains("unsafe"), "{path}: {r:?}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{path}");
        if path.starts_with("/api") {
            assert_eq!(r.header("cache-control"), Some("no-store"), "{path}");
        }
    }
    // The page keeps no inline script or style for the policy to allow.
    let html = get(&d.addr, "/").await.body;
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "{html}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_bodies_are_refused_before_they_are_read() {
    let redis = RedisServer::start();
    let store = store(&redis);
    create_group(&store, "leasehold", "tenants", 2).await;
    let d = Dashboard::start(
        &redis.url(),
        "100ms",
        "300ms",
        &["--allow-admin", "--admin-token", TOKEN],
    )
    .await;
    // A head that announces 2 MB, and no body: the refusal comes without it.
    for (token, status) in [(None, 401), (Some("wrong-token-wrong-token"), 401)] {
        let mut tcp = TcpStream::connect(&d.addr).await.unwrap();
        let mut head = format!(
            "POST /api/groups/tenants/partitions/add HTTP/1.1\r\nHost: {}\r\n\
             Content-Type: application/json\r\nContent-Length: 2000000\r\n",
            d.addr
        );
        if let Some(t) = token {
            head.push_str(&format!("X-Leasehold-Token: {t}\r\n"));
        }
        head.push_str("\r\n");
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = timeout(Duration::from_secs(5), tcp.read(&mut buf))
            .await
            .expect("refused without waiting for the body")
            .unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{answer}"
        );
    }
    // With the token, a body over the limit is a 413, not a 5xx.
    let big = format!(r#"{{"partitions": ["{}"]}}"#, "x".repeat(1_100_000));
    let headers = [
        ("X-Leasehold-Token", TOKEN),
        ("Content-Type", "application/json"),
    ];
    let r = request(
        &d.addr,
        "POST",
        "/api/groups/tenants/partitions/add",
        &headers,
        &big,
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.status);
}

/// Whether the server closes `tcp` (or resets it) within `within`.
async fn closed_within(tcp: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match timeout(within, tcp.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_slow_and_too_many_connections_are_closed() {
    let redis = RedisServer::start();
    let d = Dashboard::start(&redis.url(), "100ms", "300ms", &[]).await;
    // One client holds 32 silent connections: the 33rd is closed at once.
    let mut held = Vec::new();
    for _ in 0..32 {
        held.push(TcpStream::connect(&d.addr).await.unwrap());
    }
    // Let the server count them all.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut extra = TcpStream::connect(&d.addr).await.unwrap();
    assert!(closed_within(&mut extra, Duration::from_secs(5)).await);
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&d.addr, "/api/groups").await.status, 200, "freed");
    // A head that never ends (slow loris) is cut off after the header timeout.
    let mut slow = TcpStream::connect(&d.addr).await.unwrap();
    slow.write_all(b"GET /api/groups HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let start = Instant::now();
    assert!(closed_within(&mut slow, Duration::from_secs(20)).await);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(15),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_serves_the_token_encrypted() {
    let redis = RedisServer::start();
    let ca = TestCa::generate();
    let cert = ca.server_cert_path();
    let key = ca.server_key_path();
    let d = Dashboard::start_on(
        "0.0.0.0:0",
        &redis.url(),
        "100ms",
        "300ms",
        &[
            "--admin-token",
            TOKEN,
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    )
    .await;
    assert!(d.line.contains("https://"), "{}", d.line);
    assert!(
        d.line
            .contains("(reachable from other machines; reads need a token; read-only;"),
        "{}",
        d.line
    );
    let port = d.addr.rsplit(':').next().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    let ca_der = rustls::pki_types::CertificateDer::from_pem_slice(ca.ca_pem().as_bytes()).unwrap();
    roots.add(ca_der).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let head = format!(
        "GET /api/groups HTTP/1.0\r\nHost: localhost:{port}\r\nX-Leasehold-Token: {TOKEN}\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let _ = timeout(Duration::from_secs(20), tls.read_to_string(&mut answer))
        .await
        .expect("an answer over HTTPS");
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    // Plain HTTP to it gets no answer.
    let mut plain = TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    plain
        .write_all(b"GET /api/groups HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = timeout(Duration::from_secs(15), plain.read_to_end(&mut buf)).await;
    assert!(
        !String::from_utf8_lossy(&buf).contains("prefix"),
        "no data in clear"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_overview_requests_costs_one_read_per_interval() {
    let redis = RedisServer::start();
    let store = store(&redis);
    create_group(&store, "leasehold", "tenants", 2).await;
    let d = Dashboard::start(&redis.url(), "2s", "5s", &[]).await;
    let reads: Vec<_> = futures::future::join_all((0..20).map(|_| get(&d.addr, "/api/groups")))
        .await
        .into_iter()
        .map(|r| {
            assert_eq!(r.status, 200, "{r:?}");
            r.json()["read_at"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(reads.iter().all(|r| *r == reads[0]), "one read: {reads:?}");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let later = get(&d.addr, "/api/groups").await.json();
    assert_ne!(later["read_at"], reads[0], "read again after the interval");
}
