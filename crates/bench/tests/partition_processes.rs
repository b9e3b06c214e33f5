//! Partition replicas as real OS processes (`leasehold-bench partition-child`): a
//! SIGKILLed replica's partitions are owned again by the others within lease + renew
//! interval; a SIGTERMed replica's partitions are taken over at once. Throughout, no
//! partition is held by two replicas at once, by the owners' own reports.

use std::collections::{BTreeMap, HashMap};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupStatus};
use leasehold_testkit::RedisServer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};

const LEASE: Duration = Duration::from_millis(600);
const SETTLE: Duration = Duration::from_millis(200);
const PARTITIONS: usize = 12;
/// Slack for a busy 2-core machine.
const SLACK: Duration = Duration::from_millis(500);
/// Process start, settle and first claims.
const START: Duration = Duration::from_secs(20);

/// Every line every replica printed, with the replica's id.
type Log = Arc<Mutex<Vec<(String, Value)>>>;

/// A `leasehold-bench partition-child` process.
struct Replica {
    id: String,
    child: Child,
    reader: JoinHandle<()>,
}

impl Replica {
    fn spawn(url: &str, group: &str, id: &str, log: &Log) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
            .args(["partition-child", "--redis-url", url, "--group", group])
            .args(["--replica", id, "--partitions", &PARTITIONS.to_string()])
            .args(["--lease-ms", &LEASE.as_millis().to_string()])
            .args(["--settle-ms", &SETTLE.as_millis().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn a partition child");
        let stdout = child.stdout.take().expect("piped stdout");
        let (log, replica) = (log.clone(), id.to_owned());
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let event = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("bad line {line:?} from {replica}: {e}"));
                log.lock().unwrap().push((replica.clone(), event));
            }
        });
        Self {
            id: id.to_owned(),
            child,
            reader,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the replica runs")
    }

    /// Waits for it to exit and for its last lines to be read.
    async fn wait(mut self) -> ExitStatus {
        let status = timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("the replica exits")
            .expect("wait for the replica");
        timeout(Duration::from_secs(5), self.reader)
            .await
            .expect("its output ends")
            .expect("the reader task");
        status
    }
}

fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    u64::try_from(since.as_micros()).expect("µs fit in u64")
}

async fn status(store: &RedisStore, group: &str) -> Option<GroupStatus> {
    GroupAdmin::new(store.clone(), group)
        .unwrap()
        .status()
        .await
        .expect("read the group")
}

/// Every partition owned by one of `live`, and spread ≤ 1 among exactly them.
fn balanced(s: &GroupStatus, live: &[&str]) -> bool {
    let owners_live = s
        .partitions
        .iter()
        .all(|p| p.owner.as_deref().is_some_and(|o| live.contains(&o)));
    let members: Vec<&str> = s.replicas.iter().map(|(r, _)| r.as_str()).collect();
    owners_live
        && members.len() == live.len()
        && live.iter().all(|r| members.contains(r))
        && s.spread() <= 1
}

/// Polls every 5 ms until `done`; checks at every poll that no partition's fence went
/// down. Returns the status that satisfied `done`.
async fn poll_until(
    store: &RedisStore,
    group: &str,
    fences: &mut HashMap<String, u64>,
    mut done: impl FnMut(&GroupStatus) -> bool,
) -> GroupStatus {
    loop {
        if let Some(s) = status(store, group).await {
            for p in &s.partitions {
                let seen = fences.entry(p.partition.clone()).or_default();
                assert!(
                    p.fence.get() >= *seen,
                    "fence of {} went down from {seen} to {}",
                    p.partition,
                    p.fence
                );
                *seen = p.fence.get();
            }
            if done(&s) {
                return s;
            }
        }
        sleep(Duration::from_millis(5)).await;
    }
}

/// Checks that no partition was held by two replicas at once, by their own reports:
/// each term runs from its `owned` line to its `released` line, or to `ended[replica]`
/// (a kill, or the end of the test) if it has none.
fn assert_no_double_ownership(log: &Log, ended: &HashMap<String, u64>) {
    let mut open: HashMap<(String, String), u64> = HashMap::new();
    let mut terms: BTreeMap<String, Vec<(u64, u64, String)>> = BTreeMap::new();
    for (replica, e) in log.lock().unwrap().iter() {
        let field = |name: &str| e[name].as_u64().unwrap_or_else(|| panic!("{e}: {name}"));
        let partition = e["partition"].as_str().unwrap_or_default().to_owned();
        match e["event"].as_str() {
            Some("owned") => {
                open.insert((partition, replica.clone()), field("at_us"));
            }
            Some("released") => {
                let start = open
                    .remove(&(partition.clone(), replica.clone()))
                    .unwrap_or_else(|| panic!("{replica} released {partition} it never owned"));
                terms
                    .entry(partition)
                    .or_default()
                    .push((start, field("at_us"), replica.clone()));
            }
            _ => {}
        }
    }
    for ((partition, replica), start) in open {
        let end = ended.get(&replica).copied().unwrap_or(u64::MAX);
        terms
            .entry(partition)
            .or_default()
            .push((start, end, replica));
    }
    for (partition, mut terms) in terms {
        terms.sort();
        for pair in terms.windows(2) {
            let ((_, end, a), (start, _, b)) = (&pair[0], &pair[1]);
            assert!(
                start >= end,
                "{partition}: {b} owned it from {start} µs while {a} still held it until {end} µs"
            );
        }
    }
}

