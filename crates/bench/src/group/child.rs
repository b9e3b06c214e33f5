//! The hidden `partition-child` mode: a partition [`Coordinator`] in its own OS
//! process, reporting on stdout; or several (`--replica a,b,c`: one coordinator per id,
//! each with its own store connection and session), whose lines then each name their
//! replica (`"replica": "a"`, see [`Line`](crate::group::event::Line)).
//!
//! It prints one [`PartitionEvent`] per line: `joined` after its first group tick,
//! `owned` and `released` around every partition callback (`released` with the term's
//! end reason and its last successful send, printed even when the elector aborts the
//! callback), `handoffs` when it hands partitions over to rebalance, `group_set` when
//! the group's partition count (as its ticks see it) changes, `refused` if `ready()`
//! fails, and on SIGTERM it leaves gracefully (`shutdown().await`) before printing
//! `sigterm` and `stopped` and exiting 0.
//!
//! `--list-version` versions its list of `--partitions` (a newer one replaces the
//! group's set when it joins); with `--rejoin-grace-ms` its shutdown keeps its
//! partitions for that long (its callbacks still end, with `released` lines), for the
//! same replica id to resume them.
//!
//! Every [`ROSTER_EVERY`] it adds up its coordinators'
//! [`CoordinatorHandle::roster_bytes_received`] and prints a `roster_bytes` line when
//! the total grew (a line of the process, with no replica id).
//!
//! With `--hand-off-bytes N` (N > 0), every callback, once its term ends (after
//! `lead.cancelled()`, before it returns), hands off N bytes for the next owner
//! ([`Ownership::hand_off`]): a header naming the term, `"{partition}@{fence}:"`,
//! padded to N ([`hand_off_state`]). The `released` line says how many bytes were
//! left (`handed_off`) or why `hand_off` refused them (`hand_off_error`). Whatever
//! the setting, every `owned` line says what the previous term handed over (its
//! header and length) or why nothing was ([`Ownership::handed_over`]).
//!
//! With `--prepare` (or `--prepare-ms N`), the coordinators make their hand-overs warm
//! moves (`GroupConfigBuilder::prepare_moves`: the wait N ms, default the renew
//! interval, lease / 3): each prepares for a partition it is named to receive
//! (`Coordinator::on_prepare`) by sleeping `--prepare-work-ms`, and prints a `prepared`
//! line when it finished or was dropped. Every `released` line names the term's
//! successor (`Ownership::successor`) if it had one.
//!
//! With `--load-schedule` (`rebalance-load`), the coordinators take their weights from
//! measured load (`GroupConfigBuilder::weights_from_loads`, `--half-life-ms`,
//! `--threshold-percent`), and every callback reports its partition's synthetic load
//! ([`Schedule::load`]) through [`Ownership::report_load`] every `--report-every-ms`
//! until its term ends.
//!
//! With `--feedback` as well (`rebalance-load --load feedback`), the schedule's loads are
//! arrival rates into a queue per partition: every callback serves its partition's
//! queue ([`Queue`]), reports what it achieves (or the arrivals, as the
//! [`Feedback`]'s `report` says) every `--report-every-ms`, commits the queue to the
//! fleet's directory, and once its term ends hands the queue off to the next owner
//! ([`hand_off_queue`]); each term prints a `backlog` line after its `owned` line: the
//! backlog it started with and where its queue came from.
//!
//! With `--ledger-url`, every callback also does real fenced work: every
//! `--write-every-ms` it appends `partition,replica,fence,seq,sent_at_us` to the
//! partition's ledger list on that server with [`FencedWriter::rpush`]; a stale
//! rejection is reported (`rejected`) and ends the writing for that term.

use std::sync::Arc;
use std::time::Duration;

use leasehold_election::{DutyResult, ElectorConfig, FencedWriteError, FencedWriter};
use leasehold_partitions::{
    Coordinator, CoordinatorHandle, GroupConfig, GroupStore, LoadDamping, Prepare,
};
use leasehold_partitions::{MoveCause, Ownership};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;
use tokio::time::{MissedTickBehavior, interval};
use tokio_util::sync::CancellationToken;

