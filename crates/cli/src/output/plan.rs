//! `leasehold plan`: what a change would do, as text and as JSON.

use std::fmt::Write as _;

use leasehold_partitions::{PlannedChange, PlannedLoad, PlannedMove, WhatIf};
use serde::Serialize;

use super::{header, plural, plural_of, table};

/// `leasehold plan --json`.
#[derive(Debug, Serialize)]
pub struct PlanJson {
    /// The group name.
    pub group: String,
    /// The key prefix.
    pub prefix: String,
    /// The change planned, as given.
    pub change: ChangeJson,
    /// Whether the group balances by weight after the change.
    pub weighted: bool,
    /// Whether only these moves can happen (`false`: a tie the live group breaks by
    /// chance could change which replicas make them).
    pub exact: bool,
    /// Whether the rules came to rest.
    pub settled: bool,
    /// Rounds of hand-overs.
    pub rounds: usize,
    /// Partitions moved in all.
    pub moved: usize,
    /// Weight moved in all.
    pub moved_weight: u64,
    /// Partitions left without an owner.
    pub unowned: usize,
    /// The moves per (from, to, cause).
    pub moves: Vec<PlannedMoveJson>,
    /// Every replica, before and after.
    pub replicas: Vec<PlannedReplicaJson>,
}

/// The change of `leasehold plan --json`.
#[derive(Debug, Serialize)]
pub struct ChangeJson {
    /// `--add-replica`.
    pub add_replica: Vec<AddJson>,
    /// `--remove-replica`.
    pub remove_replica: Vec<String>,
    /// `--drain`.
    pub drain: Vec<String>,
    /// `--weight`.
    pub weight: Vec<WeightJson>,
}

/// One `--add-replica`.
#[derive(Debug, Serialize)]
pub struct AddJson {
    /// The replica id.
    pub replica: String,
    /// Its capacity.
    pub capacity: u32,
}

/// One `--weight`.
#[derive(Debug, Serialize)]
pub struct WeightJson {
    /// The partition.
    pub partition: String,
    /// Its weight.
    pub weight: u64,
}

/// Planned moves from one replica to another for one cause.
#[derive(Debug, Serialize)]
pub struct PlannedMoveJson {
    /// From (null: the partitions had no owner).
    pub from: Option<String>,
    /// To.
    pub to: String,
    /// Why the old terms end, as the ledger will say (`handoff`, `drain`, `leave`, ...);
    /// null with no owner before.
    pub cause: Option<String>,
    /// How many partitions.
    pub count: usize,
    /// Their weights, summed.
    pub weight: u64,
    /// Which (weighted groups only; empty by count).
    pub partitions: Vec<String>,
}

/// One replica before and after.
#[derive(Debug, Serialize)]
pub struct PlannedReplicaJson {
    /// The replica id.
    pub replica: String,
    /// `member`, `added`, `removed` or `drained`.
    pub role: String,
    /// Its capacity.
    pub capacity: u32,
    /// Partitions now.
    pub count_before: usize,
    /// Partitions after.
    pub count: usize,
    /// Load now.
    pub load_before: u64,
    /// Load after.
    pub load: u64,
    /// Its share after, in a weighted group (null otherwise).
    pub share: Option<f64>,
}

fn move_json(m: &PlannedMove) -> PlannedMoveJson {
    PlannedMoveJson {
        from: m.from.clone(),
        to: m.to.clone(),
        cause: m.cause.map(|c| c.as_str().to_owned()),
        count: m.count,
        weight: m.weight,
        partitions: m.partitions.clone(),
    }
}

fn replica_json(l: &PlannedLoad) -> PlannedReplicaJson {
    PlannedReplicaJson {
        replica: l.replica.clone(),
        role: l.role.as_str().to_owned(),
        capacity: l.capacity,
        count_before: l.count_before,
        count: l.count,
        load_before: l.load_before,
        load: l.load,
        share: l.share,
    }
}

