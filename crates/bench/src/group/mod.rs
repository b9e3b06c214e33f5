//! Partition-group scenarios: every replica is a child OS process (this binary in its
//! hidden `partition-child` mode, [`child`]), followed through its own JSON lines
//! ([`event`], logged by [`process`], the bench's side of each child, gathered by the
//! [`harness`]'s fleet and folded into who owns what by [`ownership`]) and, where
//! asked, through `GroupAdmin::status` reads ([`status`]). The [duty scenarios](crate::duty)
//! are laid out the same way.
//!
//! - [`rebalance`]: cold start, SIGKILL of one replica, a join (weighted too:
//!   [`weights`]);
//! - [`measured`] (`rebalance-load --load shifting|stationary|feedback`): balancing by
//!   measured load against synthetic tenants ([`tenants`]; with `feedback`, queues
//!   whose owners report what they achieve, [`feedback`]), beside static weights and
//!   count only;
//! - [`lossy`] (`rebalance-lossy`): a primary failover that loses a
//!   joiner's grants, checked for partitions owned twice by local deadlines;
//! - [`load`]: cold-start convergence and the steady cost of a balanced group;
//! - [`rolling`]: every replica restarted in turn, default, sticky or growing the list;
//! - [`add`]: partitions added to a running group.
//!
//! [`handoffs`] checks the state handed over across planned moves (`rolling` and
//! `rebalance` with `--hand-off-bytes`), [`warm`] the named receivers and warm moves
//! of `rebalance`'s hand-offs (`--prepare`), [`ledger`] the group's ledger of moves.

pub mod add;
pub mod child;
pub mod event;
pub mod feedback;
pub mod handoffs;
pub mod harness;
pub mod ledger;
pub mod load;
pub mod lossy;
pub mod measured;
pub mod ownership;
pub mod process;
pub mod rebalance;
pub mod rolling;
pub mod status;
pub mod tenants;
pub mod warm;
pub mod weights;

/// A partition group as a scenario starts it: the settings the group scenarios share.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// Partitions.
    pub partitions: usize,
    /// Replicas at the start.
    pub replicas: usize,
    /// The lease of every partition, in milliseconds.
    pub lease_ms: u64,
    /// Settle time of a starting replica, in milliseconds (`None`: one lease).
    pub settle_ms: Option<u64>,
    /// Every replica's niceness (`nice -n`).
    pub replica_nice: u8,
    /// The Redis set-up.
    pub target: crate::store::TargetArgs,
}
