//! What `failover` and `handover` share: the Redis servers, the follower's store, the
//! start of a run (child leader up, follower following), the loop over runs and the
//! checks and summaries of their results.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use leasehold_election::RedisStore;

use crate::clock::{micros, now_us};
use crate::duty::follower::Follower;
use crate::duty::process::{ChildMode, LeaderProcess, Leading};
use crate::stats::Summary;
use crate::store::{self, BoxError, Servers, Topology};

/// Longest a child may take to start and win a free lease (process start, runtime,
/// connection, self-check, acquire) on a busy machine.
pub const CHILD_START: Duration = Duration::from_secs(10);

/// The shared state of one `failover` or `handover` invocation.
#[derive(Debug)]
pub struct Harness {
    exe: PathBuf,
    /// The store as the children's `--store` argument.
    spec_arg: String,
    store: RedisStore,
    lease: Duration,
    renew_interval: Duration,
    /// Every elector on a thread of its own (`Elector::spawn_dedicated`).
    dedicated: bool,
    /// `min_replicas_acked` of every elector (0: off).
    acked: usize,
    /// Makes duty names unique per invocation, so runs against a shared `--redis-url`
    /// never meet an earlier run's lease or fence.
    tag: String,
    /// The servers (ours unless `--redis-url` was given; killed on drop).
    servers: Servers,
}

/// A run whose child leads and whose follower waits for the lease.
#[derive(Debug)]
pub struct Pair {
    /// The child process holding the lease.
    pub leader: LeaderProcess,
    /// Its `leading` event.
    pub leading: Leading,
    /// The in-process follower.
    pub follower: Follower,
}

/// What the single-duty runs share: the lease, how each elector runs, the servers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The lease, in milliseconds.
    pub lease_ms: u64,
    /// Every elector on a thread and runtime of its own.
    pub dedicated: bool,
    /// Every elector's `min_replicas_acked` (0: off).
    pub min_replicas_acked: usize,
    /// The Redis set-up.
    pub target: crate::store::TargetArgs,
}

impl Harness {
    /// Starts the servers of `settings`' topology unless it names a server, and the
    /// follower's store.
    ///
    /// # Errors
    /// If the servers cannot start, or the URL or lease is invalid.
    pub fn start(settings: &Settings) -> Result<Self, BoxError> {
        let lease = Duration::from_millis(settings.lease_ms);
        let servers = Servers::start(&settings.target)?;
        let renew_interval = store::config("probe", "probe", lease)?.renew_interval();
        Ok(Self {
            exe: std::env::current_exe()?,
            store: store::build_store(&servers.spec, lease)?,
            spec_arg: servers.spec.to_arg()?,
            lease,
            renew_interval,
            dedicated: settings.dedicated,
            acked: settings.min_replicas_acked,
            tag: format!("{}-{}", std::process::id(), now_us() / 1000),
            servers,
        })
    }

    /// The Redis set-up.
    pub fn topology(&self) -> Topology {
        self.servers.topology
    }

    /// The lease of every elector.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The lease, in whole ms (as reports give it).
    pub fn lease_ms(&self) -> u64 {
        micros(self.lease) / 1000
    }

    /// Whether every elector runs with `Elector::spawn_dedicated`.
    pub fn dedicated(&self) -> bool {
        self.dedicated
    }

    /// Every elector's `min_replicas_acked` (0: off).
    pub fn acked(&self) -> usize {
        self.acked
    }

    /// How often the leader renews (the library default for this lease).
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval
    }

    /// Starts run `run` of `scenario` on a fresh duty: the child leader first, then,
    /// once it leads, the follower; returns when the follower has seen the child lead.
    ///
    /// # Errors
    /// If either side does not get there in time.
    pub async fn start_pair(&self, scenario: &str, run: usize) -> Result<Pair, BoxError> {
        let duty = format!("bench-{scenario}-{}-{run}", self.tag);
        let mode = ChildMode {
            dedicated: self.dedicated,
            acked: self.acked,
            ..ChildMode::default()
        };
        let leader =
            LeaderProcess::spawn(&self.exe, &self.spec_arg, &duty, "child", self.lease, mode)?;
        let leading = leader.wait_leading(CHILD_START + self.lease).await?;
        let config = store::acked_config(&duty, "follower", self.lease, self.acked)?;
        let follower = Follower::spawn(self.store.clone(), config, self.dedicated)?;
        follower.wait_following(self.lease * 3).await?;
        Ok(Pair {
            leader,
            leading,
            follower,
        })
    }

    /// Runs `one` `runs` times one after another, printing each result with
    /// `describe`.
    ///
    /// # Errors
    /// The first run that fails, with its number.
    pub async fn repeat<'h, R, Fut>(
        &'h self,
        runs: usize,
        one: impl Fn(&'h Harness, usize) -> Fut,
        describe: impl Fn(&R) -> String,
    ) -> Result<Vec<R>, BoxError>
    where
        Fut: Future<Output = Result<R, BoxError>>,
    {
        let mut all = Vec::with_capacity(runs);
        for i in 1..=runs {
            let r = one(self, i).await.map_err(|e| format!("run {i}: {e}"))?;
            eprintln!("run {i}/{runs}: {}", describe(&r));
            all.push(r);
        }
        Ok(all)
    }
}

/// Min, median and max of one figure over every run.
///
/// # Errors
/// If there were no runs.
pub fn summary<R>(runs: &[R], figure: fn(&R) -> f64) -> Result<Summary, BoxError> {
    let series: Vec<f64> = runs.iter().map(figure).collect();
    Ok(Summary::of(&series).ok_or("no runs")?)
}

/// Checks that the follower's term got a higher fence than the child's.
///
/// # Errors
/// If it did not.
pub fn fence_grew(child: u64, follower: u64) -> Result<(), BoxError> {
    if follower <= child {
        return Err(format!("fence did not increase: child {child}, follower {follower}").into());
    }
    Ok(())
}