/// The whole answer of `leasehold plan --json`.
pub fn plan_json(prefix: &str, group: &str, change: &WhatIf, plan: &PlannedChange) -> PlanJson {
    PlanJson {
        group: group.to_owned(),
        prefix: prefix.to_owned(),
        change: ChangeJson {
            add_replica: change
                .add
                .iter()
                .map(|(replica, capacity)| AddJson {
                    replica: replica.clone(),
                    capacity: *capacity,
                })
                .collect(),
            remove_replica: change.remove.clone(),
            drain: change.drain.clone(),
            weight: change
                .weights
                .iter()
                .map(|(partition, weight)| WeightJson {
                    partition: partition.clone(),
                    weight: *weight,
                })
                .collect(),
        },
        weighted: plan.weighted,
        exact: plan.exact,
        settled: plan.settled,
        rounds: plan.rounds,
        moved: plan.moved(),
        moved_weight: plan.moved_weight(),
        unowned: plan.unowned,
        moves: plan.moves.iter().map(move_json).collect(),
        replicas: plan.loads.iter().map(replica_json).collect(),
    }
}

/// The change in words: `add replica d (capacity 1), drain a`.
fn change_text(change: &WhatIf) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(
        change
            .add
            .iter()
            .map(|(r, c)| format!("add replica {r} (capacity {c})")),
    );
    parts.extend(change.remove.iter().map(|r| format!("remove replica {r}")));
    parts.extend(change.drain.iter().map(|r| format!("drain {r}")));
    parts.extend(
        change
            .weights
            .iter()
            .map(|(p, w)| format!("weight {p}={w}")),
    );
    if parts.is_empty() {
        "no change".to_owned()
    } else {
        parts.join(", ")
    }
}

/// `leasehold plan`: a headline, the moves, each replica before → after, and notes.
pub fn plan_text(prefix: &str, group: &str, change: &WhatIf, plan: &PlannedChange) -> String {
    let mut out = String::new();
    let how = if plan.weighted {
        "by weight"
    } else {
        "by count"
    };
    let _ = writeln!(
        out,
        "plan for group {group} (prefix {prefix}): {}; nothing was changed",
        change_text(change)
    );
    let _ = writeln!(
        out,
        "balanced {how}: {} in {}\n",
        plural(plan.moved(), "move"),
        rounds(plan.rounds),
    );
    if !plan.moves.is_empty() {
        let mut rows = vec![header(&[
            "MOVES",
            "FROM",
            "TO",
            "CAUSE",
            "WEIGHT",
            "PARTITIONS",
        ])];
        for m in &plan.moves {
            rows.push(vec![
                m.count.to_string(),
                m.from.clone().unwrap_or_else(|| "-".to_owned()),
                m.to.clone(),
                m.cause.map_or("-", |c| c.as_str()).to_owned(),
                m.weight.to_string(),
                if m.partitions.is_empty() {
                    "-".to_owned()
                } else {
                    m.partitions.join(",")
                },
            ]);
        }
        table(&mut out, &rows);
        out.push('\n');
    }
    let mut rows = vec![header(&[
        "REPLICA",
        "ROLE",
        "CAPACITY",
        "PARTITIONS",
        "LOAD",
        "SHARE",
    ])];
    for l in &plan.loads {
        rows.push(vec![
            l.replica.clone(),
            l.role.as_str().to_owned(),
            l.capacity.to_string(),
            format!("{} -> {}", l.count_before, l.count),
            format!("{} -> {}", l.load_before, l.load),
            l.share.map_or("-".to_owned(), |s| format!("{s:.1}")),
        ]);
    }
    table(&mut out, &rows);
    if !plan.weighted && plan.moved() > 0 {
        out.push_str(
            "\nby count, a replica hands over partitions it picks at random: the moves are \
             counts per pair of replicas, not names\n",
        );
    }
    if !plan.exact {
        out.push_str(
            "\nnot exact: several replicas may claim the same free partitions at once (or \
             orphans go to whoever asks first); the planner lets them claim by id, the live \
             group by which claim lands first, so which replicas make these moves may differ\n",
        );
    }
    if !plan.settled {
        out.push_str("\nwarning: the balancing rules did not come to rest\n");
    }
    if plan.unowned > 0 {
        let _ = writeln!(
            out,
            "\nwarning: {} left without an owner",
            plural(plan.unowned, "partition")
        );
    }
    out
}

/// `1 round of hand-overs`, `3 rounds of hand-overs`.
fn rounds(n: usize) -> String {
    plural_of(n, "round of hand-overs", "rounds of hand-overs")
}

#[cfg(test)]
mod rounds_tests {
    use super::rounds;

    /// Issue 45: "3 round of hand-overss".
    #[test]
    fn rounds_of_hand_overs_read_as_english() {
        assert_eq!(rounds(0), "0 rounds of hand-overs");
        assert_eq!(rounds(1), "1 round of hand-overs");
        assert_eq!(rounds(3), "3 rounds of hand-overs");
    }
}
