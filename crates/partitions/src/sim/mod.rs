//! A deterministic fault simulation of a partition group: real coordinators (the
//! replica state machine, the driver, one elector per partition) on tokio's paused
//! clock against the in-memory store, each replica behind a link of its own whose
//! faults come from a seed. One seed, one run: the same seed replays the same run.
//!
//! A run picks a fleet (2–4 replicas, some sticky, 4–16 partitions, sometimes weights)
//! and a schedule of faults from its seed: replicas killed and restarted, shut down
//! and restarted (sticky ones within their rejoin grace or not), a second process with
//! the same replica id, replies lost, run twice, delivered late, black holes (a paused
//! process), partitions added, removed and re-added, drains, weight changes, and the
//! store wiped (Redis restarted without its data). A quarter of the seeds also have an
//! operator who sets and removes preferences at random times (on live replicas, and on
//! one that never runs). Another quarter make their hand-overs warm moves
//! (`prepare_moves`), receivers preparing quickly for some partitions and past the
//! giver's wait for others. The seeds whose replicas take their weights from reported
//! loads (Zipf-like tenants) also scale a spare replica in and out, as an operator
//! would: planned joins and leaves, not faults. Then every fault heals.
//!
//! The oracle (`sim/oracle.rs`) checks every term the callbacks saw: no partition has two
//! owners whose local deadlines are both in the future; fences grow; no partition is
//! left without an owner through a quiet lease (no fault active); a hand-over with no
//! fault around it lands within one renew interval, never on its giver, and on the
//! member it names if it names one; a removed partition
//! is never served after its removal; and once everything healed, every partition is
//! served exactly once.
//!
//! For Leasehold's own tests and the `leasehold-bench simulate` command; no semver
//! promise.

mod link;
mod oracle;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use tokio::time::{Instant, sleep, sleep_until};

use self::link::{Link, Mode};
use self::oracle::{Listing, TermRec, Terms};
use crate::store::protocol::Protocol;
use crate::{
    Coordinator, CoordinatorHandle, GroupAdmin, GroupConfig, LoadDamping, MemoryGroupStore,
    MemorySnapshot, Ownership,
};

/// Every partition's lease in a simulation.
const LEASE: Duration = Duration::from_secs(1);
/// How long a giver waits for its receiver to prepare, in the seeds with warm moves.
const WARM_WAIT: Duration = Duration::from_millis(400);
/// How long the faults go on before everything heals.
const FAULTS_FOR: Duration = Duration::from_secs(40);
/// A graceful shutdown returns within this (the callbacks' grace is a lease at most).
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(10);
/// How long the healed fleet runs before the final check.
const HEAL_FOR: Duration = Duration::from_secs(8);

/// The kinds of fault a simulation injects, and how often (relative weights).
pub const FAULTS: [(&str, u32); 10] = [
    ("kill", 15),
    ("stop", 15),
    ("dup", 5),
    ("lossy", 15),
    ("hole", 8),
    ("set", 20),
    ("drain", 7),
    ("weight", 9),
    ("wipe", 6),
    ("failover", 6),
];

/// Which faults a run injects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// Names from [`FAULTS`].
    pub faults: Vec<&'static str>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            faults: FAULTS.iter().map(|(f, _)| *f).collect(),
        }
    }
}

impl SimOptions {
    /// Only the named faults (comma-separated names from [`FAULTS`]).
    ///
    /// # Errors
    /// A name that is not a fault.
    pub fn only(names: &str) -> Result<Self, String> {
        let mut faults = Vec::new();
        for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match FAULTS.iter().find(|(f, _)| *f == n) {
                Some((f, _)) => faults.push(*f),
                None => {
                    return Err(format!(
                        "no fault {n:?}; the faults are {}",
                        FAULTS.map(|(f, _)| f).join(", ")
                    ));
                }
            }
        }
        Ok(Self { faults })
    }

    /// The options as a command-line argument (empty: the default).
    pub fn arg(&self) -> String {
        if *self == Self::default() {
            String::new()
        } else {
            format!(" --faults {}", self.faults.join(","))
        }
    }
}

/// What one seed's run found.
#[derive(Debug, Clone)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Simulated time the run covered.
    pub simulated: Duration,
    /// Scheduled events plus store calls.
    pub events: u64,
    /// Terms the callbacks saw.
    pub terms: usize,
    /// What the oracle found wrong (empty: nothing).
    pub violations: Vec<String>,
    /// The run's faults, one line each, for a replay.
    pub log: Vec<String>,
    /// A digest of every term (partition, replica, fence, start): two runs of one seed
    /// agree on it.
    pub digest: u64,
}

/// The command that replays `seed` with its log.
pub fn replay_command(seed: u64, options: &SimOptions) -> String {
    format!(
        "cargo run --release -p leasehold-bench -- simulate --seed {seed}{} --verbose",
        options.arg()
    )
}

