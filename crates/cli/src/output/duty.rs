//! A duty's leader (`leader`) and everything under a prefix (`list`).

use std::fmt::Write as _;

use leasehold_election::Fence;
use leasehold_partitions::GroupStatus;
use serde::Serialize;

use super::{header, human, millis, plural, plural_of, table};
use crate::reads::{Duty, Leader};

/// `leasehold leader --json`.
#[derive(Debug, Serialize)]
pub struct LeaderJson {
    /// The duty.
    pub duty: String,
    /// The key prefix.
    pub prefix: String,
    /// The current leader; `null` when nobody leads now.
    pub leader: Option<LeaderEntry>,
    /// The fence of the current term, or of the last one when nobody leads.
    pub fence: u64,
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

/// `leasehold list --json`.
#[derive(Debug, Serialize)]
pub struct ListJson {
    /// The key prefix.
    pub prefix: String,
    /// Every group under it, by name.
    pub groups: Vec<GroupEntry>,
    /// Every duty under it, by name.
    pub duties: Vec<DutyEntry>,
}

/// One group in [`ListJson`].
#[derive(Debug, Serialize)]
pub struct GroupEntry {
    /// The group.
    pub group: String,
    /// Partitions in its set.
    pub partitions: usize,
    /// Partitions a live session holds.
    pub owned: usize,
    /// Partitions nobody holds right now.
    pub unowned: usize,
    /// How many replicas heartbeat in it.
    pub live_replicas: usize,
    /// Their ids, sorted.
    pub replicas: Vec<String>,
    /// The drained ones among them, sorted.
    pub drained: Vec<String>,
    /// The version of the last versioned partition list applied (0: none).
    pub list_version: u64,
}

/// One duty in [`ListJson`].
#[derive(Debug, Serialize)]
pub struct DutyEntry {
    /// The duty.
    pub duty: String,
    /// `led`, `nobody` (elected before, nobody leads now) or `foreign` (its lease key
    /// holds something that is not a Leasehold lease).
    pub state: &'static str,
    /// The leader's replica id; `null` unless `led`.
    pub leader: Option<String>,
    /// The fence of the current (or last) term; `null` when `foreign`.
    pub fence: Option<u64>,
    /// Lease left in milliseconds; `null` unless `led` (or the key has no expiry).
    pub lease_left_ms: Option<u64>,
}

/// The JSON form of a duty's leader (`None`: nobody leads now; `fence` the last one).
pub fn leader_json(prefix: &str, duty: &str, leader: Option<&Leader>, fence: Fence) -> LeaderJson {
    LeaderJson {
        duty: duty.to_owned(),
        prefix: prefix.to_owned(),
        leader: leader.map(|l| LeaderEntry {
            replica: l.replica.clone(),
            fence: l.fence.get(),
            lease_left_ms: l.lease_left.map(millis),
        }),
        fence: fence.get(),
    }
}

/// The human form of a duty's leader, one line.
pub fn leader_text(duty: &str, leader: Option<&Leader>, fence: Fence) -> String {
    match leader {
        None => format!("{duty}: nobody leads now (last fence {fence})\n"),
        Some(l) => format!(
            "{duty}: led by {} (fence {}, lease left {})\n",
            l.replica,
            l.fence,
            l.lease_left.map_or_else(|| "no expiry".to_owned(), human)
        ),
    }
}

/// One group as `list` shows it.
pub fn group_entry(group: &str, status: &GroupStatus) -> GroupEntry {
    let mut replicas: Vec<String> = status.replicas.iter().map(|(r, _)| r.clone()).collect();
    replicas.sort();
    let mut drained: Vec<String> = status
        .members
        .iter()
        .filter(|m| m.drained)
        .map(|m| m.replica.clone())
        .collect();
    drained.sort();
    let owned = status
        .partitions
        .iter()
        .filter(|p| p.owner.is_some())
        .count();
    GroupEntry {
        group: group.to_owned(),
        partitions: status.partitions.len(),
        owned,
        unowned: status.partitions.len() - owned,
        live_replicas: replicas.len(),
        replicas,
        drained,
        list_version: status.list_version,
    }
}

/// One duty as `list` shows it; `None` for a duty that vanished since it was found.
pub fn duty_entry(duty: &str, read: &Duty) -> Option<DutyEntry> {
    let (state, leader, fence, left) = match read {
        Duty::Led(l) => ("led", Some(l.replica.clone()), Some(l.fence), l.lease_left),
        Duty::Vacant { last_fence } => ("nobody", None, Some(*last_fence), None),
        Duty::Foreign(_) => ("foreign", None, None, None),
        Duty::NeverElected => return None,
    };
    Some(DutyEntry {
        duty: duty.to_owned(),
        state,
        leader,
        fence: fence.map(Fence::get),
        lease_left_ms: left.map(millis),
    })
}

/// The human form of `list`: a summary, then a table of groups and one of duties.
pub fn list_text(list: &ListJson) -> String {
    let led = list.duties.iter().filter(|d| d.state == "led").count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "prefix {}: {}, {} ({led} led)",
        list.prefix,
        plural(list.groups.len(), "group"),
        plural_of(list.duties.len(), "duty", "duties"),
    );
    if !list.groups.is_empty() {
        out.push('\n');
        let mut rows = vec![header(&[
            "GROUP",
            "PARTITIONS",
            "OWNED",
            "LIVE REPLICAS",
            "DRAINED",
            "LIST VERSION",
        ])];
        for g in &list.groups {
            rows.push(vec![
                g.group.clone(),
                g.partitions.to_string(),
                g.owned.to_string(),
                g.live_replicas.to_string(),
                g.drained.len().to_string(),
                g.list_version.to_string(),
            ]);
        }
        table(&mut out, &rows);
    }
    if !list.duties.is_empty() {
        out.push('\n');
        let mut rows = vec![header(&["DUTY", "LEADER", "FENCE", "LEASE LEFT"])];
        for d in &list.duties {
            let dash = || "-".to_owned();
            let leader = match d.state {
                "foreign" => "(not a Leasehold lease)".to_owned(),
                _ => d.leader.clone().unwrap_or_else(dash),
            };
            let left = match (&d.leader, d.lease_left_ms) {
                (Some(_), Some(ms)) => human(std::time::Duration::from_millis(ms)),
                (Some(_), None) => "no expiry".to_owned(),
                (None, _) => dash(),
            };
            let fence = d
                .fence
                .filter(|f| *f != 0)
                .map_or_else(dash, |f| f.to_string());
            rows.push(vec![d.duty.clone(), leader, fence, left]);
        }
        table(&mut out, &rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::group::tests::group;
    use super::*;

    fn leader() -> Leader {
        Leader {
            replica: "replica-a".into(),
            fence: Fence(42),
            lease_left: Some(Duration::from_millis(2_930)),
        }
    }

    #[test]
    fn leader_line_and_json() {
        let l = leader();
        assert_eq!(
            leader_text("scheduler", Some(&l), l.fence),
            "scheduler: led by replica-a (fence 42, lease left 2.9s)\n"
        );
        assert_eq!(
            leader_text("scheduler", None, Fence(41)),
            "scheduler: nobody leads now (last fence 41)\n"
        );
        let json = serde_json::to_value(leader_json("lh", "scheduler", Some(&l), l.fence)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "duty": "scheduler", "prefix": "lh",
                "leader": {"replica": "replica-a", "fence": 42, "lease_left_ms": 2930},
                "fence": 42,
            })
        );
        let json = serde_json::to_value(leader_json("lh", "scheduler", None, Fence(41))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"duty": "scheduler", "prefix": "lh", "leader": null, "fence": 41})
        );
    }

    #[test]
    fn list_shows_groups_and_each_duty_led_nobody_or_foreign() {
        let list = ListJson {
            prefix: "lh".into(),
            groups: vec![group_entry("tenants", &group())],
            duties: [
                (
                    "reports",
                    Duty::Vacant {
                        last_fence: Fence(7),
                    },
                ),
                ("scheduler", Duty::Led(leader())),
                ("vanished", Duty::NeverElected),
                ("weird", Duty::Foreign("x".into())),
            ]
            .iter()
            .filter_map(|(name, d)| duty_entry(name, d))
            .collect(),
        };
        let expected = "\
prefix lh: 1 group, 3 duties (1 led)

GROUP    PARTITIONS  OWNED  LIVE REPLICAS  DRAINED  LIST VERSION
tenants  5           3      3              1        3

DUTY       LEADER                   FENCE  LEASE LEFT
reports    -                        7      -
scheduler  replica-a                42     2.9s
weird      (not a Leasehold lease)  -      -
";
        assert_eq!(list_text(&list), expected);
        let json = serde_json::to_value(&list).unwrap();
        assert_eq!(
            json["groups"][0],
            serde_json::json!({
                "group": "tenants", "partitions": 5, "owned": 3, "unowned": 2,
                "live_replicas": 3, "replicas": ["a", "b", "c"], "drained": ["b"],
                "list_version": 3,
            })
        );
        assert_eq!(
            json["duties"],
            serde_json::json!([
                {"duty": "reports", "state": "nobody", "leader": null, "fence": 7, "lease_left_ms": null},
                {"duty": "scheduler", "state": "led", "leader": "replica-a", "fence": 42, "lease_left_ms": 2930},
                {"duty": "weird", "state": "foreign", "leader": null, "fence": null, "lease_left_ms": null},
            ])
        );
    }

    #[test]
    fn an_empty_prefix_is_one_line() {
        let list = ListJson {
            prefix: "lh".into(),
            groups: vec![],
            duties: vec![],
        };
        assert_eq!(list_text(&list), "prefix lh: 0 groups, 0 duties (0 led)\n");
    }
}
