//! What every scenario run shares: the Redis servers, the follower's store, and the
//! start of a run (child leader up, follower following).

use std::path::PathBuf;
use std::time::Duration;

use leasehold_election::RedisStore;

use crate::ScenarioArgs;
use crate::event::now_us;
use crate::follower::Follower;
use crate::leader::{ChildLeader, Leading};
use crate::setup::{self, BoxError};
use crate::topology::{Servers, Topology};

/// Longest a child may take to start and win a free lease (process start, runtime,
/// connection, self-check, acquire) on a busy machine.
const CHILD_START: Duration = Duration::from_secs(10);

/// The shared state of one `failover` or `handover` invocation.
#[derive(Debug)]
pub struct Harness {
    exe: PathBuf,
    /// The store as the children's `--store` argument.
    spec_arg: String,
    store: RedisStore,
    lease: Duration,
    renew_interval: Duration,
    /// Makes duty names unique per invocation, so runs against a shared `--redis-url`
    /// never meet an earlier run's lease or fence.
    tag: String,
    /// The servers (ours unless `--redis-url` was given; killed on drop).
    servers: Servers,
}

/// A run whose child leads and whose follower waits for the lease.
#[derive(Debug)]
pub struct Pair {
    /// The child process holding the lease.
    pub leader: ChildLeader,
    /// Its `leading` event.
    pub leading: Leading,
    /// The in-process follower.
    pub follower: Follower,
}

impl Harness {
    /// Starts the servers of `args`' topology unless `args` names a server, and the
    /// follower's store.
    ///
    /// # Errors
    /// If the servers cannot start, or the URL or lease is invalid.
    pub fn start(args: &ScenarioArgs) -> Result<Self, BoxError> {
        let lease = Duration::from_millis(args.lease_ms);
        let servers = Servers::start(&args.target)?;
        let renew_interval = setup::config("probe", "probe", lease)?.renew_interval;
        Ok(Self {
            exe: std::env::current_exe()?,
            store: setup::build_store(&servers.spec, lease)?,
            spec_arg: servers.spec.to_arg()?,
            lease,
            renew_interval,
            tag: format!("{}-{}", std::process::id(), now_us() / 1000),
            servers,
        })
    }

    /// The Redis set-up.
    pub fn topology(&self) -> Topology {
        self.servers.topology
    }

    /// The lease of every elector.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How often the leader renews (the library default for this lease).
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval
    }

    /// Starts run `run` of `scenario` on a fresh duty: the child leader first, then,
    /// once it leads, the follower; returns when the follower has seen the child lead.
    ///
    /// # Errors
    /// If either side does not get there in time.
    pub async fn start_pair(&self, scenario: &str, run: usize) -> Result<Pair, BoxError> {
        let duty = format!("bench-{scenario}-{}-{run}", self.tag);
        let leader = ChildLeader::spawn(&self.exe, &self.spec_arg, &duty, "child", self.lease)?;
        let leading = leader.wait_leading(CHILD_START + self.lease).await?;
        let config = setup::config(&duty, "follower", self.lease)?;
        let follower = Follower::spawn(self.store.clone(), config);
        follower.wait_following(self.lease * 3).await?;
        Ok(Pair {
            leader,
            leading,
            follower,
        })
    }
}
