//! Configuration of a partition group member.

use std::collections::HashSet;
use std::time::Duration;

use leasehold_election::DEFAULT_KEY_PREFIX;
use leasehold_election::ext::{TermConfig, validate_lease, validate_name};
use leasehold_election::{ConfigError, ElectorConfig};
use thiserror::Error;

/// A group configuration was rejected by [`GroupConfigBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum GroupConfigError {
    /// The partition list is empty.
    #[error("the partition list is empty")]
    EmptyPartitionList,
    /// A partition appears twice.
    #[error("partition {0:?} appears more than once")]
    DuplicatePartition(String),
    /// A name or duration broke one of the election rules.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// The rejoin grace is zero or longer than a day.
    #[error("rejoin grace must be between 1 ms and 1 day, got {0:?}")]
    RejoinGraceOutOfRange(Duration),
    /// The capacity is 0 or above [`MAX_CAPACITY`].
    #[error("capacity must be between 1 and {MAX_CAPACITY}, got {0}")]
    CapacityOutOfRange(u32),
    /// The move budget is 0 (a group that may never move a partition to even itself
    /// out cannot balance; leave the budget unset for no limit).
    #[error("the move budget must be at least 1 move per interval")]
    ZeroMoveBudget,
    /// The hand-off state's time to live is zero or longer than a day.
    #[error("hand-off time to live must be between 1 ms and 1 day, got {0:?}")]
    HandOffTtlOutOfRange(Duration),
    /// The load damping's half-life is zero or longer than a day.
    #[error("the load damping's half-life must be between 1 ms and 1 day, got {0:?}")]
    HalfLifeOutOfRange(Duration),
    /// The load damping's threshold (or jump) is above 1,000 %.
    #[error("the load damping's thresholds must be between 0 and 1000 %, got {0} %")]
    LoadThresholdOutOfRange(u32),
    /// The load damping's warm-up is longer than a day.
    #[error("the load damping's warm-up must be at most 1 day, got {0:?}")]
    WarmUpOutOfRange(Duration),
    /// The wait for a warm move's receiver is zero or longer than the lease.
    #[error("the wait for a receiver to prepare must be between 1 ms and the lease, got {0:?}")]
    PrepareWaitOutOfRange(Duration),
    /// The advertised address ([`GroupConfigBuilder::advertise`]) is empty, longer than
    /// [`MAX_ADDRESS_LEN`] bytes, or holds a control character.
    #[error("invalid advertised address: {reason}")]
    InvalidAddress {
        /// What is wrong with it.
        reason: AddressError,
    },
}

/// Why an advertised address ([`GroupConfigBuilder::advertise`]) was refused
/// ([`GroupConfigError::InvalidAddress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AddressError {
    /// The address is empty (leave it unset to advertise none).
    #[error("it is empty")]
    Empty,
    /// The address is longer than [`MAX_ADDRESS_LEN`] bytes.
    #[error("it is {len} bytes long, more than {MAX_ADDRESS_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The address holds a control character (tab and newline included: the group
    /// stores it after a tab, and operators read it on one line).
    #[error("it holds a control character at byte {at}")]
    ControlCharacter {
        /// The byte offset of the first one.
        at: usize,
    },
}

/// The longest address a replica may advertise ([`GroupConfigBuilder::advertise`]), in
/// bytes.
pub const MAX_ADDRESS_LEN: usize = 256;

/// Checks an address a replica advertises: not empty, at most [`MAX_ADDRESS_LEN`] bytes,
/// no control character.
fn validate_address(address: &str) -> Result<(), AddressError> {
    if address.is_empty() {
        return Err(AddressError::Empty);
    }
    if address.len() > MAX_ADDRESS_LEN {
        return Err(AddressError::TooLong { len: address.len() });
    }
    if let Some((at, _)) = address.char_indices().find(|(_, c)| c.is_control()) {
        return Err(AddressError::ControlCharacter { at });
    }
    Ok(())
}

/// The largest capacity a replica may have ([`GroupConfigBuilder::capacity`]).
pub const MAX_CAPACITY: u32 = 1_000;

