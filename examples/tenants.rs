//! Tenants sharded across replicas: 32 tenant workloads spread over every running
//! replica, each tenant served by exactly one of them, rebalanced as replicas come and
//! go.
//!
//! Every replica runs a partition coordinator for the group `tenants` (lease 3 s). For
//! each tenant it owns, a callback does a little periodic "work" tagged with the
//! tenant's fence and stops as soon as ownership ends (handed over to a newcomer, lease
//! lost, shutdown). Start replicas in separate terminals and watch the tenants spread,
//! move to a newcomer, and come back when one leaves. The first Ctrl-C (SIGINT) or
//! SIGTERM leaves gracefully, so the others take its tenants over at once instead of
//! waiting for the leases to expire; while Redis cannot be reached it says "waiting for
//! Redis (...)" once for each new error:
//!
//! ```text
//! cargo run --release --example tenants -- replica-a
//! cargo run --release --example tenants -- replica-b
//! cargo run --release --example tenants -- replica-c
//! ```
//!
//! Uses `REDIS_URL` (default `redis://127.0.0.1:6379/`).

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use leasehold_partitions::ErrorChain;
use leasehold_partitions::{
    Coordinator, DutyResult, GroupConfig, GroupView, Ownership, PartitionsError, RedisStore,
};

/// How often a tenant's callback processes a batch.
const BATCH_EVERY: Duration = Duration::from_secs(1);
/// Claims and hand-offs come in bursts: the owned set is shown once it has been quiet
/// this long.
const SETTLE: Duration = Duration::from_millis(200);

/// Runs the replica until the first SIGINT or SIGTERM. (Public so that the workspace's
/// `tests/examples.rs` can run this very code as a child process.)
#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        // Colours only on a terminal: logs piped to a file or a collector stay plain.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    // One shutdown future for the whole run, its handlers installed before anything
    // else: a signal that arrives at any point from here on ends the loop below.
    let shutdown = shutdown_signal()?;
    tokio::pin!(shutdown);

    let replica = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("replica-{}", std::process::id()));
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let store = RedisStore::connect(&url)?;
    let tenants: Vec<String> = (1..=32).map(|i| format!("tenant-{i:02}")).collect();
    let config = GroupConfig::builder("tenants", tenants, replica.as_str())
        .lease(Duration::from_secs(3))
        .build()?;

    let coordinator = Coordinator::new(store, config, |tenant: String, lead: Ownership| {
        serve(tenant, lead)
    })
    .spawn();

    println!("{replica}: joining group 'tenants' on {url}; Ctrl-C to leave");
    let mut view = coordinator.subscribe();
    let mut shown = BTreeSet::new();
    let mut error: Option<String> = None;
    let settle = tokio::time::sleep(SETTLE);
    tokio::pin!(settle);
    let mut settling = false;
    let mut told_wait = false;
    loop {
        tokio::select! {
            signal = &mut shutdown => {
                println!(
                    "{replica}: {signal}: leaving; handing {} tenants over at once",
                    coordinator.status().owned.len()
                );
                break;
            }
            changed = view.changed() => {
                if changed.is_err() {
                    break;
                }
                let v = view.borrow_and_update().clone();
                if let Some(at) = v.grants_from.filter(|_| !told_wait) {
                    told_wait = true;
                    let left = at.saturating_duration_since(tokio::time::Instant::now());
                    println!(
                        "{replica}: the group is new (or its Redis restarted): nothing is granted \
                         for one lease, {:.1} s more, in case leases granted before are still held",
                        left.as_secs_f64()
                    );
                }
                let now = v.error.as_ref().map(describe);
                if now != error {
                    match &now {
                        Some(e) => println!("{replica}: {e}"),
                        None => println!("{replica}: taking part again"),
                    }
                    error = now;
                }
                if v.owned != shown {
                    settle.as_mut().reset(tokio::time::Instant::now() + SETTLE);
                    settling = true;
                }
            }
            () = &mut settle, if settling => {
                settling = false;
                let v = coordinator.status();
                if v.owned != shown {
                    show(&replica, &v);
                    shown = v.owned;
                }
            }
        }
    }
    coordinator.shutdown().await;
    println!("{replica}: left the group");
    Ok(())
}

/// One tenant's workload while this replica owns it: a batch every [`BATCH_EVERY`],
/// stamped with the fence (a real service would pass it to every write, see
/// `FencedWriter`), until ownership ends.
async fn serve(tenant: String, lead: Ownership) -> DutyResult {
    println!("  + {tenant}: serving (fence {})", lead.fence());
    let mut tick = tokio::time::interval(BATCH_EVERY);
    let mut batches = 0_u64;
    loop {
        tokio::select! {
            () = lead.cancelled() => break,
            _ = tick.tick() => batches += 1, // process one batch under `lead.fence()`
        }
    }
    println!(
        "  - {tenant}: stopped after {batches} batches (fence {})",
        lead.fence()
    );
    Ok(())
}

/// What keeps this replica from taking part: Redis out of reach (retried at every
/// tick), or a conflict someone has to resolve.
fn describe(e: &PartitionsError) -> String {
    match e {
        PartitionsError::Store(e) => format!("waiting for Redis ({})", ErrorChain(e)),
        other => format!("not claiming tenants: {}", ErrorChain(other)),
    }
}

/// Prints what this replica owns and who else is live.
fn show(replica: &str, v: &GroupView) {
    let owned: Vec<&str> = v.owned.iter().map(String::as_str).collect();
    println!(
        "{replica}: owns {} of {} tenants [{}]; live replicas: {}",
        owned.len(),
        v.partitions,
        owned.join(" "),
        v.live_replicas.join(", "),
    );
}

/// Resolves with the signal's name on the first SIGINT (Ctrl-C) or SIGTERM. On Unix
/// the handlers are installed by this call, not on the first poll.
fn shutdown_signal() -> std::io::Result<impl Future<Output = &'static str>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => "SIGINT",
                _ = terminate.recv() => "SIGTERM",
            }
        })
    }
    #[cfg(not(unix))]
    {
        let ctrl_c = tokio::signal::ctrl_c();
        Ok(async move {
            let _ = ctrl_c.await;
            "Ctrl-C"
        })
    }
}
