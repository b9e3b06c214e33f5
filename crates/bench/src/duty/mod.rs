//! Single-duty scenarios: the leader in a child OS process (this binary in its hidden
//! `child` mode), the follower in the bench process, on a fresh duty per run.
//!
//! - [`failover`]: SIGKILL the leader, time the follower's take-over past the expiry;
//! - [`handover`]: SIGTERM the leader, time the graceful hand-over;
//! - [`stall`]: in one process, a duty that blocks its runtime.
//!
//! [`harness`] starts the servers and each run's pair ([`leader`] is the parent's side
//! of the child, [`follower`] the in-process elector); [`event`] is the child's JSON
//! lines and [`child`] the child itself.

pub mod child;
pub mod event;
pub mod failover;
pub mod follower;
pub mod handover;
pub mod harness;
pub mod leader;
pub mod stall;

pub use self::harness::Harness;