/// Validated settings of one replica's membership in a partition group. Build it with
/// [`GroupConfig::builder`] (every value is checked once, there); read it back with the
/// getters. A built configuration cannot be changed, so it stays valid.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// The group name; all its keys share this Redis Cluster hash tag.
    pub(crate) group: String,
    /// This replica's partition list. The group's set in Redis is authoritative once the
    /// group exists: this list creates the group (if it does not exist, or Redis lost
    /// it), and replaces the group's set only if it is versioned
    /// ([`GroupConfig::list_version`]) and newer than the version the group has. The
    /// set can also change at runtime through [`crate::GroupAdmin`].
    pub(crate) partitions: Vec<String>,
    /// The version of `partitions`. 0 (the default): the list only seeds a new group.
    /// Above 0: a replica whose version is newer than the group's replaces the group's
    /// set with its list (its additions first, then its removals) when it joins, so a
    /// rolling deploy of a changed list just bumps the version. Default: 0.
    pub(crate) list_version: u64,
    /// Keep this replica's session, and every partition it holds, for this long across
    /// a graceful restart (Kafka's static membership): `shutdown()` stops the callbacks
    /// without releasing, and the same replica id started again within the grace takes
    /// its partitions back, each in a new term (a new fence). `None` (the default): a
    /// shutdown hands everything over at once.
    pub(crate) rejoin_grace: Option<Duration>,
    /// This replica's capacity relative to the others' (1 ..= [`MAX_CAPACITY`]): in a
    /// group whose partitions have weights or whose replicas' capacities differ, each
    /// replica's share of the total weight is in proportion to its capacity. Default: 1.
    pub(crate) capacity: u32,
    /// This replica's id.
    pub(crate) replica_id: String,
    /// Lease of each partition, and the heartbeat's time-to-live. Default: 10 s.
    pub(crate) lease: Duration,
    /// Renew and heartbeat interval. Default: lease / 3.
    pub(crate) renew_interval: Duration,
    /// Longest a campaigning elector waits between attempts. Default: lease / 3.
    pub(crate) retry_interval: Duration,
    /// How long a starting replica heartbeats before it claims anything, so replicas
    /// started together see each other first. Default: the lease.
    pub(crate) settle: Duration,
    /// Grace a partition callback gets after its cancellation. Default: 5 s (never past
    /// the lease's validity).
    pub(crate) grace: Duration,
    /// Key prefix. Default: `leasehold`.
    pub(crate) key_prefix: String,
    /// Replicas that must acknowledge a heartbeat or a claim before it counts (`WAIT k
    /// timeout` after it, timeout a quarter of the renew interval at most): a failover
    /// to any of them then loses no session or claim. Default: none (see
    /// docs/topologies.md).
    pub(crate) min_replicas_acked: Option<usize>,
    /// How much the group hands over to even out its load per renew interval (see
    /// [`GroupConfigBuilder::move_budget`]). Default: none (no limit).
    pub(crate) move_budget: Option<MoveBudget>,
    /// How long the state a term hands off (`Ownership::hand_off`) waits in Redis for
    /// the partition's next owner. Default: 60 s.
    pub(crate) hand_off_ttl: Duration,
    /// Whether this replica turns the loads its partitions report into their weights,
    /// and how (see [`GroupConfigBuilder::weights_from_loads`]). Default: none.
    pub(crate) load_damping: Option<LoadDamping>,
    /// Warm moves: how long a replica waits for the receiver of a hand-over to prepare
    /// before it ends its term (see [`GroupConfigBuilder::prepare_moves`]). Default:
    /// none (a hand-over ends the term at once).
    pub(crate) prepare_moves: Option<Duration>,
    /// Where this replica serves requests, as it advertises it to the group (see
    /// [`GroupConfigBuilder::advertise`]). Default: none.
    pub(crate) advertise: Option<String>,
}

/// A group's move budget ([`GroupConfigBuilder::move_budget`]): how much a group hands
/// over to even out its load per renew interval, group-wide. Availability comes first:
/// partitions without an owner are claimed at once, whatever the budget.
///
/// ```
/// use leasehold_partitions::{GroupConfig, MoveBudget};
///
/// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
///     .move_budget(MoveBudget::Moves(100))
///     .build()?;
/// assert_eq!(config.move_budget(), Some(MoveBudget::Moves(100)));
/// # Ok::<(), leasehold_partitions::GroupConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MoveBudget {
    /// At most this many partitions handed over per renew interval (≥ 1).
    Moves(u32),
    /// At most this much partition weight handed over per renew interval (≥ 1), for a
    /// weighted group whose partitions differ in size: a heavy tenant costs its weight,
    /// and a partition heavier than the whole budget moves alone in a window of its
    /// own.
    Weight(u32),
}

