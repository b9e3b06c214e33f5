//! `failover-lossy`: a failover of the *servers* that loses the leader's grant.
//!
//! Each run starts a fresh topology (a Sentinel set with one replica, or a cluster of
//! three primaries with one replica each) and:
//!
//! 1. waits until its servers have been up for a lease + [`AGE_SLACK`]: the acquire
//!    script holds grants back for one lease after a server starts (the boot marker),
//!    which on a young replica would hide the loss;
//! 2. cuts the primary that serves the duty off from its replicas, then starts the
//!    child leader (`--one-term`: it wins this one term and never campaigns again, as
//!    a leader cut off from the new primary would not), so its grant and renewals live
//!    on the primary only (checked: the lease key exists there and on no replica);
//! 3. starts the follower in the bench process, and once it follows, at a random
//!    point of the renew cycle, SIGKILLs the primary; the topology promotes the
//!    replica, which lacks the grant;
//! 4. times the topology's detection (a new primary named and answering as a master)
//!    and the follower's take-over, and waits for the old leader's step-down (its
//!    renewals reach the new primary and are refused).
//!
//! The old leader was entitled to its term until its last successful acquire or
//! renewal *send* + the lease (see [`crate::overlap`]): a follower that leads before
//! then is an overlap. A follower whose fence is not above the old leader's is a
//! fence repeat.

use std::time::Duration;

use leasehold_election::DEFAULT_KEY_PREFIX;
use serde::Serialize;
use tokio::task::block_in_place;
use tokio::time::{Instant, sleep, sleep_until};

use crate::clock::{micros, now_us, span_ms};
use crate::duty::event::Event;
use crate::duty::failover::{REAP, settle_renewal};
use crate::duty::follower::Follower;
use crate::duty::harness::{CHILD_START, summary};
use crate::duty::process::{ChildMode, LeaderProcess};
use crate::overlap::{self, Term};
use crate::stats::{Summary, round3};
use crate::store::{self, BoxError, Servers, TargetArgs, Topology};

/// How much longer than a lease the servers must have been up before the cut: the
/// acquire script counts a server's uptime in whole seconds and takes one off.
pub const AGE_SLACK: Duration = Duration::from_secs(2);
/// Longest the topology may take to name a new primary after the kill.
const DETECT_LIMIT: Duration = Duration::from_secs(30);

/// How the old leader's term ended, by its own `term_ended` line.
#[derive(Debug, Clone, Serialize)]
pub struct OldLeaderEnd {
    /// The elector's reason (`renewal_refused`, `deadline_passed`, ...).
    pub reason: String,
    /// Primary kill → the old leader's status showed the term over.
    pub after_kill_ms: f64,
}

/// One lossy failover.
#[derive(Debug, Clone, Serialize)]
pub struct LossyRun {
    /// The data node that was primary (and was cut off, then killed).
    pub primary_node: usize,
    /// The replica the topology promoted.
    pub new_primary_node: usize,
    /// Whether the lease key existed on the primary just after the grant.
    pub grant_on_primary: bool,
    /// Whether it existed on any replica then (it should not: the cut failed if so).
    pub grant_on_replica: bool,
    /// Servers up (at least this long) at the kill.
    pub topology_age_ms: f64,
    /// The old leader's last successful acquire or renewal sent → the primary kill.
    pub since_renew_ms: f64,
    /// Primary kill → the old leader's local deadline (that send + the lease).
    pub old_deadline_ms: f64,
    /// Primary kill → the topology named a new primary that answers as a master.
    pub detection_ms: f64,
    /// Primary kill → the follower's term started.
    pub leaderless_ms: f64,
    /// The old leader's deadline − the follower's start: positive when the follower
    /// led while the old leader was still entitled to (an overlap).
    pub overlap_ms: f64,
    /// `overlap_ms > 0`.
    pub overlap: bool,
    /// The old leader's fence.
    pub old_fence: u64,
    /// The follower's fence.
    pub new_fence: u64,
    /// `new_fence <= old_fence`.
    pub fence_repeat: bool,
    /// How the old leader's term ended (`null`: no `term_ended` line before the run
    /// ended).
    pub old_leader_end: Option<OldLeaderEnd>,
}

