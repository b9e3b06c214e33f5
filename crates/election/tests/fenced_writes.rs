//! The fenced-write helper against a real redis-server: writes, raises and batches, and
//! the order of raise, read and write that keeps a resuming owner exactly-once.

mod support;

use std::time::Duration;

use leasehold_election::{Fence, FencedWriteError, FencedWriter, RedisStore, StoreError};
use leasehold_testkit::RedisServer;
use support::store;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_refuses_lower_fences_and_writes_no_value() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    w.raise("cursor:{p1}", Fence(7)).await.unwrap();
    assert_eq!(
        redis.redis_cli(&["EXISTS", "cursor:{p1}"]),
        "(integer) 0",
        "a raise writes no value"
    );
    assert_eq!(redis.redis_cli(&["GET", "cursor:{p1}:fence"]), "7");
    let err = w.set("cursor:{p1}", "5", Fence(6)).await.unwrap_err();
    assert!(
        matches!(
            err,
            FencedWriteError::Stale {
                fence: Fence(6),
                highest: Fence(7)
            }
        ),
        "{err:?}"
    );
    assert_eq!(redis.redis_cli(&["EXISTS", "cursor:{p1}"]), "(integer) 0");
    // Equal: accepted and idempotent (a retry changes nothing).
    w.raise("cursor:{p1}", Fence(7)).await.unwrap();
    w.raise("cursor:{p1}", Fence(7)).await.unwrap();
    w.set("cursor:{p1}", "6", Fence(7)).await.unwrap();
    // Lower: the same typed refusal as a write's.
    let err = w.raise("cursor:{p1}", Fence(5)).await.unwrap_err();
    assert!(
        matches!(
            err,
            FencedWriteError::Stale {
                fence: Fence(5),
                highest: Fence(7)
            }
        ),
        "{err:?}"
    );
    // Higher: raised, the value untouched.
    w.raise("cursor:{p1}", Fence(9)).await.unwrap();
    assert_eq!(redis.redis_cli(&["GET", "cursor:{p1}:fence"]), "9");
    assert_eq!(redis.redis_cli(&["GET", "cursor:{p1}"]), "6");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_writes_every_key_or_none() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    // One key of the batch has seen fence 20.
    w.set("cursor:{t}", "3", Fence(20)).await.unwrap();
    let batch = w
        .batch()
        .rpush("out:{t}", "r1")
        .set("cursor:{t}", "4")
        .hset("state:{t}", "owner", "b");
    let err = batch.commit(Fence(15)).await.unwrap_err();
    assert!(
        matches!(
            err,
            FencedWriteError::Stale {
                fence: Fence(15),
                highest: Fence(20)
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        redis.redis_cli(&[
            "EXISTS",
            "out:{t}",
            "state:{t}",
            "out:{t}:fence",
            "state:{t}:fence"
        ]),
        "(integer) 0",
        "nothing of a refused batch is written, no guard raised"
    );
    assert_eq!(redis.redis_cli(&["GET", "cursor:{t}"]), "3");

    batch.commit(Fence(20)).await.unwrap();
    assert_eq!(redis.redis_cli(&["LRANGE", "out:{t}", "0", "-1"]), "r1");
    assert_eq!(redis.redis_cli(&["GET", "cursor:{t}"]), "4");
    assert_eq!(redis.redis_cli(&["HGET", "state:{t}", "owner"]), "b");
    for guard in ["out:{t}:fence", "cursor:{t}:fence", "state:{t}:fence"] {
        assert_eq!(redis.redis_cli(&["GET", guard]), "20", "{guard}");
    }
    // A higher fence raises every guard; the writes land in order (the second RPUSH
    // after the first), several to one key.
    w.batch()
        .rpush("out:{t}", "r2")
        .rpush("out:{t}", "r3")
        .set("cursor:{t}", "6")
        .commit(Fence(21))
        .await
        .unwrap();
    assert_eq!(
        redis.redis_cli(&["LRANGE", "out:{t}", "0", "-1"]),
        "r1\nr2\nr3"
    );
    assert_eq!(redis.redis_cli(&["GET", "out:{t}:fence"]), "21");
    assert_eq!(redis.redis_cli(&["GET", "state:{t}:fence"]), "20");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_a_key_of_the_wrong_type_writes_nothing() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    redis.redis_cli(&["SET", "out:{t}", "a string"]);
    // The bad write comes last: a script is not rolled back, so the check before any
    // write is what keeps the SET before it from landing.
    let err = w
        .batch()
        .set("cursor:{t}", "6")
        .rpush("out:{t}", "r1")
        .commit(Fence(3))
        .await
        .unwrap_err();
    assert!(
        matches!(err, FencedWriteError::Store(StoreError::WrongType(_))),
        "{err:?}"
    );
    // A type the batch itself gives a key counts: a SET then an HSET of one key.
    let err = w
        .batch()
        .set("cursor:{t}", "6")
        .hset("cursor:{t}", "f", "v")
        .commit(Fence(3))
        .await
        .unwrap_err();
    assert!(
        matches!(err, FencedWriteError::Store(StoreError::WrongType(_))),
        "{err:?}"
    );
    assert_eq!(
        redis.redis_cli(&["EXISTS", "cursor:{t}", "cursor:{t}:fence", "out:{t}:fence"]),
        "(integer) 0"
    );
    assert_eq!(redis.redis_cli(&["GET", "out:{t}"]), "a string");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_without_rpush_is_safe_to_commit_again() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    let batch = w
        .batch()
        .set("cursor:{t}", "6")
        .hset("state:{t}", "owner", "b")
        .raise("out:{t}");
    batch.commit(Fence(4)).await.unwrap();
    let before = redis.redis_cli(&["DBSIZE"]);
    batch.commit(Fence(4)).await.unwrap();
    assert_eq!(redis.redis_cli(&["DBSIZE"]), before);
    assert_eq!(before, "(integer) 5", "two values and three guards");
    assert_eq!(redis.redis_cli(&["GET", "cursor:{t}"]), "6");
    assert_eq!(redis.redis_cli(&["HLEN", "state:{t}"]), "(integer) 1");
    assert_eq!(redis.redis_cli(&["EXISTS", "out:{t}"]), "(integer) 0");
    assert_eq!(redis.redis_cli(&["GET", "out:{t}:fence"]), "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_and_sends_nothing() {
    let redis = RedisServer::start();
    let w = FencedWriter::new(store(&redis.url()));
    for err in [
        w.set("", "v", Fence(1)).await.unwrap_err(),
        w.hset("", "f", "v", Fence(1)).await.unwrap_err(),
        w.rpush("", "v", Fence(1)).await.unwrap_err(),
        w.raise("", Fence(1)).await.unwrap_err(),
        w.batch()
            .set("a{t}", "1")
            .set("", "2")
            .commit(Fence(1))
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, FencedWriteError::EmptyKey), "{err:?}");
        assert_eq!(err.to_string(), "a fenced key must not be empty");
    }
    let empty = w.batch();
    assert!(empty.is_empty());
    let err = empty.commit(Fence(1)).await.unwrap_err();
    assert!(matches!(err, FencedWriteError::EmptyBatch), "{err:?}");
    // Keys without a shared hash tag: refused on one server too, so that what runs
    // here runs on a Cluster.
    let err = w
        .batch()
        .rpush("out:tenant-7", "r")
        .set("cursor:tenant-7", "1")
        .commit(Fence(1))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FencedWriteError::CrossSlot { key, other }
            if key == "out:tenant-7" && other == "cursor:tenant-7"),
        "{err:?}"
    );
    assert_eq!(redis.redis_cli(&["DBSIZE"]), "(integer) 0");
}