impl MoveBudget {
    /// The budget per renew interval, whatever it counts.
    pub(crate) fn per_interval(self) -> u32 {
        match self {
            Self::Moves(n) | Self::Weight(n) => n,
        }
    }
}

/// How a group turns the loads its partitions' owners report
/// ([`Ownership::report_load`](crate::Ownership::report_load)) into
/// their weights ([`GroupConfigBuilder::weights_from_loads`]).
///
/// Once per renew interval, each replica folds the last load reported for each of its
/// partitions into an exponentially weighted average with this half-life, rounds it to
/// a weight (at least 1, at most [`MAX_WEIGHT`](crate::MAX_WEIGHT)), and writes the
/// weights that moved by more than `threshold_percent` of the stored one (and by at
/// least 1), all in one request. A large step goes through at once: beside the average,
/// a fast one (a tenth of the half-life) follows the load, and when it is more than
/// `jump_percent` above the stored weight, or below it by the same ratio (under 1 / 1.5
/// of it for 50 %), both jump to the latest report (noise of ±20 % never does; a tenant
/// whose load doubles or halves is reweighed within a few intervals).
///
/// **Report the load the tenant brings, not what its owner gets through.** A new owner
/// catching up with the backlog its tenant built while it had no owner processes far
/// more than the tenant's load for a while: reported as throughput, that looks like a
/// step, and moves the tenant (or others) for nothing. Report the arrival rate (entries
/// produced per second, requests received), or the size of the work (bytes stored, CPU
/// seconds the tenant's requests cost), not entries processed or lag. And a new term's
/// reports count only after [`warm_up`](Self::warm_up) (default: one lease): a catch-up
/// burst in its first moments is ignored either way.
///
/// ```
/// # use std::time::Duration;
/// # use leasehold_partitions::LoadDamping;
/// let damping = LoadDamping::default()
///     .half_life(Duration::from_secs(20))
///     .threshold_percent(15);
/// # let _ = damping;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadDamping {
    /// How long until a step in a partition's load is half-way into its weight.
    /// Default: 60 s.
    pub(crate) half_life: Duration,
    /// How far (in % of the stored weight) the average must move before it is written.
    /// Default: 10.
    pub(crate) threshold_percent: u32,
    /// How far above the stored weight (in %), or below it by the same ratio, the fast
    /// average must be for the averages to jump to the latest report (0: never).
    /// Default: 50.
    pub(crate) jump_percent: u32,
    /// How long a new term's reports are ignored: its weight stays what the partition
    /// had (its previous owner's measure) meanwhile, then the reports count as usual.
    /// A new owner catching up with a backlog reports a burst that is not the tenant's
    /// load (see above). `None`: one lease of the group. Default: `None`.
    pub(crate) warm_up: Option<Duration>,
}

impl Default for LoadDamping {
    fn default() -> Self {
        Self {
            half_life: Duration::from_secs(60),
            threshold_percent: 10,
            jump_percent: 50,
            warm_up: None,
        }
    }
}

impl LoadDamping {
    /// Sets [`half_life`](Self::half_life) (1 ms ..= 1 day).
    #[must_use]
    pub fn half_life(mut self, half_life: Duration) -> Self {
        self.half_life = half_life;
        self
    }

    /// Sets [`threshold_percent`](Self::threshold_percent) (0 ..= 1,000).
    #[must_use]
    pub fn threshold_percent(mut self, percent: u32) -> Self {
        self.threshold_percent = percent;
        self
    }

    /// Sets [`jump_percent`](Self::jump_percent) (0 ..= 1,000; 0: never jump).
    #[must_use]
    pub fn jump_percent(mut self, percent: u32) -> Self {
        self.jump_percent = percent;
        self
    }

    /// Sets [`warm_up`](Self::warm_up) (0 ..= 1 day; zero: a new term's first report
    /// counts).
    #[must_use]
    pub fn warm_up(mut self, warm_up: Duration) -> Self {
        self.warm_up = Some(warm_up);
        self
    }
}

/// The default of [`GroupConfig::hand_off_ttl`].
pub const DEFAULT_HAND_OFF_TTL: Duration = Duration::from_secs(60);

