//! The alerts of `docs/operations.md` that can be told from Redis alone, evaluated on
//! each read: nobody leads a duty, partitions without an owner, a replica left idle or
//! a group out of balance. Pure functions of what was read, plus [`AlertClock`], which
//! remembers since when each one holds (an alert fires once it has held for the `for:`
//! of its rule; until then it is pending).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use leasehold_partitions::{GroupStatus, ReplicaState};
use serde::Serialize;

use crate::output::DutyEntry;

/// How urgent an alert is (the rule's `severity` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Look at it soon.
    Warn,
    /// Someone should look now.
    Page,
}

/// A condition of an alert rule that holds now.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The rule's name in `docs/operations.md`.
    pub alert: &'static str,
    /// Its severity.
    pub severity: Severity,
    /// What it is about: `group` or `duty` (and a replica), to tell alerts apart.
    pub subject: String,
    /// One line for people.
    pub summary: String,
    /// The rule's `for:`: how long it must hold before it fires.
    pub hold: Duration,
}

/// An alert as the dashboard shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// The rule's name in `docs/operations.md`.
    pub alert: &'static str,
    /// `warn` or `page`.
    pub severity: Severity,
    /// What it is about (`group tenants`, `duty scheduler`).
    pub subject: String,
    /// One line for people.
    pub summary: String,
    /// When this dashboard first saw it hold (RFC 3339).
    pub since: String,
    /// Whether it has held for its rule's `for:` (else it is pending).
    pub firing: bool,
}

/// The `for:` of `LeaseholdNoLeader`.
const NO_LEADER_FOR: Duration = Duration::from_secs(30);
/// The `for:` of `LeaseholdUnownedPartitions`.
const UNOWNED_FOR: Duration = Duration::from_secs(45);
/// The `for:` of `LeaseholdPartitionsUnbalanced` and `LeaseholdWeightedPartitionsIdle`.
const BALANCE_FOR: Duration = Duration::from_secs(600);

/// `LeaseholdNoLeader`: a duty elected before that nobody leads now.
pub fn duty_conditions(duty: &DutyEntry) -> Vec<Condition> {
    if duty.state != "nobody" {
        return Vec::new();
    }
    vec![Condition {
        alert: "LeaseholdNoLeader",
        severity: Severity::Page,
        subject: format!("duty {}", duty.duty),
        summary: format!("nobody leads {}", duty.duty),
        hold: NO_LEADER_FOR,
    }]
}

/// Whether a live replica takes part in the balance: active and not drained.
fn takes_part(state: ReplicaState, drained: bool) -> bool {
    state == ReplicaState::Active && !drained
}

/// `LeaseholdUnownedPartitions`, and, among the replicas taking part,
/// `LeaseholdWeightedPartitionsIdle` (weighted: one holds nothing while another holds
/// two or more) or `LeaseholdPartitionsUnbalanced` (by count: counts differ by more
/// than one).
pub fn group_conditions(group: &str, status: &GroupStatus) -> Vec<Condition> {
    let mut out = Vec::new();
    let total = status.partitions.len();
    let unowned = status
        .partitions
        .iter()
        .filter(|p| p.owner.is_none())
        .count();
    if unowned > 0 {
        out.push(Condition {
            alert: "LeaseholdUnownedPartitions",
            severity: Severity::Page,
            subject: format!("group {group}"),
            summary: format!("{unowned} of {total} partitions of {group} have no owner"),
            hold: UNOWNED_FOR,
        });
    }
    let owned: HashMap<String, usize> = status.owned_counts().into_iter().collect();
    let counts: Vec<(&str, usize)> = status
        .members
        .iter()
        .filter(|m| takes_part(m.state, m.drained))
        .map(|m| {
            let n = owned.get(&m.replica).copied().unwrap_or(0);
            (m.replica.as_str(), n)
        })
        .collect();
    let max = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let min = counts.iter().map(|(_, n)| *n).min().unwrap_or(0);
    if status.weighted {
        if max >= 2 {
            for (replica, _) in counts.iter().filter(|(_, n)| *n == 0) {
                out.push(Condition {
                    alert: "LeaseholdWeightedPartitionsIdle",
                    severity: Severity::Warn,
                    subject: format!("group {group} replica {replica}"),
                    summary: format!(
                        "{replica} of {group} holds nothing while another holds {max}"
                    ),
                    hold: BALANCE_FOR,
                });
            }
        }
    } else if max - min > 1 {
        let idle: Vec<&str> = counts
            .iter()
            .filter(|(_, n)| *n == 0)
            .map(|(r, _)| *r)
            .collect();
        let also = if idle.is_empty() {
            String::new()
        } else {
            format!(" ({} idle)", idle.join(", "))
        };
        out.push(Condition {
            alert: "LeaseholdPartitionsUnbalanced",
            severity: Severity::Warn,
            subject: format!("group {group}"),
            summary: format!("replicas of {group} hold between {min} and {max} partitions{also}"),
            hold: BALANCE_FOR,
        });
    }
    out
}

