//! What the commands print: the status table, the leader line, the JSON shapes and the
//! lines of `watch`. Pure functions of what was read, tested without a server.
//!
//! The JSON shapes are a stable interface for scripts (documented in
//! `docs/operations.md`): fields may be added, never renamed or removed.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use leasehold_election::{Fence, LeaderInfo};
use leasehold_partitions::GroupStatus;
use serde::Serialize;

/// `leasehold status --json`.
#[derive(Debug, Serialize)]
pub struct StatusJson {
    /// The group name.
    pub group: String,
    /// The key prefix it lives under.
    pub prefix: String,
    /// Every partition, in the configured order.
    pub partitions: Vec<PartitionJson>,
    /// Live replicas, sorted by id.
    pub replicas: Vec<ReplicaJson>,
    /// How many replicas heartbeat in the group.
    pub live_replicas: usize,
    /// Partitions with no lease right now.
    pub unowned: usize,
    /// Most minus fewest partitions owned by a live replica.
    pub spread: usize,
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
}

/// `leasehold leader --json`.
#[derive(Debug, Serialize)]
pub struct LeaderJson {
    /// The duty.
    pub duty: String,
    /// The key prefix.
    pub prefix: String,
    /// The current leader; `null` when nobody leads.
    pub leader: Option<LeaderEntry>,
}