impl GroupConfig {
    /// The group's name; all its keys share this Redis Cluster hash tag.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// This replica's partition list: it seeds a group that does not exist yet, and
    /// replaces the group's set only if it is versioned
    /// ([`list_version`](Self::list_version)) and newer than the group's.
    pub fn partitions(&self) -> &[String] {
        &self.partitions
    }

    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    /// Prefix of every Redis key and channel.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// Lease of each partition, and the heartbeat's time-to-live.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Renew and heartbeat interval.
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval
    }

    /// Longest a campaigning elector waits between attempts.
    pub fn retry_interval(&self) -> Duration {
        self.retry_interval
    }

    /// How long a starting replica heartbeats before it claims anything.
    pub fn settle(&self) -> Duration {
        self.settle
    }

    /// Grace a partition callback gets after its cancellation.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// The version of [`partitions`](Self::partitions) (0: the list only seeds).
    pub fn list_version(&self) -> u64 {
        self.list_version
    }

    /// How long this replica's session outlives a graceful restart, if it is sticky.
    pub fn rejoin_grace(&self) -> Option<Duration> {
        self.rejoin_grace
    }

    /// This replica's capacity relative to the others'.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Replicas that must acknowledge a heartbeat or a claim before it counts.
    pub fn min_replicas_acked(&self) -> Option<usize> {
        self.min_replicas_acked
    }

    /// The group's move budget, if any.
    pub fn move_budget(&self) -> Option<MoveBudget> {
        self.move_budget
    }

    /// How long hand-off state waits in Redis for the partition's next owner.
    pub fn hand_off_ttl(&self) -> Duration {
        self.hand_off_ttl
    }

    /// How reported loads become weights, if they do.
    pub fn load_damping(&self) -> Option<LoadDamping> {
        self.load_damping
    }

    /// How long a giver waits for a warm move's receiver to prepare, if moves are warm.
    pub fn prepare_moves(&self) -> Option<Duration> {
        self.prepare_moves
    }

    /// Where this replica serves requests, if it advertises it.
    pub fn advertise(&self) -> Option<&str> {
        self.advertise.as_deref()
    }

    /// Starts a builder: every setting but the group, the list and the replica id has a
    /// default. The builder's methods come in groups, most-set first: the lease and key
    /// prefix; timing; deploys; balance; moves; replication; the advertised address.
    pub fn builder(
        group: impl Into<String>,
        partitions: impl IntoIterator<Item = impl Into<String>>,
        replica_id: impl Into<String>,
    ) -> GroupConfigBuilder {
        GroupConfigBuilder {
            group: group.into(),
            partitions: partitions.into_iter().map(Into::into).collect(),
            replica_id: replica_id.into(),
            lease: Duration::from_secs(10),
            renew_interval: None,
            retry_interval: None,
            settle: None,
            grace: Duration::from_secs(5),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            list_version: 0,
            rejoin_grace: None,
            capacity: 1,
            min_replicas_acked: None,
            move_budget: None,
            hand_off_ttl: DEFAULT_HAND_OFF_TTL,
            load_damping: None,
            prepare_moves: None,
            advertise: None,
        }
    }

    /// The settings of this replica's partition terms (`partition`: any partition's
    /// name, to check it), renewing on the grid that starts at `epoch`.
    pub(crate) fn terms(
        &self,
        partition: &str,
        epoch: tokio::time::Instant,
    ) -> Result<TermConfig, ConfigError> {
        let elector = ElectorConfig::builder(partition, self.replica_id.as_str())
            .lease(self.lease)
            .renew_interval(self.renew_interval)
            .retry_interval(self.retry_interval)
            .grace(self.grace)
            .key_prefix(self.key_prefix.as_str())
            .build()?;
        TermConfig::new(elector, self.group.as_str(), epoch)
    }

    /// A digest of the partition list, to detect replicas configured differently.
    pub(crate) fn digest(&self) -> String {
        // FNV-1a over the newline-joined list: stable across processes and releases.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.partitions.join("\n").bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        format!("{}:{h:016x}", self.partitions.len())
    }
}

/// Builder of [`GroupConfig`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing by itself; call .build()"]
pub struct GroupConfigBuilder {
    group: String,
    partitions: Vec<String>,
    replica_id: String,
    lease: Duration,
    renew_interval: Option<Duration>,
    retry_interval: Option<Duration>,
    settle: Option<Duration>,
    grace: Duration,
    key_prefix: String,
    list_version: u64,
    rejoin_grace: Option<Duration>,
    capacity: u32,
    min_replicas_acked: Option<usize>,
    move_budget: Option<MoveBudget>,
    hand_off_ttl: Duration,
    load_damping: Option<LoadDamping>,
    prepare_moves: Option<Duration>,
    advertise: Option<String>,
}

