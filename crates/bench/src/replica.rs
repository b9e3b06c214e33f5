//! The bench's side of `partition-child` processes: spawn them, log their events,
//! signal them.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::partition_event::PartitionEvent;
use crate::setup::BoxError;
use crate::topology::StoreSpec;

/// One event of a replica process, as the bench logged it.
#[derive(Debug, Clone)]
pub struct Logged {
    /// The replica id.
    pub replica: String,
    /// Which process of that replica id (1 for the first, 2 after a restart, ...).
    pub incarnation: u32,
    /// What it reported.
    pub event: PartitionEvent,
}

/// Every event of every replica process, in the order the bench read them. Cheap to
/// clone; clones share the log.
#[derive(Debug, Clone, Default)]
pub struct EventLog(Arc<Mutex<Vec<Logged>>>);

impl EventLog {
    fn push(&self, logged: Logged) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(logged);
    }

    /// How many partitions the latest process of `replica` says it owns now (its
    /// `owned` events minus its `released` ones).
    pub fn owned_now(&self, replica: &str) -> usize {
        let log = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let latest = log
            .iter()
            .filter(|l| l.replica == replica)
            .map(|l| l.incarnation)
            .max();
        let mut owned = std::collections::HashSet::new();
        for l in log
            .iter()
            .filter(|l| l.replica == replica && Some(l.incarnation) == latest)
        {
            match &l.event {
                PartitionEvent::Owned { partition, .. } => {
                    owned.insert(partition.as_str());
                }
                PartitionEvent::Released { partition, .. } => {
                    owned.remove(partition.as_str());
                }
                _ => {}
            }
        }
        owned.len()
    }

    /// A copy of the log so far.
    pub fn snapshot(&self) -> Vec<Logged> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What every replica process of one group shares.
#[derive(Debug, Clone)]
pub struct ReplicaSpec {
    /// This binary.
    pub exe: PathBuf,
    /// The group name.
    pub group: String,
    /// The partition count.
    pub partitions: usize,
    /// The lease.
    pub lease_ms: u64,
    /// The settle time (`None`: the library default, one lease).
    pub settle_ms: Option<u64>,
    /// How often a callback appends a ledger record, when the replica has a ledger.
    pub write_every_ms: u64,
}

/// A `leasehold-bench partition-child` process. Dropping it kills the process.
#[derive(Debug)]
pub struct ReplicaProcess {
    replica: String,
    child: Child,
    pid: u32,
    reader: JoinHandle<()>,
}

impl ReplicaProcess {
    /// Starts replica `replica` of `spec`'s group on the coordination store `store`;
    /// with `ledger_url`, its callbacks write fenced ledger records there.
    /// Its events go to `log` under `incarnation`.
    ///
    /// # Errors
    /// If the process cannot be started.
    pub fn spawn(
        spec: &ReplicaSpec,
        replica: &str,
        incarnation: u32,
        store: &StoreSpec,
        ledger_url: Option<&str>,
        log: &EventLog,
    ) -> Result<Self, BoxError> {
        let mut cmd = Command::new(&spec.exe);
        cmd.args(["partition-child", "--store", &store.to_arg()?])
            .args(["--group", &spec.group, "--replica", replica])
            .args(["--partitions", &spec.partitions.to_string()])
            .args(["--lease-ms", &spec.lease_ms.to_string()]);
        if let Some(settle) = spec.settle_ms {
            cmd.args(["--settle-ms", &settle.to_string()]);
        }
        if let Some(url) = ledger_url {
            cmd.args(["--ledger-url", url])
                .args(["--write-every-ms", &spec.write_every_ms.to_string()]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("the replica exited at once")?;
        let stdout = child.stdout.take().ok_or("the replica has no stdout")?;
        let reader = tokio::spawn(read_events(
            stdout,
            replica.to_owned(),
            incarnation,
            log.clone(),
        ));
        Ok(Self {
            replica: replica.to_owned(),
            child,
            pid,
            reader,
        })
    }

    /// The replica id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Sends SIGKILL (a crash).
    ///
    /// # Errors
    /// If the signal cannot be sent.
    pub fn kill(&mut self) -> Result<(), BoxError> {
        Ok(self.child.start_kill()?)
    }

    /// Sends `sig` (`TERM`, `STOP`, `CONT`, `KILL`) through `kill -<sig> <pid>`, since
    /// unsafe code (`libc::kill`) is forbidden.
    ///
    /// # Errors
    /// If `kill` cannot be run or fails.
    pub async fn signal(&self, sig: &str) -> Result<(), BoxError> {
        signal(self.pid, sig).await
    }

    /// Waits (at most `limit`) for it to exit and for its last events to be logged.
    ///
    /// # Errors
    /// On timeout or a wait error.
    pub async fn wait(&mut self, limit: Duration) -> Result<ExitStatus, BoxError> {
        let status = timeout(limit, self.child.wait()).await.map_err(|_| {
            format!(
                "replica {} (pid {}) did not exit within {limit:?}",
                self.replica, self.pid
            )
        })??;
        let _ = timeout(limit, &mut self.reader).await;
        Ok(status)
    }

    /// SIGTERM, then waits (at most `limit`) for a clean exit.
    ///
    /// # Errors
    /// If the signal fails, the process does not exit in time, or exits non-zero.
    pub async fn terminate(&mut self, limit: Duration) -> Result<(), BoxError> {
        self.signal("TERM").await?;
        let status = self.wait(limit).await?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "replica {} exited with {status} after SIGTERM",
                self.replica
            )
            .into())
        }
    }
}

/// Sends `sig` to `pid` with `kill -<sig> <pid>`.
///
/// # Errors
/// If `kill` cannot be run or fails.
pub async fn signal(pid: u32, sig: &str) -> Result<(), BoxError> {
    let status = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .await?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{sig} {pid} failed: {status}").into())
    }
}

/// Logs the process's JSON lines until its stdout closes.
async fn read_events(stdout: ChildStdout, replica: String, incarnation: u32, log: EventLog) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match serde_json::from_str::<PartitionEvent>(&line) {
            Ok(event) => log.push(Logged {
                replica: replica.clone(),
                incarnation,
                event,
            }),
            Err(e) => tracing::warn!(%replica, %line, error = %e, "unreadable line from a replica"),
        }
    }
}
