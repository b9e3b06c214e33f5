//! `leasehold dashboard` against a real redis-server with real coordinators: the JSON
//! API's keys, errors as JSON 4xx, the refusals that keep it safe, the event stream
//! following a move, and what it costs Redis with no viewer, one, and ten.

mod support;

use std::time::Duration;

use leasehold_testkit::RedisServer;
use support::http::{Events, get, request};
use support::{Dashboard, create_group, leader, replica, run, store, wait_for_counts, wait_until};
use tokio::time::sleep;

const TOKEN: &str = "a-test-token-of-some-length";

/// Starts the dashboard reading every 100 ms at most (every 300 ms without a notice).
async fn start(url: &str, extra: &[&str]) -> Dashboard {
    Dashboard::start(url, "100ms", "300ms", extra).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_shows_groups_duties_partitions_replicas_and_moves() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 4)]).await;
    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    let balanced = [("replica-a", 2), ("replica-b", 2)];
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let (elector, _) = leader(&store, "leasehold", "scheduler", "replica-a").await;
    let d = start(&redis.url(), &[]).await;

    let r = get(&d.addr, "/api/groups").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let o = r.json();
    assert_eq!(o["prefix"], "leasehold");
    assert_eq!(o["admin"], false);
    let g = &o["groups"][0];
    assert_eq!(g["group"], "tenants", "{o}");
    assert_eq!(g["partitions"], 4, "{o}");
    assert_eq!(g["owned"], 4, "{o}");
    assert_eq!(g["health"], "ok", "{o}");
    let duty = &o["duties"][0];
    assert_eq!(duty["duty"], "scheduler", "{o}");
    assert_eq!(duty["state"], "led", "{o}");
    assert_eq!(duty["leader"], "replica-a", "{o}");
    assert!(duty["fence"].as_u64().unwrap() > 0, "{o}");
    assert!(duty["lease_left_ms"].as_u64().is_some(), "{o}");
    assert_eq!(o["alerts"], serde_json::json!([]), "{o}");

    let page = get(&d.addr, "/api/groups/tenants").await.json();
    assert_eq!(page["group"], "tenants");
    let partitions = page["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 4, "{page}");
    for p in partitions {
        assert!(p["partition"].as_str().unwrap().starts_with('p'), "{p}");
        let owner = p["owner"].as_str().unwrap();
        assert!(["replica-a", "replica-b"].contains(&owner), "{p}");
        assert_eq!(p["weight"], 1, "{p}");
    }
    let replicas = page["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2, "{page}");
    for r in replicas {
        assert_eq!(r["owned"], 2, "{r}");
        assert_eq!(r["load"], 2, "{r}");
        assert_eq!(r["share"], 2.0, "{r}");
        assert_eq!(r["state"], "active", "{r}");
        assert!(r["replica"].is_string() && r["capacity"] == 1, "{r}");
        // Shown under the replica when it advertises one; these do not.
        assert_eq!(r.get("address"), Some(&serde_json::Value::Null), "{r}");
    }
    assert_eq!(page["unowned"], 0, "{page}");
    assert!(page["preferences"].as_array().unwrap().is_empty(), "{page}");
    assert!(page["alerts"].as_array().unwrap().is_empty(), "{page}");

    let moves = get(&d.addr, "/api/groups/tenants/moves").await.json();
    let all = moves["moves"].as_array().unwrap();
    assert_eq!(all.len(), 6, "four first owners, two hand-offs: {moves}");
    let handoff = all.iter().find(|m| m["cause"] == "handoff").unwrap();
    assert_eq!(handoff["from"], "replica-a", "{moves}");
    assert_eq!(handoff["to"], "replica-b", "{moves}");
    assert!(handoff["unowned_ms"].as_u64().is_some(), "{moves}");
    let moved = handoff["partition"].as_str().unwrap();
    let one = get(
        &d.addr,
        &format!("/api/groups/tenants/moves?partition={moved}"),
    )
    .await
    .json();
    assert_eq!(one["moves"].as_array().unwrap().len(), 2, "{one}");
    let to_b = get(
        &d.addr,
        "/api/groups/tenants/moves?replica=replica-b&limit=1",
    )
    .await
    .json();
    let to_b = to_b["moves"].as_array().unwrap();
    assert_eq!(to_b.len(), 1);
    assert_eq!(to_b[0]["to"], "replica-b");

    // The page and its assets, embedded.
    let html = get(&d.addr, "/").await;
    assert_eq!(html.status, 200);
    assert!(
        html.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(html.body.contains("id=\"map\"") && html.body.contains("/app.js"));
    let js = get(&d.addr, "/app.js").await;
    assert!(js.body.contains("data-partition") && js.body.contains("EventSource"));
    assert_eq!(get(&d.addr, "/style.css").await.status, 200);

    elector.shutdown().await;
    b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerts_of_the_runbook_are_evaluated_live() {
    let redis = RedisServer::start();
    let store = store(&redis);
    // A group whose replicas are all gone, and a duty nobody leads any more.
    create_group(&store, "leasehold", "tenants", 3).await;
    let (elector, _) = leader(&store, "leasehold", "scheduler", "replica-a").await;
    elector.shutdown().await;
    let d = start(&redis.url(), &[]).await;
    let o = get(&d.addr, "/api/groups").await.json();
    assert_eq!(o["groups"][0]["health"], "page", "{o}");
    assert_eq!(o["duties"][0]["state"], "nobody", "{o}");
    let alerts: Vec<(&str, &str, &str)> = o["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["firing"], false, "pending at first: {a}");
            assert!(a["since"].as_str().unwrap().ends_with('Z'), "{a}");
            (
                a["alert"].as_str().unwrap(),
                a["severity"].as_str().unwrap(),
                a["summary"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        alerts,
        [
            ("LeaseholdNoLeader", "page", "nobody leads scheduler"),
            (
                "LeaseholdUnownedPartitions",
                "page",
                "3 of 3 partitions of tenants have no owner"
            ),
        ],
        "{o}"
    );
    let page = get(&d.addr, "/api/groups/tenants").await.json();
    assert_eq!(
        page["alerts"][0]["alert"], "LeaseholdUnownedPartitions",
        "{page}"
    );
    assert!(page["partitions"][0]["owner"].is_null(), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_json_4xx() {
    let redis = RedisServer::start();
    let store = store(&redis);
    create_group(&store, "leasehold", "tenants", 2).await;
    let d = start(&redis.url(), &[]).await;
    let long = "x".repeat(300);
    for (path, status, says) in [
        ("/api/groups/nope", 404, "no group \"nope\""),
        ("/api/groups/nope/moves", 404, "no group \"nope\""),
        ("/api/groups/a%7Bb%7D", 400, "invalid group"),
        (&*format!("/api/groups/{long}"), 400, "invalid group"),
        (
            "/api/groups/tenants/moves?partition=a%7Bb",
            400,
            "invalid partition",
        ),
        ("/api/groups/tenants/moves?limit=x", 400, "limit"),
        ("/events?group=a%7Bb%7D", 400, "invalid group"),
        ("/nothing/here", 404, "no such page"),
    ] {
        let r = get(&d.addr, path).await;
        assert_eq!(r.status, status, "{path}: {r:?}");
        let json = r.json();
        let error = json["error"].as_str().unwrap();
        assert!(error.contains(says), "{path}: {json}");
        assert_eq!(json["status"], status, "{path}: {json}");
    }
    // Another site's name resolved to 127.0.0.1 (DNS rebinding) is not served.
    for host in ["evil.example", "evil.example:80"] {
        let r = request(&d.addr, "GET", "/api/groups", &[("Host", host)], "").await;
        assert_eq!(r.status, 403, "{host}: {r:?}");
        assert!(r.json()["error"].as_str().unwrap().contains("loopback"));
    }
    let port = d.addr.rsplit(':').next().unwrap();
    let r = request(
        &d.addr,
        "GET",
        "/api/groups",
        &[("Host", &*format!("localhost:{port}"))],
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    // A change with a body that is not JSON, to a read-only dashboard: refused first.
    let r = request(&d.addr, "POST", "/api/groups/tenants/drain", &[], "{").await;
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.json()["error"].as_str().unwrap().contains("read-only"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_options_are_refused_before_listening() {
    let url = "redis://127.0.0.1:1/";
    let r = run(&["dashboard", "--redis-url", url, "--listen", "0.0.0.0:0"]).await;
    support::assert_failed(
        &r,
        2,
        "refusing to listen on 0.0.0.0:0 without an admin token",
    );
    let r = run(&["dashboard", "--redis-url", url, "--allow-admin"]).await;
    support::assert_failed(&r, 2, "--allow-admin needs an admin token");
    let r = run(&[
        "dashboard",
        "--redis-url",
        url,
        "--allow-admin",
        "--admin-token",
        "short",
    ])
    .await;
    support::assert_failed(&r, 2, "too short");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actions_need_the_token_from_the_same_origin() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 2, "replica-a");
    let b = replica(&store, "leasehold", "tenants", 2, "replica-b");
    let balanced = [("replica-a", 1), ("replica-b", 1)];
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    let d = start(&redis.url(), &["--allow-admin", "--admin-token", TOKEN]).await;
    let origin = format!("http://{}", d.addr);
    let path = "/api/groups/tenants/drain";
    let body = r#"{"replica": "replica-b"}"#;
    let json = ("Content-Type", "application/json");
    let cookie = format!("token={TOKEN}");
    let refused = [
        (vec![json], 401, "needs the token"),
        (
            vec![json, ("X-Leasehold-Token", "wrong-token-wrong-token")],
            401,
            "wrong admin token",
        ),
        (
            vec![
                json,
                ("X-Leasehold-Token", TOKEN),
                ("Sec-Fetch-Site", "cross-site"),
            ],
            403,
            "cross-site",
        ),
        (
            vec![
                json,
                ("X-Leasehold-Token", TOKEN),
                ("Origin", "http://evil.example"),
            ],
            403,
            "cross-origin",
        ),
        // A cookie is not a token.
        (
            vec![json, ("Cookie", cookie.as_str())],
            401,
            "needs the token",
        ),
    ];
    for (headers, status, says) in refused {
        let r = request(&d.addr, "POST", path, &headers, body).await;
        assert_eq!(r.status, status, "{headers:?}: {r:?}");
        assert!(r.json()["error"].as_str().unwrap().contains(says), "{r:?}");
    }
    let ok_headers = [
        json,
        ("X-Leasehold-Token", TOKEN),
        ("Origin", &*origin),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let r = request(&d.addr, "POST", path, &ok_headers, body).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["action"], "drain");
    wait_until(&store, "leasehold", "tenants", "drained replica-b", |s| {
        s.drained == ["replica-b"]
    })
    .await;
    // Bad input to an allowed action is a 4xx too.
    for (p, b, status) in [
        (
            "/api/groups/tenants/weight",
            r#"{"partition": "p0", "weight": 0}"#,
            400,
        ),
        (
            "/api/groups/tenants/weight",
            r#"{"partition": "nope", "weight": 5}"#,
            404,
        ),
        (
            "/api/groups/nope/undrain",
            r#"{"replica": "replica-b"}"#,
            404,
        ),
        ("/api/groups/tenants/undrain", r#"{"replica": "a{b}"}"#, 400),
        ("/api/groups/tenants/undrain", r#"{"replica": 5}"#, 422),
        (
            "/api/groups/tenants/prefer",
            r#"{"partition": "nope", "replica": "replica-a"}"#,
            404,
        ),
        (
            "/api/groups/tenants/prefer",
            r#"{"partition": "p0", "replica": "a{b}"}"#,
            400,
        ),
        (
            "/api/groups/tenants/prefer",
            r#"{"replica": "replica-a"}"#,
            422,
        ),
    ] {
        let r = request(&d.addr, "POST", p, &ok_headers, b).await;
        assert_eq!(r.status, status, "{p} {b}: {r:?}");
        assert!(r.json()["error"].is_string(), "{r:?}");
    }
    let r = request(
        &d.addr,
        "POST",
        "/api/groups/tenants/undrain",
        &ok_headers,
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    wait_until(&store, "leasehold", "tenants", "undrained", |s| {
        s.drained.is_empty()
    })
    .await;
    // A preference, then none: the partition goes to its preferred replica.
    let prefer = r#"{"partition": "p0", "replica": "replica-a"}"#;
    let prefer_path = "/api/groups/tenants/prefer";
    let r = request(&d.addr, "POST", prefer_path, &ok_headers, prefer).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["action"], "prefer");
    wait_until(&store, "leasehold", "tenants", "p0 on replica-a", |s| {
        s.preferences == [("p0".to_owned(), "replica-a".to_owned())]
            && s.partitions
                .iter()
                .any(|p| p.partition == "p0" && p.owner.as_deref() == Some("replica-a"))
    })
    .await;
    let unprefer = r#"{"partition": "p0", "replica": null}"#;
    let r = request(&d.addr, "POST", prefer_path, &ok_headers, unprefer).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["action"], "unprefer");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("was replica-a"),
        "{r:?}"
    );
    wait_until(&store, "leasehold", "tenants", "no preference", |s| {
        s.preferences.is_empty()
    })
    .await;
    b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_is_sent_the_partitions_that_move_and_the_moves() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 4)]).await;
    let d = start(&redis.url(), &[]).await;
    let mut viewer = Events::open(&d.addr, "/events?group=tenants").await;
    let owners = |g: &serde_json::Value, replica: &str| {
        g["partitions"].as_array().map(|ps| {
            ps.iter()
                .filter(|p| p["owner"] == replica && p["partition"].is_string())
                .count()
        })
    };
    let first = viewer.until("group", |g| g["partitions"].is_array()).await;
    assert_eq!(owners(&first, "replica-a"), Some(4), "{first}");
    assert_eq!(first["moves"].as_array().unwrap().len(), 4, "{first}");
    let overview = viewer.until("overview", |_| true).await;
    assert_eq!(overview["groups"][0]["group"], "tenants", "{overview}");
    // The dashboard's connections carry its name: the one it reads on, and the one
    // subscribed to the notices.
    let clients = redis.redis_cli(&["CLIENT", "LIST"]);
    let named: Vec<&str> = clients
        .lines()
        .filter(|l| l.contains(" name=leasehold-dashboard "))
        .collect();
    assert!(named.iter().any(|l| l.contains(" sub=0 ")), "{clients}");
    assert!(named.iter().any(|l| l.contains(" sub=1 ")), "{clients}");

    let b = replica(&store, "leasehold", "tenants", 4, "replica-b");
    let moved = viewer
        .until("group", |g| owners(g, "replica-b") == Some(2))
        .await;
    assert_eq!(owners(&moved, "replica-a"), Some(2), "{moved}");
    // The hand-offs come as moves (in this event or the next ones).
    let mut handoffs = 0;
    let mut event = moved;
    loop {
        handoffs += event["moves"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["cause"] == "handoff" && m["to"] == "replica-b")
            .count();
        if handoffs == 2 {
            break;
        }
        event = viewer.until("group", |_| true).await;
    }
    // Later events leave the unchanged partitions out.
    let later = viewer.until("group", |g| g["partitions"].is_null()).await;
    assert_eq!(later["replicas"].as_array().unwrap().len(), 2, "{later}");
    b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_brings_the_update_before_the_refresh() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let a = replica(&store, "leasehold", "tenants", 2, "replica-a");
    let b = replica(&store, "leasehold", "tenants", 2, "replica-b");
    let balanced = [("replica-a", 1), ("replica-b", 1)];
    wait_for_counts(&store, "leasehold", "tenants", &balanced).await;
    // Without a notice, the group would be read again in a minute.
    let d = Dashboard::start(&redis.url(), "100ms", "60s", &[]).await;
    let mut viewer = Events::open(&d.addr, "/events?group=tenants").await;
    viewer.until("group", |g| g["partitions"].is_array()).await;
    let drained_b = |g: &serde_json::Value| {
        g["replicas"].as_array().is_some_and(|rs| {
            rs.iter()
                .any(|r| r["replica"] == "replica-b" && r["drained"] == true)
        })
    };
    let started = tokio::time::Instant::now();
    // The drain publishes the group's notice.
    let admin = leasehold_partitions::GroupAdmin::new(store.clone(), "tenants").unwrap();
    admin.drain("replica-b").await.unwrap();
    viewer.until("group", drained_b).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the drain showed after {:?}",
        started.elapsed()
    );
    b.shutdown().await;
    a.shutdown().await;
}

/// Commands the server ran, by name, but `INFO` (the test's own).
fn commands(redis: &RedisServer) -> u64 {
    redis
        .redis_cli(&["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter_map(|l| {
            let calls = l.split("calls=").nth(1)?;
            calls.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// Commands run during `window`.
async fn commands_during(redis: &RedisServer, window: Duration) -> u64 {
    let before = commands(redis);
    sleep(window).await;
    commands(redis) - before
}

/// Waits until a second passes with no command (a viewer gone is noticed at the next
/// keep-alive the dashboard writes to it, within a few seconds).
async fn wait_until_quiet(redis: &RedisServer) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while commands_during(redis, Duration::from_secs(1)).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dashboard still reads 20 s after its viewers left"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_viewer_costs_redis_nothing_and_ten_cost_what_one_does() {
    let redis = RedisServer::start();
    let store = store(&redis);
    create_group(&store, "leasehold", "tenants", 8).await;
    let (elector, _) = leader(&store, "leasehold", "scheduler", "replica-a").await;
    elector.shutdown().await;
    drop(store);
    let d = start(&redis.url(), &[]).await;
    let window = Duration::from_secs(3);

    // Nobody has looked yet.
    assert_eq!(
        commands_during(&redis, window).await,
        0,
        "before any viewer"
    );

    // One viewer: reads at the refresh pace.
    let mut one = Events::open(&d.addr, "/events?group=tenants").await;
    one.until("group", |g| g["partitions"].is_array()).await;
    let with_one = commands_during(&redis, window).await;
    assert!(with_one > 0, "one viewer is read for");
    drop(one);
    wait_until_quiet(&redis).await;
    assert_eq!(
        commands_during(&redis, window).await,
        0,
        "after the viewer left"
    );

    // Ten viewers share the readers.
    let mut ten = Vec::new();
    for _ in 0..10 {
        let mut v = Events::open(&d.addr, "/events?group=tenants").await;
        v.until("group", |g| g["partitions"].is_array()).await;
        ten.push(v);
    }
    let with_ten = commands_during(&redis, window).await;
    eprintln!("commands in {window:?}: one viewer {with_one}, ten viewers {with_ten}");
    assert!(
        with_ten <= with_one + with_one / 4 + 10,
        "ten viewers cost {with_ten} commands, one {with_one}"
    );
    drop(ten);
    wait_until_quiet(&redis).await;
    assert_eq!(commands_during(&redis, window).await, 0, "after they left");
}

/// A storm of the group's notices costs at most one read of its status per renew
/// interval (the replicas' lease is 2 s, so about 667 ms), however short `--interval`:
/// each full read is one `group` event with a new `read_at`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_notices_costs_one_status_read_per_renew_interval() {
    use leasehold_election::redis;

    let redis_server = RedisServer::start();
    let store = store(&redis_server);
    let a = replica(&store, "leasehold", "tenants", 4, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 4)]).await;
    // No refresh within the test: only the notices call for reads.
    let d = Dashboard::start(&redis_server.url(), "100ms", "60s", &[]).await;
    let mut viewer = Events::open(&d.addr, "/events?group=tenants").await;
    viewer.until("group", |g| g["partitions"].is_array()).await;
    // Past the first renew interval, so that the lease is known (sessions seen).
    sleep(Duration::from_secs(1)).await;
    let client = redis::Client::open(redis_server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let window = Duration::from_secs(3);
    let storm = async {
        let end = tokio::time::Instant::now() + window;
        while tokio::time::Instant::now() < end {
            let _: i64 = redis::cmd("PUBLISH")
                .arg("leasehold:released")
                .arg("leasehold:{tenants}")
                .query_async(&mut conn)
                .await
                .unwrap();
            sleep(Duration::from_millis(20)).await;
        }
    };
    let mut reads = std::collections::BTreeSet::new();
    let watch = async {
        loop {
            let (name, event) = viewer.next().await;
            if name == "group" {
                reads.insert(event["read_at"].as_str().unwrap_or_default().to_owned());
            }
        }
    };
    tokio::select! {
        () = storm => {}
        () = watch => {}
    }
    // 150 notices in 3 s: at most one read per ~667 ms (and one in flight at the start).
    eprintln!("{} status reads during {window:?} of notices", reads.len());
    assert!(reads.len() >= 2, "the notices were not read for: {reads:?}");
    assert!(reads.len() <= 7, "{} reads: {reads:?}", reads.len());
    a.shutdown().await;
}

/// A group whose renew interval (a third of its lease) is longer than `--refresh`: the
/// reader waits for it, idle, rather than spinning until it comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_waits_idle_for_a_renew_interval_longer_than_the_refresh() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let config = leasehold_partitions::GroupConfig::builder("tenants", ["p0", "p1"], "replica-a")
        .lease(Duration::from_secs(15))
        .build()
        .unwrap();
    let a = leasehold_partitions::Coordinator::new(
        store.clone(),
        config,
        |_p: String, lead: leasehold_partitions::Ownership| async move {
            lead.cancelled().await;
            Ok(())
        },
    )
    .spawn();
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 2)]).await;
    let d = Dashboard::start(&redis.url(), "100ms", "1s", &[]).await;
    let mut viewer = Events::open(&d.addr, "/events?group=tenants").await;
    viewer.until("group", |g| g["partitions"].is_array()).await;
    // Past the refresh: the next read waits for the renew interval (about 5 s).
    sleep(Duration::from_millis(1500)).await;
    let before = d.cpu_time();
    sleep(Duration::from_secs(3)).await;
    let used = d.cpu_time() - before;
    assert!(
        used < Duration::from_secs(1),
        "the dashboard used {used:?} of CPU in 3 s"
    );
    drop(viewer);
    a.shutdown().await;
}
