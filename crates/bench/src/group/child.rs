//! The hidden `partition-child` mode: one partition [`Coordinator`] in its own OS
//! process, reporting on stdout.
//!
//! It prints one [`PartitionEvent`] per line: `joined` after its first group tick,
//! `owned` and `released` around every partition callback, `handoffs` when it hands
//! partitions over to rebalance, `group_set` when the group's partition count (as its
//! ticks see it) changes, `refused` if `ready()` fails, and on SIGTERM it leaves
//! gracefully (`shutdown().await`) before printing `sigterm` and `stopped` and exiting 0.
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

use leasehold_election::{DutyResult, FencedWriteError, FencedWriter, Leadership};
use leasehold_partitions::{Coordinator, GroupConfig};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{MissedTickBehavior, interval};

use crate::PartitionChildArgs;
use crate::clock::now_us;
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
    let handle = Coordinator::new(store, config, move |partition: String, lead: Leadership| {
        own(partition, lead, ledger.clone())
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
/// end of the term.
async fn own(partition: String, lead: Leadership, ledger: Option<Arc<Ledger>>) -> DutyResult {
    let fence = lead.fence().get();
    PartitionEvent::Owned {
        partition: partition.clone(),
        fence,
        at_us: now_us(),
    }
    .emit();
    let (writes, write_errors) = match ledger {
        Some(ledger) => write_ledger(&partition, &lead, &ledger).await,
        None => {
            lead.cancelled().await;
            (0, 0)
        }
    };
    PartitionEvent::Released {
        partition,
        fence,
        at_us: now_us(),
        writes,
        write_errors,
    }
    .emit();
    Ok(())
}

/// Appends a record every `ledger.every` until the term ends or a write is rejected as
/// stale; returns the accepted writes and the failed ones.
async fn write_ledger(partition: &str, lead: &Leadership, ledger: &Ledger) -> (u64, u64) {
    let key = ledger_key(partition);
    let fence = lead.fence();
    let (mut writes, mut errors, mut seq) = (0, 0, 0_u64);
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
            Ok(()) => writes += 1,
            Err(FencedWriteError::Stale { highest, .. }) => {
                PartitionEvent::Rejected {
                    partition: partition.to_owned(),
                    fence: fence.get(),
                    highest: highest.get(),
                    at_us: now_us(),
                }
                .emit();
                lead.cancelled().await;
                break;
            }
            // A store error: the write may or may not have landed; try the next one.
            Err(_) => errors += 1,
        }
    }
    (writes, errors)
}
