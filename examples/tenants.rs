//! Tenants sharded across replicas: 32 tenant workloads spread over every running
//! replica, each tenant served by exactly one of them, rebalanced as replicas come and
//! go.
//!
//! Every replica runs a partition coordinator for the group `tenants` (lease 3 s). For
//! each tenant it owns, a callback does a little periodic "work" tagged with the
//! tenant's fence and stops as soon as ownership ends (handed over to a newcomer, lease
//! lost, shutdown). Start replicas in separate terminals and watch the tenants spread,
//! move to a newcomer, and come back when one leaves; Ctrl-C leaves gracefully, so the
//! others take its tenants over at once instead of waiting for the leases to expire:
//!
//! ```text
//! cargo run --example tenants -- replica-a
//! cargo run --example tenants -- replica-b
//! cargo run --example tenants -- replica-c
//! ```
//!
//! Uses `REDIS_URL` (default `redis://127.0.0.1:6379/`).

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold_election::{DutyResult, Leadership, RedisStore};
use leasehold_partitions::{Coordinator, GroupConfig, GroupView};

/// How often a tenant's callback processes a batch.
const BATCH_EVERY: Duration = Duration::from_secs(1);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let replica = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("replica-{}", std::process::id()));
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let store = RedisStore::connect(&url)?;
    let tenants: Vec<String> = (1..=32).map(|i| format!("tenant-{i:02}")).collect();
    let config = GroupConfig::builder("tenants", tenants, replica.as_str())
        .lease(Duration::from_secs(3))
        .build()?;

    let coordinator = Coordinator::new(store, config, |tenant: String, lead: Leadership| {
        serve(tenant, lead)
    })
    .spawn();

    println!("{replica}: joining group 'tenants' on {url}; Ctrl-C to leave");
    let mut view = coordinator.subscribe();
    let mut shown = BTreeSet::new();
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            changed = view.changed() => {
                if changed.is_err() {
                    break;
                }
                // Claims and hand-offs come in bursts: show the state once it settles.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let v = view.borrow_and_update().clone();
                if v.owned != shown {
                    show(&replica, &v);
                    shown = v.owned;
                }
            }
        }
    }
    println!(
        "{replica}: leaving; handing {} tenants over at once",
        shown.len()
    );
    coordinator.shutdown().await;
    println!("{replica}: left the group");
    Ok(())
}

/// One tenant's workload while this replica owns it: a batch every [`BATCH_EVERY`],
/// stamped with the fence (a real service would pass it to every write, see
/// `FencedWriter`), until ownership ends.
async fn serve(tenant: String, lead: Leadership) -> DutyResult {
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

/// Prints what this replica owns and who else is live.
fn show(replica: &str, v: &GroupView) {
    let owned: Vec<&str> = v.owned.iter().map(String::as_str).collect();
    println!(
        "{replica}: owns {} of 32 tenants [{}]; live replicas: {}{}",
        owned.len(),
        owned.join(" "),
        v.live_replicas.join(", "),
        v.error
            .as_ref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default()
    );
}
