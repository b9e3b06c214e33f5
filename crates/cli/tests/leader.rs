//! `leasehold leader` against a real redis-server and a real elector.

mod support;

use std::time::Duration;

use leasehold_election::{Elector, ElectorConfig, Leadership};
use leasehold_testkit::RedisServer;
use support::{assert_failed, leader, run, run_json, store};
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

    assert_eq!(json["fence"], fence.get());

    // A graceful shutdown releases the lease at once.
    elector.shutdown().await;
    let r = run(&["leader", "--redis-url", &url, "--duty", "scheduler"]).await;
    let expected = format!("scheduler: nobody leads now (last fence {fence})\n");
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), &*expected), "{r:?}");
    assert!(r.stderr.is_empty(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duty_never_elected_is_not_found_unlike_one_nobody_leads_now() {
    let redis = RedisServer::start();
    let url = redis.url();
    let never = ["leader", "--redis-url", &url, "--duty", "reports"];
    let r = run(&never).await;
    assert_failed(
        &r,
        4,
        "no duty \"reports\" under prefix \"leasehold\": never elected here (no key \
         leasehold:{reports}:fence)",
    );
    let mut json = never.to_vec();
    json.push("--json");
    assert_failed(&run(&json).await, 4, "never elected here");
    // Under another prefix it is another duty.
    let (elector, fence) = leader(&store(&redis), "ops", "reports", "replica-a").await;
    assert_failed(&run(&never).await, 4, "never elected here");
    elector.shutdown().await;

    // Elected once, released: nobody leads now, exit 0.
    let mut ops = never.to_vec();
    ops.extend(["--prefix", "ops"]);
    let r = run(&ops).await;
    let expected = format!("reports: nobody leads now (last fence {fence})\n");
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), &*expected), "{r:?}");
    ops.push("--json");
    let r = run(&ops).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(
        r.stdout,
        format!(
            "{{\n  \"duty\": \"reports\",\n  \"prefix\": \"ops\",\n  \"leader\": null,\n  \
             \"fence\": {fence}\n}}\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_key_holding_a_foreign_value_is_not_shown_as_a_leader() {
    let redis = RedisServer::start();
    let url = redis.url();
    let args = ["leader", "--redis-url", &url, "--duty", "scheduler"];
    for value in [
        "x",
        "replica-a:0123",
        "replica-a:0123456789ABCDEF0123456789ABCDEF",
    ] {
        redis.redis_cli(&["SET", "leasehold:{scheduler}:lease", value]);
        let r = run(&args).await;
        assert_failed(
            &r,
            5,
            &format!(
                "leasehold:{{scheduler}}:lease holds {value:?}, which is not a Leasehold \
                 lease (<replica>:<32 hex digits>)"
            ),
        );
        let mut json = args.to_vec();
        json.push("--json");
        assert_failed(&run(&json).await, 5, "not a Leasehold lease");
    }
    // A token of the right shape, written by hand, is a leader like any other.
    redis.redis_cli(&[
        "SET",
        "leasehold:{scheduler}:lease",
        "replica-z:0123456789abcdef0123456789abcdef",
        "PX",
        "60000",
    ]);
    redis.redis_cli(&["SET", "leasehold:{scheduler}:fence", "12"]);
    let r = run(&args).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(
        r.stdout
            .starts_with("scheduler: led by replica-z (fence 12, lease left "),
        "{r:?}"
    );
}