/// The essentials: the lease and where the keys live.
impl GroupConfigBuilder {
    /// Lease (10 ms ..= 1 day).
    ///
    /// **Most groups set this.** Longer leases survive longer pauses; a dead replica's
    /// partitions move a lease after it stopped. Default: 10 s.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Key prefix.
    ///
    /// *Set it when you need it.* Default: `leasehold`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }
}

/// Timing: derived from the lease unless set.
impl GroupConfigBuilder {
    /// Renew and heartbeat interval.
    ///
    /// *Rarely needed: the default follows from the lease.* Default: lease / 3.
    pub fn renew_interval(mut self, d: Duration) -> Self {
        self.renew_interval = Some(d);
        self
    }

    /// Retry interval of campaigning electors.
    ///
    /// *Rarely needed: the default follows from the lease.* Default: lease / 3.
    pub fn retry_interval(mut self, d: Duration) -> Self {
        self.retry_interval = Some(d);
        self
    }

    /// Settle time before the first claim, when nobody serves the group yet: the
    /// replicas started together see each other before anyone claims, and take equal
    /// shares without hand-offs. A replica joining a group that is already served does
    /// not settle; in a new group it settles at most until the group grants (one renew
    /// interval after the group was created on a server that has run for more than a
    /// lease; a lease on one that started more recently).
    ///
    /// *Rarely needed: the default follows from the lease.* Default: the lease.
    pub fn settle(mut self, d: Duration) -> Self {
        self.settle = Some(d);
        self
    }

    /// Grace of a cancelled partition callback.
    ///
    /// *Set it when you need it.* Default: 5 s (never past the lease's validity).
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }
}

/// Deploys: versioned lists and sticky restarts.
impl GroupConfigBuilder {
    /// The version of the partition list (see [`GroupConfig::list_version`]).
    ///
    /// *Set it when you need it.*
    pub fn list_version(mut self, version: u64) -> Self {
        self.list_version = version;
        self
    }

    /// Keeps this replica's partitions across a graceful restart for `grace` (see
    /// [`GroupConfig::rejoin_grace`]); 1 ms ..= 1 day.
    ///
    /// *Set it when you need it.*
    pub fn rejoin_grace(mut self, grace: Duration) -> Self {
        self.rejoin_grace = Some(grace);
        self
    }
}

/// Balance: capacities, weights from loads, a move budget.
impl GroupConfigBuilder {
    /// This replica's capacity (see [`GroupConfig::capacity`]); 1 ..= [`MAX_CAPACITY`].
    ///
    /// *Set it when you need it.*
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = capacity;
        self
    }

    /// Balances by measured load: the loads the callbacks report
    /// ([`Ownership::report_load`](crate::Ownership::report_load)),
    /// damped by `damping`, become their partitions' weights, so the group spreads its
    /// partitions by what they cost, as it does by hand-set weights
    /// ([`GroupAdmin::set_weight`](crate::GroupAdmin::set_weight)) and with the same
    /// hysteresis and move budget. The first weight written makes the group weighted.
    ///
    /// *Set it when you need it.*
    ///
    /// Reports win over hand-set weights: a hand-set weight restarts the partition's
    /// average from that value, and its owner's reports then move it at the half-life.
    /// A partition whose owner reports nothing keeps the weight it has. Writing costs at
    /// most one request per replica per renew interval, whatever the number of
    /// partitions, and none while no weight moved past the threshold. Give every replica
    /// of a group the same setting.
    ///
    /// ```
    /// # use leasehold_partitions::{GroupConfig, LoadDamping};
    /// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
    ///     .weights_from_loads(LoadDamping::default())
    ///     .build()
    ///     .unwrap();
    /// assert!(config.load_damping().is_some());
    /// ```
    pub fn weights_from_loads(mut self, damping: LoadDamping) -> Self {
        self.load_damping = Some(damping);
        self
    }

    /// Spreads a large rebalance over time (a join at P = 10,000, a replica back after
    /// maintenance): at most the budget handed over to even out the group per renew
    /// interval, counted for the whole group in Redis (each replica takes its hand-offs
    /// out of the window's budget before it makes them: one more script per hand-over,
    /// none in a steady group). [`MoveBudget::Moves`] counts partitions,
    /// [`MoveBudget::Weight`] their weights (for a weighted group whose partitions
    /// differ in size). Availability comes first: partitions without an owner (a crash,
    /// a leave, a drain) are claimed as soon as ever, whatever the budget; it limits
    /// only the moves a replica makes to even out the load. Give every replica of a
    /// group the same budget (each counts against the one it was given). Default: no
    /// limit.
    ///
    /// *Set it when you need it* (large groups, expensive moves).
    ///
    /// ```
    /// # use leasehold_partitions::{GroupConfig, MoveBudget};
    /// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
    ///     .move_budget(MoveBudget::Weight(500))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.move_budget(), Some(MoveBudget::Weight(500)));
    /// ```
    pub fn move_budget(mut self, budget: MoveBudget) -> Self {
        self.move_budget = Some(budget);
        self
    }
}

