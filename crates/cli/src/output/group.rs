//! A group's status (`status`, the start of `watch`), one partition's owner (`owner`)
//! and the partition set (`partitions list`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use leasehold_election::Fence;
use leasehold_partitions::{GroupStatus, PartitionOwner, ReplicaState, ReplicaStatus};
use serde::Serialize;

use super::{header, human, millis, plural, since, state_name, table};

/// `leasehold status --json`.
#[derive(Debug, Serialize)]
pub struct StatusJson {
    /// The group name.
    pub group: String,
    /// The key prefix it lives under.
    pub prefix: String,
    /// Every partition, in the order they were added.
    pub partitions: Vec<PartitionJson>,
    /// Live replicas, sorted by id.
    pub replicas: Vec<ReplicaJson>,
    /// How many replicas heartbeat in the group.
    pub live_replicas: usize,
    /// Partitions with no lease right now.
    pub unowned: usize,
    /// Most minus fewest partitions owned by a live replica.
    pub spread: usize,
    /// The version of the last versioned partition list applied (0: none).
    pub list_version: u64,
    /// Whether the group balances by weight (a weight was set, or capacities differ).
    pub weighted: bool,
    /// The partitions' weights, summed (the partition count if none was set).
    pub total_weight: u64,
    /// Every drained replica id, live or not (a drain lasts until undrained).
    pub drained: Vec<String>,
}

/// One partition in [`StatusJson`].
#[derive(Debug, Serialize)]
pub struct PartitionJson {
    /// The partition.
    pub partition: String,
    /// Its owner's replica id; `null` when nobody holds its lease.
    pub owner: Option<String>,
    /// The fence of the current (or last) term; 0 if it was never leased.
    pub fence: u64,
    /// Lease left in milliseconds; `null` when unowned.
    pub lease_left_ms: Option<u64>,
    /// How long its owner has held it, in milliseconds; `null` when unowned.
    pub held_for_ms: Option<u64>,
    /// Its weight (1 unless set).
    pub weight: u64,
    /// The replica id it is preferred on (`leasehold partitions prefer`); absent if none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
}

/// One live replica in [`StatusJson`].
#[derive(Debug, Serialize)]
pub struct ReplicaJson {
    /// The replica id.
    pub replica: String,
    /// Partitions whose lease it holds.
    pub owned: usize,
    /// Whether it has just joined and claims nothing yet.
    pub settling: bool,
    /// `settling`, `active`, `leaving`, `draining` or `away`.
    pub state: &'static str,
    /// Whether an operator drained it.
    pub drained: bool,
    /// Time left on its session in milliseconds (its partitions are held that long
    /// unless it heartbeats again).
    pub session_left_ms: Option<u64>,
    /// The process using it, `host pid`; `null` if it did not say.
    pub instance: Option<String>,
    /// Where it serves requests, as it advertised when it joined; `null` if it
    /// advertises nothing.
    pub address: Option<String>,
    /// The weights of the partitions it holds, summed (`owned` unless weighted).
    pub load: u64,
    /// Its capacity.
    pub capacity: u32,
    /// Its share of the total weight (total × capacity / the capacities of the
    /// replicas taking part, summed); 0 if it does not take part (leaving, drained).
    pub share: f64,
}

/// `leasehold status --summary --json`: [`StatusJson`] without the partitions, with
/// their count and how many are owned.
#[derive(Debug, Serialize)]
pub struct SummaryJson {
    /// The group name.
    pub group: String,
    /// The key prefix it lives under.
    pub prefix: String,
    /// How many partitions the group has.
    pub partition_count: usize,
    /// Partitions a live session holds.
    pub owned: usize,
    /// Partitions with no lease right now.
    pub unowned: usize,
    /// Live replicas, sorted by id, as in [`StatusJson`].
    pub replicas: Vec<ReplicaJson>,
    /// How many replicas heartbeat in the group.
    pub live_replicas: usize,
    /// Most minus fewest partitions owned by a live replica.
    pub spread: usize,
    /// The version of the last versioned partition list applied (0: none).
    pub list_version: u64,
    /// Whether the group balances by weight.
    pub weighted: bool,
    /// The partitions' weights, summed.
    pub total_weight: u64,
    /// Every drained replica id, live or not, sorted.
    pub drained: Vec<String>,
}

