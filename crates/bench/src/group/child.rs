//! The hidden `partition-child` mode: one partition [`Coordinator`] in its own OS
//! process, reporting on stdout.
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
//! With `--ledger-url`, every callback also does real fenced work: every
//! `--write-every-ms` it appends `partition,replica,fence,seq,sent_at_us` to the
//! partition's ledger list on that server with [`FencedWriter::rpush`]; a stale
//! rejection is reported (`rejected`) and ends the writing for that term.

use std::sync::Arc;
use std::time::Duration;

use leasehold_election::{DutyResult, ElectorConfig, FencedWriteError, FencedWriter, Leadership};
use leasehold_partitions::{Coordinator, GroupConfig};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{MissedTickBehavior, interval};

use crate::PartitionChildArgs;
use crate::clock::{now_us, wall_us};
use crate::group::event::{PartitionEvent, ledger_key, partition_names};
use crate::store::{self, BoxError, StoreSpec};

/// Where and how often a callback writes its ledger records.
#[derive(Debug)]
struct Ledger {
    writer: FencedWriter,
    every: Duration,
}

/// Runs the child until SIGTERM.
///
/// # Errors
/// Bad settings, or the SIGTERM handler could not be installed.
pub async fn run(args: &PartitionChildArgs) -> Result<(), BoxError> {
    let lease = Duration::from_millis(args.lease_ms);
    let store = store::build_store(&args.conn.spec()?, lease)?;
    let mut builder = GroupConfig::builder(
        args.group.as_str(),
        partition_names(args.partitions),
        args.replica.as_str(),
    )
    .lease(lease)
    .list_version(args.list_version)
    .capacity(args.capacity);
    if let Some(ms) = args.settle_ms {
        builder = builder.settle(Duration::from_millis(ms));
    }
    if let Some(ms) = args.rejoin_grace_ms {
        builder = builder.rejoin_grace(Duration::from_millis(ms));
    }
    let config = builder.build()?;
    let ledger = match &args.ledger_url {
        Some(url) => Some(Arc::new(Ledger {
            writer: FencedWriter::new(store::build_store(&StoreSpec::single(url.as_str()), lease)?),
            every: Duration::from_millis(args.write_every_ms.max(1)),
        })),
        None => None,
    };
    // Installed before the coordinator starts, so an early SIGTERM is never fatal.
    let mut term = signal(SignalKind::terminate())?;
    // The safety margin of the partitions' electors (the library default for this
    // lease and renew interval): a deadline lies lease − margin after its send.
    let margin = ElectorConfig::builder("probe", args.replica.as_str())
        .lease(config.lease)
        .renew_interval(config.renew_interval)
        .build()?
        .safety_margin;
    let validity = config.lease.saturating_sub(margin);
    let handle = Coordinator::new(store, config, move |partition: String, lead: Leadership| {
        own(partition, lead, ledger.clone(), validity)
    })
    .spawn();

    {
        let mut view = handle.subscribe();
        let (mut joined, mut handoffs) = (false, 0);
        // The group's set as last reported: (P, list differs); P 0 until the first tick.
        let mut set = (0, false);
        let (mut watching, mut waiting_ready) = (true, true);
        let ready = handle.ready();
        tokio::pin!(ready);
        loop {
            {
                let v = view.borrow_and_update();
                if v.joined && !joined {
                    joined = true;
                    PartitionEvent::Joined { at_us: now_us() }.emit();
                }
                if v.joined && (v.partitions, v.list_differs) != set {
                    set = (v.partitions, v.list_differs);
                    PartitionEvent::GroupSet {
                        partitions: set.0,
                        list_differs: set.1,
                        at_us: now_us(),
                    }
                    .emit();
                }
                if v.handoffs > handoffs {
                    handoffs = v.handoffs;
                    PartitionEvent::Handoffs {
                        total: handoffs,
                        at_us: now_us(),
                    }
                    .emit();
                }
            }
            tokio::select! {
                _ = term.recv() => break,
                changed = view.changed(), if watching => watching = changed.is_ok(),
                r = &mut ready, if waiting_ready => {
                    waiting_ready = false;
                    if let Err(e) = r {
                        PartitionEvent::Refused {
                            error: e.to_string(),
                            at_us: now_us(),
                        }
                        .emit();
                    }
                }
            }
        }
    }
    let sigterm_us = now_us();
    handle.shutdown().await;
    let stopped_us = now_us();
    PartitionEvent::Sigterm { at_us: sigterm_us }.emit();
    PartitionEvent::Stopped { at_us: stopped_us }.emit();
    Ok(())
}

/// A partition callback: report the term, write the ledger if there is one, report the
/// end of the term (from [`TermLine`]'s drop, so an aborted callback reports it too).
async fn own(
    partition: String,
    lead: Leadership,
    ledger: Option<Arc<Ledger>>,
    validity: Duration,
) -> DutyResult {
    PartitionEvent::Owned {
        partition: partition.clone(),
        fence: lead.fence().get(),
        at_us: now_us(),
    }
    .emit();
    let mut line = TermLine {
        partition,
        lead,
        validity,
        writes: 0,
        write_errors: 0,
    };
    match ledger {
        Some(ledger) => write_ledger(&mut line, &ledger).await,
        None => line.lead.cancelled().await,
    }
    Ok(())
}

/// One term of a partition callback; prints its `released` line when dropped: when
/// the callback returns, or when the elector aborts it (a lease that may be lost gives
/// the callback no grace).
struct TermLine {
    partition: String,
    lead: Leadership,
    /// Lease − safety margin: how far the deadline lies after a claim or renewal was
    /// sent.
    validity: Duration,
    /// Ledger records written (and seen accepted).
    writes: u64,
    /// Ledger writes that failed with a store error.
    write_errors: u64,
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
            reason: self.lead.end_reason().map(|r| r.label().to_owned()),
            sent_at_us: Some(wall_us(
                deadline.checked_sub(self.validity).unwrap_or(deadline),
            )),
        }
        .emit();
    }
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
                .emit();
                lead.cancelled().await;
                break;
            }
            // A store error: the write may or may not have landed; try the next one.
            Err(_) => line.write_errors += 1,
        }
    }
}
