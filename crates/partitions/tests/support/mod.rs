//! A fleet of coordinators in one process, with an ownership ledger checked for
//! double ownership on this process's clock.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_partitions::{
    Coordinator, CoordinatorHandle, GroupAdmin, GroupConfig, GroupConfigBuilder, GroupStore,
    MoveCause, NoHandOff, Ownership,
};
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Term {
    pub partition: String,
    pub replica: String,
    pub fence: u64,
    pub start: Instant,
    pub end: Option<Instant>,
    /// Why it ended, as its callback was told (`Ownership::end_reason`).
    pub reason: Option<MoveCause>,
    /// The replica it was handed to, as its callback was told (`Ownership::successor`).
    pub successor: Option<String>,
    /// What the term was offered of the state the one before handed off
    /// (`Ownership::handed_over`).
    pub handed_over: Result<Vec<u8>, NoHandOff>,
}

/// The loads a fleet's callbacks report (`Ownership::report_load`): each partition's
/// (0 if not set), times `1 ± noise` drawn anew at every report.
#[derive(Debug, Clone, Default)]
pub struct Loads {
    pub of: Arc<Mutex<BTreeMap<String, f64>>>,
    pub noise: Arc<Mutex<f64>>,
    /// A new term reports this many times the load for this long (a consumer that
    /// reports its throughput, catching up with the backlog of the time its tenant had
    /// no owner).
    pub catch_up: Arc<Mutex<Option<(f64, Duration)>>>,
    draws: Arc<std::sync::atomic::AtomicU64>,
}

impl Loads {
    pub fn set(&self, partition: &str, load: f64) {
        self.of.lock().unwrap().insert(partition.to_owned(), load);
    }

    /// The load `partition`'s term started at `since` reports now.
    pub fn of_term(&self, partition: &str, since: Instant) -> f64 {
        let base = self.now(partition);
        match *self.catch_up.lock().unwrap() {
            Some((factor, within)) if since.elapsed() < within => base * factor,
            _ => base,
        }
    }

    /// The load `partition` reports now.
    pub fn now(&self, partition: &str) -> f64 {
        let base = self
            .of
            .lock()
            .unwrap()
            .get(partition)
            .copied()
            .unwrap_or(0.0);
        let noise = *self.noise.lock().unwrap();
        // A cheap deterministic spread in [-1, 1): a multiplicative hash of a counter.
        let n = self
            .draws
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let unit = (n >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        base * (1.0 + noise * unit)
    }
}

/// The state a fleet that hands off leaves at the end of a term: which term left it.
pub fn state_of(partition: &str, fence: u64) -> Vec<u8> {
    format!("{partition}@{fence}").into_bytes()
}

#[derive(Debug, Clone, Default)]
pub struct Ledger(Arc<Mutex<Vec<Term>>>);

struct EndOnDrop(Ledger, usize);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.0.lock().unwrap()[self.1].end = Some(Instant::now());
    }
}

impl Ledger {
    pub fn terms(&self) -> Vec<Term> {
        self.0.lock().unwrap().clone()
    }

    /// No partition ever had two owners at once, and fences grow per partition.
    pub fn assert_no_double_ownership(&self) {
        let mut by: HashMap<String, Vec<Term>> = HashMap::new();
        for t in self.terms() {
            by.entry(t.partition.clone()).or_default().push(t);
        }
        for (p, mut terms) in by {
            terms.sort_by_key(|t| t.start);
            for w in terms.windows(2) {
                let end = w[0]
                    .end
                    .unwrap_or_else(|| panic!("{p}: an earlier term never ended: {:?}", w[0]));
                assert!(
                    end <= w[1].start,
                    "{p}: two owners at once: {:?} / {:?}",
                    w[0],
                    w[1]
                );
                assert!(
                    w[0].fence < w[1].fence,
                    "{p}: fence did not grow: {:?} / {:?}",
                    w[0],
                    w[1]
                );
            }
        }
    }
}

pub struct Fleet<B: GroupStore> {
    pub store: B,
    /// The group name (default `g`).
    pub group: String,
    pub partitions: Vec<String>,
    pub lease: Duration,
    pub ledger: Ledger,
    pub replicas: BTreeMap<String, CoordinatorHandle<B>>,
    /// Callbacks started from now on hand off [`state_of`] their term as it ends.
    pub hand_off: bool,
    /// Callbacks started from now on report these loads every 20 ms while they run.
    pub loads: Option<Loads>,
    /// Replicas started from now on prepare for warm moves, each preparation taking
    /// this long (`Coordinator::on_prepare`), recorded in `prepared`.
    pub prepare: Option<Duration>,
    pub prepared: Arc<Mutex<Vec<Prepared>>>,
}

/// A preparation for a warm move, as a replica's `on_prepare` callback ran it.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub replica: String,
    pub partition: String,
    pub from: String,
    pub start: Instant,
    /// When it returned (`None`: dropped before, its owner's wait over).
    pub end: Option<Instant>,
}

