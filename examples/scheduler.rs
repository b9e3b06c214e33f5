//! One duty, one leader: a periodic "scheduler" that only the leader runs.
//!
//! Prints every change of leadership with its fence, and "waiting for Redis (...)" once
//! for each new error while Redis cannot be reached. The first Ctrl-C (SIGINT) or
//! SIGTERM releases the lease at once, so another replica takes over without waiting
//! for it to expire. Run three in three terminals and stop the leader to watch the
//! hand-over:
//!
//! ```text
//! cargo run --release --example scheduler -- replica-a
//! cargo run --release --example scheduler -- replica-b
//! cargo run --release --example scheduler -- replica-c
//! ```
//!
//! Uses `REDIS_URL` (default `redis://127.0.0.1:6379/`).

use std::future::Future;
use std::time::Duration;

use leasehold_election::{
    Elector, ElectorConfig, ErrorChain, Leadership, RedisStore, Role, Status,
};

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
    let mut shown = Shown::default();
    loop {
        tokio::select! {
            signal = &mut shutdown => {
                println!("{replica}: {signal}: releasing the lease");
                break;
            }
            changed = status.changed() => {
                if changed.is_err() {
                    break;
                }
                let s = status.borrow_and_update().clone();
                shown.show(&replica, &s);
            }
        }
    }
    elector.shutdown().await;
    println!("{replica}: released");
    Ok(())
}

/// What was printed last, so that each line says something new.
#[derive(Default)]
struct Shown {
    role: Option<String>,
    error: Option<String>,
}

impl Shown {
    /// Prints what changed in `s`: the Redis error, the role, how a term ended.
    fn show(&mut self, replica: &str, s: &Status) {
        let error = s.last_error.as_ref().map(|e| ErrorChain(e).to_string());
        if error != self.error {
            match &error {
                Some(e) => println!("{replica}: waiting for Redis ({e})"),
                None => println!("{replica}: Redis is reachable"),
            }
            self.error = error;
        }
        let role = match &s.role {
            Role::Leader { fence, .. } => Some(format!("LEADER with fence {fence}")),
            Role::Follower { leader: Some(l) } => Some(format!("following {l}")),
            Role::Follower { leader: None } if s.last_error.is_none() => {
                Some("no leader known".to_owned())
            }
            _ => None, // starting, stopped, or no answer from Redis (said above)
        };
        if role.is_some() && role != self.role {
            println!("{replica}: {}", role.as_deref().unwrap_or_default());
            if let Some(end) = s.last_term.as_ref().filter(|_| !s.is_leader()) {
                println!("{replica}: term {} ended: {}", end.fence, end.reason);
            }
            self.role = role;
        }
    }
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
