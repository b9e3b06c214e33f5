//! The fenced-write helper against a real redis-server.

mod support;

use leasehold_election::{Fence, FencedWriteError, FencedWriter, StoreError};
use leasehold_testkit::RedisServer;
use support::store;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lower_fences_are_rejected_equal_and_higher_accepted() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    w.set("report", "v1", Fence(10)).await.unwrap();
    w.set("report", "v2", Fence(10))
        .await
        .expect("one term may write many times");
    w.set("report", "v3", Fence(12)).await.unwrap();
    let err = w.set("report", "stale", Fence(11)).await.unwrap_err();
    assert!(
        matches!(
            err,
            FencedWriteError::Stale {
                fence: Fence(11),
                highest: Fence(12)
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        redis.redis_cli(&["GET", "report"]),
        "v3",
        "the stale write did not land"
    );
    assert_eq!(redis.redis_cli(&["GET", "{report}:fence"]), "12");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_appends_and_hash_fields_are_fenced() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    w.rpush("ledger:{p1}", "a", Fence(1)).await.unwrap();
    w.rpush("ledger:{p1}", "b", Fence(2)).await.unwrap();
    assert!(matches!(
        w.rpush("ledger:{p1}", "late", Fence(1)).await,
        Err(FencedWriteError::Stale { .. })
    ));
    assert_eq!(redis.redis_cli(&["LLEN", "ledger:{p1}"]), "(integer) 2");
    w.hset("state", "owner", "a", Fence(5)).await.unwrap();
    assert!(matches!(
        w.hset("state", "owner", "old", Fence(4)).await,
        Err(FencedWriteError::Stale { .. })
    ));
    assert_eq!(redis.redis_cli(&["HGET", "state", "owner"]), "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_the_wrong_type_fails_typed_and_leaves_the_guard_alone() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    redis.redis_cli(&["HSET", "h", "f", "v"]);
    let err = w.rpush("h", "x", Fence(9)).await.unwrap_err();
    assert!(
        matches!(err, FencedWriteError::Store(StoreError::WrongType(_))),
        "{err:?}"
    );
    assert_eq!(
        redis.redis_cli(&["EXISTS", "{h}:fence"]),
        "(integer) 0",
        "guard untouched by a failed write"
    );
}