/// Since when each condition has held, as this dashboard saw it (a condition that
/// stops holding is forgotten).
#[derive(Debug, Default)]
pub struct AlertClock {
    since: HashMap<(&'static str, String), SystemTime>,
}

impl AlertClock {
    /// The alerts for the conditions holding at `now`, page first.
    pub fn stamp(&mut self, conditions: Vec<Condition>, now: SystemTime) -> Vec<Alert> {
        let mut seen = HashMap::with_capacity(conditions.len());
        let mut out: Vec<Alert> = conditions
            .into_iter()
            .map(|c| {
                let key = (c.alert, c.subject.clone());
                let since = self.since.get(&key).copied().unwrap_or(now);
                seen.insert(key, since);
                let held = now.duration_since(since).unwrap_or_default();
                Alert {
                    alert: c.alert,
                    severity: c.severity,
                    subject: c.subject,
                    summary: c.summary,
                    since: humantime::format_rfc3339_millis(since).to_string(),
                    firing: held >= c.hold,
                }
            })
            .collect();
        self.since = seen;
        out.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.subject.cmp(&b.subject)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duty(state: &'static str) -> DutyEntry {
        DutyEntry {
            duty: "scheduler".into(),
            state,
            leader: None,
            fence: Some(3),
            lease_left_ms: None,
        }
    }

    #[test]
    fn a_duty_nobody_leads_pages() {
        assert!(duty_conditions(&duty("led")).is_empty());
        assert!(duty_conditions(&duty("foreign")).is_empty());
        let c = duty_conditions(&duty("nobody"));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].alert, "LeaseholdNoLeader");
        assert_eq!(c[0].severity, Severity::Page);
    }

    /// A group of `owners.len()` partitions (`None`: unowned) and active `members`.
    fn group(owners: &[Option<&str>], members: &[&str], weighted: bool) -> GroupStatus {
        let mut s = GroupStatus::default();
        s.weighted = weighted;
        s.partitions = owners
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut p = leasehold_partitions::PartitionOwner::default();
                p.partition = format!("p{i}");
                p.owner = o.map(str::to_owned);
                p
            })
            .collect();
        s.replicas = members.iter().map(|m| ((*m).to_owned(), Some(0))).collect();
        s.members = members
            .iter()
            .map(|m| {
                let mut r = leasehold_partitions::ReplicaStatus::default();
                r.replica = (*m).to_owned();
                r.state = ReplicaState::Active;
                r
            })
            .collect();
        s
    }

    fn names(c: &[Condition]) -> Vec<&str> {
        c.iter().map(|c| c.alert).collect()
    }

    #[test]
    fn unowned_partitions_page_and_imbalance_warns() {
        let a = Some("a");
        let b = Some("b");
        assert!(group_conditions("g", &group(&[a, b, a, b], &["a", "b"], false)).is_empty());
        let c = group_conditions("g", &group(&[a, None, a, b], &["a", "b"], false));
        assert_eq!(names(&c), ["LeaseholdUnownedPartitions"]);
        assert_eq!(c[0].summary, "1 of 4 partitions of g have no owner");
        // By count: 3 against 0 is out of balance, and names the idle one.
        let c = group_conditions("g", &group(&[a, a, a], &["a", "b"], false));
        assert_eq!(names(&c), ["LeaseholdPartitionsUnbalanced"]);
        assert!(c[0].summary.ends_with("(b idle)"), "{}", c[0].summary);
        // By weight: idle beside a replica holding two or more.
        let c = group_conditions("g", &group(&[a, a], &["a", "b"], true));
        assert_eq!(names(&c), ["LeaseholdWeightedPartitionsIdle"]);
        assert_eq!(c[0].subject, "group g replica b");
        // One heavy partition alone is fine; a drained replica takes no part.
        assert!(group_conditions("g", &group(&[a], &["a", "b"], true)).is_empty());
        let mut drained = group(&[a, a, a], &["a", "b"], false);
        drained.members[1].drained = true;
        assert!(group_conditions("g", &drained).is_empty());
    }

    #[test]
    fn an_alert_fires_once_it_has_held_for_its_rule() {
        let cond = || {
            let mut c = duty_conditions(&duty("nobody"));
            c[0].hold = Duration::from_secs(30);
            c
        };
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut clock = AlertClock::default();
        let a = clock.stamp(cond(), t0);
        assert!(!a[0].firing, "pending at first");
        let a = clock.stamp(cond(), t0 + Duration::from_secs(29));
        assert!(!a[0].firing);
        let a = clock.stamp(cond(), t0 + Duration::from_secs(30));
        assert!(a[0].firing);
        assert_eq!(a[0].since, "1970-01-01T00:16:40.000Z");
        // Gone, then back: pending again, from the new time.
        assert!(
            clock
                .stamp(Vec::new(), t0 + Duration::from_secs(31))
                .is_empty()
        );
        let a = clock.stamp(cond(), t0 + Duration::from_secs(32));
        assert!(!a[0].firing);
    }
}
