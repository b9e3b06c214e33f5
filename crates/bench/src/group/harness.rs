//! A group of `partition-child` processes on one Redis set-up, watched from the bench
//! through the children's own event lines and (when asked) `GroupAdmin::status` reads: what
//! the `rebalance` and `load` scenarios share.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior, interval};

use crate::clock::now_us;
use crate::group::ownership::Progress;
use crate::group::process::{EventLog, ReplicaProcess, ReplicaSpec};
use crate::group::status::GroupWatch;
use crate::store::{self, BoxError, Servers, TargetArgs};

/// Longest a replica may take to leave gracefully after SIGTERM.
pub const EXIT: Duration = Duration::from_secs(15);

/// How often [`Fleet::wait_events`] looks at the event counters (in memory: no Redis
/// traffic).
const EVENT_POLL: Duration = Duration::from_millis(5);
/// How often it says on stderr how far it got.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// The longest a cold start (or a phase that moves many partitions) may take to
/// converge: 30 s + 30 leases + 1 ms per partition (the claims and the event lines of
/// 100,000 partitions take a while on a 2-core machine).
pub fn convergence_limit(partitions: usize, lease: Duration) -> Duration {
    let per_partition = Duration::from_millis(u64::try_from(partitions).unwrap_or(u64::MAX));
    Duration::from_secs(30)
        .saturating_add(lease.saturating_mul(30))
        .saturating_add(per_partition)
}

/// Replica processes of one group, and the bench's view of them.
#[derive(Debug)]
pub struct Fleet {
    /// What every replica process shares.
    pub spec: ReplicaSpec,
    /// The coordination servers (ours unless a URL was given; killed on drop).
    pub servers: Servers,
    /// `GroupAdmin::status` polls.
    pub watch: GroupWatch,
    /// Every event of every replica.
    pub log: EventLog,
    /// The replica processes started and not yet taken out.
    procs: Vec<ReplicaProcess>,
}

impl Fleet {
    /// Starts the servers of `target`'s topology unless it names a server; the group is
    /// named after `scenario`, this process and the time, so runs never meet each
    /// other's keys.
    ///
    /// # Errors
    /// If the servers cannot start or the settings are invalid.
    pub fn start(
        target: &TargetArgs,
        scenario: &str,
        partitions: usize,
        lease_ms: u64,
        settle_ms: Option<u64>,
        poll: Duration,
        nice: u8,
    ) -> Result<Self, BoxError> {
        let servers = Servers::start(target)?;
        Self::on(
            servers, scenario, partitions, lease_ms, settle_ms, poll, nice,
        )
    }

    /// Like [`Fleet::start`], on servers already started.
    ///
    /// # Errors
    /// If the settings are invalid.
    pub fn on(
        servers: Servers,
        scenario: &str,
        partitions: usize,
        lease_ms: u64,
        settle_ms: Option<u64>,
        poll: Duration,
        nice: u8,
    ) -> Result<Self, BoxError> {
        let lease = Duration::from_millis(lease_ms);
        let group = format!(
            "bench-{scenario}-{}-{}",
            std::process::id(),
            now_us() / 1000
        );
        Ok(Self {
            spec: ReplicaSpec {
                exe: std::env::current_exe()?,
                group: group.clone(),
                partitions,
                lease_ms,
                settle_ms,
                write_every_ms: 5,
                nice,
                list_version: 0,
                rejoin_grace_ms: None,
                capacity: 1,
                move_budget: None,
                hand_off_bytes: 0,
                leave_within_ms: None,
                prepare: None,
                load: None,
            },
            watch: GroupWatch::new(store::build_store(&servers.spec, lease)?, &group, poll),
            servers,
            log: EventLog::new(partitions),
            procs: Vec::new(),
        })
    }