/// Runs seed `seed` on a runtime of its own (current thread, paused clock).
///
/// # Panics
/// If the runtime cannot be built.
pub fn run(seed: u64, options: &SimOptions) -> SimReport {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    // The world is made on the runtime: its clocks are the paused one.
    runtime.block_on(async { World::new(seed, options.clone()).run().await })
}

/// A replica process of the simulation.
struct Proc {
    pid: u64,
    handle: CoordinatorHandle<Link>,
}

/// A replica id's standing configuration.
#[derive(Debug, Clone)]
struct Replica {
    id: String,
    grace: Option<Duration>,
    capacity: u32,
    link: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Pick and inject the next fault.
    Chaos,
    /// Start a process for this replica id (if none runs).
    Start(String),
    /// Stop the duplicate process `pid` (a crash).
    KillPid(u64),
    /// This replica's link is healed.
    Heal(String),
    /// Undrain this replica.
    Undrain(String),
    /// A wipe's window has passed: the group must have come back with the set the
    /// admin's answers say (if some replica could restore it), else the set is what the
    /// store has now.
    AfterWipe { restorable: bool, at: Instant },
    /// The primary dies and the replica that was cut off at the snapshot `id` is
    /// promoted.
    Promote(u64),
    /// A failover's window has passed: the replicas' copies of the set have caught up
    /// with the promoted store's, which is the set from then on.
    AfterFailover { at: Instant },
    /// The operator sets or removes a preference.
    Prefer,
    /// The spare replica of a load-reporting seed joins, or leaves gracefully.
    Scale,
    /// The faults are over.
    End,
}

/// The replica a load-reporting seed scales in and out, as an operator would: its
/// joins and leaves are planned, not faults, so every hand-over they bring must land on
/// its receiver at once (the oracle's hand-over check).
struct Spare {
    /// Its own generator, so that the run's other draws stay what they would be
    /// without it.
    rng: StdRng,
    replica: Replica,
    running: Option<Proc>,
}

struct World {
    seed: u64,
    options: SimOptions,
    rng: StdRng,
    store: MemoryGroupStore,
    calls: Arc<AtomicU64>,
    partitions: Vec<String>,
    /// Partitions added at runtime (for re-adds and removals).
    extra: u32,
    replicas: BTreeMap<String, Replica>,
    procs: BTreeMap<String, Proc>,
    /// Duplicate processes (same replica id as a running one).
    dups: BTreeMap<u64, Proc>,
    next_pid: u64,
    admin: GroupAdmin<Link>,
    admin_link: Link,
    terms: Terms,
    listing: Listing,
    /// When each fault's effect may last until: (from, to).
    spans: Vec<(Instant, Instant)>,
    queue: BinaryHeap<Reverse<(Instant, u64, Ev)>>,
    seq: u64,
    log: Vec<String>,
    events: u64,
    start: Instant,
    drained: Vec<String>,
    /// Calls that never returned.
    stuck: Vec<String>,
    /// When each replica id last had a fault (kill, stop, duplicate, link fault).
    faulted: BTreeMap<String, Instant>,
    /// Replica ids that could restore the group after the last wipe.
    restorers: Vec<String>,
    /// When the store was last wiped.
    last_wipe: Option<Instant>,
    /// Failovers under way: the store as the replica last received it, and when.
    replicas_cut: BTreeMap<u64, (Instant, MemorySnapshot)>,
    /// When a replica was last promoted.
    last_failover: Option<Instant>,
    /// Whether the replicas take their weights from loads their terms report (a
    /// quarter of the seeds): each partition reports a load of its own, unchanging.
    loads: bool,
    /// Preferences set and removed by an operator (another quarter of the seeds,
    /// overlapping): their own generator, so that the run's other draws stay what they
    /// would be without them.
    prefs: Option<StdRng>,
    /// Hand-overs are warm moves (and receivers prepare).
    warm: bool,
    /// A load-reporting seed's spare replica.
    spare: Option<Spare>,
    /// Around each planned leave of the spare (a hand-over to it may be under way).
    leaves: Vec<(Instant, Instant)>,
}

/// The load a partition's terms report in a simulation that takes loads: Zipf-like
/// by its place in the set (`p00` 1,000, `p01` about 470, ... `p15` about 50; added
/// ones hash to 1 to 40), so that some tenants are far heavier than a share and the
/// refining round hands over into rooms that reach past a taker's share.
fn load_of(partition: &str) -> f64 {
    match partition
        .strip_prefix('p')
        .and_then(|n| n.parse::<u32>().ok())
    {
        Some(i) if partition.len() == 3 => (1000.0 / f64::from(i + 1).powf(1.1)).round(),
        _ => {
            let h = partition.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            (1 + h % 40) as f64
        }
    }
}

