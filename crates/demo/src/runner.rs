//! The script: start a fleet, crash one replica, add one, stop one gracefully; after
//! each event, poll the store every few milliseconds until every partition is owned by
//! a running replica with spread ≤ 1, and show it all.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use leasehold_election::DEFAULT_KEY_PREFIX;
use leasehold_election::{BuildError, RedisStore};
use leasehold_partitions::{Coordinator, CoordinatorHandle, GroupAdmin, GroupConfig, GroupStore};
use tokio::time::{Instant, sleep};

use crate::BoxError;
use crate::backend::{Chosen, Store};
use crate::plot;
use crate::state::{Balance, Event, Mark, Outcome, Sample, Timeline, moved, views_agree};
use crate::view::{self, Frame, ReplicaRow};

/// How often the store is polled while measuring.
const POLL: Duration = Duration::from_millis(5);
/// How often the live view is redrawn.
const REDRAW: Duration = Duration::from_millis(100);
/// How often a plain progress line is printed while waiting.
const PROGRESS: Duration = Duration::from_secs(1);
/// Owner cells shown in the live view (the plot shows them all).
const GRID_MAX: usize = 48;

/// What the command line decided.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Replicas started at first.
    pub(crate) replicas: usize,
    /// Partitions in the group.
    pub(crate) partitions: usize,
    /// Lease of every partition.
    pub(crate) lease: Duration,
    /// Pause after each hand-over before the next event.
    pub(crate) script_delay: Duration,
    /// Redraw a live view (else print plain lines).
    pub(crate) tui: bool,
    /// Where to write the SVG timeline.
    pub(crate) plot: Option<PathBuf>,
}

/// Runs the script on the chosen store; `Ok(true)` if every hand-over converged and
/// the fleet ended balanced.
///
/// # Errors
/// A store that cannot be built or read, or a plot that cannot be written.
pub(crate) async fn run(settings: Settings, chosen: Chosen) -> Result<bool, BoxError> {
    let description = (chosen.description, chosen.kind);
    match chosen.store {
        Store::Memory(store) => {
            Demo::new(settings, description, move || Ok(store.clone()))?
                .script()
                .await
        }
        Store::Redis {
            url,
            _server: server,
        } => {
            let ok = Demo::new(settings, description, move || {
                RedisStore::builder(url.as_str()).build()
            })?
            .script()
            .await;
            // Our private server (if any) outlives every replica.
            drop(server);
            ok
        }
    }
}

/// Makes one store handle per replica.
type Factory<B> = Box<dyn Fn() -> Result<B, BuildError> + Send + Sync>;

struct Demo<B: GroupStore> {
    settings: Settings,
    header: String,
    /// The plot's title: the header without addresses.
    title: String,
    group: String,
    partitions: Vec<String>,
    make: Factory<B>,
    /// Reads the group for the view; not a member.
    observer: B,
    /// The running replicas, in start order.
    members: Vec<(String, CoordinatorHandle<B>)>,
    next_id: usize,
    started: Instant,
    sample: Sample,
    events: Vec<Event>,
    timeline: Timeline,
    last_draw: Option<Instant>,
}

impl<B: GroupStore> Demo<B> {
    fn new(
        settings: Settings,
        (store, kind): (String, String),
        make: impl Fn() -> Result<B, BuildError> + Send + Sync + 'static,
    ) -> Result<Self, BoxError> {
        let width = settings.partitions.saturating_sub(1).to_string().len();
        let partitions: Vec<String> = (0..settings.partitions)
            .map(|i| format!("p{i:0width$}"))
            .collect();
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let header = |store: &str| {
            format!(
                "leasehold fleet demo · {store} · {} partitions · lease {} ms",
                settings.partitions,
                settings.lease.as_millis()
            )
        };
        let (title, header) = (header(&kind), header(&store));
        Ok(Self {
            group: format!("demo-{}-{millis}", std::process::id()),
            header,
            title,
            observer: make()?,
            make: Box::new(make),
            timeline: Timeline::new(partitions.clone()),
            sample: Sample::empty(partitions.len()),
            partitions,
            settings,
            members: Vec::new(),
            next_id: 1,
            started: Instant::now(),
            events: Vec::new(),
            last_draw: None,
        })
    }