use crate::args::PartitionChildArgs;
use crate::clock::{now_us, wall_us};
use crate::group::event::{
    PartitionEvent, ROSTER_EVERY, hand_off_state, ledger_key, no_hand_off_cause, no_hand_off_label,
    partition_names, state_header,
};
use crate::group::feedback::{
    self, Feedback, Queue, commit, committed, hand_off_queue, queue_of_state, starting_queue,
};
use crate::group::tenants::{Schedule, partition_index};
use crate::store::{self, BoxError, StoreSpec};

/// Where and how often a callback writes its ledger records.
#[derive(Debug)]
struct Ledger {
    writer: FencedWriter,
    every: Duration,
}

/// The synthetic loads a callback reports, and how often.
#[derive(Debug)]
struct Reports {
    schedule: Schedule,
    every: Duration,
    /// The loads are arrival rates into queues the callbacks serve (`--feedback`).
    feedback: Option<Feedback>,
}

/// Runs the child until SIGTERM: one coordinator per `--replica` id, each with its own
/// store connection (so its own session).
///
/// # Errors
/// Bad settings, or the SIGTERM handler could not be installed.
pub async fn run(args: &PartitionChildArgs) -> Result<(), BoxError> {
    let lease = Duration::from_millis(args.lease_ms);
    let first = args.replica.first().ok_or("no --replica")?;
    // With several coordinators in the process, every line names its replica.
    let tagged = args.replica.len() > 1;
    let ledger = match &args.ledger_url {
        Some(url) => Some(Arc::new(Ledger {
            writer: FencedWriter::new(store::build_store(&StoreSpec::single(url.as_str()), lease)?),
            every: Duration::from_millis(args.write_every_ms.max(1)),
        })),
        None => None,
    };
    let reports = match &args.loads.load_schedule {
        Some(json) => Some(Arc::new(Reports {
            schedule: serde_json::from_str(json)?,
            every: Duration::from_millis(args.loads.report_every_ms.max(1)),
            feedback: args
                .loads
                .feedback
                .as_deref()
                .map(serde_json::from_str)
                .transpose()?,
        })),
        None => None,
    };
    let spec = args.conn.spec()?;
    let mut configs = Vec::new();
    for replica in &args.replica {
        configs.push((store::build_store(&spec, lease)?, config(args, replica)?));
    }
    // Installed before the coordinators start, so an early SIGTERM is never fatal.
    let mut term = signal(SignalKind::terminate())?;
    // The safety margin of the partitions' electors (the library default for this
    // lease and renew interval): a deadline lies lease − margin after its send.
    let (lease, renew) = (configs[0].1.lease(), configs[0].1.renew_interval());
    let margin = ElectorConfig::builder("probe", first.as_str())
        .lease(lease)
        .renew_interval(renew)
        .build()?
        .safety_margin();
    let validity = lease.saturating_sub(margin);
    // How long each preparation for a warm move takes (with `--prepare`).
    let work = prepare_moves(args).map(|_| Duration::from_millis(args.prepare_work_ms));
    let stop = CancellationToken::new();
    let mut handles = Vec::new();
    let mut watchers = JoinSet::new();
    for (store, config) in configs {
        let tag = tagged.then(|| config.replica_id().to_owned());
        let ledger = ledger.clone();
        let reports = reports.clone();
        let term = Term {
            validity,
            tagged,
            hand_off_bytes: args.hand_off_bytes,
        };
        let mut coordinator =
            Coordinator::new(store, config, move |partition: String, lead: Ownership| {
                own(partition, lead, ledger.clone(), reports.clone(), term)
            });
        if let Some(work) = work {
            let tag = tag.clone();
            coordinator =
                coordinator.on_prepare(move |job: Prepare| prepare(job, work, tag.clone()));
        }
        let handle = Arc::new(coordinator.spawn());
        watchers.spawn(watch(handle.clone(), tag, stop.clone()));
        handles.push(handle);
    }

    let mut roster = interval(ROSTER_EVERY);
    roster.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut reported = 0;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = roster.tick() => {
                let total = handles.iter().map(|h| h.roster_bytes_received()).sum();
                if total > reported {
                    reported = total;
                    PartitionEvent::RosterBytes { total, at_us: now_us() }.emit();
                }
            }
        }
    }
    let sigterm_us = now_us();
    stop.cancel();
    while watchers.join_next().await.is_some() {}
    // Every coordinator leaves at once.
    let mut leaving = JoinSet::new();
    for handle in handles {
        match args.leave_within_ms {
            Some(ms) => leaving.spawn(async move {
                let _ = handle.shutdown_within(Duration::from_millis(ms)).await;
            }),
            None => leaving.spawn(async move { handle.shutdown().await }),
        };
    }
    while leaving.join_next().await.is_some() {}
    let stopped_us = now_us();
    for replica in &args.replica {
        let tag = tagged.then_some(replica.as_str());
        PartitionEvent::Sigterm { at_us: sigterm_us }.emit_as(tag);
        PartitionEvent::Stopped { at_us: stopped_us }.emit_as(tag);
    }
    Ok(())
}