/// Moves: hand-off state and warm moves.
impl GroupConfigBuilder {
    /// How long the state a term hands off
    /// ([`Ownership::hand_off`](crate::Ownership::hand_off)) waits in
    /// Redis for the partition's next owner (1 ms ..= 1 day): the next owner takes it
    /// when its term starts, and state nobody took is gone after this. Default: 60 s.
    ///
    /// *Rarely needed: 60 s suits most.*
    pub fn hand_off_ttl(mut self, ttl: Duration) -> Self {
        self.hand_off_ttl = ttl;
        self
    }

    /// Warm moves (make before break): before this replica ends a term it hands over to
    /// even out the group, and the hand-over names its receiver (the member with room
    /// that is to take it: [`Ownership::successor`](crate::Ownership::successor)),
    /// it asks that receiver to prepare (its
    /// [`Coordinator::on_prepare`](crate::Coordinator::on_prepare) callback: warm a
    /// cache, open a connection) and keeps serving the partition until the receiver
    /// says it is ready, for at most `within` (1 ms ..= the lease). Then the move is
    /// the plain one: the term ends (its callback's grace, its
    /// [`hand_off`](crate::Ownership::hand_off) state), the lease is
    /// released, and the receiver claims it. There are never two owners: preparing
    /// gives the receiver no ownership. A receiver that does not answer within the wait
    /// (slow, dead, a lost message) costs the move that wait, and the move goes on
    /// unnamed, to whoever claims first. Drains, leaves and removals are not delayed.
    ///
    /// *Set it when you need it.*
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use leasehold_partitions::GroupConfig;
    /// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
    ///     .prepare_moves(Duration::from_secs(2))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.prepare_moves(), Some(Duration::from_secs(2)));
    /// ```
    pub fn prepare_moves(mut self, within: Duration) -> Self {
        self.prepare_moves = Some(within);
        self
    }
}

/// Replication: how many Redis replicas a heartbeat or claim waits for.
impl GroupConfigBuilder {
    /// Counts a heartbeat or claim only once `replicas` replicas acknowledge it (see
    /// [`GroupConfig::min_replicas_acked`]); 0 turns it off.
    ///
    /// *Set it when you need it.* See docs/topologies.md.
    ///
    /// ```
    /// # use leasehold_partitions::GroupConfig;
    /// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
    ///     .min_replicas_acked(1)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.min_replicas_acked(), Some(1));
    /// ```
    pub fn min_replicas_acked(mut self, replicas: usize) -> Self {
        self.min_replicas_acked = (replicas > 0).then_some(replicas);
        self
    }
}

/// Discovery: where this replica serves.
impl GroupConfigBuilder {
    /// Advertises where this replica serves requests: a free-form string (`host:port`,
    /// a URL), not empty, at most [`MAX_ADDRESS_LEN`] bytes, without control characters
    /// (tab and newline included). The replica stores it with its membership when it
    /// joins (its steady heartbeats cost nothing more), and operators see it beside the
    /// replica in [`GroupAdmin::status`](crate::GroupAdmin::status)
    /// ([`ReplicaStatus::address`](crate::ReplicaStatus::address)), `leasehold status`
    /// and `leasehold owner`. Leasehold only stores and shows it: it never connects to
    /// it. Default: none.
    ///
    /// *Set it when you need it* (to find a partition's owner from another process).
    ///
    /// ```
    /// # use leasehold_partitions::{AddressError, GroupConfig, GroupConfigError};
    /// let config = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
    ///     .advertise("10.0.0.7:8080")
    ///     .build()?;
    /// assert_eq!(config.advertise(), Some("10.0.0.7:8080"));
    ///
    /// let refused = GroupConfig::builder("tenants", ["t1", "t2"], "replica-1")
    ///     .advertise("10.0.0.7:8080\n")
    ///     .build();
    /// assert_eq!(
    ///     refused.unwrap_err(),
    ///     GroupConfigError::InvalidAddress { reason: AddressError::ControlCharacter { at: 13 } }
    /// );
    /// # Ok::<(), GroupConfigError>(())
    /// ```
    pub fn advertise(mut self, address: impl Into<String>) -> Self {
        self.advertise = Some(address.into());
        self
    }
}