/// `leasehold owner --json`.
#[derive(Debug, Serialize)]
pub struct OwnerJson {
    /// The group.
    pub group: String,
    /// The key prefix.
    pub prefix: String,
    /// The partition.
    pub partition: String,
    /// Its owner's replica id; `null` when nobody holds it.
    pub owner: Option<String>,
    /// The fence of the current (or last) term; 0 if it was never leased.
    pub fence: u64,
    /// Time left on the owner's session in milliseconds; `null` when unowned.
    pub lease_left_ms: Option<u64>,
    /// How long the owner has held it, in milliseconds; `null` when unowned.
    pub held_for_ms: Option<u64>,
    /// Since when (RFC 3339 UTC, by this machine's clock); `null` when unowned.
    pub held_since: Option<String>,
    /// The owner's process, `host pid`; `null` when unowned or unknown.
    pub instance: Option<String>,
    /// Where the owner serves requests, as it advertised; `null` when unowned, unknown
    /// or it advertises nothing.
    pub address: Option<String>,
    /// Its weight (1 unless set).
    pub weight: u64,
}

/// `leasehold partitions list --json`.
#[derive(Debug, Serialize)]
pub struct PartitionsJson {
    /// The group.
    pub group: String,
    /// The key prefix.
    pub prefix: String,
    /// Every partition, in the order they were added.
    pub partitions: Vec<String>,
}

/// One live replica, as the tables and the JSON show it.
struct Row {
    replica: String,
    owned: usize,
    state: ReplicaState,
    drained: bool,
    session_left: Option<Duration>,
    instance: Option<String>,
    address: Option<String>,
    load: u64,
    capacity: u32,
    share: f64,
}

/// Whether a member takes a share (settling, active or away, and not drained).
fn takes_part(state: ReplicaState, drained: bool) -> bool {
    !drained
        && matches!(
            state,
            ReplicaState::Settling | ReplicaState::Active | ReplicaState::Away
        )
}

/// Live replicas sorted by id, with the partitions each owns (counted from the
/// partitions) and what the group's members say about them.
fn rows(status: &GroupStatus) -> Vec<Row> {
    let members: HashMap<&str, _> = status
        .members
        .iter()
        .map(|m| (m.replica.as_str(), m))
        .collect();
    let settling: HashMap<&str, bool> = status
        .replicas
        .iter()
        .map(|(r, published)| (r.as_str(), published.is_none()))
        .collect();
    let capacities: u64 = status
        .members
        .iter()
        .filter(|m| takes_part(m.state, m.drained))
        .map(|m| u64::from(m.capacity))
        .sum();
    let shares = status.shares();
    let mut out: Vec<Row> = status
        .owned_counts()
        .into_iter()
        .map(|(replica, owned)| {
            let member = members.get(replica.as_str());
            let state = member.map_or_else(
                || {
                    if settling.get(replica.as_str()).copied().unwrap_or(false) {
                        ReplicaState::Settling
                    } else {
                        ReplicaState::Active
                    }
                },
                |m| m.state,
            );
            let drained = member.is_some_and(|m| m.drained);
            let capacity = member.map_or(1, |m| m.capacity);
            let share = if takes_part(state, drained) && capacities > 0 {
                // The share the replicas balance to (a heavy tenant alone changes it).
                shares.iter().find(|(r, _)| *r == replica).map_or(
                    status.total_weight as f64 * f64::from(capacity) / capacities as f64,
                    |(_, s)| *s,
                )
            } else {
                0.0
            };
            Row {
                owned,
                state,
                drained,
                session_left: member.map(|m| m.session_left),
                instance: member.map(|m| m.instance.clone()).filter(|i| !i.is_empty()),
                address: member.and_then(|m| m.address.clone()),
                load: member.map_or(owned as u64, |m| m.load),
                capacity,
                share,
                replica,
            }
        })
        .collect();
    out.sort_by(|a, b| a.replica.cmp(&b.replica));
    out
}

fn unowned(status: &GroupStatus) -> usize {
    status
        .partitions
        .iter()
        .filter(|p| p.owner.is_none())
        .count()
}