/// The group configuration of coordinator `replica`.
fn config(args: &PartitionChildArgs, replica: &str) -> Result<GroupConfig, BoxError> {
    let mut builder = GroupConfig::builder(
        args.group.as_str(),
        partition_names(args.partitions),
        replica,
    )
    .lease(Duration::from_millis(args.lease_ms))
    .list_version(args.list_version)
    .capacity(args.capacity);
    if let Some(ms) = args.settle_ms {
        builder = builder.settle(Duration::from_millis(ms));
    }
    if let Some(ms) = args.rejoin_grace_ms {
        builder = builder.rejoin_grace(Duration::from_millis(ms));
    }
    if let Some(k) = args.move_budget {
        builder = builder.move_budget(leasehold_partitions::MoveBudget::Moves(k));
    }
    if let Some(within) = prepare_moves(args) {
        builder = builder.prepare_moves(within);
    }
    if let Some(ms) = args.loads.half_life_ms {
        builder = builder.weights_from_loads(
            LoadDamping::default()
                .half_life(Duration::from_millis(ms))
                .threshold_percent(args.loads.threshold_percent),
        );
    }
    Ok(builder.build()?)
}

/// How long a giver waits for its receiver to prepare (`--prepare-ms`, or with
/// `--prepare` the renew interval: the library's default of lease / 3); `None`
/// without warm moves.
fn prepare_moves(args: &PartitionChildArgs) -> Option<Duration> {
    match args.prepare_ms {
        Some(ms) => Some(Duration::from_millis(ms)),
        None => args
            .prepare
            .then(|| Duration::from_millis(args.lease_ms) / 3),
    }
}

/// A receiver's preparation for a warm move: sleeps `work`, then prints its
/// `prepared` line (from [`PrepareLine`]'s drop, so a preparation the coordinator
/// drops unfinished reports too).
async fn prepare(job: Prepare, work: Duration, tag: Option<String>) {
    let mut line = PrepareLine {
        partition: job.partition,
        from: job.from,
        tag,
        start_us: now_us(),
        finished: false,
    };
    tokio::time::sleep(work).await;
    line.finished = true;
}

/// One preparation; prints its `prepared` line when dropped.
struct PrepareLine {
    partition: String,
    from: String,
    /// The replica id its line names (in a process of several coordinators).
    tag: Option<String>,
    start_us: u64,
    finished: bool,
}

impl Drop for PrepareLine {
    fn drop(&mut self) {
        PartitionEvent::Prepared {
            partition: std::mem::take(&mut self.partition),
            from: std::mem::take(&mut self.from),
            start_us: self.start_us,
            end_us: now_us(),
            finished: self.finished,
        }
        .emit_as(self.tag.as_deref());
    }
}