impl GroupConfigBuilder {
    /// Validates and fills in defaults.
    ///
    /// # Errors
    /// The first [`GroupConfigError`] found.
    pub fn build(self) -> Result<GroupConfig, GroupConfigError> {
        validate_name("group name", &self.group)?;
        validate_name("replica id", &self.replica_id)?;
        validate_lease(self.lease)?;
        if self.partitions.is_empty() {
            return Err(GroupConfigError::EmptyPartitionList);
        }
        let mut seen = HashSet::new();
        for p in &self.partitions {
            validate_name("partition name", p)?;
            if !seen.insert(p.as_str()) {
                return Err(GroupConfigError::DuplicatePartition(p.clone()));
            }
        }
        if let Some(g) = self.rejoin_grace
            && (g.is_zero() || g > leasehold_election::MAX_LEASE)
        {
            return Err(GroupConfigError::RejoinGraceOutOfRange(g));
        }
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            return Err(GroupConfigError::CapacityOutOfRange(self.capacity));
        }
        if self.move_budget.is_some_and(|b| b.per_interval() == 0) {
            return Err(GroupConfigError::ZeroMoveBudget);
        }
        if let Some(settle) = self.settle
            && settle > leasehold_election::MAX_LEASE
        {
            return Err(GroupConfigError::Invalid(ConfigError::TooLong {
                what: "settle",
                got: settle,
                max: leasehold_election::MAX_LEASE,
            }));
        }
        if self.hand_off_ttl.is_zero() || self.hand_off_ttl > leasehold_election::MAX_LEASE {
            return Err(GroupConfigError::HandOffTtlOutOfRange(self.hand_off_ttl));
        }
        if let Some(d) = self.load_damping {
            if d.half_life.is_zero() || d.half_life > leasehold_election::MAX_LEASE {
                return Err(GroupConfigError::HalfLifeOutOfRange(d.half_life));
            }
            if d.threshold_percent > 1_000 {
                return Err(GroupConfigError::LoadThresholdOutOfRange(
                    d.threshold_percent,
                ));
            }
            if let Some(w) = d.warm_up
                && w > leasehold_election::MAX_LEASE
            {
                return Err(GroupConfigError::WarmUpOutOfRange(w));
            }
            if d.jump_percent > 1_000 {
                return Err(GroupConfigError::LoadThresholdOutOfRange(d.jump_percent));
            }
        }
        if let Some(w) = self.prepare_moves
            && (w.is_zero() || w > self.lease)
        {
            return Err(GroupConfigError::PrepareWaitOutOfRange(w));
        }
        if let Some(address) = &self.advertise {
            validate_address(address)
                .map_err(|reason| GroupConfigError::InvalidAddress { reason })?;
        }
        let config = GroupConfig {
            prepare_moves: self.prepare_moves,
            capacity: self.capacity,
            list_version: self.list_version,
            rejoin_grace: self.rejoin_grace,
            renew_interval: self.renew_interval.unwrap_or(self.lease / 3),
            retry_interval: self.retry_interval.unwrap_or(self.lease / 3),
            settle: self.settle.unwrap_or(self.lease),
            group: self.group,
            partitions: self.partitions,
            replica_id: self.replica_id,
            lease: self.lease,
            grace: self.grace,
            key_prefix: self.key_prefix,
            min_replicas_acked: self.min_replicas_acked,
            move_budget: self.move_budget,
            hand_off_ttl: self.hand_off_ttl,
            load_damping: self.load_damping,
            advertise: self.advertise,
        };
        // Every election rule (intervals, margin, prefix) is checked once here.
        config.terms(&config.partitions[0], tokio::time::Instant::now())?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests;
