//! The hidden `child` mode: one elector in its own OS process, reporting on stdout.
//!
//! It prints one [`Event`] per line: `leading` when its duty starts, `renewed` after
//! every renewal, and on SIGTERM it shuts down gracefully (release plus notification)
//! before printing `sigterm` and `stopped` and exiting 0.

use std::time::Duration;

use leasehold_election::{DutyResult, Elector, Leadership};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, MissedTickBehavior, interval};

use crate::ChildArgs;
use crate::clock::{now_us, wall_us};
use crate::duty::event::Event;
use crate::store::{self, BoxError};

/// How often the duty looks at its deadline to notice a renewal.
const POLL: Duration = Duration::from_millis(1);

/// Runs the child until SIGTERM.
///
/// # Errors
/// Bad settings, or the SIGTERM handler could not be installed.
pub async fn run(args: &ChildArgs) -> Result<(), BoxError> {
    let lease = Duration::from_millis(args.lease_ms);
    let store = store::build_store(&args.conn.spec()?, lease)?;
    let config = store::config(&args.duty, &args.replica, lease)?;
    // The renewal was sent at `deadline - (lease - margin)`.
    let validity = config.lease - config.safety_margin;
    // Installed before the elector starts, so an early SIGTERM is never fatal.
    let mut term = signal(SignalKind::terminate())?;
    let handle = Elector::new(store, config, move |lead| report(lead, validity)).spawn();
    term.recv().await;
    let sigterm_us = now_us();
    handle.shutdown().await;
    let stopped_us = now_us();
    Event::Sigterm { at_us: sigterm_us }.emit();
    Event::Stopped { at_us: stopped_us }.emit();
    Ok(())
}

/// The duty: report the start, then every move of the deadline, until cancelled.
async fn report(lead: Leadership, validity: Duration) -> DutyResult {
    let sent_at = |deadline: Instant| wall_us(deadline.checked_sub(validity).unwrap_or(deadline));
    let mut last = lead.deadline();
    Event::Leading {
        fence: lead.fence().get(),
        at_us: now_us(),
        sent_at_us: sent_at(last),
    }
    .emit();
    let mut poll = interval(POLL);
    poll.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = lead.cancelled() => return Ok(()),
            _ = poll.tick() => {}
        }
        let deadline = lead.deadline();
        if deadline != last {
            last = deadline;
            Event::Renewed {
                sent_at_us: sent_at(deadline),
            }
            .emit();
        }
    }
}