impl World {
    fn new(seed: u64, options: SimOptions) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let store = MemoryGroupStore::new();
        let calls = Arc::new(AtomicU64::new(0));
        let count = rng.random_range(4..=16);
        let partitions: Vec<String> = (0..count).map(|i| format!("p{i:02}")).collect();
        let n = rng.random_range(2..=4);
        let mut replicas = BTreeMap::new();
        let weighted_caps = rng.random_bool(0.2);
        for i in 0..n {
            let id = format!("r{i}");
            let grace = rng
                .random_bool(0.5)
                .then(|| Duration::from_millis(rng.random_range(5_000..12_000)));
            let capacity = if weighted_caps {
                rng.random_range(1..=3)
            } else {
                1
            };
            let link = Link::new(&id, store.clone(), rng.random(), calls.clone());
            replicas.insert(
                id.clone(),
                Replica {
                    id,
                    grace,
                    capacity,
                    link,
                },
            );
        }
        // Drawn from the seed, not the run's generator, so that every other draw of a
        // seed stays what it was.
        let loads = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 62 == 0;
        // Two other bits of the same hash: independent of `loads`.
        let prefs = ((seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) & 3 == 1)
            .then(|| StdRng::seed_from_u64(seed ^ 0x5052_4546_4552_5321));
        // Two more bits: independent of both.
        let warm = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) & 3 == 2;
        let spare = loads.then(|| {
            let mut rng = StdRng::seed_from_u64(seed ^ 0x5350_4152_4553_2121);
            let link = Link::new("s0", store.clone(), rng.random(), calls.clone());
            Spare {
                rng,
                replica: Replica {
                    id: "s0".to_owned(),
                    grace: None,
                    capacity: 1,
                    link,
                },
                running: None,
            }
        });
        let admin_link = Link::new("admin", store.clone(), rng.random(), calls.clone());
        let admin = GroupAdmin::new(admin_link.clone(), "sim").expect("valid names");
        let now = Instant::now();
        Self {
            seed,
            options,
            rng,
            store,
            calls,
            listing: Listing::new(&partitions, now),
            partitions,
            extra: 0,
            replicas,
            procs: BTreeMap::new(),
            dups: BTreeMap::new(),
            next_pid: 0,
            admin,
            admin_link,
            terms: Terms::default(),
            spans: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            log: Vec::new(),
            events: 0,
            start: now,
            drained: Vec::new(),
            stuck: Vec::new(),
            faulted: BTreeMap::new(),
            restorers: Vec::new(),
            last_wipe: None,
            replicas_cut: BTreeMap::new(),
            last_failover: None,
            loads,
            prefs,
            warm,
            spare,
            leaves: Vec::new(),
        }
    }

    fn at(&mut self, t: Instant, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, ev)));
    }

    fn note(&mut self, what: String) {
        let t = Instant::now().duration_since(self.start);
        let line = format!("{:>9.3}s {what}", t.as_secs_f64());
        if link::tracing_on() {
            eprintln!("{line}");
        }
        self.log.push(line);
    }

    /// A fault's effect may last from now until `d` from now.
    fn span(&mut self, d: Duration) {
        let now = Instant::now();
        self.spans.push((now, now + d));
    }

    fn config(&self, r: &Replica) -> GroupConfig {
        let mut b = GroupConfig::builder("sim", self.partitions_configured(), r.id.as_str())
            .lease(LEASE)
            .capacity(r.capacity);
        if let Some(g) = r.grace {
            b = b.rejoin_grace(g);
        }
        if self.warm {
            b = b.prepare_moves(WARM_WAIT);
        }
        if self.loads {
            b = b.weights_from_loads(
                LoadDamping::default()
                    .half_life(Duration::from_millis(500))
                    .threshold_percent(10),
            );
        }
        b.build().expect("a valid simulation config")
    }

    /// The list every replica is configured with: the initial one.
    fn partitions_configured(&self) -> Vec<String> {
        self.listing.initial().to_vec()
    }

    fn spawn(&mut self, id: &str) -> Proc {
        let r = self.replicas[id].clone();
        self.spawn_replica(&r)
    }

    fn spawn_replica(&mut self, r: &Replica) -> Proc {
        let config = self.config(r);
        self.next_pid += 1;
        let pid = self.next_pid;
        let terms = self.terms.clone();
        let loads = self.loads;
        let handle = Coordinator::new(
            r.link.for_process(pid),
            config,
            move |partition: String, lead: Ownership| {
                let terms = terms.clone();
                async move {
                    let state = format!("{partition}@{}", lead.fence().get());
                    let load = loads.then(|| load_of(&partition));
                    let end = terms.begin(TermRec::new(partition, pid, &lead));
                    match load {
                        None => lead.cancelled().await,
                        // Reported twice a second while the term runs: the weights
                        // it leads to move partitions under the faults too.
                        Some(x) => loop {
                            lead.report_load(x)?;
                            tokio::select! {
                                () = lead.cancelled() => break,
                                () = sleep(Duration::from_millis(500)) => {}
                            }
                        },
                    }
                    end.handed_to(&lead);
                    // Every term hands off its name: the oracle checks who gets it.
                    lead.hand_off(state)?;
                    Ok(())
                }
            },
        )
        .seed(self.seed.wrapping_mul(1_000_003).wrapping_add(pid));
        let handle = if self.warm {
            // Quick for most partitions; past the giver's wait for every third.
            handle
                .on_prepare(|job| async move {
                    let slow = load_of(&job.partition) % 3.0 < 1.0;
                    sleep(if slow { WARM_WAIT * 2 } else { WARM_WAIT / 8 }).await;
                })
                .spawn()
        } else {
            handle.spawn()
        };
        Proc { pid, handle }
    }

    fn start_replica(&mut self, id: &str) {
        if self.procs.contains_key(id) {
            return;
        }
        let p = self.spawn(id);
        self.note(format!("start {id} (pid {})", p.pid));
        self.procs.insert(id.to_owned(), p);
    }

    async fn run(mut self) -> SimReport {
        let ids: Vec<String> = self.replicas.keys().cloned().collect();
        self.note(format!(
            "fleet: {} partitions, replicas {:?}, loads reported: {}, preferences: {}, warm moves: {}",
            self.partitions.len(),
            self.replicas
                .values()
                .map(|r| (r.id.clone(), r.grace.map(|g| g.as_millis()), r.capacity))
                .collect::<Vec<_>>(),
            self.loads,
            self.prefs.is_some(),
            self.warm
        ));
        let t0 = Instant::now();
        for (i, id) in ids.iter().enumerate() {
            let at = t0 + Duration::from_millis(self.rng.random_range(0..300) * i as u64);
            self.at(at, Ev::Start(id.clone()));
        }
        self.span(LEASE * 3);
        if self.rng.random_bool(0.3) {
            // A weighted group from the start.
            self.at(t0 + LEASE * 2, Ev::Chaos);
        }
        self.at(t0 + LEASE * 3, Ev::Chaos);
        if let Some(rng) = self.prefs.as_mut() {
            let first = t0 + Duration::from_millis(rng.random_range(500..4_000));
            self.at(first, Ev::Prefer);
        }
        if let Some(spare) = self.spare.as_mut() {
            let first = t0 + Duration::from_millis(spare.rng.random_range(2_000..6_000));
            self.at(first, Ev::Scale);
        }
        self.at(t0 + FAULTS_FOR, Ev::End);
        while let Some(Reverse((t, _, ev))) = self.queue.pop() {
            sleep_until(t).await;
            self.events += 1;
            match ev {
                Ev::Chaos => {
                    if Instant::now() < t0 + FAULTS_FOR {
                        self.chaos().await;
                        let gap = Duration::from_millis(self.rng.random_range(100..2_500));
                        self.at(Instant::now() + gap, Ev::Chaos);
                    }
                }
                Ev::Start(id) => self.start_replica(&id),
                Ev::KillPid(pid) => {
                    if let Some(p) = self.dups.remove(&pid) {
                        self.note(format!("kill duplicate pid {pid}"));
                        p.handle.abort();
                        self.span(LEASE * 3);
                    }
                }
                Ev::Heal(id) => {
                    self.replicas[&id].link.set_mode(Mode::Clean);
                }
                Ev::Undrain(id) => self.undrain(&id).await,
                Ev::AfterWipe { restorable, at } => self.after_wipe(restorable, at).await,
                Ev::Promote(id) => self.promote(id).await,
                Ev::AfterFailover { at } => self.after_failover(at).await,
                Ev::Prefer => {
                    if Instant::now() < t0 + FAULTS_FOR {
                        self.prefer().await;
                    }
                }
                Ev::Scale => {
                    if Instant::now() < t0 + FAULTS_FOR {
                        self.scale().await;
                    }
                }
                Ev::End => break,
            }
        }
        self.heal().await;
        // While healed, only the checks of recent wipes and the spare's planned joins
        // and leaves still run.
        let end = Instant::now() + HEAL_FOR;
        while let Some(Reverse((t, _, ev))) = self.queue.pop() {
            if t > end {
                break;
            }
            match ev {
                Ev::AfterWipe { restorable, at } => {
                    sleep_until(t).await;
                    self.after_wipe(restorable, at).await;
                }
                Ev::AfterFailover { at } => {
                    sleep_until(t).await;
                    self.after_failover(at).await;
                }
                // Planned joins and leaves go on once the faults' effects are over,
                // where nothing excuses a hand-over that does not land at once, until
                // two seconds before the final check.
                Ev::Scale if t + Duration::from_secs(2) < end => {
                    sleep_until(t).await;
                    self.scale().await;
                }
                _ => {}
            }
        }
        sleep_until(end).await;
        let end = Instant::now();
        let mut violations = std::mem::take(&mut self.stuck);
        violations.extend(oracle::check(
            &self.terms.all(),
            &self.listing,
            &self.spans,
            &self.leaves,
            LEASE,
            self.start,
            end,
        ));
        let digest = self.terms.digest(self.start);
        let terms = self.terms.all().len();
        for (_, p) in std::mem::take(&mut self.procs) {
            p.handle.abort();
        }
        for (_, p) in std::mem::take(&mut self.dups) {
            p.handle.abort();
        }
        if let Some(p) = self.spare.take().and_then(|s| s.running) {
            p.handle.abort();
        }
        SimReport {
            seed: self.seed,
            simulated: end.duration_since(self.start),
            events: self.events + self.calls.load(Ordering::Relaxed),
            terms,
            violations,
            log: self.log,
            digest,
        }
    }

    /// The spare replica joins, or leaves gracefully; then waits 1 to 6 s. No fault
    /// span: planned joins and leaves must hand every partition over at once.
    async fn scale(&mut self) {
        let Some(mut spare) = self.spare.take() else {
            return;
        };
        match spare.running.take() {
            Some(p) => {
                self.note(format!("scale in: s0 (pid {}) leaves", p.pid));
                let now = Instant::now();
                let wait = if self.warm { WARM_WAIT } else { Duration::ZERO };
                self.leaves
                    .push((now - LEASE - wait, now + SHUTDOWN_LIMIT + LEASE));
                if tokio::time::timeout(SHUTDOWN_LIMIT, p.handle.shutdown())
                    .await
                    .is_err()
                {
                    self.stuck.push(format!(
                        "shutdown of s0 (pid {}) did not return within {SHUTDOWN_LIMIT:?}",
                        p.pid
                    ));
                }
            }
            None => {
                let p = self.spawn_replica(&spare.replica);
                self.note(format!("scale out: s0 (pid {}) joins", p.pid));
                spare.running = Some(p);
            }
        }
        let gap = Duration::from_millis(spare.rng.random_range(1_000..6_000));
        self.spare = Some(spare);
        self.at(Instant::now() + gap, Ev::Scale);
    }

    /// Ends every fault: links clean, every replica running, drains lifted.
    async fn heal(&mut self) {
        self.note("heal: links clean, every replica started, drains lifted".into());
        for r in self.replicas.values() {
            r.link.set_mode(Mode::Clean);
        }
        self.admin_link.set_mode(Mode::Clean);
        for (_, p) in std::mem::take(&mut self.dups) {
            p.handle.abort();
        }
        let ids: Vec<String> = self.replicas.keys().cloned().collect();
        for id in &ids {
            self.start_replica(id);
        }
        for id in std::mem::take(&mut self.drained) {
            self.undrain(&id).await;
        }
        // Every fault's effect is over a few leases after the heal (a sticky replica
        // parked just before it is back at once).
        self.span(LEASE * 4);
    }

    /// The operator prefers a listed partition on a replica (now and then one that
    /// never runs), or removes a partition's preference; then waits 0.2 to 3 s. No
    /// fault span: a preference must never leave a partition without an owner.
    async fn prefer(&mut self) {
        let Some(rng) = self.prefs.as_mut() else {
            return;
        };
        let listed = self.listing.listed_now();
        let mut ids: Vec<String> = self.replicas.keys().cloned().collect();
        ids.push("ghost".to_owned());
        let p = listed.choose(rng).cloned();
        let on = if rng.random_bool(0.3) {
            None
        } else {
            ids.choose(rng).cloned()
        };
        let gap = Duration::from_millis(rng.random_range(200..3_000));
        if let Some(p) = p {
            match on {
                Some(r) => {
                    self.note(format!("prefer {p} on {r}"));
                    let out = self.admin.prefer(&p, &r).await;
                    self.note(format!("  -> {out:?}"));
                }
                None => {
                    self.note(format!("unprefer {p}"));
                    let out = self.admin.unprefer(&p).await;
                    self.note(format!("  -> {out:?}"));
                }
            }
        }
        self.at(Instant::now() + gap, Ev::Prefer);
    }

    fn pick_replica(&mut self) -> String {
        let ids: Vec<String> = self.replicas.keys().cloned().collect();
        ids.choose(&mut self.rng).expect("replicas").clone()
    }

    async fn chaos(&mut self) {
        let enabled: Vec<(&str, u32)> = FAULTS
            .iter()
            .copied()
            .filter(|(f, _)| self.options.faults.contains(f))
            .collect();
        let total: u32 = enabled.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return;
        }
        let mut roll = self.rng.random_range(0..total);
        let mut fault = "";
        for (f, w) in enabled {
            if roll < w {
                fault = f;
                break;
            }
            roll -= w;
        }
        let id = self.pick_replica();
        let grace = self.replicas[&id].grace;
        if matches!(fault, "kill" | "stop" | "dup" | "lossy" | "hole") {
            self.faulted.insert(id.clone(), Instant::now());
        }
        match fault {
            // A crash, then a restart after a while.
            "kill" => {
                if let Some(p) = self.procs.remove(&id) {
                    let back = Duration::from_millis(self.rng.random_range(50..4_000));
                    self.note(format!(
                        "kill {id} (pid {}), back in {} ms",
                        p.pid,
                        back.as_millis()
                    ));
                    p.handle.abort();
                    self.at(Instant::now() + back, Ev::Start(id));
                    self.span(back.max(LEASE) + LEASE * 3);
                }
            }
            // A graceful stop (sticky ones park), then a restart within their grace or
            // after it.
            "stop" => {
                if let Some(p) = self.procs.remove(&id) {
                    let back = match grace {
                        Some(g) if self.rng.random_bool(0.8) => {
                            Duration::from_millis(self.rng.random_range(50..2_000)).min(g / 2)
                        }
                        Some(g) => g + LEASE,
                        None => Duration::from_millis(self.rng.random_range(50..3_000)),
                    };
                    self.note(format!(
                        "stop {id} (pid {}{}), back in {} ms",
                        p.pid,
                        if grace.is_some() { ", sticky" } else { "" },
                        back.as_millis()
                    ));
                    let started = Instant::now();
                    if tokio::time::timeout(SHUTDOWN_LIMIT, p.handle.shutdown())
                        .await
                        .is_err()
                    {
                        self.stuck.push(format!(
                            "shutdown of {id} (pid {}) did not return within {SHUTDOWN_LIMIT:?}",
                            p.pid
                        ));
                    }
                    let took = started.elapsed();
                    self.at(Instant::now() + back, Ev::Start(id));
                    self.span(took + back + LEASE * 3);
                }
            }
            // A second process with the same replica id, for a while.
            "dup" => {
                let p = self.spawn(&id);
                let d = Duration::from_millis(self.rng.random_range(200..3_000));
                self.note(format!(
                    "duplicate of {id} (pid {}) for {} ms",
                    p.pid,
                    d.as_millis()
                ));
                let pid = p.pid;
                self.dups.insert(pid, p);
                self.at(Instant::now() + d, Ev::KillPid(pid));
                self.span(d + LEASE * 3);
            }
            // Lossy replies.
            "lossy" => {
                let d = Duration::from_millis(self.rng.random_range(200..3_000));
                let mode = Mode::Lossy {
                    fail: self.rng.random_range(0.0..0.2),
                    lose: self.rng.random_range(0.0..0.3),
                    twice: self.rng.random_range(0.0..0.3),
                    late: self.rng.random_range(0.0..0.2),
                };
                self.note(format!(
                    "lossy link of {id} for {} ms: {mode:?}",
                    d.as_millis()
                ));
                self.replicas[&id].link.set_mode(mode);
                self.at(Instant::now() + d, Ev::Heal(id));
                self.span(d + LEASE * 3);
            }
            // A black hole (a paused process, a cut network).
            "hole" => {
                let d = Duration::from_millis(self.rng.random_range(100..2_500));
                self.note(format!("black hole of {id} for {} ms", d.as_millis()));
                self.replicas[&id].link.set_mode(Mode::Hole {
                    until: Instant::now() + d,
                });
                self.at(Instant::now() + d, Ev::Heal(id));
                self.span(d + LEASE * 3);
            }
            // The partition set changes.
            "set" => self.change_set().await,
            // Drains.
            "drain" => {
                if !self.drained.contains(&id) {
                    self.note(format!("drain {id}"));
                    let r = self.admin.drain(&id).await;
                    self.note(format!("  -> {r:?}"));
                    if r.is_ok() {
                        self.drained.push(id.clone());
                        let d = Duration::from_millis(self.rng.random_range(500..4_000));
                        self.at(Instant::now() + d, Ev::Undrain(id));
                    }
                    // A drain of every replica leaves nothing served: that is the
                    // operator's doing, not a fault of the group.
                    self.span(LEASE * 6);
                }
            }
            // Weights.
            "weight" => {
                let listed = self.listing.listed_now();
                if let Some(p) = listed.choose(&mut self.rng).cloned() {
                    let w = *[1u64, 2, 3, 5, 8, 20]
                        .choose(&mut self.rng)
                        .expect("weights");
                    self.note(format!("weight {p} = {w}"));
                    let r = self.admin.set_weight(&p, w).await;
                    self.note(format!("  -> {r:?}"));
                    self.span(LEASE * 4);
                }
            }
            // A failover that loses the last writes: the replica's link is cut now, the
            // primary dies a moment later, and the replica is promoted.
            "failover" => {
                let d = Duration::from_millis(self.rng.random_range(0..800));
                self.seq += 1;
                let id = self.seq;
                self.note(format!(
                    "the replica misses every write from now; promoted in {} ms",
                    d.as_millis()
                ));
                self.replicas_cut
                    .insert(id, (Instant::now(), self.store.snapshot()));
                self.at(Instant::now() + d, Ev::Promote(id));
                self.span(d + LEASE * 4);
            }
            // Redis restarted without its data.
            _ => self.wipe().await,
        }
        // Now and then the admin's link is lossy too.
        let admin_mode = if self.options.faults.contains(&"lossy") && self.rng.random_bool(0.2) {
            Mode::Lossy {
                fail: 0.0,
                lose: 0.0,
                twice: 0.5,
                late: 0.0,
            }
        } else {
            Mode::Clean
        };
        self.admin_link.set_mode(admin_mode);
    }

    /// Redis restarts without its data. The group must come back with the set it had,
    /// if a live replica with a clean link had read it; otherwise nothing is sure about
    /// the set until the group is back.
    async fn wipe(&mut self) {
        let keys = crate::keys::GroupKeys::new("leasehold", "sim");
        let now = Instant::now();
        let page = Protocol::set_page(&self.store, &keys, 0, 100_000)
            .await
            .ok()
            .flatten();
        let current = page.as_ref().map(|p| (p.life.clone(), p.set_version));
        let restorers: Vec<String> = self
            .procs
            .iter()
            .filter(|(id, p)| {
                self.replicas[id.as_str()].link.is_clean()
                    && current.is_some()
                    && p.handle.view().set_copy == current
            })
            .map(|(id, _)| id.clone())
            .collect();
        self.note(format!(
            "wipe the store ({} can restore it)",
            if restorers.is_empty() {
                "nobody".to_owned()
            } else {
                restorers.join(", ")
            }
        ));
        self.store.wipe();
        // A wipe while the last one's check is still due: what came back of that one is
        // not known, so nothing is sure from then on until this one's check.
        let overlapping = self.last_wipe.filter(|w| now < *w + LEASE * 3);
        if let Some(w) = overlapping {
            self.listing.unsure_all(w);
        }
        // Within a failover's window replicas may restore a set newer than the
        // promoted store's: nothing is sure until this wipe's check either.
        let after_failover = self.last_failover.filter(|f| now < *f + LEASE * 3);
        self.last_wipe = Some(now);
        let restorable = !restorers.is_empty() && overlapping.is_none() && after_failover.is_none();
        if !restorable {
            self.listing.unsure_all(now);
        }
        self.restorers = restorers;
        self.at(
            now + LEASE * 3,
            Ev::AfterWipe {
                restorable,
                at: now,
            },
        );
        self.span(LEASE * 5);
    }

    /// Promotes the replica cut off at snapshot `id`: the store goes back to it under a
    /// new server lifetime. Set changes answered since were lost with it, and replicas
    /// may still hold copies of the newer set for a while (a wipe meanwhile may restore
    /// one), so nothing is sure about the set from the cut until the failover's window
    /// has passed.
    async fn promote(&mut self, id: u64) {
        let Some((cut, snapshot)) = self.replicas_cut.remove(&id) else {
            return;
        };
        self.note(format!(
            "failover: the replica cut off {} ms ago is promoted",
            cut.elapsed().as_millis()
        ));
        self.store.fail_over_to(snapshot);
        let now = Instant::now();
        // From the cut on, and past the changes answered since (lost with it).
        self.listing.unsure_all(cut);
        self.listing.unsure_all(now);
        self.last_failover = Some(now);
        self.at(now + LEASE * 3, Ev::AfterFailover { at: now });
        self.span(LEASE * 4);
    }

    /// From a failover's end on, the set is what the store has (unless a later wipe or
    /// failover decides).
    async fn after_failover(&mut self, at: Instant) {
        if self.last_failover.is_some_and(|f| f > at) || self.last_wipe.is_some_and(|w| w > at) {
            return;
        }
        let Some(now_set) = self.stored_set().await else {
            // Nobody has created it again yet: look later.
            self.at(Instant::now() + LEASE, Ev::AfterFailover { at });
            return;
        };
        self.note(format!("the set after the failover: {now_set:?}"));
        self.listing.reset(&now_set, Instant::now());
    }

    /// The set as the store has it now, sorted (`None`: no group).
    async fn stored_set(&self) -> Option<Vec<String>> {
        let keys = crate::keys::GroupKeys::new("leasehold", "sim");
        let page = Protocol::set_page(&self.store, &keys, 0, 100_000)
            .await
            .ok()
            .flatten()?;
        let mut names: Vec<String> = page.names.into_iter().map(|(n, _)| n).collect();
        names.sort();
        Some(names)
    }

    async fn after_wipe(&mut self, restorable: bool, at: Instant) {
        if self.last_wipe.is_some_and(|w| w > at) {
            // Wiped again since: that wipe's check decides.
            return;
        }
        let Some(now_set) = self.stored_set().await else {
            // Nobody has created it again yet (no live replica): look later.
            self.listing.unsure_all(at);
            self.at(
                Instant::now() + LEASE,
                Ev::AfterWipe {
                    restorable: false,
                    at,
                },
            );
            return;
        };
        // Every replica that could restore it had a fault meanwhile (killed before it
        // saw the group missing, say): then the group may have been seeded from a
        // configured list, as documented, and nothing was sure from the wipe on (even if
        // what the admin saw since happens to agree with the seeded set).
        let excused = self
            .restorers
            .iter()
            .all(|r| self.faulted.get(r).is_some_and(|t| *t >= at));
        if restorable && !excused && self.listing.sure() {
            let mut want = self.listing.listed_now();
            want.sort();
            if want != now_set {
                self.stuck.push(format!(
                    "after a wipe the group came back with {now_set:?}, not the set its \
                     replicas saw {want:?}"
                ));
            }
            if want == now_set {
                return;
            }
        }
        // Nothing was sure from the wipe on.
        self.listing.unsure_all(at);
        self.note(format!("the set after the wipe: {now_set:?}"));
        self.listing.reset(&now_set, Instant::now());
    }

    async fn undrain(&mut self, id: &str) {
        self.note(format!("undrain {id}"));
        let r = self.admin.undrain(id).await;
        self.note(format!("  -> {r:?}"));
        self.drained.retain(|d| d != id);
        self.span(LEASE * 4);
    }

    async fn change_set(&mut self) {
        let listed = self.listing.listed_now();
        let removed = self.listing.removed_now();
        let roll = self.rng.random_range(0..3);
        let asked = Instant::now();
        if roll == 0 || listed.len() <= 2 {
            // Add a new one, or re-add a removed one.
            let name = match removed.choose(&mut self.rng) {
                Some(n) if self.rng.random_bool(0.5) => n.clone(),
                _ => {
                    self.extra += 1;
                    format!("x{:02}", self.extra)
                }
            };
            self.note(format!("add {name}"));
            let r = self.admin.add([name.as_str()]).await;
            self.note(format!("  -> {r:?}"));
            match r {
                Ok(_) | Err(crate::PartitionsError::AlreadyPresent(_)) => {
                    self.listing.added(&name, asked, Instant::now());
                }
                Err(_) => self.listing.unsure(&name, asked),
            }
        } else {
            let name = listed.choose(&mut self.rng).expect("listed").clone();
            self.note(format!("remove {name}"));
            let r = self.admin.remove([name.as_str()]).await;
            self.note(format!("  -> {r:?}"));
            match r {
                Ok(_) | Err(crate::PartitionsError::UnknownPartition(_)) => {
                    self.listing.removed(&name, asked, Instant::now());
                }
                Err(_) => self.listing.unsure(&name, asked),
            }
        }
        self.span(LEASE * 4);
    }
}