/// Prints one coordinator's `joined`, `ready`, `group_set`, `handoffs` and `refused` lines
/// (tagged with `tag` if given) as its view changes, until `stop`.
async fn watch<B: GroupStore>(
    handle: Arc<CoordinatorHandle<B>>,
    tag: Option<String>,
    stop: CancellationToken,
) {
    let tag = tag.as_deref();
    let mut view = handle.subscribe();
    let (mut joined, mut handoffs) = (false, 0);
    let mut is_ready: Option<bool> = None;
    // The group's set as last reported: (P, list differs); P 0 until the first tick.
    let mut set = (0, false);
    let (mut watching, mut waiting_ready) = (true, true);
    let ready = handle.wait_until_ready();
    tokio::pin!(ready);
    loop {
        {
            let v = view.borrow_and_update();
            if v.joined && !joined {
                joined = true;
                PartitionEvent::Joined { at_us: now_us() }.emit_as(tag);
            }
            if v.joined && (v.partitions, v.list_differs) != set {
                set = (v.partitions, v.list_differs);
                PartitionEvent::GroupSet {
                    partitions: set.0,
                    list_differs: set.1,
                    at_us: now_us(),
                }
                .emit_as(tag);
            }
            if v.handoffs > handoffs {
                handoffs = v.handoffs;
                PartitionEvent::Handoffs {
                    total: handoffs,
                    at_us: now_us(),
                }
                .emit_as(tag);
            }
        }
        // After the view's borrow is released (the handle borrows it again), and as of
        // a version no older than the one just seen.
        let now = handle.readiness();
        if is_ready != Some(now.is_ok()) {
            is_ready = Some(now.is_ok());
            PartitionEvent::Ready {
                ready: now.is_ok(),
                reason: now
                    .err()
                    .map(|e| leasehold_partitions::ErrorChain(&e).to_string()),
                at_us: now_us(),
            }
            .emit_as(tag);
        }
        tokio::select! {
            () = stop.cancelled() => break,
            changed = view.changed(), if watching => watching = changed.is_ok(),
            r = &mut ready, if waiting_ready => {
                waiting_ready = false;
                if let Err(e) = r {
                    PartitionEvent::Refused {
                        error: leasehold_partitions::ErrorChain(&e).to_string(),
                        at_us: now_us(),
                    }
                    .emit_as(tag);
                }
            }
        }
    }
}

/// What every partition callback of a coordinator shares.
#[derive(Debug, Clone, Copy)]
struct Term {
    /// Lease − safety margin (see [`TermLine::validity`]).
    validity: Duration,
    /// Lines name their replica (a process of several coordinators).
    tagged: bool,
    /// Bytes of state to hand off when the term ends (0: none).
    hand_off_bytes: usize,
}

