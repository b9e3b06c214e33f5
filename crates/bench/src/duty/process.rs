//! The parent's side of a child leader: spawn it, follow its events, signal it.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::duty::event::Event;
use crate::store::BoxError;

/// Everything a child has reported so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildState {
    /// Its `leading` event: fence, duty start and acquire sent (wall µs).
    pub leading: Option<Leading>,
    /// When its latest reported renewal was sent (wall µs).
    pub last_renew_sent_us: Option<u64>,
    /// When it received SIGTERM (wall µs).
    pub sigterm_us: Option<u64>,
    /// When its graceful shutdown finished (wall µs).
    pub stopped_us: Option<u64>,
    /// Its stdout is closed: it has exited (or is about to).
    pub closed: bool,
}

impl ChildState {
    /// When the lease was last extended, as far as the child has told (wall µs): the
    /// latest renewal, or the winning acquire.
    pub fn last_extended_us(&self) -> Option<u64> {
        self.last_renew_sent_us
            .or(self.leading.map(|l| l.sent_at_us))
    }
}

/// The child's `leading` event.
#[derive(Debug, Clone, Copy)]
pub struct Leading {
    /// The term's fence.
    pub fence: u64,
    /// When the duty started (wall µs).
    pub at_us: u64,
    /// When the winning acquire was sent (wall µs).
    pub sent_at_us: u64,
}

/// How a child runs its elector.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildMode {
    /// `Elector::spawn_dedicated` instead of `Elector::spawn`.
    pub dedicated: bool,
    /// Keep its application runtime busy (see `soak`).
    pub saturate: bool,
    /// Report every term's end and, after the shutdown, every renewal's round trip.
    pub soak: bool,
    /// Win one term and never campaign again; report its end (see
    /// [`crate::duty::one_term`]).
    pub one_term: bool,
    /// `min_replicas_acked` (0: off).
    pub acked: usize,
}

/// A leader elector running in a child process (`leasehold-bench child ...`).
///
/// Dropping it kills the child.
#[derive(Debug)]
pub struct LeaderProcess {
    child: Child,
    pid: u32,
    state: watch::Receiver<ChildState>,
    events: Arc<Mutex<Vec<Event>>>,
    reader: JoinHandle<()>,
}

impl LeaderProcess {
    /// Starts `exe child ...` for `duty` as `replica`, on the store `spec_arg` (a
    /// `StoreSpec` as JSON).
    ///
    /// # Errors
    /// If the process cannot be started.
    pub fn spawn(
        exe: &Path,
        spec_arg: &str,
        duty: &str,
        replica: &str,
        lease: Duration,
        mode: ChildMode,
    ) -> Result<Self, BoxError> {
        let flags = [
            (mode.dedicated, "--dedicated"),
            (mode.saturate, "--saturate"),
            (mode.soak, "--soak"),
            (mode.one_term, "--one-term"),
        ];
        let mut child = Command::new(exe)
            .args([
                "child",
                "--store",
                spec_arg,
                "--duty",
                duty,
                "--replica",
                replica,
            ])
            .args(["--lease-ms", &lease.as_millis().to_string()])
            .args(["--min-replicas-acked", &mode.acked.to_string()])
            .args(flags.iter().filter(|f| f.0).map(|f| f.1))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("the child exited at once")?;
        let stdout = child.stdout.take().ok_or("the child has no stdout")?;
        let (tx, state) = watch::channel(ChildState::default());
        let events = Arc::new(Mutex::new(Vec::new()));
        let reader = tokio::spawn(read_events(stdout, tx, events.clone()));
        Ok(Self {
            child,
            pid,
            state,
            events,
            reader,
        })
    }

    /// Every event it has reported so far, in order.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What it has reported so far.
    pub fn state(&self) -> ChildState {
        *self.state.borrow()
    }

    /// Waits (at most `limit`) until its state satisfies `done`; returns that state.
    ///
    /// # Errors
    /// On timeout, or if the child closed its stdout first.
    pub async fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        done: impl FnMut(&ChildState) -> bool,
    ) -> Result<ChildState, BoxError> {
        let mut done = done;
        let mut rx = self.state.clone();
        let state = timeout(limit, rx.wait_for(|s| done(s) || s.closed))
            .await
            .map_err(|_| format!("the child leader did not report {what} within {limit:?}"))?
            .map(|s| *s)
            .unwrap_or_else(|_| *self.state.borrow());
        if done(&state) {
            Ok(state)
        } else {
            Err(format!("the child leader exited before reporting {what}").into())
        }
    }

    /// Waits until it leads.
    ///
    /// # Errors
    /// As [`LeaderProcess::wait_for`].
    pub async fn wait_leading(&self, limit: Duration) -> Result<Leading, BoxError> {
        let state = self
            .wait_for("leading", limit, |s| s.leading.is_some())
            .await?;
        state.leading.ok_or_else(|| "no leading event".into())
    }

    /// Sends SIGKILL.
    ///
    /// # Errors
    /// If the signal cannot be sent.
    pub fn kill(&mut self) -> Result<(), BoxError> {
        Ok(self.child.start_kill()?)
    }

    /// Sends SIGTERM (the `kill` system call, no process forked).
    ///
    /// # Errors
    /// If the signal cannot be sent.
    pub async fn terminate(&self) -> Result<(), BoxError> {
        crate::group::process::signal(self.pid, "TERM").await
    }

    /// Waits (at most `limit`) for it to exit and for its last events to be read.
    ///
    /// # Errors
    /// On timeout or a wait error.
    pub async fn wait(&mut self, limit: Duration) -> Result<(ExitStatus, ChildState), BoxError> {
        let status = timeout(limit, self.child.wait())
            .await
            .map_err(|_| format!("the child leader did not exit within {limit:?}"))??;
        // Its stdout is closed now; let the reader drain what is left.
        let _ = timeout(limit, &mut self.reader).await;
        Ok((status, self.state()))
    }
}

/// Folds the child's JSON lines into its state until its stdout closes.
async fn read_events(
    stdout: ChildStdout,
    tx: watch::Sender<ChildState>,
    events: Arc<Mutex<Vec<Event>>>,
) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let event = match serde_json::from_str::<Event>(&line) {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(%line, error = %e, "unreadable line from the child leader");
                continue;
            }
        };
        events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        tx.send_modify(|s| match event {
            Event::Leading {
                fence,
                at_us,
                sent_at_us,
            } => {
                s.leading = Some(Leading {
                    fence,
                    at_us,
                    sent_at_us,
                });
            }
            Event::Renewed { sent_at_us } => s.last_renew_sent_us = Some(sent_at_us),
            Event::Sigterm { at_us } => s.sigterm_us = Some(at_us),
            Event::Stopped { at_us } => s.stopped_us = Some(at_us),
            Event::TermEnded { .. } | Event::RenewRtt { .. } => {}
        });
    }
    tx.send_modify(|s| s.closed = true);
}