/// Starts replicas `a`, `b` and `c`.
fn three_replicas(redis: &RedisServer, group: &str, log: &Log) -> Vec<Replica> {
    ["a", "b", "c"]
        .iter()
        .map(|id| Replica::spawn(&redis.url(), group, id, log))
        .collect()
}

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .call_timeout(Duration::from_millis(300))
        .build()
        .expect("store")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_replica_is_replaced_within_lease_plus_renew_interval() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let log = Log::default();
    let mut replicas = three_replicas(&redis, "kill", &log);
    let mut fences = HashMap::new();
    let before = timeout(
        START,
        poll_until(&store, "kill", &mut fences, |s| {
            balanced(s, &["a", "b", "c"])
        }),
    )
    .await
    .expect("three replicas balance");
    let mine = before
        .partitions
        .iter()
        .filter(|p| p.owner.as_deref() == Some("a"))
        .count();
    assert_eq!(mine, PARTITIONS / 3, "{before:?}");

    let mut victim = replicas.remove(0);
    let killed_us = now_us();
    let killed = Instant::now();
    victim.child.start_kill().expect("SIGKILL the replica");
    let limit = LEASE + LEASE / 3 + SLACK;
    let after = timeout(
        limit,
        poll_until(&store, "kill", &mut fences, |s| {
            s.partitions
                .iter()
                .all(|p| matches!(p.owner.as_deref(), Some("b" | "c")))
        }),
    )
    .await
    .expect("the survivors own every partition within lease + renew interval (+ slack)");
    let took = killed.elapsed();
    eprintln!("re-owned {took:?} after the kill");
    assert!(!victim.wait().await.success(), "the replica was killed");
    for p in &after.partitions {
        let old = before
            .partitions
            .iter()
            .find(|q| q.partition == p.partition)
            .expect("same partitions");
        if old.owner.as_deref() == Some("a") {
            assert!(
                p.fence > old.fence,
                "{}: a new term, a higher fence",
                p.partition
            );
        }
    }
    timeout(
        START,
        poll_until(&store, "kill", &mut fences, |s| balanced(s, &["b", "c"])),
    )
    .await
    .expect("the survivors balance");

    for r in &replicas {
        let kill = Command::new("kill")
            .args(["-TERM", &r.pid().to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(kill.success());
    }
    for r in replicas {
        let id = r.id.clone();
        assert!(r.wait().await.success(), "{id} exits 0 after SIGTERM");
    }
    assert_no_double_ownership(&log, &HashMap::from([("a".to_owned(), killed_us)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigtermed_replica_hands_its_partitions_over_at_once() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let log = Log::default();
    let mut replicas = three_replicas(&redis, "term", &log);
    let mut fences = HashMap::new();
    timeout(
        START,
        poll_until(&store, "term", &mut fences, |s| {
            balanced(s, &["a", "b", "c"])
        }),
    )
    .await
    .expect("three replicas balance");

    let leaver = replicas.remove(0);
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &leaver.pid().to_string()])
        .status()
        .await
        .expect("run kill");
    assert!(kill.success(), "kill -TERM: {kill}");
    timeout(
        LEASE / 2,
        poll_until(&store, "term", &mut fences, |s| {
            s.partitions
                .iter()
                .all(|p| matches!(p.owner.as_deref(), Some("b" | "c")))
        }),
    )
    .await
    .expect("the others own every partition well before a lease passes");
    let took = sent.elapsed();
    eprintln!("taken over {took:?} after SIGTERM");
    assert!(leaver.wait().await.success(), "a SIGTERMed replica exits 0");
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|(r, e)| r == "a" && e["event"] == "stopped"),
        "it reports its graceful shutdown"
    );
    timeout(
        START,
        poll_until(&store, "term", &mut fences, |s| balanced(s, &["b", "c"])),
    )
    .await
    .expect("the others balance");

    for r in &replicas {
        let kill = Command::new("kill")
            .args(["-TERM", &r.pid().to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(kill.success());
    }
    for r in replicas {
        let id = r.id.clone();
        assert!(r.wait().await.success(), "{id} exits 0 after SIGTERM");
    }
    assert_no_double_ownership(&log, &HashMap::new());
}
