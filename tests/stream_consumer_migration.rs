//! Moving a running consumer onto the recipe's keys (docs/recipes.md, "Moving a running
//! consumer onto these keys"), against a real redis-server.
//!
//! Replicas of an old version (output `out:<tenant>`, cursor `cursor:<tenant>`, each
//! written by a fenced write of its own) and of the new one (the recipe's
//! `out:{<tenant>}` and `cursor:{<tenant>}` in one fenced batch, resumed through the
//! documented `resume`) share one group through a rolling upgrade: the old replicas
//! hand tenants to a new one, the new one leaves and hands its migrated tenants back to
//! old replicas (which must write nothing there), then new replicas replace every old
//! one. Every entry of every stream ends up output exactly once, in order, in the old
//! list followed by the new one. The documented code is the code under test: a test
//! compares the two.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_partitions::redis;
use leasehold_partitions::{
    Coordinator, CoordinatorHandle, DutyError, DutyResult, Fence, FencedWriteError, FencedWriter,
    GroupConfig, HandOffError, Ownership, RedisStore,
};
use leasehold_testkit::RedisServer;
use tokio::time::{Instant, sleep};

// ---- docs/recipes.md, "Moving a running consumer onto these keys" (compared below) ----

/// Above every fence a term is given (at least the server's clock in µs: 2^62 µs is
/// 146,000 years away); a power of two, so the guard scripts' Lua numbers hold it
/// exactly.
const RETIRED: Fence = Fence(1 << 62);

