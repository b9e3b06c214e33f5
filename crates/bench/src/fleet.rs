//! A group of `partition-child` processes on one Redis set-up, watched from the bench:
//! what the `rebalance` and `load` scenarios share.

use std::time::Duration;

use crate::event::now_us;
use crate::group::GroupWatch;
use crate::replica::{EventLog, ReplicaProcess, ReplicaSpec};
use crate::setup::{self, BoxError};
use crate::topology::{Servers, TargetArgs};

/// Longest a replica may take to leave gracefully after SIGTERM.
pub const EXIT: Duration = Duration::from_secs(15);

/// Replica processes of one group, and the bench's view of them.
#[derive(Debug)]
pub struct Fleet {
    /// What every replica process shares.
    pub spec: ReplicaSpec,
    /// The coordination servers (ours unless a URL was given; killed on drop).
    pub servers: Servers,
    /// `group_status` polls.
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
    ) -> Result<Self, BoxError> {
        let servers = Servers::start(target)?;
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
            },
            watch: GroupWatch::new(setup::build_store(&servers.spec, lease)?, &group, poll),
            servers,
            log: EventLog::default(),
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

    /// The replicas started and not taken out.
    pub fn live(&self) -> Vec<String> {
        self.procs.iter().map(|p| p.replica().to_owned()).collect()
    }

    /// Takes replica `replica` out of the fleet (to kill it).
    pub fn take(&mut self, replica: &str) -> Option<ReplicaProcess> {
        let i = self.procs.iter().position(|p| p.replica() == replica)?;
        Some(self.procs.remove(i))
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