/// The leader in [`LeaderJson`].
#[derive(Debug, Serialize)]
pub struct LeaderEntry {
    /// Its replica id.
    pub replica: String,
    /// The fence of its term.
    pub fence: u64,
    /// Lease left in milliseconds (`null`: the key has no expiry, which Leasehold never
    /// writes).
    pub lease_left_ms: Option<u64>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Live replicas as (id, owned, settling), sorted by id.
fn replicas(status: &GroupStatus) -> Vec<(String, usize, bool)> {
    let settling: HashMap<&str, bool> = status
        .replicas
        .iter()
        .map(|(r, published)| (r.as_str(), published.is_none()))
        .collect();
    let mut out: Vec<_> = status
        .owned_counts()
        .into_iter()
        .map(|(r, n)| {
            let s = settling.get(r.as_str()).copied().unwrap_or(false);
            (r, n, s)
        })
        .collect();
    out.sort();
    out
}

fn unowned(status: &GroupStatus) -> usize {
    status
        .partitions
        .iter()
        .filter(|p| p.owner.is_none())
        .count()
}

/// The JSON form of a group's status.
pub fn status_json(prefix: &str, group: &str, status: &GroupStatus) -> StatusJson {
    StatusJson {
        group: group.to_owned(),
        prefix: prefix.to_owned(),
        partitions: status
            .partitions
            .iter()
            .map(|p| PartitionJson {
                partition: p.partition.clone(),
                owner: p.owner.clone(),
                fence: p.fence.get(),
                lease_left_ms: p.owner.as_ref().and(p.remaining).map(millis),
            })
            .collect(),
        replicas: replicas(status)
            .into_iter()
            .map(|(replica, owned, settling)| ReplicaJson {
                replica,
                owned,
                settling,
            })
            .collect(),
        live_replicas: status.replicas.len(),
        unowned: unowned(status),
        spread: status.spread(),
    }
}

/// The JSON form of a duty's leader.
pub fn leader_json(prefix: &str, duty: &str, leader: Option<&LeaderInfo>) -> LeaderJson {
    LeaderJson {
        duty: duty.to_owned(),
        prefix: prefix.to_owned(),
        leader: leader.map(|l| LeaderEntry {
            replica: l.replica_id.clone(),
            fence: l.fence.get(),
            lease_left_ms: l.remaining.map(millis),
        }),
    }
}

/// Pretty-printed JSON plus a newline.
pub fn to_json<T: Serialize>(value: &T) -> String {
    // Serialising these plain structs cannot fail.
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

/// A lease left, for people: `840ms`, `9.5s`.
pub fn lease_left(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Left-aligned columns separated by two spaces; no trailing spaces.
fn table(out: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The human form of a group's status: partitions, then owned counts, then a summary.
pub fn status_text(prefix: &str, group: &str, status: &GroupStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "group {group} (prefix {prefix}): {}, {}\n",
        plural(status.partitions.len(), "partition"),
        plural(status.replicas.len(), "live replica")
    );
    let mut rows = vec![vec![
        "PARTITION".to_owned(),
        "OWNER".to_owned(),
        "FENCE".to_owned(),
        "LEASE LEFT".to_owned(),
    ]];
    for p in &status.partitions {
        let fence = if p.fence == Fence(0) {
            "-".to_owned()
        } else {
            p.fence.to_string()
        };
        let (owner, left) = match (&p.owner, p.remaining) {
            (None, _) => ("-".to_owned(), "-".to_owned()),
            (Some(o), Some(d)) => (o.clone(), lease_left(d)),
            (Some(o), None) => (o.clone(), "no expiry".to_owned()),
        };
        rows.push(vec![p.partition.clone(), owner, fence, left]);
    }
    table(&mut out, &rows);
    out.push('\n');
    let mut rows = vec![vec!["REPLICA".to_owned(), "OWNED".to_owned()]];
    for (r, n, settling) in replicas(status) {
        let owned = if settling {
            format!("{n} (settling)")
        } else {
            n.to_string()
        };
        rows.push(vec![r, owned]);
    }
    table(&mut out, &rows);
    let _ = writeln!(
        out,
        "\nlive replicas: {}, unowned partitions: {}, spread: {}",
        status.replicas.len(),
        unowned(status),
        status.spread()
    );
    out
}

/// The human form of a duty's leader, one line.
pub fn leader_text(duty: &str, leader: Option<&LeaderInfo>) -> String {
    match leader {
        None => format!("{duty}: nobody leads\n"),
        Some(l) => format!(
            "{duty}: led by {} (fence {}, lease left {})\n",
            l.replica_id,
            l.fence,
            l.remaining
                .map_or_else(|| "no expiry".to_owned(), lease_left)
        ),
    }
}

/// A change between two reads of a group, as `watch` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A partition's lease changed hands, or its owner started a new term.
    Owner {
        /// The partition.
        partition: String,
        /// The owner before (`None`: unowned).
        from: Option<String>,
        /// The owner now (`None`: unowned).
        to: Option<String>,
        /// The fence now: the new term's, or the ended term's when `to` is `None`.
        fence: Fence,
    },
    /// A replica started heartbeating.
    Joined(String),
    /// A replica stopped heartbeating (left, or its heartbeat expired).
    Left(String),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |o: &Option<String>| o.clone().unwrap_or_else(|| "(none)".to_owned());
        match self {
            Self::Owner {
                partition,
                from,
                to,
                fence,
            } => write!(
                f,
                "{partition}  {} → {}  fence {fence}",
                name(from),
                name(to)
            ),
            Self::Joined(r) => write!(f, "replica {r} joined"),
            Self::Left(r) => write!(f, "replica {r} left"),
        }
    }
}

/// What changed from `old` to `new`: replicas that left, then partitions (in order),
/// then replicas that joined. A renewal changes nothing; a new term does, even for the
/// same owner.
pub fn changes(old: &GroupStatus, new: &GroupStatus) -> Vec<Change> {
    let live = |s: &GroupStatus| {
        let mut v: Vec<String> = s.replicas.iter().map(|(r, _)| r.clone()).collect();
        v.sort();
        v
    };
    let (before, after) = (live(old), live(new));
    let mut out: Vec<Change> = before
        .iter()
        .filter(|r| !after.contains(r))
        .map(|r| Change::Left(r.clone()))
        .collect();
    let previous: HashMap<&str, (&Option<String>, Fence)> = old
        .partitions
        .iter()
        .map(|p| (p.partition.as_str(), (&p.owner, p.fence)))
        .collect();
    for p in &new.partitions {
        let (from, fence) = previous
            .get(p.partition.as_str())
            .map_or((None, Fence(0)), |(o, f)| ((*o).clone(), *f));
        if from != p.owner || (p.owner.is_some() && fence != p.fence) {
            out.push(Change::Owner {
                partition: p.partition.clone(),
                from,
                to: p.owner.clone(),
                fence: p.fence,
            });
        }
    }
    out.extend(
        after
            .iter()
            .filter(|r| !before.contains(r))
            .map(|r| Change::Joined(r.clone())),
    );
    out
}

#[cfg(test)]
mod tests {
    use leasehold_partitions::PartitionOwner;

    use super::*;

    fn part(name: &str, owner: Option<&str>, fence: u64, left_ms: u64) -> PartitionOwner {
        PartitionOwner {
            partition: name.to_owned(),
            owner: owner.map(str::to_owned),
            fence: Fence(fence),
            remaining: owner.map(|_| Duration::from_millis(left_ms)),
            held_for: None,
            weight: 1,
        }
    }

    fn group() -> GroupStatus {
        GroupStatus {
            partitions: vec![
                part("p0", Some("b"), 1_764_000_000_000_001, 9_512),
                part("p1", Some("a"), 1_764_000_000_000_002, 840),
                part("p2", None, 7, 0),
                part("p3", None, 0, 0),
                part("p4", Some("a"), 12, 10_000),
            ],
            replicas: vec![
                ("b".into(), Some(1)),
                ("a".into(), Some(2)),
                ("c".into(), None),
            ],
            members: vec![],
            list_version: 0,
            weighted: false,
            total_weight: 6,
        }
    }