    async fn script(mut self) -> Result<bool, BoxError> {
        if self.settings.tui {
            print!("\x1b[?25l\x1b[2J");
        } else {
            println!("{} · group {}", self.header, self.group);
        }
        self.started = Instant::now();
        let n = self.settings.replicas;

        self.begin(format!("start {n} replicas"), None);
        for _ in 0..n {
            self.add_replica()?;
        }
        self.settle().await?;

        let victim = self.members[1].0.clone();
        self.begin(
            format!("kill {victim} (abort: no release)"),
            Some(victim.clone()),
        );
        self.take_out(&victim).abort();
        self.settle().await?;

        let id = format!("replica-{}", self.next_id);
        self.begin(format!("add {id}"), None);
        self.add_replica()?;
        self.settle().await?;

        let leaver = self.members[0].0.clone();
        self.begin(
            format!("stop {leaver} (graceful shutdown)"),
            Some(leaver.clone()),
        );
        let handle = self.take_out(&leaver);
        let leaving = tokio::spawn(async move { handle.shutdown().await });
        self.settle().await?;
        leaving.await?;

        let end = self.started.elapsed();
        self.timeline.finish(end);
        self.draw(true);
        if self.settings.tui {
            print!("\x1b[?25h");
        } else {
            println!("\n{}", view::GRID_LEGEND);
            print!(
                "{}",
                view::owner_grid(&self.partitions, &self.sample, &self.alive(), false)
            );
        }
        println!("\ngroup status (partition, owner, fence, lease left):");
        print!("{}", view::status_table(&self.partitions, &self.sample));
        let last = self.balance();
        println!();
        print!(
            "{}",
            view::summary(&self.events, &last, self.sample.heartbeats.len())
        );
        if let Some(path) = &self.settings.plot {
            plot::write(path, &self.timeline, &self.events, &self.title)?;
            println!("wrote {}", path.display());
        }
        let ok = last.converged()
            && self
                .events
                .iter()
                .all(|e| matches!(e.outcome, Outcome::Converged { .. }));
        println!("stopping {} replicas ...", self.members.len());
        for (_, handle) in self.members.drain(..) {
            handle.shutdown().await;
        }
        Ok(ok)
    }

    fn add_replica(&mut self) -> Result<(), BoxError> {
        let id = format!("replica-{}", self.next_id);
        self.next_id += 1;
        let config =
            GroupConfig::builder(self.group.as_str(), self.partitions.clone(), id.as_str())
                .lease(self.settings.lease)
                .build()?;
        let handle = Coordinator::new(
            (self.make)()?,
            config,
            |_partition: String, lead: leasehold_partitions::Ownership| async move {
                // A real service would serve the partition here.
                lead.cancelled().await;
                Ok(())
            },
        )
        .spawn();
        self.members.push((id, handle));
        Ok(())
    }

    fn take_out(&mut self, id: &str) -> CoordinatorHandle<B> {
        let i = self
            .members
            .iter()
            .position(|(m, _)| m == id)
            .expect("a running replica");
        self.members.remove(i).1
    }

    /// Records an event; `removed` is the replica it takes out.
    fn begin(&mut self, label: String, removed: Option<String>) {
        let at = self.started.elapsed();
        self.timeline.marks.push(Mark {
            at,
            label: label.clone(),
            removed,
        });
        self.events.push(Event {
            at,
            label: label.clone(),
            outcome: Outcome::Waiting(self.balance()),
        });
        if !self.settings.tui {
            println!("[{:>8}] {label}", view::secs(at));
        }
    }

    /// Polls until the last event's hand-over converged (or timed out), then keeps the
    /// view live for the script delay.
    async fn settle(&mut self) -> Result<(), BoxError> {
        let before = self.sample.owners.clone();
        let at = self.events.last().expect("an event").at;
        let limit = (self.settings.lease * 15).max(Duration::from_secs(30));
        let mut last_progress = Instant::now();
        loop {
            self.poll().await?;
            let balance = self.balance();
            let now = self.started.elapsed();
            let outcome = if balance.converged()
                && views_agree(&self.partitions, &self.sample.owners, &self.views())
            {
                Outcome::Converged {
                    after: now.saturating_sub(at),
                    moved: moved(&before, &self.sample.owners),
                    spread: balance.spread,
                }
            } else if now.saturating_sub(at) > limit {
                Outcome::TimedOut(balance)
            } else {
                Outcome::Waiting(balance)
            };
            let done = !matches!(outcome, Outcome::Waiting(_));
            let why = self.why_waiting();
            let event = self.events.last_mut().expect("an event");
            event.outcome = outcome;
            if !self.settings.tui && (done || last_progress.elapsed() >= PROGRESS) {
                last_progress = Instant::now();
                println!(
                    "{}",
                    view::progress_line(now, event, self.sample.heartbeats.len(), why.as_deref())
                );
            }
            self.draw(done);
            if done {
                break;
            }
            sleep(POLL).await;
        }
        if !self.settings.tui {
            for line in view::replica_table(&self.rows(), false).lines() {
                println!("{:>11}{line}", "");
            }
        }
        let until = Instant::now() + self.settings.script_delay;
        while Instant::now() < until {
            self.poll().await?;
            self.draw(false);
            sleep(POLL).await;
        }
        Ok(())
    }