/// A partition's committed state: the output list and the cursor naming the next entry
/// to process, under one hash tag so that one batch moves both.
const OUT: &str = "out:{tenant-7}";
const CURSOR: &str = "cursor:{tenant-7}";
const OLD: Fence = Fence(10);
const NEW: Fence = Fence(11);

/// Reads the committed cursor, as a resuming owner does.
async fn read_cursor(store: &RedisStore) -> u64 {
    let reply = store
        .query(redis::cmd("GET").arg(CURSOR))
        .await
        .expect("the cursor is read");
    let text: Option<String> = redis::from_redis_value(reply).expect("a string");
    text.map_or(0, |t| t.parse().expect("a number"))
}

/// Processes entry `n` and commits its output with the cursor past it, in one batch.
async fn commit_entry(w: &FencedWriter, n: u64, fence: Fence) -> Result<(), FencedWriteError> {
    w.batch()
        .rpush(OUT, format!("entry-{n}"))
        .set(CURSOR, (n + 1).to_string())
        .commit(fence)
        .await
}

/// The old owner (fence 10) has read cursor 5 and processed entry 5; its commit is in
/// flight (held until `go`) when its term ends and the new owner (fence 11) resumes.
async fn deposed_owner_in_flight(
    redis: &RedisServer,
) -> (
    FencedWriter,
    oneshot::Sender<()>,
    JoinHandle<Result<(), FencedWriteError>>,
) {
    let w = FencedWriter::new(store(&redis.url()));
    for n in 0..5 {
        commit_entry(&w, n, OLD).await.unwrap();
    }
    assert_eq!(read_cursor(&store(&redis.url())).await, 5);
    let (go, held) = oneshot::channel::<()>();
    let old = w.clone();
    let in_flight = tokio::spawn(async move {
        let _ = held.await;
        commit_entry(&old, 5, OLD).await
    });
    (w, go, in_flight)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_before_the_read_refuses_the_deposed_owners_in_flight_write() {
    let redis = RedisServer::start();
    let (w, go, in_flight) = deposed_owner_in_flight(&redis).await;
    let new_store = store(&redis.url());

    // (1) Raise the guards of everything this term will write, (2) then read.
    w.batch()
        .raise(OUT)
        .raise(CURSOR)
        .commit(NEW)
        .await
        .unwrap();
    let cursor = read_cursor(&new_store).await;
    assert_eq!(cursor, 5);

    // The deposed owner's write lands now: refused.
    go.send(()).unwrap();
    let late = timeout(WAIT, in_flight)
        .await
        .expect("the deposed write finishes")
        .unwrap();
    assert!(
        matches!(
            late,
            Err(FencedWriteError::Stale {
                fence: OLD,
                highest: NEW
            })
        ),
        "{late:?}"
    );
    assert_eq!(
        read_cursor(&new_store).await,
        cursor,
        "what the new owner read has not changed under it"
    );

    // (3) Process from what it read, (4) commit output and cursor together.
    commit_entry(&w, cursor, NEW).await.unwrap();
    let entries = redis.redis_cli(&["LRANGE", OUT, "0", "-1"]);
    let entries: Vec<&str> = entries.lines().collect();
    assert_eq!(
        entries,
        [
            "entry-0", "entry-1", "entry-2", "entry-3", "entry-4", "entry-5"
        ],
        "every entry once"
    );
    assert_eq!(read_cursor(&new_store).await, 6);
}

/// The companion of the test above, without the raise: the same interleaving, and the
/// deposed owner's write lands after the new owner's read, so entry 5 is output twice.
/// This is the race the raise closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_raise_the_deposed_write_lands_after_the_read_and_an_entry_repeats() {
    let redis = RedisServer::start();
    let (w, go, in_flight) = deposed_owner_in_flight(&redis).await;
    let new_store = store(&redis.url());

    let cursor = read_cursor(&new_store).await;
    assert_eq!(cursor, 5);

    go.send(()).unwrap();
    timeout(WAIT, in_flight)
        .await
        .expect("the deposed write finishes")
        .unwrap()
        .expect("nothing has raised the guards: the deposed owner's write is accepted");
    assert_eq!(
        read_cursor(&new_store).await,
        6,
        "the cursor moved under the new owner after it read it"
    );

    // The new owner processes from what it read: entry 5 again, and its higher fence
    // is accepted.
    commit_entry(&w, cursor, NEW).await.unwrap();
    let entries = redis.redis_cli(&["LRANGE", OUT, "0", "-1"]);
    let fives = entries.lines().filter(|e| *e == "entry-5").count();
    assert_eq!(fives, 2, "entry 5 was output twice: {entries:?}");
}