/// Steps 1 to 3 of the recipe, for a tenant the old version served with the keys
/// `out:<tenant>` and `cursor:<tenant>`: where this term resumes, or `None` if a newer
/// term owns the tenant.
async fn resume(
    store: &RedisStore,
    writer: &FencedWriter,
    tenant: &str,
    lead: &Ownership,
) -> Result<Option<String>, DutyError> {
    let (out, cursor_key) = (format!("out:{{{tenant}}}"), format!("cursor:{{{tenant}}}"));
    // 1. Raise the new keys to this term's fence, as the recipe does.
    match writer
        .batch()
        .raise(&out)
        .raise(&cursor_key)
        .commit(lead.fence())
        .await
    {
        Err(FencedWriteError::Stale { .. }) => return Ok(None),
        other => other?,
    }
    // 2. A cursor handed over by a term of the new version, which tags it `v2:` (an
    //    old term's hand-off is not one), 3. else the committed one, once migrated.
    let handed = lead.handed_over().ok();
    if let Some(cursor) = handed.and_then(|bytes| bytes.strip_prefix(b"v2:")) {
        return Ok(Some(String::from_utf8(cursor.to_vec())?));
    }
    if let Some(cursor) = get(store, &cursor_key).await? {
        return Ok(Some(cursor));
    }
    // Not migrated yet. Retire the old keys: raise their guards above every fence, so
    // that no old replica's write lands there again, from a deposed term or a later
    // one (one key at a time: they need not share a slot).
    let (old_out, old_cursor) = (format!("out:{tenant}"), format!("cursor:{tenant}"));
    for key in [&old_out, &old_cursor] {
        writer.raise(key, RETIRED).await?;
    }
    // Only then read the old cursor (final now), and carry it over under this term's
    // fence: from here on the tenant's cursor is the new one.
    let cursor = get(store, &old_cursor)
        .await?
        .unwrap_or_else(|| "0-0".into());
    match writer.set(&cursor_key, &cursor, lead.fence()).await {
        Ok(()) => Ok(Some(cursor)),
        Err(FencedWriteError::Stale { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `GET key`.
async fn get(store: &RedisStore, key: &str) -> Result<Option<String>, DutyError> {
    let reply = store.query(redis::cmd("GET").arg(key)).await?;
    Ok(redis::from_redis_value(reply)?)
}

// ---- end of the documented code ----

const GROUP: &str = "consumers";
const TENANTS: usize = 4;
/// Long enough that a busy 2-core machine does not cost a term its lease (an old term
/// aborted between its two writes would output an entry twice: the old version's own
/// weakness, not the migration's).
const LEASE: Duration = Duration::from_secs(2);
/// Any wait for the fleet to reach a state.
const LIMIT: Duration = Duration::from_secs(20);

fn tenants() -> Vec<String> {
    (1..=TENANTS).map(|i| format!("tenant-{i:02}")).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Old,
    New,
}

/// One term, as its callback saw it start.
#[derive(Debug, Clone)]
struct Term {
    tenant: String,
    version: Version,
    fence: Fence,
    /// An old term whose first raise met a retired key.
    retired: bool,
    /// What the term was offered of the previous term's hand-off.
    handed_over: Option<Vec<u8>>,
}

#[derive(Clone)]
struct Env {
    store: RedisStore,
    streams: redis::Client,
    terms: Arc<Mutex<Vec<Term>>>,
}

impl Env {
    fn record(&self, tenant: &str, version: Version, lead: &Ownership, retired: bool) {
        self.terms.lock().unwrap().push(Term {
            tenant: tenant.to_owned(),
            version,
            fence: lead.fence(),
            retired,
            handed_over: lead.handed_over().ok().map(<[u8]>::to_vec),
        });
    }

    fn terms(&self) -> Vec<Term> {
        self.terms.lock().unwrap().clone()
    }

    fn start(&self, replica: &str, version: Version) -> CoordinatorHandle<RedisStore> {
        let config = GroupConfig::builder(GROUP, tenants(), replica)
            .lease(LEASE)
            .build()
            .unwrap();
        let env = self.clone();
        Coordinator::new(self.store.clone(), config, move |tenant, lead| {
            let env = env.clone();
            async move {
                match version {
                    Version::Old => consume_old(env, tenant, lead).await,
                    Version::New => consume_new(env, tenant, lead).await,
                }
            }
        })
        .spawn()
    }

    async fn list(&self, key: &str) -> Vec<String> {
        let reply = self
            .store
            .query(redis::cmd("LRANGE").arg(key).arg(0).arg(-1))
            .await
            .unwrap();
        redis::from_redis_value(reply).unwrap()
    }

    /// The ids of `tenant`'s stream, in order.
    async fn stream_ids(&self, tenant: &str) -> Vec<String> {
        let reply = self
            .store
            .query(
                redis::cmd("XRANGE")
                    .arg(format!("stream:{{{tenant}}}"))
                    .arg("-")
                    .arg("+"),
            )
            .await
            .unwrap();
        let entries: Vec<(String, redis::Value)> = redis::from_redis_value(reply).unwrap();
        entries.into_iter().map(|(id, _)| id).collect()
    }

    /// `tenant`'s whole output: the old list, then the new one.
    async fn output(&self, tenant: &str) -> Vec<String> {
        let mut all = self.list(&format!("out:{tenant}")).await;
        all.extend(self.list(&format!("out:{{{tenant}}}")).await);
        all
    }

    /// The tenants whose cursor has moved onto the new key.
    async fn migrated(&self) -> BTreeSet<String> {
        let mut done = BTreeSet::new();
        for t in tenants() {
            if get(&self.store, &format!("cursor:{{{t}}}"))
                .await
                .unwrap()
                .is_some()
            {
                done.insert(t);
            }
        }
        done
    }
}

/// The ids after `cursor` (none if nothing arrives within 100 ms).
async fn read_after(
    conn: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    cursor: &str,
) -> Result<Vec<String>, redis::RedisError> {
    type Read = Option<Vec<(String, Vec<(String, redis::Value)>)>>;
    let read: Read = redis::cmd("XREAD")
        .arg("COUNT")
        .arg(50)
        .arg("BLOCK")
        .arg(100)
        .arg("STREAMS")
        .arg(stream)
        .arg(cursor)
        .query_async(conn)
        .await?;
    Ok(read
        .into_iter()
        .flatten()
        .flat_map(|(_, entries)| entries)
        .map(|(id, _)| id)
        .collect())
}

async fn connection(env: &Env) -> Result<redis::aio::MultiplexedConnection, DutyError> {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(2)));
    Ok(env
        .streams
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// A planned move hands `cursor` off; after a lost lease there is nothing to hand off.
fn hand_off(lead: &Ownership, cursor: String) -> DutyResult {
    match lead.hand_off(cursor) {
        Ok(()) | Err(HandOffError::LeaseLost) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The old version: its output and its cursor in keys of their own slots, each written
/// by a fenced write of its own; it raises both before it reads the cursor, stops at a
/// refusal, and hands its cursor off (untagged) on a planned move.
async fn consume_old(env: Env, tenant: String, lead: Ownership) -> DutyResult {
    let (out, cursor_key) = (format!("out:{tenant}"), format!("cursor:{tenant}"));
    let stream = format!("stream:{{{tenant}}}");
    let writer = FencedWriter::new(env.store.clone());
    for key in [&out, &cursor_key] {
        match writer.raise(key, lead.fence()).await {
            Err(FencedWriteError::Stale { highest, .. }) => {
                env.record(&tenant, Version::Old, &lead, highest == RETIRED);
                return Ok(());
            }
            other => other?,
        }
    }
    env.record(&tenant, Version::Old, &lead, false);
    let mut cursor = get(&env.store, &cursor_key)
        .await?
        .unwrap_or_else(|| "0-0".into());
    let mut conn = connection(&env).await?;
    'term: loop {
        let read = tokio::select! {
            () = lead.cancelled() => break,
            read = read_after(&mut conn, &stream, &cursor) => read,
        };
        let Ok(ids) = read else {
            sleep(Duration::from_millis(50)).await;
            continue;
        };
        for id in ids {
            if lead.check().is_err() {
                break 'term;
            }
            // Output, then cursor: a crash between the two outputs the entry again.
            match writer.rpush(&out, &id, lead.fence()).await {
                Err(FencedWriteError::Stale { .. }) => return Ok(()),
                other => other?,
            }
            match writer.set(&cursor_key, &id, lead.fence()).await {
                Err(FencedWriteError::Stale { .. }) => return Ok(()),
                other => other?,
            }
            cursor = id;
        }
    }
    hand_off(&lead, cursor)
}

/// The new version: the recipe, resumed through `resume`, handing off a tagged cursor.
async fn consume_new(env: Env, tenant: String, lead: Ownership) -> DutyResult {
    let (out, cursor_key) = (format!("out:{{{tenant}}}"), format!("cursor:{{{tenant}}}"));
    let stream = format!("stream:{{{tenant}}}");
    let writer = FencedWriter::new(env.store.clone());
    let Some(mut cursor) = resume(&env.store, &writer, &tenant, &lead).await? else {
        return Ok(());
    };
    env.record(&tenant, Version::New, &lead, false);
    let mut conn = connection(&env).await?;
    'term: loop {
        let read = tokio::select! {
            () = lead.cancelled() => break,
            read = read_after(&mut conn, &stream, &cursor) => read,
        };
        let Ok(ids) = read else {
            sleep(Duration::from_millis(50)).await;
            continue;
        };
        for id in ids {
            if lead.check().is_err() {
                break 'term;
            }
            let step = writer.batch().rpush(&out, &id).set(&cursor_key, &id);
            match step.commit(lead.fence()).await {
                Ok(()) => cursor = id,
                Err(FencedWriteError::Stale { .. }) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
    }
    hand_off(&lead, format!("v2:{cursor}"))
}

/// Waits until `done` holds, polling every 50 ms; fails after [`LIMIT`].
async fn until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < LIMIT, "not within {LIMIT:?}: {what}");
        sleep(Duration::from_millis(50)).await;
    }
}

/// The tenants `replica` owns.
fn owned_of(replica: &CoordinatorHandle<RedisStore>) -> BTreeSet<String> {
    replica.status().owned.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_onto_the_recipes_keys_outputs_every_entry_exactly_once() {
    // Logs go to the test's captured output (shown when it fails); RUST_LOG picks.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let env = Env {
        store,
        streams: redis::Client::open(redis.url()).unwrap(),
        terms: Arc::default(),
    };

    // A producer: an entry on every tenant's stream every 20 ms.
    let producing = Arc::new(AtomicBool::new(true));
    let producer = tokio::spawn({
        let (store, producing) = (env.store.clone(), producing.clone());
        async move {
            while producing.load(Ordering::SeqCst) {
                for t in tenants() {
                    let mut add = redis::cmd("XADD");
                    add.arg(format!("stream:{{{t}}}")).arg("*").arg("n").arg(1);
                    // One that fails is not in the stream: nothing to output.
                    let _ = store.query(&add).await;
                }
                sleep(Duration::from_millis(20)).await;
            }
        }
    });

    // The old version runs alone, and outputs into the old keys.
    let mut replicas = BTreeMap::new();
    replicas.insert("old-a", env.start("old-a", Version::Old));
    replicas.insert("old-b", env.start("old-b", Version::Old));
    let env = &env;
    until("every tenant has old output", || async move {
        let mut all = true;
        for t in tenants() {
            all &= env.list(&format!("out:{t}")).await.len() >= 5;
        }
        all
    })
    .await;

    // A new replica joins: the old ones hand it its share, which it migrates.
    replicas.insert("new-a", env.start("new-a", Version::New));
    let new_a = &replicas["new-a"];
    until("new-a serves migrated tenants", || async move {
        let owned = owned_of(new_a);
        let mut served = !owned.is_empty();
        for t in &owned {
            served &= env.list(&format!("out:{{{t}}}")).await.len() >= 5;
        }
        served
    })
    .await;
    let migrated = env.migrated().await;
    assert!(!migrated.is_empty());

    // It leaves: its migrated tenants go back to old replicas, which must write nothing
    // there. Their old output stays as it is from now on.
    replicas.remove("new-a").unwrap().shutdown().await;
    let frozen: BTreeMap<String, usize> = {
        let mut lens = BTreeMap::new();
        for t in &migrated {
            lens.insert(t.clone(), env.list(&format!("out:{t}")).await.len());
        }
        lens
    };
    until(
        "an old replica is kept out of a migrated tenant",
        || async move {
            env.terms()
                .iter()
                .any(|t| t.version == Version::Old && t.retired)
        },
    )
    .await;

    // The rest of the upgrade: new replicas join, the old ones leave.
    replicas.insert("new-b", env.start("new-b", Version::New));
    replicas.insert("new-c", env.start("new-c", Version::New));
    for old in ["old-a", "old-b"] {
        replicas.remove(old).unwrap().shutdown().await;
    }
    let running = &replicas;
    until(
        "every tenant migrated and served by the new version",
        || async move {
            let served: BTreeSet<String> = running.values().flat_map(owned_of).collect();
            served.len() == TENANTS && env.migrated().await.len() == TENANTS
        },
    )
    .await;

    // An old term's write, late or from a later term than any old one so far, lands in
    // no old key any more.
    let writer = FencedWriter::new(env.store.clone());
    for t in tenants() {
        let newest_old = env
            .terms()
            .iter()
            .filter(|term| term.tenant == t && term.version == Version::Old)
            .map(|term| term.fence.get())
            .max()
            .unwrap();
        for late in [Fence(newest_old), Fence(newest_old + 1_000_000)] {
            let refused = writer.rpush(&format!("out:{t}"), "late", late).await;
            assert!(
                matches!(refused, Err(FencedWriteError::Stale { highest, .. }) if highest == RETIRED),
                "{t}: {refused:?}"
            );
        }
    }

    // Every entry output exactly once, in order: the old list, then the new one.
    producing.store(false, Ordering::SeqCst);
    producer.await.unwrap();
    until("every tenant caught up", || async move {
        let mut all = true;
        for t in tenants() {
            all &= env.output(&t).await.len() >= env.stream_ids(&t).await.len();
        }
        all
    })
    .await;
    for t in tenants() {
        let (ids, output) = (env.stream_ids(&t).await, env.output(&t).await);
        let distinct: BTreeSet<&String> = output.iter().collect();
        assert_eq!(
            distinct.len(),
            output.len(),
            "{t}: an entry was output twice"
        );
        assert_eq!(output, ids, "{t}: the output is not the stream, in order");
        assert!(
            !env.list(&format!("out:{{{t}}}")).await.is_empty(),
            "{t}: nothing output under the new keys"
        );
    }
    for (t, len) in frozen {
        assert_eq!(
            env.list(&format!("out:{t}")).await.len(),
            len,
            "{t}: the old output grew after the migration"
        );
    }
    // New terms were offered the old version's untagged hand-offs, and migrated anyway.
    let terms = env.terms();
    assert!(
        terms.iter().any(|t| t.version == Version::New
            && t.handed_over
                .as_ref()
                .is_some_and(|h| !h.starts_with(b"v2:"))),
        "no new term followed an old one's hand-off: {terms:#?}"
    );
    for replica in replicas.values() {
        replica.shutdown().await;
    }
}

/// The code between the markers above is the code docs/recipes.md shows (its `use`
/// declarations aside): what the test above runs is what the recipe documents.
#[test]
fn the_documented_migration_is_the_code_under_test() {
    let source = include_str!("stream_consumer_migration.rs");
    let begin = "// ---- docs/recipes.md, \"Moving a running consumer onto these keys\" (compared below) ----\n";
    let start = source.find(begin).expect("the start marker") + begin.len();
    let end = source
        .find("\n// ---- end of the documented code ----")
        .expect("the end marker");
    let tested: Vec<&str> = source[start..end].trim().lines().collect();

    let recipes = include_str!("../docs/recipes.md");
    let block = recipes
        .split("```rust")
        .skip(1)
        .map(|b| b.split_once("\n```").expect("a closed block").0)
        .find(|b| b.contains("const RETIRED"))
        .expect("the migration block in docs/recipes.md");
    // After the rest of the fence line (`,no_run`) and the `use` declarations.
    let documented: Vec<&str> = block
        .lines()
        .skip(1)
        .skip_while(|l| {
            l.starts_with("use ") || l.starts_with("    ") || *l == "};" || l.is_empty()
        })
        .collect();
    assert_eq!(
        documented, tested,
        "docs/recipes.md's migration code differs from the code this test runs"
    );
}
