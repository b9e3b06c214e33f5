//! experiment
mod support;
use leasehold_election::RedisStore;
use leasehold_testkit::RedisServer;
use std::time::Duration;
use support::Fleet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowest_scripts() {
    let redis = RedisServer::start();
    redis.redis_cli(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    redis.redis_cli(&["CONFIG", "SET", "slowlog-max-len", "100000"]);
    let store = RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(1000))
        .build()
        .unwrap();
    let mut fleet = Fleet::new(store, 10_000, Duration::from_millis(2000));
    for i in 0..2 {
        fleet.start(&format!("r{i}"));
    }
    fleet.converge(Duration::from_secs(60)).await;
    let out = redis.redis_cli(&["SLOWLOG", "GET", "100000"]);
    std::fs::write("/tmp/slowlog.txt", out).unwrap();
    let shas: Vec<_> = leasehold_partitions::script_hashes();
    std::fs::write(
        "/tmp/shas.txt",
        shas.iter()
            .map(|(n, h)| format!("{n} {h}\n"))
            .collect::<String>(),
    )
    .unwrap();
}