    #[test]
    fn status_table_lists_partitions_counts_and_summary() {
        let text = status_text("leasehold", "tenants", &group());
        let expected = "\
group tenants (prefix leasehold): 5 partitions, 3 live replicas

PARTITION  OWNER  FENCE             LEASE LEFT
p0         b      1764000000000001  9.5s
p1         a      1764000000000002  840ms
p2         -      7                 -
p3         -      -                 -
p4         a      12                10.0s

REPLICA  OWNED
a        2
b        1
c        0 (settling)

live replicas: 3, unowned partitions: 2, spread: 2
";
        assert_eq!(text, expected);
    }

    #[test]
    fn status_json_has_the_documented_shape() {
        let json = serde_json::to_value(status_json("leasehold", "tenants", &group())).unwrap();
        let expected = serde_json::json!({
            "group": "tenants",
            "prefix": "leasehold",
            "partitions": [
                {"partition": "p0", "owner": "b", "fence": 1_764_000_000_000_001_u64, "lease_left_ms": 9512},
                {"partition": "p1", "owner": "a", "fence": 1_764_000_000_000_002_u64, "lease_left_ms": 840},
                {"partition": "p2", "owner": null, "fence": 7, "lease_left_ms": null},
                {"partition": "p3", "owner": null, "fence": 0, "lease_left_ms": null},
                {"partition": "p4", "owner": "a", "fence": 12, "lease_left_ms": 10000},
            ],
            "replicas": [
                {"replica": "a", "owned": 2, "settling": false},
                {"replica": "b", "owned": 1, "settling": false},
                {"replica": "c", "owned": 0, "settling": true},
            ],
            "live_replicas": 3,
            "unowned": 2,
            "spread": 2,
        });
        assert_eq!(json, expected);
        assert!(to_json(&expected).ends_with("}\n"));
    }

    #[test]
    fn empty_group_has_zero_spread() {
        let status = GroupStatus {
            partitions: vec![part("p0", None, 0, 0)],
            replicas: vec![],
            members: vec![],
            list_version: 0,
            weighted: false,
            total_weight: 1,
        };
        let text = status_text("lh", "g", &status);
        assert!(
            text.ends_with("live replicas: 0, unowned partitions: 1, spread: 0\n"),
            "{text}"
        );
        assert!(text.contains("REPLICA  OWNED\n\n"), "{text}");
    }

    #[test]
    fn leader_line_and_json() {
        let info = LeaderInfo::new("replica-a", Fence(42), Some(Duration::from_millis(2_930)));
        assert_eq!(
            leader_text("scheduler", Some(&info)),
            "scheduler: led by replica-a (fence 42, lease left 2.9s)\n"
        );
        assert_eq!(leader_text("scheduler", None), "scheduler: nobody leads\n");
        let json = serde_json::to_value(leader_json("lh", "scheduler", Some(&info))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "duty": "scheduler", "prefix": "lh",
                "leader": {"replica": "replica-a", "fence": 42, "lease_left_ms": 2930},
            })
        );
        let json = serde_json::to_value(leader_json("lh", "scheduler", None)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"duty": "scheduler", "prefix": "lh", "leader": null})
        );
    }

    #[test]
    fn lease_left_switches_unit_at_one_second() {
        assert_eq!(lease_left(Duration::from_millis(999)), "999ms");
        assert_eq!(lease_left(Duration::from_millis(1_000)), "1.0s");
        assert_eq!(lease_left(Duration::from_millis(12_345)), "12.3s");
    }

    #[test]
    fn renewals_are_not_changes() {
        let old = group();
        let mut new = group();
        new.partitions[0].remaining = Some(Duration::from_millis(10_000));
        assert_eq!(changes(&old, &new), vec![]);
    }

    #[test]
    fn hand_overs_expiries_new_terms_and_membership_are_changes() {
        let old = group();
        let mut new = group();
        new.partitions[0] = part("p0", Some("c"), 1_764_000_000_000_009, 10_000); // moved
        new.partitions[1] = part("p1", None, 1_764_000_000_000_002, 0); // released
        new.partitions[2] = part("p2", Some("a"), 8, 10_000); // claimed
        new.partitions[4] = part("p4", Some("a"), 13, 10_000); // new term, same owner
        new.replicas = vec![
            ("a".into(), Some(2)),
            ("c".into(), Some(1)),
            ("d".into(), None),
        ];
        let lines: Vec<String> = changes(&old, &new)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "replica b left",
                "p0  b → c  fence 1764000000000009",
                "p1  a → (none)  fence 1764000000000002",
                "p2  (none) → a  fence 8",
                "p4  a → a  fence 13",
                "replica d joined",
            ]
        );
    }
}