/// Lease left and held for, only while someone owns the partition.
fn owned_times(p: &PartitionOwner) -> (Option<Duration>, Option<Duration>) {
    match p.owner {
        Some(_) => (p.remaining, p.held_for),
        None => (None, None),
    }
}

/// The live replicas of [`StatusJson`].
fn replicas_json(status: &GroupStatus) -> Vec<ReplicaJson> {
    rows(status)
        .into_iter()
        .map(|r| ReplicaJson {
            settling: r.state == ReplicaState::Settling,
            state: state_name(r.state),
            replica: r.replica,
            owned: r.owned,
            drained: r.drained,
            session_left_ms: r.session_left.map(millis),
            instance: r.instance,
            address: r.address,
            load: r.load,
            capacity: r.capacity,
            share: (r.share * 1000.0).round() / 1000.0,
        })
        .collect()
}

/// The JSON form of a group's status.
pub fn status_json(prefix: &str, group: &str, status: &GroupStatus) -> StatusJson {
    StatusJson {
        group: group.to_owned(),
        prefix: prefix.to_owned(),
        partitions: status
            .partitions
            .iter()
            .map(|p| {
                let (left, held) = owned_times(p);
                PartitionJson {
                    partition: p.partition.clone(),
                    owner: p.owner.clone(),
                    fence: p.fence.get(),
                    lease_left_ms: left.map(millis),
                    held_for_ms: held.map(millis),
                    weight: p.weight,
                    preferred: status.preferred(&p.partition).map(str::to_owned),
                }
            })
            .collect(),
        replicas: replicas_json(status),
        live_replicas: status.replicas.len(),
        unowned: unowned(status),
        spread: status.spread(),
        list_version: status.list_version,
        weighted: status.weighted,
        total_weight: status.total_weight,
        drained: sorted(&status.drained),
    }
}

fn sorted(names: &[String]) -> Vec<String> {
    let mut v = names.to_vec();
    v.sort();
    v
}

/// The JSON form of `status --summary`.
pub fn summary_json(prefix: &str, group: &str, status: &GroupStatus) -> SummaryJson {
    let unowned = unowned(status);
    SummaryJson {
        group: group.to_owned(),
        prefix: prefix.to_owned(),
        partition_count: status.partitions.len(),
        owned: status.partitions.len() - unowned,
        unowned,
        replicas: replicas_json(status),
        live_replicas: status.replicas.len(),
        spread: status.spread(),
        list_version: status.list_version,
        weighted: status.weighted,
        total_weight: status.total_weight,
        drained: sorted(&status.drained),
    }
}

/// `status --summary`, for groups too large to list: one line of counts, then one line
/// per live replica (state, drained, partitions owned, load), sorted by id.
pub fn summary_text(prefix: &str, group: &str, status: &GroupStatus) -> String {
    let mut out = String::new();
    let p = status.partitions.len();
    let unowned = unowned(status);
    let _ = writeln!(
        out,
        "group {group} (prefix {prefix}): {}, {} owned, {unowned} unowned; {}",
        plural(p, "partition"),
        p - unowned,
        plural(status.replicas.len(), "live replica")
    );
    let mut rows = vec![header(&["REPLICA", "STATE", "DRAINED", "OWNED", "LOAD"])];
    for r in self::rows(status) {
        rows.push(vec![
            r.replica,
            state_name(r.state).to_owned(),
            if r.drained { "yes" } else { "no" }.to_owned(),
            r.owned.to_string(),
            r.load.to_string(),
        ]);
    }
    if rows.len() > 1 {
        table(&mut out, &rows);
    }
    drained_not_live(&mut out, status);
    out
}

/// The last line of `status` (and of its summary) naming every drained replica that is
/// not live, if any.
fn drained_not_live(out: &mut String, status: &GroupStatus) {
    let live: Vec<&str> = status.replicas.iter().map(|(r, _)| r.as_str()).collect();
    let away: Vec<String> = sorted(&status.drained)
        .into_iter()
        .filter(|r| !live.contains(&r.as_str()))
        .collect();
    if !away.is_empty() {
        let _ = writeln!(
            out,
            "drained, not live (drained again when they return): {}",
            away.join(", ")
        );
    }
}

fn fence_cell(fence: Fence) -> String {
    if fence == Fence(0) {
        "-".to_owned()
    } else {
        fence.to_string()
    }
}