impl<B: GroupStore> Fleet<B> {
    pub fn new(store: B, partitions: usize, lease: Duration) -> Self {
        // Logs go to the test's captured output (shown when it fails); RUST_LOG picks.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        Self {
            store,
            group: "g".to_owned(),
            partitions: (0..partitions).map(|i| format!("p{i:05}")).collect(),
            lease,
            ledger: Ledger::default(),
            replicas: BTreeMap::new(),
            hand_off: false,
            loads: None,
            prepare: None,
            prepared: Arc::default(),
        }
    }

    /// This fleet's configuration of `replica`, to adjust before `build()`.
    pub fn builder(&self, replica: &str) -> GroupConfigBuilder {
        GroupConfig::builder(self.group.as_str(), self.partitions.clone(), replica)
            .lease(self.lease)
    }

    pub fn config(&self, replica: &str) -> GroupConfig {
        self.builder(replica).build().unwrap()
    }

    pub fn start(&mut self, replica: &str) {
        let config = self.config(replica);
        self.start_with(config);
    }

    /// Starts every one of `replicas` with the fleet's configuration.
    pub fn start_all(&mut self, replicas: &[&str]) {
        for replica in replicas {
            self.start(replica);
        }
    }

    /// Starts a replica with its own configuration (its id is the config's).
    pub fn start_with(&mut self, config: GroupConfig) {
        let store = self.store.clone();
        self.start_on(store, config);
    }

    /// Starts a replica on a store of its own (behind a fault proxy, say).
    pub fn start_on(&mut self, store: B, config: GroupConfig) {
        let replica = config.replica_id().to_owned();
        let ledger = self.ledger.clone();
        let hand_off = self.hand_off;
        let loads = self.loads.clone();
        let prepare = self
            .prepare
            .map(|took| (took, self.prepared.clone(), replica.clone()));
        let coordinator =
            Coordinator::new(store, config, move |partition: String, lead: Ownership| {
                let (ledger, loads) = (ledger.clone(), loads.clone());
                async move {
                    let index = {
                        let mut all = ledger.0.lock().unwrap();
                        all.push(Term {
                            partition: partition.clone(),
                            replica: lead.replica_id().to_owned(),
                            fence: lead.fence().get(),
                            start: Instant::now(),
                            end: None,
                            reason: None,
                            successor: None,
                            handed_over: lead.handed_over().map(<[u8]>::to_vec),
                        });
                        all.len() - 1
                    };
                    let _end = EndOnDrop(ledger.clone(), index);
                    match &loads {
                        None => lead.cancelled().await,
                        Some(loads) => loop {
                            let since = ledger.0.lock().unwrap()[index].start;
                            lead.report_load(loads.of_term(&partition, since))?;
                            tokio::select! {
                                () = lead.cancelled() => break,
                                () = tokio::time::sleep(Duration::from_millis(20)) => {}
                            }
                        },
                    }
                    {
                        let mut all = ledger.0.lock().unwrap();
                        all[index].reason = lead.end_reason();
                        all[index].successor = lead.successor().map(str::to_owned);
                    }
                    if hand_off {
                        lead.hand_off(state_of(&partition, lead.fence().get()))?;
                    }
                    Ok(())
                }
            });
        let coordinator = match prepare {
            None => coordinator,
            Some((took, prepared, me)) => coordinator.on_prepare(move |job| {
                let (prepared, me) = (prepared.clone(), me.clone());
                async move {
                    let index = {
                        let mut all = prepared.lock().unwrap();
                        all.push(Prepared {
                            replica: me,
                            partition: job.partition.clone(),
                            from: job.from.clone(),
                            start: Instant::now(),
                            end: None,
                        });
                        all.len() - 1
                    };
                    tokio::time::sleep(took).await;
                    prepared.lock().unwrap()[index].end = Some(Instant::now());
                }
            }),
        };
        let handle = coordinator.spawn();
        self.replicas.insert(replica, handle);
    }

    /// Creates the group the way a fleet does, by its first replica (an admin never
    /// creates one): a replica that only seeds the set and leaves at once, before it
    /// could be granted anything. For tests that change the group before any of their
    /// replicas runs.
    pub async fn create_group(&self) {
        let config = self.config("group-creator");
        let creator = Coordinator::new(
            self.store.clone(),
            config,
            |_p, lead: Ownership| async move {
                lead.cancelled().await;
                Ok(())
            },
        )
        .spawn();
        let admin = GroupAdmin::new(self.store.clone(), &self.group).unwrap();
        let start = Instant::now();
        while !admin.exists().await.unwrap_or(false) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the group was not created"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        creator.shutdown().await;
    }

    /// Owned count per replica, from each replica's own view.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.replicas
            .iter()
            .map(|(r, h)| (r.clone(), h.status().owned.len()))
            .collect()
    }

    /// Every partition owned by exactly one live replica (per their views).
    pub fn all_owned_once(&self) -> bool {
        let mut owners: HashMap<String, usize> = HashMap::new();
        for h in self.replicas.values() {
            for p in h.status().owned {
                *owners.entry(p).or_default() += 1;
            }
        }
        owners.len() == self.partitions.len() && owners.values().all(|n| *n == 1)
    }

    pub fn spread(&self) -> usize {
        let c = self.counts();
        c.values().max().unwrap_or(&0) - c.values().min().unwrap_or(&0)
    }

    /// Balanced per the views, and every owned partition's callback is running (a view
    /// shows a partition from its claim on; its callback starts a moment later).
    pub fn balanced(&self) -> bool {
        self.all_owned_once() && self.spread() <= 1 && self.callbacks_agree()
    }

    /// The partitions whose callbacks run now, by replica, match the views.
    pub fn callbacks_agree(&self) -> bool {
        let mut running: HashMap<String, String> = HashMap::new();
        for t in self.ledger.terms().into_iter().filter(|t| t.end.is_none()) {
            running.insert(t.partition, t.replica);
        }
        self.replicas.iter().all(|(r, h)| {
            h.status()
                .owned
                .iter()
                .all(|p| running.get(p).is_some_and(|owner| owner == r))
        })
    }

    /// Waits (on the tokio clock) until every partition is owned once with its callback
    /// running, and `done`; fails naming `what` after `limit`.
    pub async fn until(&self, what: &str, limit: Duration, done: impl Fn(&Self) -> bool) {
        let start = Instant::now();
        while !(self.all_owned_once() && self.callbacks_agree() && done(self)) {
            assert!(
                start.elapsed() < limit,
                "{what}: not done after {limit:?}: counts {:?}",
                self.counts()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (on the tokio clock) until balanced; returns how long it took.
    pub async fn converge(&self, limit: Duration) -> Duration {
        let start = Instant::now();
        while !self.balanced() {
            assert!(
                start.elapsed() < limit,
                "not balanced after {limit:?}: counts {:?}, all owned once: {}",
                self.counts(),
                self.all_owned_once()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        start.elapsed()
    }

    /// Waits (on the tokio clock) until each of `partitions` is owned by exactly one
    /// replica whose callback for it runs; returns how long it took.
    pub async fn reowned<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a String> + Clone,
        limit: Duration,
    ) -> Duration {
        let start = Instant::now();
        loop {
            let running: Vec<Term> = self
                .ledger
                .terms()
                .into_iter()
                .filter(|t| t.end.is_none())
                .collect();
            let done = partitions.clone().into_iter().all(|p| {
                let owners: Vec<&String> = self
                    .replicas
                    .iter()
                    .filter(|(_, h)| h.status().owned.contains(p))
                    .map(|(r, _)| r)
                    .collect();
                owners.len() == 1
                    && running
                        .iter()
                        .any(|t| &t.partition == p && &t.replica == owners[0])
            });
            if done {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < limit,
                "not owned again after {limit:?}: counts {:?}",
                self.counts()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Waits until every partition is owned once and its callback runs, however the
    /// counts are spread (a weighted group balances loads, not counts).
    pub async fn settle(&self, limit: Duration) -> Duration {
        let start = Instant::now();
        while !(self.all_owned_once() && self.callbacks_agree()) {
            assert!(
                start.elapsed() < limit,
                "not every partition owned once after {limit:?}: counts {:?}",
                self.counts()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        start.elapsed()
    }
}

impl Ledger {
    /// The longest time one of `partitions` went without a running callback between
    /// `from` and `to` (on the tokio clock), and that partition.
    pub fn longest_gap(
        &self,
        partitions: &[String],
        from: Instant,
        to: Instant,
    ) -> (Duration, String) {
        let terms = self.terms();
        let mut worst = (Duration::ZERO, String::new());
        for p in partitions {
            let mut spans: Vec<(Instant, Instant)> = terms
                .iter()
                .filter(|t| &t.partition == p)
                .map(|t| (t.start, t.end.unwrap_or(to)))
                .collect();
            spans.sort();
            let mut covered = from;
            for (start, end) in spans {
                if end <= covered {
                    continue;
                }
                if start > covered {
                    let gap = start.min(to) - covered;
                    if gap > worst.0 {
                        worst = (gap, p.clone());
                    }
                }
                covered = covered.max(end);
                if covered >= to {
                    break;
                }
            }
            if covered < to && to - covered > worst.0 {
                worst = (to - covered, p.clone());
            }
        }
        worst
    }

    /// The replicas that ran `partition`'s callback, in term order.
    pub fn owners_of(&self, partition: &str) -> Vec<String> {
        let mut terms: Vec<Term> = self
            .terms()
            .into_iter()
            .filter(|t| t.partition == partition)
            .collect();
        terms.sort_by_key(|t| t.start);
        terms.into_iter().map(|t| t.replica).collect()
    }
}
