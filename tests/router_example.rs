//! `examples/router.rs` as a fleet of processes against a real redis-server: a client
//! routing requests with its `Router` has every request for a tenant with an owner
//! served (by the replica it named, or after one redirect) through a SIGKILL of one
//! replica, a join and a graceful leave (SIGTERM); and a replica answers `200` for a
//! tenant it owns, `421` naming the owner for one it does not, `404` for one that is
//! not the group's.
//!
//! The example's source is compiled into this test (`#[path]`); the replicas are this
//! binary re-executed as the example's `serve`, and the load runs in this process on
//! the example's own client code (its `load`, `Caller` and `Tally`), so that the test
//! can read its counts between the steps. The example's `client` command runs once at
//! the end. This is a `harness = false` test: `main` decides which role a process
//! plays.

#[allow(dead_code)]
#[path = "../examples/router.rs"]
mod router;
mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use leasehold_partitions::Router;
use leasehold_testkit::RedisServer;

use self::router::{Caller, Counts, Tally};
use self::support::{CHILD_ENV, ExampleProcess, free_port};

const TENANTS: usize = 32;
/// A short lease keeps the run short: a killed replica's tenants move after it.
const LEASE: Duration = Duration::from_secs(1);
/// Requests per second, over the tenants in turn.
const RATE: f64 = 100.0;
/// Any wait for the fleet to reach a state (a start, a move): generous for a busy
/// 2-core machine.
const LIMIT: Duration = Duration::from_secs(45);
/// The load runs on this long after each step has settled.
const AFTER: Duration = Duration::from_secs(2);
/// From a signal to the exit (the leaver redirects until its tenants have new owners).
const EXIT: Duration = Duration::from_secs(20);

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        support::child(router::main);
    }
    support::run(&[(
        "every_request_for_an_owned_tenant_is_served_through_a_kill_a_join_and_a_leave",
        every_request_is_served,
    )]);
}

/// A replica process with its HTTP port.
struct Replica {
    port: u16,
    process: ExampleProcess,
}

impl Replica {
    fn start(name: &str, redis: &RedisServer) -> Self {
        let port = free_port();
        let process = ExampleProcess::start(
            "router",
            &[
                "serve",
                "--replica",
                name,
                "--port",
                &port.to_string(),
                "--lease-ms",
                &LEASE.as_millis().to_string(),
                "--tenants",
                &TENANTS.to_string(),
            ],
            &[("REDIS_URL", &redis.url())],
        );
        process.wait_for_line(&format!("{name}: serving group 'tenants'"), LIMIT);
        Self { port, process }
    }
}

/// The replicas running, by id.
type Fleet = BTreeMap<&'static str, Replica>;

/// The test's client: a router of the group and the example's load through it, on a
/// runtime of the test's own.
struct Load {
    runtime: tokio::runtime::Runtime,
    router: Arc<Router>,
    tally: Arc<Tally>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn new(redis: &RedisServer) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let router = runtime
            .block_on(async { router::router_of(&redis.url(), "leasehold-router") })
            .expect("a router");
        Self {
            runtime,
            router: Arc::new(router),
            tally: Arc::new(Tally::default()),
            stop: None,
            task: None,
        }
    }

    /// Tenant → the replica the router names.
    fn routes(&self) -> BTreeMap<String, String> {
        self.router
            .routes()
            .into_iter()
            .map(|(t, r)| (t, r.replica().to_owned()))
            .collect()
    }

    /// Waits until the router names an owner of `fleet` for every tenant, and `done`
    /// holds of the routes.
    fn wait_routed(
        &self,
        what: &str,
        fleet: &Fleet,
        done: impl Fn(&BTreeMap<String, String>) -> bool,
    ) {
        let deadline = Instant::now() + LIMIT;
        loop {
            let routes = self.routes();
            if routes.len() == TENANTS
                && routes.values().all(|r| fleet.contains_key(r.as_str()))
                && done(&routes)
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not {what} within {LIMIT:?}: {routes:?}"
            );
            sleep(Duration::from_millis(50));
        }
    }

    fn start(&mut self) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (router, tally) = (Arc::clone(&self.router), Arc::clone(&self.tally));
        self.task = Some(self.runtime.spawn(async move {
            let until = async {
                let _ = stopped.await;
            };
            let tenants = router::tenants(TENANTS);
            router::load(&[router], &Caller::new(), &tenants, RATE, until, &tally).await;
        }));
        self.stop = Some(stop);
    }

    fn finish(&mut self) -> Counts {
        let _ = self.stop.take().expect("started").send(());
        let task = self.task.take().expect("started");
        self.runtime
            .block_on(async { tokio::time::timeout(LIMIT, task).await })
            .expect("the load stops")
            .expect("the load ran");
        self.tally.counts()
    }
}

/// Counts since `before`.
fn since(now: Counts, before: Counts) -> Counts {
    Counts {
        requests: now.requests - before.requests,
        ok: now.ok - before.ok,
        redirected: now.redirected - before.redirected,
        unavailable: now.unavailable - before.unavailable,
        unreachable: now.unreachable - before.unreachable,
        failed: now.failed - before.failed,
    }
}

/// `GET path` over HTTP/1.0 (neither chunked nor kept alive): the status code, the
/// head and the body.
fn http_get(port: u16, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the replica");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("send a request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status code in {head:?}"));
    (code, head.to_ascii_lowercase(), body.to_owned())
}

/// Of `among`, the replica the routes name most often.
fn busiest<'a>(routes: &BTreeMap<String, String>, among: &[&'a str]) -> &'a str {
    among
        .iter()
        .copied()
        .max_by_key(|r| routes.values().filter(|o| o == r).count())
        .expect("a replica")
}