/// Runs seeds `from..from + count`, `threads` at a time; calls `each` with every
/// report as it comes.
pub fn run_many(
    from: u64,
    count: u64,
    options: &SimOptions,
    threads: usize,
    each: impl Fn(&SimReport) + Send + Sync,
) -> Vec<SimReport> {
    let next = AtomicU64::new(from);
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= from + count {
                        break;
                    }
                    let report = run(seed, options);
                    each(&report);
                    if !report.violations.is_empty() {
                        failed
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(report);
                    }
                }
            });
        }
    });
    let mut failed = failed.into_inner().unwrap_or_else(PoisonError::into_inner);
    failed.sort_by_key(|r| r.seed);
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The simulation `cargo test` runs: a few hundred seeds of every fault (the bench's
    /// `leasehold-bench simulate --seeds 100000` runs many more).
    #[test]
    fn three_hundred_seeds_of_every_fault_break_no_promise() {
        let options = SimOptions::default();
        let failed = run_many(0, 300, &options, 2, |_| {});
        let described: Vec<String> = failed
            .iter()
            .map(|r| format!("{}: {:?}", replay_command(r.seed, &options), r.violations))
            .collect();
        assert!(described.is_empty(), "{described:#?}");
    }

    #[test]
    fn a_seed_replays_exactly() {
        let a = run(11, &SimOptions::default());
        let b = run(11, &SimOptions::default());
        assert_eq!(a.digest, b.digest, "{:#?}\n{:#?}", a.log, b.log);
        assert_eq!(a.log, b.log);
        assert!(a.terms > 0);
    }
}