    /// Reads the group from the store and extends the timeline.
    async fn poll(&mut self) -> Result<(), BoxError> {
        let status = GroupAdmin::new(self.observer.clone(), &self.group)?
            .with_key_prefix(DEFAULT_KEY_PREFIX)?
            .status()
            .await?;
        if let Some(status) = status {
            let fences: Vec<u64> = status.partitions.iter().map(|p| p.fence.get()).collect();
            self.sample = Sample {
                owners: status.partitions.iter().map(|p| p.owner.clone()).collect(),
                terms: self.sample.count_terms(&fences),
                fences,
                remaining: status.partitions.iter().map(|p| p.remaining).collect(),
                heartbeats: status.replicas.into_iter().map(|(r, _)| r).collect(),
            };
        }
        self.timeline
            .record(self.started.elapsed(), &self.sample.owners);
        Ok(())
    }

    fn alive(&self) -> Vec<String> {
        self.members.iter().map(|(id, _)| id.clone()).collect()
    }

    fn balance(&self) -> Balance {
        Balance::of(&self.sample.owners, &self.alive())
    }

    /// Why the fleet is not balanced yet, as its replicas and the store tell it.
    fn why_waiting(&self) -> Option<String> {
        let views: Vec<_> = self.members.iter().map(|(_, h)| h.status()).collect();
        let now = Instant::now();
        if let Some(at) = views
            .iter()
            .filter_map(|v| v.grants_from)
            .filter(|at| *at > now)
            .max()
        {
            return Some(format!(
                "a new group grants nothing for its first renew interval, while the replicas \
                 started together join (a lease, {}, on a Redis that started less than a \
                 lease ago: it may have lost leases that are still held); {} left",
                view::secs(self.settings.lease),
                view::secs(at.saturating_duration_since(now))
            ));
        }
        if views.iter().any(|v| v.settling) {
            return Some(
                "a replica that joins settles for one renew interval (heartbeating, claiming \
                 nothing) so that every replica claims against the same roster"
                    .to_owned(),
            );
        }
        let running: BTreeSet<&str> = self.members.iter().map(|(id, _)| id.as_str()).collect();
        let gone = self
            .sample
            .owners
            .iter()
            .flatten()
            .filter(|o| !running.contains(o.as_str()))
            .count();
        (gone > 0).then(|| {
            format!(
                "{gone} partitions are held by a replica that is gone (killed: it released \
                 nothing) until their leases expire"
            )
        })
    }

    fn views(&self) -> Vec<(String, BTreeSet<String>)> {
        self.members
            .iter()
            .map(|(id, h)| (id.clone(), h.status().owned))
            .collect()
    }

    fn rows(&self) -> Vec<ReplicaRow> {
        self.members
            .iter()
            .map(|(id, h)| {
                let v = h.status();
                ReplicaRow {
                    id: id.clone(),
                    owned: v.owned.into_iter().collect(),
                    settling: v.settling,
                    error: v
                        .error
                        .map(|e| leasehold_election::ErrorChain(&e).to_string()),
                }
            })
            .collect()
    }

    /// Redraws the live view (at most every [`REDRAW`] unless `force`).
    fn draw(&mut self, force: bool) {
        if !self.settings.tui || (!force && self.last_draw.is_some_and(|t| t.elapsed() < REDRAW)) {
            return;
        }
        self.last_draw = Some(Instant::now());
        let shown = self.partitions.len().min(GRID_MAX);
        let rows = self.rows();
        let mut screen = view::render(&Frame {
            header: &self.header,
            now: self.started.elapsed(),
            partitions: &self.partitions[..shown],
            sample: &self.sample,
            replicas: &rows,
            events: &self.events,
            color: true,
        });
        if shown < self.partitions.len() {
            screen.push_str(&format!(
                "(first {shown} of {} partitions shown)\n",
                self.partitions.len()
            ));
        }
        // Home, each line cleared to its end, then the rest of the screen cleared.
        let body: String = screen.lines().map(|l| format!("{l}\x1b[K\n")).collect();
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\x1b[H{body}\x1b[J");
        let _ = out.flush();
    }
}
