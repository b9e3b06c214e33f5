//! Spread a set of partitions (tenants, shards) over a fleet: each partition has
//! exactly one owner, each replica its fair share.
//!
//! Every replica runs a [`Coordinator`]. It heartbeats into the group's Redis sorted
//! set, runs one term runner (the election crate's own term code: same lease, fence, deadline and
//! release logic) per partition it claims, inside a `JoinSet`, and renews all its
//! leases in one round trip per renew interval. A replica never claims beyond
//! ceil(P/N); while any replica holds fewer than floor(P/N), the most loaded ones
//! hand partitions over gracefully, so at steady state every replica holds floor(P/N)
//! or ceil(P/N). See `docs/partitions.md` for the rules and the key layout.
//!
//! The set lives in Redis: a replica's configured list creates the group, a newer
//! versioned list ([`GroupConfigBuilder::list_version`]) replaces it in a rolling
//! deploy, and [`GroupAdmin`] adds, removes, lists and drains at runtime. With
//! [`GroupConfigBuilder::rejoin_grace`] a restarted replica takes its own partitions
//! back and nothing moves.
//!
//! ```no_run
//! use std::time::Duration;
//! use leasehold_partitions::{Coordinator, GroupConfig, Ownership, RedisStore};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379/")?;
//! let tenants: Vec<String> = (0..32).map(|i| format!("tenant-{i}")).collect();
//! let config = GroupConfig::builder("tenants", tenants, "replica-a")
//!     .lease(Duration::from_secs(10))
//!     .build()?;
//! let coordinator = Coordinator::new(store, config, |tenant: String, lead: Ownership| async move {
//!     println!("now serving {tenant} (fence {})", lead.fence());
//!     lead.cancelled().await; // ownership ended: stop
//!     Ok(())
//! })
//! .spawn();
//! tokio::signal::ctrl_c().await?;
//! coordinator.shutdown().await; // leave, release every partition, wake the others
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod admin;
mod balance;
mod config;
mod coordinator;
mod error;
mod keys;
pub mod metrics;
mod notice;
mod ownership;
mod replica;
mod router;
mod store;
mod view;

#[cfg(any(test, feature = "testing"))]
pub mod sim;

// What a partitions user touches of the election crate, so that this crate is the one
// dependency they add: the store, a term's lease, the callback's result, fenced writes,
// and the errors this crate's own errors wrap (`GroupConfigError::Invalid` holds a
// `ConfigError`, `PartitionsError::Stopped` a `Stopped`).
pub use leasehold_election::{
    BuildError, ConfigError, DutyError, DutyResult, ErrorChain, Fence, FencedBatch,
    FencedWriteError, FencedWriter, Leadership, RedisStore, RedisStoreBuilder, Stopped, StoreError,
    TermEndReason, TermOver, redis,
};

pub use self::admin::{GroupAdmin, MAX_WEIGHT};
pub use self::balance::whatif::{PlannedChange, PlannedLoad, PlannedMove, PlannedRole, WhatIf};
pub use self::config::{
    AddressError, DEFAULT_HAND_OFF_TTL, GroupConfig, GroupConfigBuilder, GroupConfigError,
    LoadDamping, MAX_ADDRESS_LEN, MAX_CAPACITY, MoveBudget,
};
pub use self::coordinator::{Coordinator, CoordinatorHandle, Prepare};
pub use self::error::{PartitionsError, Result};
pub use self::notice::{GroupNotice, Moved, NOTICE_VERSION, WarmMove};
pub use self::ownership::{HandOffError, LoadError, MAX_HAND_OFF_BYTES, NoHandOff, Ownership};
pub use self::router::{Route, RouteChange, Router, RouterStatus};
pub use self::store::memory::{MemoryGroupStore, MemorySnapshot};
pub use self::store::ops::moves::{LEDGER_LEN, Move, MoveCause, UnknownCause};
#[cfg(feature = "testing")]
pub use self::store::redis::script_hashes;
pub use self::store::{GroupStatus, GroupStore, PartitionOwner, ReplicaState, ReplicaStatus};
pub use self::view::{GroupView, ListDifference, NotReady};