/// A partition callback: report the term (and what the previous one handed over),
/// write the ledger if there is one, report the partition's synthetic load if there are
/// [`Reports`], hand state off with `--hand-off-bytes` once the
/// term ends, report the end of the term (from [`TermLine`]'s drop, so an aborted
/// callback reports it too).
async fn own(
    partition: String,
    lead: Ownership,
    ledger: Option<Arc<Ledger>>,
    reports: Option<Arc<Reports>>,
    term: Term,
) -> DutyResult {
    let tag = term.tagged.then(|| lead.replica_id().to_owned());
    let (mut handed_over, mut handed_over_bytes) = (None, None);
    let (mut no_hand_off, mut cause) = (None, None);
    match lead.handed_over() {
        Ok(state) => {
            handed_over = Some(state_header(state));
            handed_over_bytes = u64::try_from(state.len()).ok();
        }
        Err(why) => {
            no_hand_off = Some(no_hand_off_label(&why).to_owned());
            cause = no_hand_off_cause(&why);
        }
    }
    PartitionEvent::Owned {
        partition: partition.clone(),
        fence: lead.fence().get(),
        at_us: now_us(),
        handed_over,
        handed_over_bytes,
        no_hand_off,
        no_hand_off_cause: cause,
    }
    .emit_as(tag.as_deref());
    let mut line = TermLine {
        partition,
        tag,
        lead,
        validity: term.validity,
        writes: 0,
        write_errors: 0,
        handed_off: None,
        hand_off_error: None,
    };
    let reporting = report_loads(
        line.lead.clone(),
        line.partition.clone(),
        partition_index(&line.partition),
        reports,
        line.tag.clone(),
    );
    let queue = match ledger {
        Some(ledger) => tokio::join!(write_ledger(&mut line, &ledger), reporting).1,
        None => tokio::join!(line.lead.cancelled(), reporting).1,
    };
    // The term is over (every path above returns only once it is cancelled): leave
    // the next owner its state, before the callback returns and the release goes.
    let state = match queue {
        Some(q) => Some(hand_off_queue(&line.partition, line.lead.fence().get(), &q)),
        None => (term.hand_off_bytes > 0).then(|| {
            hand_off_state(
                &line.partition,
                line.lead.fence().get(),
                term.hand_off_bytes,
            )
        }),
    };
    if let Some(state) = state {
        let len = u64::try_from(state.len()).ok();
        match line.lead.hand_off(state) {
            Ok(()) => line.handed_off = len,
            Err(e) => line.hand_off_error = Some(e.to_string()),
        }
    }
    Ok(())
}

/// One term of a partition callback; prints its `released` line when dropped: when
/// the callback returns, or when the elector aborts it (a lease that may be lost gives
/// the callback no grace).
struct TermLine {
    partition: String,
    /// The replica id its lines name (in a process of several coordinators).
    tag: Option<String>,
    lead: Ownership,
    /// Lease − safety margin: how far the deadline lies after a claim or renewal was
    /// sent.
    validity: Duration,
    /// Ledger records written (and seen accepted).
    writes: u64,
    /// Ledger writes that failed with a store error.
    write_errors: u64,
    /// Bytes of state the term left for the next owner.
    handed_off: Option<u64>,
    /// Why `Ownership::hand_off` refused the state.
    hand_off_error: Option<String>,
}

impl Drop for TermLine {
    fn drop(&mut self) {
        let deadline = self.lead.deadline();
        PartitionEvent::Released {
            partition: std::mem::take(&mut self.partition),
            fence: self.lead.fence().get(),
            at_us: now_us(),
            writes: self.writes,
            write_errors: self.write_errors,
            reason: end_label(&self.lead),
            sent_at_us: Some(wall_us(
                deadline.checked_sub(self.validity).unwrap_or(deadline),
            )),
            handed_off: self.handed_off,
            hand_off_error: self.hand_off_error.take(),
            successor: self.lead.successor().map(str::to_owned),
        }
        .emit_as(self.tag.as_deref());
    }
}

/// Reports the load of partition `index` by `reports`' schedule every `reports.every`
/// until the term ends (returns at once without reports or index). With a
/// [`Feedback`], serves the partition's queue instead ([`serve`]) and returns it as the
/// term leaves it.
async fn report_loads(
    lead: Ownership,
    partition: String,
    index: Option<usize>,
    reports: Option<Arc<Reports>>,
    tag: Option<String>,
) -> Option<Queue> {
    let (Some(reports), Some(index)) = (reports, index) else {
        return None;
    };
    if let Some(feedback) = &reports.feedback {
        return Some(serve(&lead, &partition, index, &reports, feedback, tag.as_deref()).await);
    }
    let mut tick = interval(reports.every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = lead.cancelled() => return None,
            _ = tick.tick() => {}
        }
        // A load the schedule gives is finite and positive: never refused.
        let _ = lead.report_load(reports.schedule.load(index, now_us()));
    }
}