/// The final report of `failover-lossy`.
#[derive(Debug, Clone, Serialize)]
pub struct LossyReport {
    /// Always `failover`.
    pub scenario: &'static str,
    /// Always `true`.
    pub lose_writes: bool,
    /// The Redis set-up.
    pub topology: Topology,
    /// The lease.
    pub lease_ms: u64,
    /// Whether every elector ran with `Elector::spawn_dedicated`.
    pub dedicated: bool,
    /// Runs whose follower led before the old leader's local deadline.
    pub overlaps: usize,
    /// Runs whose follower's fence was not above the old leader's.
    pub fence_repeats: usize,
    /// Runs where the lease key was found on a replica after the cut (a cut that did
    /// not hold: such a run loses nothing).
    pub grants_replicated: usize,
    /// Summary of `leaderless_ms`.
    pub leaderless_ms: Summary,
    /// Summary of `detection_ms`.
    pub detection_ms: Summary,
    /// Summary of `overlap_ms` (positive: an overlap).
    pub overlap_ms: Summary,
    /// Summary of `old_deadline_ms`.
    pub old_deadline_ms: Summary,
    /// Every run, in order.
    pub runs: Vec<LossyRun>,
}

/// What `failover-lossy` runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The lease, in milliseconds.
    pub lease_ms: u64,
    /// Runs, each on a fresh topology.
    pub runs: u64,
    /// Electors on a thread and runtime of their own.
    pub dedicated: bool,
    /// The Redis set-up (with replicas: sentinel or cluster).
    pub target: TargetArgs,
}

/// Runs `settings.runs` lossy failovers, each on a fresh topology.
///
/// # Errors
/// On a topology without replicas, or the first run that fails.
pub async fn run(settings: &Settings) -> Result<LossyReport, BoxError> {
    store::check_lossy_target(&settings.target)?;
    let runs = usize::try_from(settings.runs)?;
    let tag = format!("{}-{}", std::process::id(), now_us() / 1000);
    let mut all = Vec::with_capacity(runs);
    for i in 1..=runs {
        let r = one(settings, &tag, i)
            .await
            .map_err(|e| format!("run {i}: {e}"))?;
        eprintln!(
            "run {i}/{runs}: detection {:.1} ms, leaderless {:.1} ms, old deadline {:.1} ms \
             after the kill, overlap {:.1} ms{}, fences {} → {}{}",
            r.detection_ms,
            r.leaderless_ms,
            r.old_deadline_ms,
            r.overlap_ms,
            if r.overlap { " (OVERLAP)" } else { "" },
            r.old_fence,
            r.new_fence,
            if r.fence_repeat { " (REPEAT)" } else { "" },
        );
        all.push(r);
    }
    Ok(LossyReport {
        scenario: "failover",
        lose_writes: true,
        topology: settings.target.topology,
        lease_ms: settings.lease_ms,
        dedicated: settings.dedicated,
        overlaps: all.iter().filter(|r| r.overlap).count(),
        fence_repeats: all.iter().filter(|r| r.fence_repeat).count(),
        grants_replicated: all.iter().filter(|r| r.grant_on_replica).count(),
        leaderless_ms: summary(&all, |r| r.leaderless_ms)?,
        detection_ms: summary(&all, |r| r.detection_ms)?,
        overlap_ms: summary(&all, |r| r.overlap_ms)?,
        old_deadline_ms: summary(&all, |r| r.old_deadline_ms)?,
        runs: all,
    })
}

async fn one(settings: &Settings, tag: &str, run: usize) -> Result<LossyRun, BoxError> {
    let lease = Duration::from_millis(settings.lease_ms);
    let renew_interval = store::config("probe", "probe", lease)?.renew_interval();
    let mut servers = block_in_place(|| Servers::start_with(&settings.target, true))?;
    // Every node had started by now: their uptime is at least the time since.
    let up_since = Instant::now();
    let result = lossy_failover(
        settings,
        &mut servers,
        up_since,
        tag,
        run,
        lease,
        renew_interval,
    )
    .await;
    block_in_place(|| drop(servers));
    result
}

