//! Warm hand-offs: a consumer per partition that hands its offset to the next owner.
//!
//! Two replicas of one group run in this process against one Redis. Each owned stream
//! is "consumed" (its offset grows every 20 ms); when ownership ends for a planned
//! move, the callback leaves its offset for the next owner with
//! [`Ownership::hand_off`], and the next owner resumes from it
//! ([`Ownership::handed_over`]) instead of starting cold. The run: `replica-a` serves
//! all 8 streams, `replica-b` joins and takes half (handed over by `a`), `a` shuts down
//! and `b` takes the rest (handed over again), then `b` shuts down. Every resume prints
//! where it resumed and from whom; a stream with no hand-off says why.
//!
//! The join's hand-overs are warm moves (`GroupConfigBuilder::prepare_moves`): `a` names
//! `b` as the receiver ([`Ownership::successor`]) and asks it to prepare first
//! (`Coordinator::on_prepare`: here it just says so), and lets go of each stream only
//! once `b` is ready.
//!
//! ```text
//! cargo run --example hand_off
//! ```
//!
//! Uses `REDIS_URL` (default `redis://127.0.0.1:6379/`), group `hand-off-demo`.

use std::time::Duration;

use leasehold_partitions::{
    Coordinator, DutyResult, GroupConfig, HandOffError, NoHandOff, Ownership, RedisStore,
};

/// How often a stream's consumer takes the next record.
const RECORD_EVERY: Duration = Duration::from_millis(20);

/// One stream's consumer: resumes from the offset handed over, or from 0.
async fn consume(stream: String, lead: Ownership) -> DutyResult {
    let mut offset: u64 = match lead.handed_over() {
        Ok(bytes) => {
            let offset = std::str::from_utf8(bytes)?.parse()?;
            println!(
                "{}: {stream} resumed at offset {offset}, handed over",
                lead.replica_id()
            );
            offset
        }
        Err(NoHandOff::FirstOwner) => {
            println!("{}: {stream} starts at 0 (first owner)", lead.replica_id());
            0
        }
        Err(why) => {
            // A real consumer would read its last committed offset here.
            println!("{}: {stream} starts cold: {why}", lead.replica_id());
            0
        }
    };
    loop {
        tokio::select! {
            () = lead.cancelled() => break,
            () = tokio::time::sleep(RECORD_EVERY) => {
                // The term may have ended since the sleep began: stop before the side
                // effect, but still hand off below (a `?` here would skip that).
                if lead.check().is_err() {
                    break;
                }
                offset += 1;
            }
        }
    }
    // The term is ending (a hand-off, a drain, a shutdown): leave the offset for the
    // next owner. It travels with the release; a crash leaves nothing, and so does a
    // lost lease (whose term is aborted at once: this may not even run).
    let why = lead
        .end_reason()
        .map_or_else(String::new, |r| r.to_string());
    match lead.hand_off(offset.to_string()) {
        Ok(()) => {}
        Err(HandOffError::LeaseLost) => {
            println!(
                "{}: {stream} stopped at offset {offset} ({why}): lease lost, nothing handed off",
                lead.replica_id()
            );
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    }
    match lead.successor() {
        Some(next) => println!(
            "{}: {stream} handed off at offset {offset} ({why}, to {next})",
            lead.replica_id()
        ),
        None => println!(
            "{}: {stream} handed off at offset {offset} ({why})",
            lead.replica_id()
        ),
    }
    Ok(())
}

/// Runs the demo to its end. (Public so that the workspace's `tests/examples.rs` can
/// run this very code as a child process.)
#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let streams: Vec<String> = (0..8).map(|i| format!("stream-{i}")).collect();
    let start = |replica: &str| -> Result<_, Box<dyn std::error::Error>> {
        let config = GroupConfig::builder("hand-off-demo", streams.clone(), replica)
            .lease(Duration::from_secs(2))
            .prepare_moves(Duration::from_secs(1))
            .build()?;
        let me = replica.to_owned();
        Ok(
            Coordinator::new(RedisStore::connect(&url)?, config, consume)
                .on_prepare(move |job| {
                    let me = me.clone();
                    async move {
                        // A real consumer would open the stream and warm its cache here.
                        println!("{me}: preparing {} (from {})", job.partition, job.from);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                })
                .spawn(),
        )
    };
    let wait_for = |h: &leasehold_partitions::CoordinatorHandle<RedisStore>, owned: usize| {
        let mut view = h.subscribe();
        async move {
            view.wait_for(|v| v.owned.len() == owned).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok::<_, Box<dyn std::error::Error>>(())
        }
    };

    let a = start("replica-a")?;
    wait_for(&a, 8).await?;
    let b = start("replica-b")?;
    wait_for(&b, 4).await?;
    a.shutdown().await;
    wait_for(&b, 8).await?;
    b.shutdown().await;
    println!("done");
    Ok(())
}