    /// The lease.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.spec.lease_ms)
    }

    /// Starts replica `replica`.
    ///
    /// # Errors
    /// If the process cannot be started.
    pub fn spawn(&mut self, replica: &str) -> Result<(), BoxError> {
        let p = ReplicaProcess::spawn(&self.spec, replica, 1, &self.servers.spec, None, &self.log)?;
        self.procs.push(p);
        Ok(())
    }

    /// Starts process `name` running one coordinator per id of `replicas` (see
    /// [`ReplicaProcess::spawn_many`]).
    ///
    /// # Errors
    /// If the process cannot be started.
    pub fn spawn_many(&mut self, name: &str, replicas: &[String]) -> Result<(), BoxError> {
        let p = ReplicaProcess::spawn_many(
            &self.spec,
            name,
            replicas,
            1,
            &self.servers.spec,
            None,
            &self.log,
        )?;
        self.procs.push(p);
        Ok(())
    }

    /// Starts incarnation `incarnation` of replica `replica` with `spec` (which may
    /// differ from the fleet's: a new version's list, say). Returns when it was
    /// started (wall µs).
    ///
    /// # Errors
    /// If the process cannot be started, or `replica` is already running.
    pub fn spawn_with(
        &mut self,
        spec: &ReplicaSpec,
        replica: &str,
        incarnation: u32,
    ) -> Result<u64, BoxError> {
        if self.procs.iter().any(|p| p.replica() == replica) {
            return Err(format!("replica {replica} is running already").into());
        }
        let p = ReplicaProcess::spawn(
            spec,
            replica,
            incarnation,
            &self.servers.spec,
            None,
            &self.log,
        )?;
        let at = now_us();
        self.procs.push(p);
        Ok(at)
    }

    /// Stops replica `replica` gracefully: SIGTERM, then waits (at most `limit`) for a
    /// clean exit and its last lines. Unlike [`Fleet::take`], its lines (the releases
    /// of its shutdown) still count.
    ///
    /// # Errors
    /// If there is no such replica, or it does not exit cleanly in time.
    pub async fn stop(&mut self, replica: &str, limit: Duration) -> Result<(), BoxError> {
        let i = self
            .procs
            .iter()
            .position(|p| p.replica() == replica)
            .ok_or_else(|| format!("no replica {replica} to stop"))?;
        let mut p = self.procs.remove(i);
        p.terminate(limit).await
    }

    /// The replicas started and not taken out (every coordinator of every process).
    pub fn live(&self) -> Vec<String> {
        self.procs
            .iter()
            .flat_map(|p| p.replicas().iter().cloned())
            .collect()
    }

    /// The replica processes started and not taken out, by name, with their process
    /// ids.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.procs
            .iter()
            .map(|p| (p.replica().to_owned(), p.pid()))
            .collect()
    }

    /// Takes replica `replica` out of the fleet (to kill it): from now on its events
    /// no longer count in [`EventLog::progress`]. Returns it and the partitions it
    /// owned, by its own lines.
    pub fn take(&mut self, replica: &str) -> Option<(ReplicaProcess, HashSet<String>)> {
        let i = self.procs.iter().position(|p| p.replica() == replica)?;
        let owned = self.log.retire(replica);
        Some((self.procs.remove(i), owned))
    }

    /// Fails if a replica of the fleet has exited.
    ///
    /// # Errors
    /// Which replica exited, and how.
    pub fn check_running(&mut self) -> Result<(), BoxError> {
        for p in &mut self.procs {
            if let Some(status) = p.try_wait()? {
                return Err(format!("replica {} exited early: {status}", p.replica()).into());
            }
        }
        Ok(())
    }

    /// Waits until `done` holds for the ownership the replicas' events add up to, and
    /// returns those counters. Reads nothing from Redis; says on stderr how far it got
    /// every 10 s.
    ///
    /// # Errors
    /// If a replica exits, or `done` does not hold within `limit` of `since` (the
    /// message says what was last seen: owned count, per-replica counts).
    pub async fn wait_events(
        &mut self,
        what: &str,
        since: Instant,
        limit: Duration,
        mut done: impl FnMut(&Progress) -> bool,
    ) -> Result<Progress, BoxError> {
        let start = Instant::now();
        let deadline = since + limit;
        let mut next_report = start + PROGRESS_EVERY;
        let mut tick = interval(EVENT_POLL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let progress = self.log.progress();
            if done(&progress) {
                return Ok(progress);
            }
            let now = Instant::now();
            if let Err(e) = self.check_running() {
                return Err(format!("{what}: {e}; last seen {}", progress.describe()).into());
            }
            if now >= deadline {
                let first = match progress.milestones.all_owned_us {
                    Some(_) => "; every partition was owned at some point",
                    None => "",
                };
                return Err(format!(
                    "{what}: not within {:.1} s{first}; last seen {}",
                    limit.as_secs_f64(),
                    progress.describe()
                )
                .into());
            }
            if now >= next_report {
                next_report = now + PROGRESS_EVERY;
                eprintln!(
                    "{what}: waiting {:.0} s so far: {}",
                    (now - start).as_secs_f64(),
                    progress.describe()
                );
            }
        }
    }

    /// Stops every replica gracefully: SIGTERM to all at once, then waits for each.
    ///
    /// # Errors
    /// The first replica that did not stop cleanly.
    pub async fn shutdown(&mut self) -> Result<(), BoxError> {
        let mut first_err = None;
        for p in &self.procs {
            if let Err(e) = p.signal("TERM").await {
                first_err.get_or_insert(e);
            }
        }
        for mut p in self.procs.drain(..) {
            match p.wait(EXIT).await {
                Ok(status) if status.success() => {}
                Ok(status) => {
                    first_err.get_or_insert(
                        format!("replica {} exited with {status} after SIGTERM", p.replica())
                            .into(),
                    );
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