fn cell(d: Option<Duration>, show: fn(Duration) -> String) -> String {
    d.map_or_else(|| "-".to_owned(), show)
}

/// The human form of a group's status: partitions, then live replicas, then a summary.
pub fn status_text(prefix: &str, group: &str, status: &GroupStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "group {group} (prefix {prefix}): {}, {}\n",
        plural(status.partitions.len(), "partition"),
        plural(status.replicas.len(), "live replica")
    );
    let weighted = status.weighted;
    let mut head = vec!["PARTITION", "OWNER", "FENCE", "LEASE LEFT", "HELD FOR"];
    if weighted {
        head.push("WEIGHT");
    }
    // Only for a group with preferences: the others' output stays as it was.
    let preferring = !status.preferences.is_empty();
    if preferring {
        head.push("PREFERRED ON");
    }
    let mut rows = vec![header(&head)];
    for p in &status.partitions {
        let (left, held) = owned_times(p);
        let (owner, left) = match (&p.owner, left) {
            (None, _) => ("-".to_owned(), "-".to_owned()),
            (Some(o), Some(d)) => (o.clone(), human(d)),
            (Some(o), None) => (o.clone(), "no expiry".to_owned()),
        };
        let mut row = vec![
            p.partition.clone(),
            owner,
            fence_cell(p.fence),
            left,
            cell(held, human),
        ];
        if weighted {
            row.push(p.weight.to_string());
        }
        if preferring {
            row.push(status.preferred(&p.partition).unwrap_or("-").to_owned());
        }
        rows.push(row);
    }
    table(&mut out, &rows);
    out.push('\n');
    let mut head = vec!["REPLICA", "STATE", "DRAINED", "OWNED"];
    if weighted {
        head.extend(["LOAD", "CAPACITY", "SHARE"]);
    }
    head.extend(["SESSION LEFT", "INSTANCE", "ADDRESS"]);
    let mut table_rows = vec![header(&head)];
    for r in self::rows(status) {
        let mut row = vec![
            r.replica,
            state_name(r.state).to_owned(),
            if r.drained { "yes" } else { "no" }.to_owned(),
            r.owned.to_string(),
        ];
        if weighted {
            row.extend([
                r.load.to_string(),
                r.capacity.to_string(),
                format!("{:.1}", r.share),
            ]);
        }
        row.extend([
            cell(r.session_left, human),
            r.instance.unwrap_or_else(|| "-".to_owned()),
            r.address.unwrap_or_else(|| "-".to_owned()),
        ]);
        table_rows.push(row);
    }
    table(&mut out, &table_rows);
    let _ = write!(
        out,
        "\nlive replicas: {}, unowned partitions: {}, spread: {}, list version: {}",
        status.replicas.len(),
        unowned(status),
        status.spread(),
        status.list_version
    );
    if weighted {
        let _ = write!(out, ", total weight: {}", status.total_weight);
    }
    out.push('\n');
    drained_not_live(&mut out, status);
    out
}

/// The owner's process (`host pid`) and address, from its member details (`member`:
/// the owner's, if it is a live member), for an owned partition only.
fn owner_process<'a>(
    owner: &PartitionOwner,
    member: Option<&'a ReplicaStatus>,
) -> (Option<&'a str>, Option<&'a str>) {
    match (&owner.owner, member) {
        (Some(_), Some(m)) => (
            Some(m.instance.as_str()).filter(|i| !i.is_empty()),
            m.address.as_deref(),
        ),
        _ => (None, None),
    }
}

/// The JSON form of one partition's owner; `member` is its owner's details (its
/// instance and address), `now` this machine's clock.
pub fn owner_json(
    prefix: &str,
    group: &str,
    owner: &PartitionOwner,
    member: Option<&ReplicaStatus>,
    now: SystemTime,
) -> OwnerJson {
    let (left, held) = owned_times(owner);
    let (instance, address) = owner_process(owner, member);
    OwnerJson {
        group: group.to_owned(),
        prefix: prefix.to_owned(),
        partition: owner.partition.clone(),
        owner: owner.owner.clone(),
        fence: owner.fence.get(),
        lease_left_ms: left.map(millis),
        held_for_ms: held.map(millis),
        held_since: held.map(|d| since(now, d)),
        instance: instance.map(str::to_owned),
        address: address.map(str::to_owned),
        weight: owner.weight,
    }
}

