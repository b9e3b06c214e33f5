//! The demo against real Redis: a server given by `REDIS_URL`, and the private
//! redis-server it starts by itself. Needs `redis-server` (CI installs it).

mod support;

use leasehold_testkit::RedisServer;
use support::run_demo;

const FAST: [&str; 5] = ["--no-tui", "--lease-ms", "500", "--script-delay-ms", "300"];

#[test]
fn redis_url_run_converges_after_every_event() {
    let server = RedisServer::start();
    let run = run_demo(&FAST, &[("REDIS_URL", &server.url())]);
    assert!(
        run.stdout
            .contains(&format!("using Redis at {}", server.url())),
        "{}",
        run.stdout
    );
    run.assert_converged(32);
}

#[test]
fn without_redis_url_it_starts_a_private_redis_server() {
    // Fails rather than skips when redis-server is missing, like every Redis test here.
    drop(RedisServer::start());
    let run = run_demo(&FAST, &[]);
    assert!(
        run.stdout
            .contains("using a private redis-server on 127.0.0.1:"),
        "{}",
        run.stdout
    );
    run.assert_converged(32);
}