/// Serves partition `index`'s queue for the term ([`feedback`]): starts from the queue
/// the previous term handed over, else the last one committed, else every arrival
/// since the fleet's spawn, plus the arrivals while nobody served it (printing the
/// `backlog` line); then every `reports.every` processes what the owner can, reports
/// the throughput achieved (or the arrivals) and commits the queue. Once the term is
/// over, serves up to that instant, commits, and returns the queue to hand off.
async fn serve(
    lead: &Ownership,
    partition: &str,
    index: usize,
    reports: &Reports,
    feedback: &Feedback,
    tag: Option<&str>,
) -> Queue {
    let schedule = &reports.schedule;
    let factor = feedback.service_factor;
    let dir = feedback.commit_dir.as_path();
    let handed = lead.handed_over().ok().and_then(queue_of_state);
    let last_commit = match handed {
        Some(_) => None,
        None => committed(dir, partition),
    };
    let (mut queue, source) = starting_queue(handed, last_commit, feedback.origin_us);
    let start_us = now_us();
    queue.advance(schedule, index, factor, start_us, false);
    let base = schedule.base_load(index, start_us);
    PartitionEvent::Backlog {
        partition: partition.to_owned(),
        fence: lead.fence().get(),
        backlog_ms: (1000.0 * queue.backlog / base).round() as u64,
        source: source.label().to_owned(),
        at_us: start_us,
    }
    .emit_as(tag);
    let writer = lead.replica_id().to_owned();
    // The first report comes one interval in: a rate needs an interval to count over.
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + reports.every, reports.every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_us = start_us;
    loop {
        tokio::select! {
            biased;
            () = lead.cancelled() => break,
            _ = tick.tick() => {}
        }
        let now = now_us();
        let served = queue.advance(schedule, index, factor, now, true);
        let secs = now.saturating_sub(last_us) as f64 / 1e6;
        let load = feedback::reported(feedback.report, served, secs);
        last_us = now;
        // Finite and at least 0: never refused.
        let _ = lead.report_load(load);
        // A commit that fails leaves the last one: a later owner re-serves more.
        let _ = commit(dir, partition, &writer, &queue);
    }
    queue.advance(schedule, index, factor, now_us(), true);
    let _ = commit(dir, partition, &writer, &queue);
    queue
}

/// Appends a record every `ledger.every` until the term ends or a write is rejected as
/// stale, counting the accepted writes and the failed ones in `line`.
async fn write_ledger(line: &mut TermLine, ledger: &Ledger) {
    let partition = line.partition.clone();
    let lead = line.lead.clone();
    let key = ledger_key(&partition);
    let fence = lead.fence();
    let mut seq = 0_u64;
    let mut tick = interval(ledger.every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = lead.cancelled() => break,
            _ = tick.tick() => {}
        }
        let record = format!(
            "{partition},{},{},{seq},{}",
            lead.replica_id(),
            fence.get(),
            now_us()
        );
        seq += 1;
        let result = tokio::select! {
            biased;
            () = lead.cancelled() => break,
            r = ledger.writer.rpush(&key, &record, fence) => r,
        };
        match result {
            Ok(()) => line.writes += 1,
            Err(FencedWriteError::Stale { highest, .. }) => {
                PartitionEvent::Rejected {
                    partition: partition.clone(),
                    fence: fence.get(),
                    highest: highest.get(),
                    at_us: now_us(),
                }
                .emit_as(line.tag.as_deref());
                lead.cancelled().await;
                break;
            }
            // A store error: the write may or may not have landed; try the next one.
            Err(_) => line.write_errors += 1,
        }
    }
}

/// A term's end as a `released` line's `reason` says it: why this replica ended it
/// (`handed_off`, `drained`, `removed`, `shutdown`, as the releases metric labels
/// them), else the elector's reason (`renewal_refused`, `duty_failed`, ...).
fn end_label(lead: &Ownership) -> Option<String> {
    let planned = match lead.end_reason()? {
        MoveCause::HandOff => "handed_off",
        MoveCause::Drain => "drained",
        MoveCause::Removal => "removed",
        MoveCause::Leave => "shutdown",
        _ => return lead.leadership().end_reason().map(|r| r.label().to_owned()),
    };
    Some(planned.to_owned())
}
