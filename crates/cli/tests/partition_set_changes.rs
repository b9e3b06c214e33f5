//! `leasehold partitions add|remove|list` against a real redis-server: the happy paths,
//! a running replica taking an added partition and giving back a removed one, and
//! every kind of bad input refused with its exit code, changing nothing.

mod support;

use leasehold_testkit::RedisServer;
use support::{
    assert_failed, create_group, digest, redis_with_digest, replica, run, run_json, store,
    wait_for_counts, wait_until,
};

/// `leasehold partitions <args> --redis-url <url>`.
async fn partitions(url: &str, args: &[&str]) -> support::Run {
    let mut all = vec!["partitions"];
    all.extend(args);
    all.extend(["--redis-url", url]);
    run(&all).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_adds_to_a_group_its_replicas_created_and_remove_takes_away() {
    let redis = RedisServer::start();
    let url = redis.url();
    // An add never creates a group (after a Redis restart that lost it, an add landing
    // first would shrink it to the added names): its replicas do.
    let r = partitions(&url, &["add", "--group", "tenants", "p0", "p1"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            Some(4),
            "",
            "leasehold: error: no group \"tenants\" under prefix \"leasehold\" (no replica \
             has created it: a group is created by its replicas, never by `partitions add`); \
             there are no groups under prefix \"leasehold\" (is --prefix right?)\n"
        ),
        "{r:?}"
    );
    assert_eq!(
        redis.redis_cli(&["DBSIZE"]),
        "(integer) 0",
        "nothing was written"
    );
    create_group(&store(&redis), "leasehold", "tenants", 2).await;
    let r = partitions(&url, &["add", "--group", "tenants", "p2", "p3"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "added 2 partitions to group tenants (prefix leasehold)\n"
        ),
        "{r:?}"
    );
    let r = partitions(&url, &["list", "--group", "tenants"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (Some(0), "p0\np1\np2\np3\n"),
        "{r:?}"
    );

    let r = partitions(&url, &["remove", "--group", "tenants", "p1", "p3"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "removed 2 partitions from group tenants (prefix leasehold); an owned one is \
             handed back by its owner\n"
        ),
        "{r:?}"
    );
    let json = run_json(&[
        "partitions",
        "list",
        "--group",
        "tenants",
        "--json",
        "--redis-url",
        &url,
    ])
    .await;
    assert_eq!(
        json,
        serde_json::json!({"group": "tenants", "prefix": "leasehold", "partitions": ["p0", "p2"]})
    );

    // The old --grant-delay-ms is still accepted, with a warning that it does nothing.
    let r = partitions(
        &url,
        &["add", "--group", "tenants", "--grant-delay-ms", "0", "p4"],
    )
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            Some(0),
            "added 1 partition to group tenants (prefix leasehold)\n",
            "leasehold: warning: --grant-delay-ms is no longer used: `partitions add` never \
             creates a group (its replicas do, and restore it after a Redis restart that \
             lost it)\n"
        ),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_replica_takes_an_added_partition_and_gives_back_a_removed_one() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let url = redis.url();
    let a = replica(&store, "leasehold", "tenants", 2, "replica-a");
    wait_for_counts(&store, "leasehold", "tenants", &[("replica-a", 2)]).await;

    let r = partitions(&url, &["add", "--group", "tenants", "p7"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    wait_until(&store, "leasehold", "tenants", "owned p7", |s| {
        s.partitions
            .iter()
            .any(|p| p.partition == "p7" && p.owner.as_deref() == Some("replica-a"))
    })
    .await;

    let r = partitions(&url, &["remove", "--group", "tenants", "p0"]).await;
    assert_eq!(r.code, Some(0), "{r:?}");
    let s = wait_until(&store, "leasehold", "tenants", "gave p0 back", |s| {
        s.members.iter().all(|m| m.held == 2)
    })
    .await;
    let names: Vec<&str> = s.partitions.iter().map(|p| p.partition.as_str()).collect();
    assert_eq!(names, ["p1", "p7"]);
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_its_exit_code_and_changes_nothing() {
    let redis = redis_with_digest();
    let url = redis.url();
    create_group(&store(&redis), "leasehold", "tenants", 2).await;
    let before = digest(&redis);
    let long = "x".repeat(300);

    let cases: &[(&[&str], i32, &str)] = &[
        // A refused name says which argument it was, and that nothing was changed.
        (
            &["partitions", "add", "--group", "tenants", "a\tb"],
            2,
            "leasehold: error: invalid PARTITION \"a\\tb\": partition name contains the \
             control character '\\t'; nothing was changed\n",
        ),
        (
            &["partitions", "add", "--group", "tenants", "p5", ""],
            2,
            "invalid PARTITION 2 of 2 \"\": partition name must not be empty; nothing was \
             changed\n",
        ),
        (
            &["partitions", "add", "--group", "tenants", long.as_str()],
            2,
            "partition name is 300 bytes long; the limit is 256; nothing was changed\n",
        ),
        (
            &["partitions", "remove", "--group", "tenants", "p0", "x}y"],
            2,
            "invalid PARTITION 2 of 2 \"x}y\": partition name contains '}', which is \
             reserved for Redis Cluster hash tags; nothing was changed\n",
        ),
        (
            &["partitions", "weight", "--group", "tenants", "{p0}", "2"],
            2,
            "invalid PARTITION \"{p0}\": partition name contains '{'",
        ),
        (
            &["partitions", "weight", "--group", "tenants", "p0", "-5"],
            2,
            "invalid WEIGHT -5: a partition weight must be between 1 and 1000000; nothing \
             was changed\n",
        ),
        (
            &["partitions", "add", "-g", "", "p5"],
            2,
            "invalid --group \"\": group must not be empty; nothing was changed\n",
        ),
        (
            &["drain", "-g", "tenants", "-r", "a\tb"],
            2,
            "invalid --replica \"a\\tb\": replica id contains the control character \
             '\\t'; nothing was changed\n",
        ),
        (
            &["undrain", "-g", "tenants", "-r", "r", "-p", "a{"],
            2,
            "invalid --prefix \"a{\": prefix contains '{', which is reserved for Redis \
             Cluster hash tags; nothing was changed\n",
        ),
        // Adding.
        (
            &["partitions", "add", "--group", "tenants", "p0"],
            2,
            "partition \"p0\" is already in group \"tenants\"; nothing was changed",
        ),
        (
            &["partitions", "add", "--group", "tenants", "p5", "p0"],
            2,
            "partition \"p0\" is already in group \"tenants\"; nothing was changed",
        ),
        (
            &["partitions", "add", "--group", "tenants", "p5", "p5"],
            2,
            "partition \"p5\" is named more than once; nothing was changed",
        ),
        (
            &["partitions", "add", "--group", "tenants", "p5", ""],
            2,
            "partition name must not be empty",
        ),
        (
            &["partitions", "add", "--group", "tenants", "a{b"],
            2,
            "partition name contains '{', which is reserved for Redis Cluster hash tags",
        ),
        (
            &["partitions", "add", "--group", "tenants", "a}b"],
            2,
            "contains '}'",
        ),
        (
            &["partitions", "add", "--group", "tenants", "a\nb"],
            2,
            "partition name contains the control character '\\n'",
        ),
        (
            &["partitions", "add", "--group", "", "p5"],
            2,
            "group must not be empty",
        ),
        (
            &["partitions", "add", "--group", "t{x}", "p5"],
            2,
            "group contains '{'",
        ),
        (
            &[
                "partitions",
                "add",
                "--group",
                "tenants",
                "--prefix",
                "a\tb",
                "p5",
            ],
            2,
            "prefix contains the control character",
        ),
        // Removing.
        (
            &["partitions", "remove", "--group", "tenants", "p9"],
            4,
            "no partition \"p9\" in group \"tenants\"; nothing was changed",
        ),
        (
            &["partitions", "remove", "--group", "tenants", "p1", "p9"],
            4,
            "no partition \"p9\" in group \"tenants\"; nothing was changed",
        ),
        (
            &["partitions", "remove", "--group", "tenants", "p0", "p1"],
            2,
            "a group keeps at least one partition: that would leave group \"tenants\" \
             empty; nothing was changed",
        ),
        (
            &["partitions", "remove", "--group", "tenants", "p0", "p0"],
            2,
            "partition \"p0\" is named more than once",
        ),
        (
            &["partitions", "remove", "--group", "tenants", ""],
            2,
            "must not be empty",
        ),
        (
            &["partitions", "remove", "--group", "nope", "p0"],
            4,
            "no group \"nope\" under prefix \"leasehold\"",
        ),
        (
            &[
                "partitions",
                "remove",
                "--group",
                "tenants",
                "--prefix",
                "ops",
                "p0",
            ],
            4,
            "no group \"tenants\" under prefix \"ops\"",
        ),
        // Reading a group that does not exist, or a partition not in it.
        (
            &["partitions", "list", "--group", "nope"],
            4,
            "no group \"nope\"",
        ),
        (
            &["owner", "--group", "tenants", "p9"],
            4,
            "no partition \"p9\" in group \"tenants\"",
        ),
        (&["owner", "--group", "nope", "p0"], 4, "no group \"nope\""),
        (
            &["owner", "--group", "tenants", "a{b}"],
            2,
            "partition name contains '{'",
        ),
        (&["status", "--group", "nope"], 4, "no group \"nope\""),
        // Draining a replica that is not live, or of no group.
        (
            &["drain", "--group", "tenants", "--replica", "ghost"],
            4,
            "replica \"ghost\" is not live in group \"tenants\" (only a heartbeating \
             replica can be drained; undrain takes a live or a drained one); nothing \
             was changed",
        ),
        (
            &["undrain", "--group", "tenants", "--replica", "ghost"],
            4,
            "replica \"ghost\" is not live in group \"tenants\"",
        ),
        (
            &["drain", "--group", "nope", "--replica", "ghost"],
            4,
            "no group \"nope\"",
        ),
        (
            &["drain", "--group", "tenants", "--replica", ""],
            2,
            "replica id must not be empty",
        ),
    ];
    for (args, code, message) in cases {
        let mut all = args.to_vec();
        all.extend(["--redis-url", &url]);
        let r = run(&all).await;
        assert_failed(&r, *code, message);
        assert_eq!(digest(&redis), before, "{args:?} changed Redis: {r:?}");
    }
    // A read says which argument was bad, but not that nothing changed: it changes
    // nothing anyway.
    for (args, message) in [
        (
            vec!["owner", "-g", "tenants", "a\tb"],
            "leasehold: error: invalid PARTITION \"a\\tb\": partition name contains the \
             control character '\\t'\n",
        ),
        (
            vec!["status", "-g", ""],
            "leasehold: error: invalid --group \"\": group must not be empty\n",
        ),
        (
            vec!["leader", "-d", "d}"],
            "leasehold: error: invalid --duty \"d}\": duty contains '}', which is reserved \
             for Redis Cluster hash tags\n",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["-u", &url]);
        let r = run(&all).await;
        assert_eq!((r.code, r.stderr.as_str()), (Some(2), message), "{r:?}");
    }
    assert!(
        !run(&[
            "partitions",
            "add",
            "--group",
            "tenants",
            "--redis-url",
            &url
        ])
        .await
        .stderr
        .is_empty(),
        "a partition name is required"
    );
    let r = partitions(&url, &["list", "--group", "tenants"]).await;
    assert_eq!(r.stdout, "p0\np1\n", "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_look_like_negative_numbers_or_flags_are_partitions_too() {
    let redis = RedisServer::start();
    let url = redis.url();
    create_group(&store(&redis), "leasehold", "tenants", 1).await;
    // A negative-looking name as is; one that looks like a flag after `--`.
    let r = partitions(&url, &["add", "-g", "tenants", "-5", "p1"]).await;
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""), "{r:?}");
    let r = run(&[
        "partitions",
        "add",
        "-g",
        "tenants",
        "-u",
        &url,
        "--",
        "-dash",
        "--double",
    ])
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "added 2 partitions to group tenants (prefix leasehold)\n"
        ),
        "{r:?}"
    );
    let r = partitions(&url, &["list", "-g", "tenants"]).await;
    assert_eq!(r.stdout, "p0\n-5\np1\n-dash\n--double\n", "{r:?}");
    let r = partitions(&url, &["weight", "-g", "tenants", "-5", "7"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "partition -5 of group tenants: weight 7 (was 1); the group balances by weight\n"
        ),
        "{r:?}"
    );
    let r = run(&["owner", "-g", "tenants", "-u", &url, "--", "-dash"]).await;
    assert_eq!(
        r.stdout, "-dash: nobody owns it now (never leased)\n",
        "{r:?}"
    );
    // Without `--`, a flag-like name is a usage error, in one line, naming the fix.
    let r = partitions(&url, &["remove", "-g", "tenants", "-dash"]).await;
    assert_failed(&r, 2, "use '-- -dash'");
    let r = run(&[
        "partitions",
        "remove",
        "-g",
        "tenants",
        "-u",
        &url,
        "--",
        "-5",
        "-dash",
        "--double",
    ])
    .await;
    assert_eq!(r.code, Some(0), "{r:?}");
    let r = partitions(&url, &["list", "-g", "tenants", "-o", "json"]).await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap(),
        serde_json::json!({"group": "tenants", "prefix": "leasehold", "partitions": ["p0", "p1"]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weight_sets_a_partitions_weight_and_status_shows_the_loads() {
    let redis = redis_with_digest();
    let url = redis.url();
    create_group(&store(&redis), "leasehold", "tenants", 2).await;
    let r = partitions(&url, &["weight", "--group", "tenants", "p0", "5"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "partition p0 of group tenants: weight 5 (was 1); the group balances by weight\n"
        ),
        "{r:?}"
    );
    let json = run_json(&[
        "status",
        "--group",
        "tenants",
        "--json",
        "--redis-url",
        &url,
    ])
    .await;
    assert_eq!(json["weighted"], true, "{json}");
    assert_eq!(json["total_weight"], 6, "{json}");
    assert_eq!(json["partitions"][0]["weight"], 5, "{json}");
    assert_eq!(json["partitions"][1]["weight"], 1, "{json}");
    let text = run(&["status", "--group", "tenants", "--redis-url", &url]).await;
    assert!(text.stdout.contains("WEIGHT"), "{text:?}");
    assert!(text.stdout.ends_with("total weight: 6\n"), "{text:?}");

    let before = digest(&redis);
    for (args, code, message) in [
        (
            vec!["weight", "--group", "tenants", "p0", "0"],
            2,
            "between 1 and 1000000",
        ),
        (
            vec!["weight", "--group", "tenants", "p0", "1000001"],
            2,
            "between 1 and 1000000",
        ),
        (
            vec!["weight", "--group", "tenants", "p9", "2"],
            4,
            "no partition \"p9\"",
        ),
        (vec!["weight", "--group", "nope", "p0", "2"], 4, "nope"),
        (
            vec!["weight", "--group", "tenants", "{p0}", "2"],
            2,
            "partition name",
        ),
    ] {
        let r = partitions(&url, &args).await;
        assert_failed(&r, code, message);
        assert_eq!(digest(&redis), before, "{args:?} changed Redis: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_sets_and_removes_a_preference_and_status_shows_it() {
    let redis = redis_with_digest();
    let url = redis.url();
    create_group(&store(&redis), "leasehold", "tenants", 2).await;
    let r = partitions(&url, &["prefer", "--group", "tenants", "p0", "r-eu"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "partition p0 of group tenants: preferred on r-eu (was none); it goes there when \
             that replica is live and the balance bound allows\n"
        ),
        "{r:?}"
    );
    let json = run_json(&[
        "status",
        "--group",
        "tenants",
        "--json",
        "--redis-url",
        &url,
    ])
    .await;
    assert_eq!(json["partitions"][0]["preferred"], "r-eu", "{json}");
    assert!(json["partitions"][1].get("preferred").is_none(), "{json}");
    let text = run(&["status", "--group", "tenants", "--redis-url", &url]).await;
    assert!(text.stdout.contains("PREFERRED ON"), "{text:?}");
    let r = partitions(&url, &["prefer", "--group", "tenants", "p0", "--remove"]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "partition p0 of group tenants: no preference (was r-eu)\n"
        ),
        "{r:?}"
    );
    let text = run(&["status", "--group", "tenants", "--redis-url", &url]).await;
    assert!(!text.stdout.contains("PREFERRED ON"), "{text:?}");

    let before = digest(&redis);
    for (args, code, message) in [
        (
            vec!["prefer", "--group", "tenants", "p9", "r-eu"],
            4,
            "no partition \"p9\"",
        ),
        (vec!["prefer", "--group", "nope", "p0", "r-eu"], 4, "nope"),
        (
            vec!["prefer", "--group", "tenants", "p0", "r{eu}"],
            2,
            "replica id",
        ),
        (
            vec!["prefer", "--group", "tenants", "p0", "r-eu", "--remove"],
            2,
            "cannot be used with",
        ),
        (vec!["prefer", "--group", "tenants", "p0"], 2, "REPLICA"),
    ] {
        let r = partitions(&url, &args).await;
        assert_failed(&r, code, message);
        assert_eq!(digest(&redis), before, "{args:?} changed Redis: {r:?}");
    }
}
