//! Metric names of the partition coordinator.

use std::sync::Once;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// Gauge: partitions this replica owns. Labels: `group`, `replica`.
pub const OWNED: &str = "leasehold_owned_partitions";
/// Gauge: the weights of the partitions this replica owns, summed (its partition count
/// in an unweighted group). Labels: `group`, `replica`.
pub const LOAD: &str = "leasehold_owned_load";
/// Gauge: this replica's capacity. Labels: `group`, `replica`.
pub const CAPACITY: &str = "leasehold_replica_capacity";
/// Gauge: live replicas in the group's heartbeat set. Labels: `group`.
pub const LIVE_REPLICAS: &str = "leasehold_live_replicas";
/// Counter: partitions acquired. Labels: `group`, `replica`.
pub const ACQUISITIONS: &str = "leasehold_partition_acquisitions_total";
/// Counter: partitions no longer owned. Labels: `group`, `replica`, `reason`
/// (a term-end reason, or `stopped` when this replica let it go).
pub const RELEASES: &str = "leasehold_partition_releases_total";
/// Counter: partitions handed off so an under-loaded replica gets its share.
/// Labels: `group`, `replica`.
pub const HANDOFFS: &str = "leasehold_partition_handoffs_total";
/// Counter: warm moves (`GroupConfigBuilder::prepare_moves`) by how their wait ended,
/// counted by the replica that gave the partition. Labels: `group`, `replica`,
/// `outcome` (`prepared`: the receiver said it was ready; `timed_out`: the wait was
/// over first, and the move went to anyone).
pub const WARM_MOVES: &str = "leasehold_partition_warm_moves_total";
/// Counter: notices of the group on its channel that this version cannot read (a newer
/// version's, or an unknown kind), ignored. Labels: `group`, `replica` (a router's:
/// `group` only).
pub const UNKNOWN_NOTICES: &str = "leasehold_group_unknown_notices_total";
/// Counter: requests a replica's handler found were for a partition it does not own
/// ([`CoordinatorHandle::misrouted`](crate::CoordinatorHandle::misrouted)), and
/// redirected. Labels: `group`, `replica`.
pub const MISROUTED: &str = "leasehold_partition_misrouted_requests_total";
/// Counter: partitions whose owner's session expired while holding them (a crash, a
/// kill, a pause or a partition from Redis longer than the lease), counted once, by the
/// replica whose tick found it. Labels: `group`.
pub const EXPIRED: &str = "leasehold_partitions_expired_total";
/// Gauge: partitions configured in the group (P). Labels: `group`.
pub const GROUP_PARTITIONS: &str = "leasehold_group_partitions";
/// Counter: failed group ticks. Labels: `group`, `replica`.
pub const TICK_ERRORS: &str = "leasehold_group_tick_errors_total";
/// Counter: sessions this replica found ended (not renewed within a lease, or lost with
/// Redis's data): every partition it held was lost at once. Labels: `group`, `replica`.
pub const SESSIONS_LOST: &str = "leasehold_group_sessions_lost_total";
/// Counter: bytes of roster this replica's group ticks received. A tick's reply carries
/// the roster (the live members) only when it changed since the version the replica
/// holds, so this grows while members join, leave, change state or move partitions, and
/// stays flat in a still group. Approximate, counted from the parsed reply: per member,
/// its replica id's and state's lengths plus 8 bytes for each of its four integer
/// fields (time left, partitions held, load, capacity); plus the roster version's
/// length. Labels: `group`, `replica`.
pub const ROSTER_BYTES: &str = "leasehold_group_roster_bytes_total";
/// Histogram (seconds): how long each partition this replica took from the free set
/// had no owner, from the end of its previous term (given back, or its owner's session
/// expired) to this claim, by the server's clock, as its entry in the ledger of moves
/// says. Labels: `group`, `replica`, `cause` (`handoff`, `drain`, `leave`, `removal`,
/// `released`, `expiry`; a first owner, `new`, has no time and is not recorded).
pub const UNOWNED_SECONDS: &str = "leasehold_partition_unowned_seconds";

/// Counter: new terms by what they were offered of the state the previous term handed
/// off (`Ownership::handed_over`). Labels: `group`, `replica`, `outcome`
/// (`delivered`, or why not: `first_owner`, `regranted`, `crashed`, `nothing_left`,
/// `server_changed`, `gone`, `stale`, `unavailable`).
pub const HAND_OFF_STATE: &str = "leasehold_partition_hand_off_state_total";

/// Counter: partition weights this replica wrote from the loads its callbacks report
/// (`GroupConfigBuilder::weights_from_loads`). Labels: `group`, `replica`.
pub const LOAD_WEIGHTS: &str = "leasehold_partition_load_weights_total";

/// Counter: partitions handed to this replica by name (a giver's rule chose it as the
/// receiver) that it did not claim when it saw them, by why; they go to anyone once the
/// giver's hold on them ends. Labels: `group`, `replica`, `reason` (`draining`,
/// `settling`, `full`: by its own view it is at its bound or allowance, or handing
/// over itself).
pub const RECEPTIONS_DECLINED: &str = "leasehold_partition_receptions_declined_total";

pub(crate) fn describe() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        describe_gauge!(OWNED, Unit::Count, "partitions this replica owns");
        describe_gauge!(LIVE_REPLICAS, Unit::Count, "live replicas in the group");
        describe_gauge!(
            LOAD,
            Unit::Count,
            "weights of the partitions this replica owns"
        );
        describe_gauge!(CAPACITY, Unit::Count, "this replica's capacity");
        describe_counter!(ACQUISITIONS, Unit::Count, "partitions acquired");
        describe_counter!(
            RELEASES,
            Unit::Count,
            "partitions no longer owned, by reason"
        );
        describe_counter!(HANDOFFS, Unit::Count, "partitions handed off to rebalance");
        describe_counter!(
            UNKNOWN_NOTICES,
            Unit::Count,
            "group notices of an unknown version or kind, ignored"
        );
        describe_counter!(
            MISROUTED,
            Unit::Count,
            "requests for a partition this replica does not own"
        );
        describe_counter!(
            WARM_MOVES,
            Unit::Count,
            "warm moves by how the wait for the receiver ended"
        );
        describe_counter!(TICK_ERRORS, Unit::Count, "failed group ticks");
        describe_counter!(
            EXPIRED,
            Unit::Count,
            "partitions freed because their owner's session expired"
        );
        describe_counter!(
            SESSIONS_LOST,
            Unit::Count,
            "group sessions found ended, with every partition they held"
        );
        describe_counter!(
            ROSTER_BYTES,
            Unit::Bytes,
            "bytes of roster received in group tick replies (sent only when it changed)"
        );
        describe_histogram!(
            UNOWNED_SECONDS,
            Unit::Seconds,
            "time a partition had no owner before this replica took it, by cause"
        );
        describe_counter!(
            HAND_OFF_STATE,
            Unit::Count,
            "new partition terms by what they were offered of the previous term's state"
        );
        describe_counter!(
            LOAD_WEIGHTS,
            Unit::Count,
            "partition weights written from the loads the callbacks report"
        );
        describe_counter!(
            RECEPTIONS_DECLINED,
            Unit::Count,
            "partitions handed to this replica by name that it did not claim, by reason"
        );
        describe_gauge!(
            GROUP_PARTITIONS,
            Unit::Count,
            "partitions configured in the group"
        );
    });
}