/// The human form of one partition's owner, one line; `member` is its owner's details
/// (its instance and address).
pub fn owner_text(
    owner: &PartitionOwner,
    member: Option<&ReplicaStatus>,
    now: SystemTime,
) -> String {
    let name = &owner.partition;
    let Some(replica) = &owner.owner else {
        return if owner.fence == Fence(0) {
            format!("{name}: nobody owns it now (never leased)\n")
        } else {
            format!("{name}: nobody owns it now (last fence {})\n", owner.fence)
        };
    };
    let (left, held) = owned_times(owner);
    let mut line = format!("{name}: owned by {replica}");
    match owner_process(owner, member) {
        (Some(instance), Some(address)) => {
            let _ = write!(line, " (instance {instance}, address {address})");
        }
        (Some(instance), None) => {
            let _ = write!(line, " (instance {instance})");
        }
        (None, Some(address)) => {
            let _ = write!(line, " (address {address})");
        }
        (None, None) => {}
    }
    let _ = write!(
        line,
        ", fence {}, lease left {}",
        owner.fence,
        left.map_or_else(|| "no expiry".to_owned(), human)
    );
    if let Some(d) = held {
        let _ = write!(line, ", held for {} (since {})", human(d), since(now, d));
    }
    if owner.weight != 1 {
        let _ = write!(line, ", weight {}", owner.weight);
    }
    line.push('\n');
    line
}

