//! `leasehold leader` against a real redis-server and a real elector.

mod support;

use std::time::Duration;

use leasehold_election::{Elector, ElectorConfig, Leadership};
use leasehold_testkit::RedisServer;
use support::{run, run_json, store};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_names_the_replica_that_leads_then_nobody_after_it_leaves() {
    let redis = RedisServer::start();
    let config = ElectorConfig::builder("scheduler", "replica-a")
        .lease(Duration::from_secs(5))
        .build()
        .unwrap();
    let elector = Elector::new(store(&redis), config, |lead: Leadership| async move {
        lead.cancelled().await;
        Ok(())
    })
    .spawn();
    let fence = timeout(Duration::from_secs(10), elector.wait_until_leader())
        .await
        .expect("replica-a never led")
        .unwrap();
    let url = redis.url();

    let r = run(&["leader", "--redis-url", &url, "--duty", "scheduler"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    let expected = format!("scheduler: led by replica-a (fence {fence}, lease left ");
    assert!(r.stdout.starts_with(&expected), "{r:?}");
    assert!(
        r.stdout.ends_with("s)\n") && r.stdout.lines().count() == 1,
        "{r:?}"
    );

    let json = run_json(&[
        "leader",
        "--redis-url",
        &url,
        "--duty",
        "scheduler",
        "--json",
    ])
    .await;
    assert_eq!(json["duty"], "scheduler");
    assert_eq!(json["prefix"], "leasehold");
    assert_eq!(json["leader"]["replica"], "replica-a");
    assert_eq!(json["leader"]["fence"], fence.get());
    let left = json["leader"]["lease_left_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 5_000, "{json}");

    // A graceful shutdown releases the lease at once.
    elector.shutdown().await;
    let r = run(&["leader", "--redis-url", &url, "--duty", "scheduler"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (Some(0), "scheduler: nobody leads\n"),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_of_a_duty_nobody_ever_led_is_nobody() {
    let redis = RedisServer::start();
    let url = redis.url();
    let r = run(&[
        "leader",
        "--redis-url",
        &url,
        "--duty",
        "reports",
        "--prefix",
        "ops",
    ])
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (Some(0), "reports: nobody leads\n"),
        "{r:?}"
    );
    assert!(r.stderr.is_empty(), "{r:?}");

    let r = run(&["leader", "--redis-url", &url, "--duty", "reports", "--json"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(
        r.stdout,
        "{\n  \"duty\": \"reports\",\n  \"prefix\": \"leasehold\",\n  \"leader\": null\n}\n"
    );
}
