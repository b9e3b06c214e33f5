//! The follower: an elector in the bench process that notes when its duty starts.

use std::sync::Arc;
use std::time::Duration;

use leasehold_election::{Elector, ElectorConfig, ElectorHandle, RedisStore, Role};
use tokio::sync::watch;
use tokio::time::timeout;

use crate::clock::now_us;
use crate::store::BoxError;

/// The start of the follower's first term.
#[derive(Debug, Clone, Copy)]
pub struct Led {
    /// Its fence.
    pub fence: u64,
    /// When its duty started (wall µs).
    pub at_us: u64,
}

/// An elector whose duty records its start and then waits for cancellation.
#[derive(Debug)]
pub struct Follower {
    handle: ElectorHandle,
    led: watch::Receiver<Option<Led>>,
}

impl Follower {
    /// Spawns the elector on the current runtime, or on a thread of its own if
    /// `dedicated`.
    ///
    /// # Errors
    /// If the dedicated thread cannot start.
    pub fn spawn(
        store: RedisStore,
        config: ElectorConfig,
        dedicated: bool,
    ) -> Result<Self, BoxError> {
        let (tx, led) = watch::channel(None);
        let tx = Arc::new(tx);
        let elector = Elector::new(store, config, move |lead| {
            let tx = tx.clone();
            async move {
                let at_us = now_us();
                // Keep the first term's start: that is the hand-over being measured.
                tx.send_if_modified(|slot| {
                    let first = slot.is_none();
                    if first {
                        *slot = Some(Led {
                            fence: lead.fence().get(),
                            at_us,
                        });
                    }
                    first
                });
                lead.cancelled().await;
                Ok(())
            }
        });
        let handle = if dedicated {
            elector.spawn_dedicated()?
        } else {
            elector.spawn()
        };
        Ok(Self { handle, led })
    }

    /// Waits (at most `limit`) until it has seen the child hold the lease: it has
    /// campaigned once and asked for release notifications.
    ///
    /// # Errors
    /// On timeout, or if the elector stopped.
    pub async fn wait_following(&self, limit: Duration) -> Result<(), BoxError> {
        let mut status = self.handle.subscribe();
        timeout(
            limit,
            status.wait_for(|s| matches!(s.role, Role::Follower { leader: Some(_) })),
        )
        .await
        .map_err(|_| format!("the follower did not see the child lead within {limit:?}"))?
        .map_err(|_| "the follower stopped")?;
        Ok(())
    }

    /// Waits (at most `limit`) until its duty starts.
    ///
    /// # Errors
    /// On timeout.
    pub async fn wait_led(&self, limit: Duration) -> Result<Led, BoxError> {
        let mut led = self.led.clone();
        let got = timeout(limit, led.wait_for(Option::is_some))
            .await
            .map_err(|_| format!("the follower did not lead within {limit:?}"))?
            .map_err(|_| "the follower's duty is gone")?;
        got.ok_or_else(|| "no term".into())
    }

    /// Stops it gracefully (releasing the lease if it holds it).
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}
