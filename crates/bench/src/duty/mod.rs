//! Single-duty scenarios: the leader in a child OS process (this binary in its hidden
//! `child` mode), the follower in the bench process, on a fresh duty per run.
//!
//! - [`failover`]: SIGKILL the leader, time the follower's take-over past the expiry;
//! - [`lossy`] (`failover-lossy`): kill the *primary* after its replicas
//!   missed the leader's grant, and count new terms that start before the old
//!   leader's local deadline;
//! - [`handover`]: SIGTERM the leader, time the graceful hand-over;
//! - [`soak`]: replicas as processes for a while, nobody killed: spurious failovers;
//! - [`stall`]: in one process, a duty that blocks its runtime.
//!
//! As in the [group scenarios](crate::group): [`child`] is the child process itself,
//! [`event`] its JSON lines, [`process`] the bench's side of it (spawn, follow,
//! signal), and [`harness`] what the scenarios share (the servers and each run's pair:
//! the child leader and the in-process [`follower`]).

pub mod child;
pub mod event;
pub mod failover;
pub mod follower;
pub mod handover;
pub mod harness;
pub mod lossy;
pub mod one_term;
pub mod process;
pub mod soak;
pub mod stall;

pub use self::harness::Harness;
