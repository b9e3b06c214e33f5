//! The bench's side of `partition-child` processes: spawn them, log their events,
//! signal them.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::clock::now_us;
use crate::group::event::{Line, PartitionEvent};
use crate::group::ownership::{Ownership, Progress};
use crate::store::{BoxError, StoreSpec};

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

/// Every event of every replica process, in the order the bench read them, and the
/// ownership they add up to (folded in as each line arrives). Cheap to clone; clones
/// share the log.
#[derive(Debug, Clone)]
pub struct EventLog(Arc<Mutex<Inner>>);

#[derive(Debug)]
struct Inner {
    events: Vec<Logged>,
    ownership: Ownership,
    /// Per process (by name), the last `roster_bytes` total it reported.
    roster_bytes: HashMap<String, u64>,
}

impl EventLog {
    /// An empty log of a group of `partitions` partitions.
    pub fn new(partitions: usize) -> Self {
        Self(Arc::new(Mutex::new(Inner {
            events: Vec::new(),
            ownership: Ownership::new(partitions),
            roster_bytes: HashMap::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, logged: Logged) {
        let mut inner = self.lock();
        if let PartitionEvent::RosterBytes { total, .. } = logged.event {
            // A line of the process, not of one replica: counted, not logged.
            inner.roster_bytes.insert(logged.replica, total);
            return;
        }
        inner
            .ownership
            .apply(&logged.replica, logged.incarnation, &logged.event);
        inner.events.push(logged);
    }

    /// Incarnation `incarnation` of `replica` was just started: it counts as live (and
    /// not yet joined) from now on.
    pub fn started(&self, replica: &str, incarnation: u32) {
        self.lock().ownership.start(replica, incarnation, now_us());
    }

    /// `replica` is being killed: from now on its partitions do not count and its
    /// remaining lines are ignored. Returns the partitions it owned.
    pub fn retire(&self, replica: &str) -> HashSet<String> {
        self.lock().ownership.retire(replica, now_us())
    }

    /// From now on the group has `partitions` partitions (its set grew or shrank):
    /// "all owned" and "balanced" count that many.
    pub fn expect_partitions(&self, partitions: usize) {
        self.lock().ownership.expect_partitions(partitions);
    }

    /// Judges balance by `balance` from now on.
    pub fn set_balance(&self, balance: crate::group::ownership::Balance) {
        self.lock().ownership.set_balance(balance);
    }

    /// Forgets the ownership milestones, so the next ones are recorded anew.
    pub fn reset_milestones(&self) {
        self.lock().ownership.reset_milestones();
    }

    /// The ownership counters now.
    pub fn progress(&self) -> Progress {
        self.lock().ownership.progress()
    }

    /// How many partitions the latest process of `replica` says it owns now (its
    /// `owned` events minus its `released` ones).
    pub fn owned_now(&self, replica: &str) -> usize {
        self.lock().ownership.owned_by(replica)
    }

    /// Bytes of roster the replica processes have reported receiving so far: each
    /// process name's last `roster_bytes` total, summed (a process started again under
    /// the same name counts from 0 again).
    pub fn roster_bytes(&self) -> u64 {
        self.lock().roster_bytes.values().sum()
    }

    /// Events logged so far.
    pub fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// A copy of the log so far.
    pub fn snapshot(&self) -> Vec<Logged> {
        self.lock().events.clone()
    }

    /// A copy of the log from event `from` on.
    pub fn since(&self, from: usize) -> Vec<Logged> {
        let inner = self.lock();
        inner.events.get(from..).unwrap_or_default().to_vec()
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
    /// Niceness the process runs at (`nice -n`; 0: the bench's own). On a machine
    /// where the replicas share the cores with the Redis server, a positive value
    /// keeps them from preempting the server in the middle of a script.
    pub nice: u8,
    /// The version of the partition list (`--list-version`; 0: it only seeds a new
    /// group).
    pub list_version: u64,
    /// The rejoin grace (`--rejoin-grace-ms`; `None`: a shutdown hands everything
    /// over).
    pub rejoin_grace_ms: Option<u64>,
    /// The replica's capacity (`--capacity`; 1: the library default).
    pub capacity: u32,
    /// The group's move budget (`--move-budget`; `None`: no limit).
    pub move_budget: Option<u32>,
    /// Bytes of state every callback hands off when its term ends
    /// (`--hand-off-bytes`; 0: none).
    pub hand_off_bytes: usize,
    /// Leave with `shutdown_within` this long on SIGTERM (`--leave-within-ms`;
    /// `None`: `shutdown()`).
    pub leave_within_ms: Option<u64>,
    /// Warm moves (`rebalance --prepare`; `None`: plain moves).
    pub prepare: Option<WarmMoves>,
    /// Report synthetic loads and take the weights from them (`rebalance-load`;
    /// `None`: no reports).
    pub load: Option<LoadReports>,
}

/// The warm moves of `rebalance --prepare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmMoves {
    /// How long a giver waits for its receiver, in milliseconds (`None`: the renew
    /// interval, lease / 3).
    pub within_ms: Option<u64>,
    /// How long each receiver's preparation takes, in milliseconds.
    pub work_ms: u64,
}

/// How the replicas of `rebalance-load` report their partitions' loads.
#[derive(Debug, Clone)]
pub struct LoadReports {
    /// The loads, as the JSON of a [`Schedule`](crate::group::tenants::Schedule).
    pub schedule: String,
    /// How often each callback reports, in milliseconds.
    pub every_ms: u64,
    /// The damping's half-life, in milliseconds.
    pub half_life_ms: u64,
    /// The damping's threshold, in %.
    pub threshold_percent: u32,
    /// `rebalance-load --load feedback`: how the queues are served and what is reported, as
    /// the JSON of a [`Feedback`](crate::group::feedback::Feedback) (`None`: the
    /// schedule's loads are reported as they are).
    pub feedback: Option<String>,
}

/// A `leasehold-bench partition-child` process. Dropping it kills the process.
#[derive(Debug)]
pub struct ReplicaProcess {
    /// Its name: the replica id when it runs one coordinator.
    replica: String,
    /// The replica ids of its coordinators.
    replicas: Vec<String>,
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
        Self::spawn_many(
            spec,
            replica,
            &[replica.to_owned()],
            incarnation,
            store,
            ledger_url,
            log,
        )
    }

    /// Starts process `name` running one coordinator for each of `replicas` (each its
    /// own session and store connection); its events go to `log` under each
    /// coordinator's replica id (its `roster_bytes` lines under `name`).
    ///
    /// # Errors
    /// If `replicas` is empty or the process cannot be started.
    pub fn spawn_many(
        spec: &ReplicaSpec,
        name: &str,
        replicas: &[String],
        incarnation: u32,
        store: &StoreSpec,
        ledger_url: Option<&str>,
        log: &EventLog,
    ) -> Result<Self, BoxError> {
        if replicas.is_empty() {
            return Err(format!("process {name}: no replica to run").into());
        }
        let mut cmd = if spec.nice > 0 {
            // `nice` execs the replica: same pid, lower priority.
            let mut nice = Command::new("nice");
            nice.args(["-n", &spec.nice.to_string()]).arg(&spec.exe);
            nice
        } else {
            Command::new(&spec.exe)
        };
        cmd.args(["partition-child", "--store", &store.to_arg()?])
            .args(["--group", &spec.group, "--replica", &replicas.join(",")])
            .args(["--partitions", &spec.partitions.to_string()])
            .args(["--lease-ms", &spec.lease_ms.to_string()]);
        if let Some(settle) = spec.settle_ms {
            cmd.args(["--settle-ms", &settle.to_string()]);
        }
        if spec.list_version > 0 {
            cmd.args(["--list-version", &spec.list_version.to_string()]);
        }
        if let Some(grace) = spec.rejoin_grace_ms {
            cmd.args(["--rejoin-grace-ms", &grace.to_string()]);
        }
        if spec.capacity != 1 {
            cmd.args(["--capacity", &spec.capacity.to_string()]);
        }
        if let Some(k) = spec.move_budget {
            cmd.args(["--move-budget", &k.to_string()]);
        }
        if spec.hand_off_bytes > 0 {
            cmd.args(["--hand-off-bytes", &spec.hand_off_bytes.to_string()]);
        }
        if let Some(ms) = spec.leave_within_ms {
            cmd.args(["--leave-within-ms", &ms.to_string()]);
        }
        if let Some(warm) = spec.prepare {
            match warm.within_ms {
                Some(ms) => cmd.args(["--prepare-ms", &ms.to_string()]),
                None => cmd.arg("--prepare"),
            };
            cmd.args(["--prepare-work-ms", &warm.work_ms.to_string()]);
        }
        if let Some(load) = &spec.load {
            cmd.args(["--load-schedule", &load.schedule])
                .args(["--report-every-ms", &load.every_ms.to_string()])
                .args(["--half-life-ms", &load.half_life_ms.to_string()])
                .args(["--threshold-percent", &load.threshold_percent.to_string()]);
            if let Some(feedback) = &load.feedback {
                cmd.args(["--feedback", feedback]);
            }
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
        for replica in replicas {
            log.started(replica, incarnation);
        }
        let reader = tokio::spawn(read_events(
            stdout,
            name.to_owned(),
            incarnation,
            log.clone(),
        ));
        Ok(Self {
            replica: name.to_owned(),
            replicas: replicas.to_vec(),
            child,
            pid,
            reader,
        })
    }

    /// The process's name: the replica id when it runs one coordinator.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The replica ids of its coordinators.
    pub fn replicas(&self) -> &[String] {
        &self.replicas
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its exit status if it has exited, without waiting.
    ///
    /// # Errors
    /// If the status cannot be read.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, BoxError> {
        Ok(self.child.try_wait()?)
    }

    /// Sends SIGKILL (a crash).
    ///
    /// # Errors
    /// If the signal cannot be sent.
    pub fn kill(&mut self) -> Result<(), BoxError> {
        Ok(self.child.start_kill()?)
    }

    /// Sends `sig` (`TERM`, `STOP`, `CONT`, `KILL`) (see [`signal`]).
    ///
    /// # Errors
    /// If the signal cannot be sent.
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

/// Sends `sig` (`TERM`, `STOP`, `CONT` or `KILL`) to `pid` with the `kill` system
/// call (through `rustix`: no unsafe code here, and no `kill` process to fork, which
/// took ~2 ms and landed inside every measured hand-over).
///
/// # Errors
/// An unknown signal name, or if the signal cannot be sent.
pub async fn signal(pid: u32, sig: &str) -> Result<(), BoxError> {
    use rustix::process::{Pid, Signal, kill_process};
    let signal = match sig {
        "TERM" => Signal::TERM,
        "STOP" => Signal::STOP,
        "CONT" => Signal::CONT,
        "KILL" => Signal::KILL,
        other => return Err(format!("unknown signal {other}").into()),
    };
    let target = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| format!("not a process id: {pid}"))?;
    kill_process(target, signal).map_err(|e| format!("kill -{sig} {pid} failed: {e}").into())
}

/// Logs the process's JSON lines until its stdout closes: under the replica id a line
/// names, or else under the process's name.
async fn read_events(stdout: ChildStdout, replica: String, incarnation: u32, log: EventLog) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match serde_json::from_str::<Line>(&line) {
            Ok(Line {
                replica: tag,
                event,
            }) => log.push(Logged {
                replica: tag.unwrap_or_else(|| replica.clone()),
                incarnation,
                event,
            }),
            Err(e) => tracing::warn!(%replica, %line, error = %e, "unreadable line from a replica"),
        }
    }
}
