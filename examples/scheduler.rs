//! One duty, one leader: a periodic "scheduler" that only the leader runs.
//!
//! Prints every change of leadership with its fence; Ctrl-C releases the lease at once
//! so another replica takes over without waiting for it to expire. Run three in three
//! terminals and stop the leader to watch the hand-over:
//!
//! ```text
//! cargo run --example scheduler -- replica-a
//! cargo run --example scheduler -- replica-b
//! cargo run --example scheduler -- replica-c
//! ```
//!
//! Uses `REDIS_URL` (default `redis://127.0.0.1:6379/`).

use std::time::Duration;

use leasehold_election::{Elector, ElectorConfig, Leadership, RedisStore, Role};

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
    let config = ElectorConfig::builder("scheduler", replica.as_str())
        .lease(Duration::from_secs(3))
        .build()?;

    let elector = Elector::new(store, config, |lead: Leadership| async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                () = lead.cancelled() => return Ok(()),
                _ = tick.tick() => println!(
                    "  [{}] enqueueing periodic jobs (fence {}, lease valid {:?} more)",
                    lead.replica_id(),
                    lead.fence(),
                    lead.remaining()
                ),
            }
        }
    })
    .spawn();

    println!("{replica}: campaigning for 'scheduler' on {url}; Ctrl-C to leave");
    let mut status = elector.subscribe();
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            changed = status.changed() => {
                if changed.is_err() {
                    break;
                }
                let s = status.borrow_and_update().clone();
                match &s.role {
                    Role::Leader { fence, .. } => println!("{replica}: LEADER with fence {fence}"),
                    Role::Follower { leader: Some(l) } => println!("{replica}: following {l}"),
                    Role::Follower { leader: None } => match &s.last_error {
                        Some(e) => println!("{replica}: waiting for Redis ({e})"),
                        None => println!("{replica}: no leader known"),
                    },
                    _ => {} // starting or stopped
                }
                if let Some(end) = s.last_term.as_ref().filter(|_| !s.is_leader()) {
                    println!("{replica}: term {} ended: {}", end.fence, end.reason);
                }
            }
        }
    }
    println!("{replica}: releasing the lease");
    elector.shutdown().await;
    Ok(())
}