fn every_request_is_served() {
    let redis = RedisServer::start();
    let mut fleet: Fleet = ["a", "b", "c"]
        .map(|name| (name, Replica::start(name, &redis)))
        .into();
    let mut load = Load::new(&redis);
    load.wait_routed("spread over a, b and c", &fleet, |routes| {
        ["a", "b", "c"]
            .iter()
            .all(|r| routes.values().any(|o| o == r))
    });

    // The replicas' answers, once.
    let routes = load.routes();
    let port = fleet["a"].port;
    let (mine, _) = routes.iter().find(|(_, o)| *o == "a").expect("a owns one");
    let (theirs, owner) = routes
        .iter()
        .find(|(_, o)| *o != "a")
        .expect("b or c owns one");
    let (code, _, body) = http_get(port, &format!("/tenants/{mine}/orders/7"));
    assert_eq!(code, 200, "{body}");
    let served: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(served["tenant"], mine.as_str());
    assert_eq!(served["replica"], "a");
    assert!(served["fence"].as_u64().is_some_and(|f| f > 0), "{body}");
    let (code, head, body) = http_get(port, &format!("/tenants/{theirs}"));
    let at = format!("127.0.0.1:{}", fleet[owner.as_str()].port);
    assert_eq!(code, 421, "{body}");
    assert!(head.contains(&format!("x-leasehold-owner: {at}")), "{head}");
    let redirect: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(redirect["owner"], at.as_str());
    let (code, _, body) = http_get(port, "/tenants/tenant-99/orders");
    assert_eq!(code, 404, "{body}");
    for path in ["/livez", "/readyz"] {
        let deadline = Instant::now() + LIMIT;
        loop {
            let (code, _, body) = http_get(port, path);
            if code == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "{path}: {code} {body}");
            sleep(Duration::from_millis(200));
        }
    }

    // The load, through every step.
    load.start();
    let mut steps: Vec<(&str, Counts)> = Vec::new();
    let mut mark = load.tally.counts();
    let mut step = |name: &'static str, load: &Load| {
        sleep(AFTER);
        let now = load.tally.counts();
        steps.push((name, since(now, mark)));
        mark = now;
    };
    step("steady", &load);

    // A kill: nothing released; the victim's tenants move once its leases expire.
    let victim = busiest(&load.routes(), &["a", "b", "c"]);
    let mut killed = fleet.remove(victim).expect("the victim");
    killed.process.signal("KILL");
    let _ = killed.process.wait_for_exit(EXIT);
    load.wait_routed(
        "the killed replica's tenants routed to the others",
        &fleet,
        |_| true,
    );
    step("kill", &load);

    // A join: d takes its share.
    fleet.insert("d", Replica::start("d", &redis));
    load.wait_routed("d's share taken", &fleet, |routes| {
        routes.values().any(|o| o == "d")
    });
    step("join", &load);

    // A graceful leave: the busiest of the others releases its tenants, redirects until
    // their new owners are known, and exits 0.
    let live: Vec<&str> = fleet.keys().copied().filter(|r| *r != "d").collect();
    let leaver = busiest(&load.routes(), &live);
    let mut left = fleet.remove(leaver).expect("the leaver");
    left.process.signal("TERM");
    let status = left.process.wait_for_exit(EXIT);
    let lines = left.process.lines();
    assert!(
        status.success(),
        "{leaver}: exit {status}:\n{}",
        lines.join("\n")
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("{leaver}: left the group"))),
        "{}",
        lines.join("\n")
    );
    load.wait_routed("the leaver's tenants routed to the others", &fleet, |_| {
        true
    });
    step("leave", &load);

    let total = load.finish();
    let failures = load.tally.failures();
    let report: Vec<String> = steps
        .iter()
        .map(|(name, c)| {
            format!(
                "{name}: {} requests, {} ok, {} redirected, {} unavailable ({} unreachable), {} failed",
                c.requests, c.ok, c.redirected, c.unavailable, c.unreachable, c.failed
            )
        })
        .collect();
    println!(
        "killed {victim}, joined d, {leaver} left; {}",
        report.join("; ")
    );
    assert_eq!(
        total.failed, 0,
        "requests for tenants with an owner not served: {failures:#?}\n{report:#?}"
    );
    for (name, c) in &steps {
        assert!(c.ok + c.redirected > 0, "{name}: nothing served: {c:?}");
    }
    // Nothing was unavailable while the fleet held still, nor around a graceful leave
    // or a join: only a crash leaves tenants without a running owner.
    let (_, steady) = steps[0];
    assert_eq!(steady.unavailable, 0, "steady: {steady:?}");
    let (_, leave) = steps[3];
    assert_eq!(leave.unreachable, 0, "leave: {leave:?}");

    // The example's own client, as a process: its summary line.
    let client = ExampleProcess::start(
        "router",
        &[
            "client",
            "--requests-per-s",
            "50",
            "--seconds",
            "2",
            "--tenants",
            &TENANTS.to_string(),
        ],
        &[("REDIS_URL", &redis.url())],
    );
    let line = client.wait_for_line("\"requests\":", LIMIT);
    let summary: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert!(
        summary["requests"].as_u64().is_some_and(|n| n > 0),
        "{line}"
    );
    assert_eq!(summary["failed"], 0, "{line}");
    assert_eq!(
        summary["ok"].as_u64().unwrap_or(0) + summary["redirected"].as_u64().unwrap_or(0),
        summary["requests"].as_u64().unwrap_or(0),
        "{line}"
    );

    for (_, mut replica) in std::mem::take(&mut fleet) {
        replica.process.signal("TERM");
        let status = replica.process.wait_for_exit(EXIT);
        assert!(status.success(), "{}", replica.process.lines().join("\n"));
    }
}