async fn lossy_failover(
    settings: &Settings,
    servers: &mut Servers,
    up_since: Instant,
    tag: &str,
    run: usize,
    lease: Duration,
    renew_interval: Duration,
) -> Result<LossyRun, BoxError> {
    let duty = format!("bench-lossy-{tag}-{run}");
    let key = format!("{DEFAULT_KEY_PREFIX}:{{{duty}}}:lease");
    let store = store::build_store(&servers.spec, lease)?;
    sleep_until(up_since + lease + AGE_SLACK).await;

    let primary = block_in_place(|| servers.cut_replication(&key))?;
    let mode = ChildMode {
        dedicated: settings.dedicated,
        one_term: true,
        ..ChildMode::default()
    };
    let exe = std::env::current_exe()?;
    let mut leader =
        LeaderProcess::spawn(&exe, &servers.spec.to_arg()?, &duty, "child", lease, mode)?;
    let leading = leader.wait_leading(CHILD_START + lease).await?;
    let copies = block_in_place(|| servers.key_on_nodes(&key))?;
    let grant_on_primary = copies.iter().any(|c| c.node == primary && c.exists);
    let grant_on_replica = copies.iter().any(|c| c.node != primary && c.exists);
    if !grant_on_primary {
        return Err(format!("the grant is not on the primary (node {primary}): {copies:?}").into());
    }
    if grant_on_replica {
        tracing::warn!(?copies, "the grant reached a replica after the cut");
    }
    let config = store::config(&duty, "follower", lease)?;
    let follower = Follower::spawn(store, config, settings.dedicated)?;
    follower.wait_following(lease * 3).await?;

    // A random point of the renew cycle, so the old leader's deadline varies.
    let after = renew_interval.mul_f64(rand::random_range(0.2..1.2));
    sleep(Duration::from_micros(
        (leading.at_us + micros(after)).saturating_sub(now_us()),
    ))
    .await;
    settle_renewal(&leader, renew_interval).await?;
    let kill_us = now_us();
    let topology_age_ms = up_since.elapsed().as_secs_f64() * 1000.0;
    block_in_place(|| servers.kill_node(primary))?;
    let detected = block_in_place(|| servers.wait_for_new_primary(primary, &key, DETECT_LIMIT));
    let led = follower.wait_led(DETECT_LIMIT + lease * 3).await;
    let (new_primary_node, detected_us) = detected?;
    let led = led?;

    // The old leader's step-down (its next renewal reaches the new primary), at the
    // latest its deadline; then stop it.
    let state = leader.state();
    let last_sent = state
        .last_extended_us()
        .ok_or("the old leader reported no lease")?;
    let until_us = last_sent + micros(lease);
    let wait_end =
        Instant::now() + Duration::from_micros(until_us.saturating_sub(now_us())) + renew_interval;
    while term_end(&leader).is_none() && Instant::now() < wait_end {
        sleep(Duration::from_millis(10)).await;
    }
    leader.terminate().await?;
    let (_, state) = leader.wait(REAP).await?;
    follower.shutdown().await;
    let end = term_end(&leader);
    // Every renewal the child reported is in now: the last one is its entitlement.
    let last_sent = state
        .last_extended_us()
        .ok_or("the old leader reported no lease")?;
    let until_us = last_sent + micros(lease);
    let terms = [
        Term {
            holder: "child".into(),
            fence: leading.fence,
            start_us: leading.at_us,
            entitled_until_us: Some(until_us),
        },
        Term {
            holder: "follower".into(),
            fence: led.fence,
            start_us: led.at_us,
            entitled_until_us: None,
        },
    ];
    let overlap_ms = span_ms(led.at_us, until_us);
    Ok(LossyRun {
        primary_node: primary,
        new_primary_node,
        grant_on_primary,
        grant_on_replica,
        topology_age_ms: round3(topology_age_ms),
        since_renew_ms: round3(span_ms(last_sent, kill_us)),
        old_deadline_ms: round3(span_ms(kill_us, until_us)),
        detection_ms: round3(span_ms(kill_us, detected_us)),
        leaderless_ms: round3(span_ms(kill_us, led.at_us)),
        overlap_ms: round3(overlap_ms),
        overlap: !overlap::overlaps(&terms).is_empty(),
        old_fence: leading.fence,
        new_fence: led.fence,
        fence_repeat: !overlap::fence_repeats(&terms).is_empty(),
        old_leader_end: end.map(|(reason, at_us)| OldLeaderEnd {
            reason,
            after_kill_ms: round3(span_ms(kill_us, at_us)),
        }),
    })
}

/// The old leader's `term_ended` line, if it printed one: the reason and when.
fn term_end(leader: &LeaderProcess) -> Option<(String, u64)> {
    leader.events().into_iter().find_map(|e| match e {
        Event::TermEnded { reason, at_us, .. } => Some((reason, at_us)),
        _ => None,
    })
}
