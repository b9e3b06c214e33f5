//! Samples every ledger's length on the bench's clock, so a partition's gaps are
//! measured from when its records were accepted, not from when they were sent (a
//! write held in a black-holed link is sent long before it lands).

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{MissedTickBehavior, interval};
use tokio_util::sync::CancellationToken;

use crate::clock::now_us;
use crate::group::event::{ledger_key, partition_names};
use crate::store::BoxError;

/// A background task reading `LLEN` of every ledger (one pipeline per sample).
#[derive(Debug)]
pub struct Sampler {
    stop: CancellationToken,
    task: JoinHandle<Result<Vec<Vec<u64>>, BoxError>>,
}

impl Sampler {
    /// Starts sampling the ledgers of `partitions` partitions on `url` every `every`.
    ///
    /// # Errors
    /// If the URL is invalid.
    pub fn start(url: &str, partitions: usize, every: Duration) -> Result<Self, BoxError> {
        let client = redis::Client::open(url)?;
        let stop = CancellationToken::new();
        let task = tokio::spawn(sample(client, partitions, every, stop.clone()));
        Ok(Self { stop, task })
    }

    /// Stops sampling; returns, per partition, the times (wall µs) at which its ledger
    /// was seen longer than at the sample before.
    ///
    /// # Errors
    /// If the sampler could not connect, or panicked.
    pub async fn finish(self) -> Result<Vec<Vec<u64>>, BoxError> {
        self.stop.cancel();
        self.task
            .await
            .map_err(|e| format!("the ledger sampler failed: {e}"))?
    }
}

async fn sample(
    client: redis::Client,
    partitions: usize,
    every: Duration,
    stop: CancellationToken,
) -> Result<Vec<Vec<u64>>, BoxError> {
    let keys: Vec<String> = partition_names(partitions)
        .iter()
        .map(|p| ledger_key(p))
        .collect();
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut last = vec![0_u64; partitions];
    let mut grew = vec![Vec::new(); partitions];
    let mut tick = interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(grew),
            _ = tick.tick() => {}
        }
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("LLEN").arg(key);
        }
        let lens: Vec<u64> = match pipe.query_async(&mut conn).await {
            Ok(lens) => lens,
            Err(e) => {
                tracing::warn!(error = %e, "sampling the ledgers failed");
                continue;
            }
        };
        let at = now_us();
        for ((len, last), grew) in lens.iter().zip(&mut last).zip(&mut grew) {
            if len > last {
                *last = *len;
                grew.push(at);
            }
        }
    }
}