/// The JSON form of a group's partition set.
pub fn partitions_json(prefix: &str, group: &str, partitions: Vec<String>) -> PartitionsJson {
    PartitionsJson {
        group: group.to_owned(),
        prefix: prefix.to_owned(),
        partitions,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use leasehold_partitions::ReplicaStatus;

    use super::super::to_json;
    use super::*;

    pub(crate) fn part(
        name: &str,
        owner: Option<&str>,
        fence: u64,
        left_ms: u64,
    ) -> PartitionOwner {
        let mut p = PartitionOwner::default();
        p.partition = name.to_owned();
        p.owner = owner.map(str::to_owned);
        p.fence = Fence(fence);
        p.remaining = owner.map(|_| Duration::from_millis(left_ms));
        p.held_for = owner.map(|_| Duration::from_millis(left_ms * 10));
        p.weight = 1;
        p
    }

    pub(crate) fn member(replica: &str, state: ReplicaState, drained: bool) -> ReplicaStatus {
        let mut m = ReplicaStatus::default();
        m.replica = replica.to_owned();
        m.state = state;
        m.session_left = Duration::from_millis(9_600);
        m.instance = format!("host-{replica} 4{}", replica.len());
        m.drained = drained;
        m.capacity = 1;
        m
    }

    pub(crate) fn group() -> GroupStatus {
        let mut g = GroupStatus::default();
        g.partitions = vec![
            part("p0", Some("b"), 1_764_000_000_000_001, 9_512),
            part("p1", Some("a"), 1_764_000_000_000_002, 840),
            part("p2", None, 7, 0),
            part("p3", None, 0, 0),
            part("p4", Some("a"), 12, 10_000),
        ];
        g.replicas = vec![
            ("b".into(), Some(1)),
            ("a".into(), Some(2)),
            ("c".into(), None),
        ];
        g.members = vec![
            member("b", ReplicaState::Draining, true),
            member("a", ReplicaState::Active, false),
            member("c", ReplicaState::Settling, false),
        ];
        g.members[1].address = Some("10.0.0.7:8080".into());
        g.list_version = 3;
        g.total_weight = 5;
        g.drained = vec!["b".into(), "z".into()];
        g
    }

    #[test]
    fn status_table_lists_partitions_replicas_and_summary() {
        let text = status_text("leasehold", "tenants", &group());
        let expected = "\
group tenants (prefix leasehold): 5 partitions, 3 live replicas

PARTITION  OWNER  FENCE             LEASE LEFT  HELD FOR
p0         b      1764000000000001  9.5s        1m 35s
p1         a      1764000000000002  840ms       8.4s
p2         -      7                 -           -
p3         -      -                 -           -
p4         a      12                10.0s       1m 40s

REPLICA  STATE     DRAINED  OWNED  SESSION LEFT  INSTANCE   ADDRESS
a        active    no       2      9.6s          host-a 41  10.0.0.7:8080
b        draining  yes      1      9.6s          host-b 41  -
c        settling  no       0      9.6s          host-c 41  -

live replicas: 3, unowned partitions: 2, spread: 2, list version: 3
drained, not live (drained again when they return): z
";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_summary_is_one_line_of_counts_and_one_per_replica() {
        let mut status = group();
        status.members[1].load = 2;
        status.drained = vec!["z".into(), "b".into()];
        let expected = "\
group tenants (prefix leasehold): 5 partitions, 3 owned, 2 unowned; 3 live replicas
REPLICA  STATE     DRAINED  OWNED  LOAD
a        active    no       2      2
b        draining  yes      1      0
c        settling  no       0      0
drained, not live (drained again when they return): z
";
        assert_eq!(summary_text("leasehold", "tenants", &status), expected);
        let json = serde_json::to_value(summary_json("leasehold", "tenants", &status)).unwrap();
        assert_eq!(json["partition_count"], 5);
        assert_eq!((&json["owned"], &json["unowned"]), (&3.into(), &2.into()));
        assert_eq!(json["replicas"][0]["replica"], "a");
        assert_eq!(json["replicas"][0]["owned"], 2);
        assert_eq!(json["spread"], 2);
        assert_eq!(json["drained"], serde_json::json!(["b", "z"]));
        assert!(json.get("partitions").is_none(), "{json}");
        let mut empty = GroupStatus::default();
        empty.partitions = vec![part("p0", None, 0, 0)];
        assert_eq!(
            summary_text("lh", "g", &empty),
            "group g (prefix lh): 1 partition, 0 owned, 1 unowned; 0 live replicas\n"
        );
    }

    #[test]
    fn status_json_has_the_documented_shape() {
        let json = serde_json::to_value(status_json("leasehold", "tenants", &group())).unwrap();
        let replica = |r: &str, owned: usize, state: &str, drained: bool, share: f64| {
            serde_json::json!({
                "replica": r, "owned": owned, "settling": state == "settling", "state": state,
                "drained": drained, "session_left_ms": 9600, "instance": format!("host-{r} 41"),
                "address": (r == "a").then_some("10.0.0.7:8080"),
                "load": 0, "capacity": 1, "share": share,
            })
        };
        let expected = serde_json::json!({
            "group": "tenants",
            "prefix": "leasehold",
            "partitions": [
                {"partition": "p0", "owner": "b", "fence": 1_764_000_000_000_001_u64, "lease_left_ms": 9512, "held_for_ms": 95120, "weight": 1},
                {"partition": "p1", "owner": "a", "fence": 1_764_000_000_000_002_u64, "lease_left_ms": 840, "held_for_ms": 8400, "weight": 1},
                {"partition": "p2", "owner": null, "fence": 7, "lease_left_ms": null, "held_for_ms": null, "weight": 1},
                {"partition": "p3", "owner": null, "fence": 0, "lease_left_ms": null, "held_for_ms": null, "weight": 1},
                {"partition": "p4", "owner": "a", "fence": 12, "lease_left_ms": 10000, "held_for_ms": 100000, "weight": 1},
            ],
            "replicas": [
                replica("a", 2, "active", false, 2.5),
                replica("b", 1, "draining", true, 0.0),
                replica("c", 0, "settling", false, 2.5),
            ],
            "live_replicas": 3,
            "unowned": 2,
            "spread": 2,
            "list_version": 3,
            "weighted": false,
            "total_weight": 5,
            "drained": ["b", "z"],
        });
        assert_eq!(json, expected);
        assert!(to_json(&expected).ends_with("}\n"));
    }

    #[test]
    fn replicas_without_member_details_fall_back_to_their_settling_flag() {
        let mut status = group();
        status.members.clear();
        let text = status_text("lh", "g", &status);
        assert!(
            text.contains("\nb        active    no       1      -             -         -\n"),
            "{text}"
        );
        assert!(
            text.contains("\nc        settling  no       0      -             -         -\n"),
            "{text}"
        );
    }

    #[test]
    fn a_weighted_group_shows_weights_loads_capacities_and_shares() {
        let mut status = group();
        status.weighted = true;
        status.total_weight = 12;
        status.partitions[0].weight = 8;
        status.members[1].load = 4;
        status.members[1].capacity = 2;
        status.members[2].capacity = 1;
        let text = status_text("leasehold", "tenants", &status);
        assert!(
            text.contains(
                "HELD FOR  WEIGHT
"
            ),
            "{text}"
        );
        assert!(
            text.contains("REPLICA  STATE     DRAINED  OWNED  LOAD  CAPACITY  SHARE"),
            "{text}"
        );
        // a and c take part (b is drained): shares 12 × 2/3 and 12 × 1/3.
        assert!(
            text.contains("\na        active    no       2      4     2         8.0"),
            "{text}"
        );
        assert!(
            text.contains("\nc        settling  no       0      0     1         4.0"),
            "{text}"
        );
        assert!(text.contains(", total weight: 12\n"), "{text}");
        let json = serde_json::to_value(status_json("leasehold", "tenants", &status)).unwrap();
        assert_eq!(json["weighted"], true);
        assert_eq!(json["total_weight"], 12);
        assert_eq!(json["partitions"][0]["weight"], 8);
        let a = &json["replicas"][0];
        assert_eq!(
            (&a["load"], &a["capacity"], &a["share"]),
            (&4.into(), &2.into(), &8.0.into())
        );
        let mut p = part("p0", Some("b"), 3, 100);
        p.weight = 8;
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert!(owner_text(&p, None, now).ends_with(", weight 8\n"));
    }

    #[test]
    fn empty_group_has_zero_spread() {
        let mut status = GroupStatus::default();
        status.partitions = vec![part("p0", None, 0, 0)];
        status.total_weight = 1;
        let text = status_text("lh", "g", &status);
        assert!(
            text.ends_with("live replicas: 0, unowned partitions: 1, spread: 0, list version: 0\n"),
            "{text}"
        );
        assert!(text.contains("INSTANCE  ADDRESS\n\n"), "{text}");
    }

    #[test]
    fn owner_line_and_json() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let p = part("p1", Some("a"), 42, 1_500);
        let a = member("a", ReplicaState::Active, false);
        assert_eq!(
            owner_text(&p, Some(&a), now),
            "p1: owned by a (instance host-a 41), fence 42, lease left 1.5s, held for 15.0s \
             (since 2027-01-15T07:59:45.000Z)\n"
        );
        let json = serde_json::to_value(owner_json("lh", "g", &p, Some(&a), now)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "group": "g", "prefix": "lh", "partition": "p1", "owner": "a", "fence": 42,
                "lease_left_ms": 1500, "held_for_ms": 15000,
                "held_since": "2027-01-15T07:59:45.000Z", "instance": "host-a 41",
                "address": null, "weight": 1,
            })
        );
        // An owner that advertises an address: beside its instance.
        let mut advertised = a.clone();
        advertised.address = Some("10.0.0.7:8080".into());
        assert_eq!(
            owner_text(&p, Some(&advertised), now),
            "p1: owned by a (instance host-a 41, address 10.0.0.7:8080), fence 42, lease left \
             1.5s, held for 15.0s (since 2027-01-15T07:59:45.000Z)\n"
        );
        let json = serde_json::to_value(owner_json("lh", "g", &p, Some(&advertised), now)).unwrap();
        assert_eq!(json["address"], "10.0.0.7:8080");
        assert_eq!(json["instance"], "host-a 41");
        let free = part("p2", None, 7, 0);
        assert_eq!(
            owner_text(&free, None, now),
            "p2: nobody owns it now (last fence 7)\n"
        );
        assert_eq!(
            owner_text(&part("p3", None, 0, 0), None, now),
            "p3: nobody owns it now (never leased)\n"
        );
        let json =
            serde_json::to_value(owner_json("lh", "g", &free, Some(&advertised), now)).unwrap();
        assert_eq!(json["owner"], serde_json::Value::Null);
        assert_eq!(json["instance"], serde_json::Value::Null);
        assert_eq!(json["address"], serde_json::Value::Null);
        assert_eq!(json["held_since"], serde_json::Value::Null);
    }
}
