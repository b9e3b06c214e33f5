//! What the dashboard shows, and how it is read: the groups and duties under the
//! prefix (the overview), one group's page, its ledger of moves. Every read goes
//! through the commands' own reads (`list`'s inventory, the group admin's status and
//! ledger), so the dashboard and the CLI never disagree.

use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupStatus};
use serde::Serialize;

use super::alerts::{self, Alert, AlertClock, Condition, Severity};
use crate::commands::{group_error, read_inventory_each};
use crate::error::EXIT_CONNECTION;
use crate::error::Error;
use crate::output::{self, DutyEntry, GroupEntry, MoveJson, SummaryJson};
use crate::target::Target;

/// Where the dashboard reads: the target and one store (one connection) for every read.
#[derive(Debug, Clone)]
pub struct Source {
    /// The URL, prefix and timeout.
    pub target: Target,
    /// The store every read uses.
    pub store: RedisStore,
    /// Whether admin actions are allowed (the page offers them).
    pub admin: bool,
}

/// `GET /api/groups`: the groups and duties under the prefix, with their alerts.
#[derive(Debug, Serialize)]
pub struct Overview {
    /// The key prefix.
    pub prefix: String,
    /// When this was read (this machine's clock, RFC 3339).
    pub read_at: String,
    /// Whether the dashboard takes admin actions (`--allow-admin`).
    pub admin: bool,
    /// Every group, by name.
    pub groups: Vec<GroupSummary>,
    /// Every duty, by name (`list`'s shape).
    pub duties: Vec<DutyEntry>,
    /// Every alert holding now, page first.
    pub alerts: Vec<Alert>,
}

/// One group in [`Overview`]: `list`'s entry, and its health at a glance; or, for a
/// group that could not be read, its name, `page` and the error (its counts zero).
#[derive(Debug, Serialize)]
pub struct GroupSummary {
    /// As `leasehold list --json` shows it.
    #[serde(flatten)]
    pub entry: GroupEntry,
    /// `ok`, `warn` or `page`: the worst of its alerts (`page` if unreadable).
    pub health: &'static str,
    /// Why it could not be read (a key of another type, a half-written group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One partition on a group's page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionRow {
    /// The partition.
    pub partition: String,
    /// Its owner; `null` when nobody holds its lease.
    pub owner: Option<String>,
    /// Its weight (1 unless set).
    pub weight: u64,
    /// The fence of the current (or last) term.
    pub fence: u64,
    /// The replica it is preferred on, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
}

/// A preference on a group's page.
#[derive(Debug, Serialize)]
pub struct Preference {
    /// The partition.
    pub partition: String,
    /// The replica it is preferred on.
    pub replica: String,
}

/// A group's page but its partitions: the summary (`status --summary --json`), the
/// preferences and the alerts.
#[derive(Debug, Serialize)]
pub struct GroupHead {
    /// As `leasehold status --summary --json` shows it.
    #[serde(flatten)]
    pub summary: SummaryJson,
    /// When this was read (this machine's clock, RFC 3339).
    pub read_at: String,
    /// Every preference, by partition.
    pub preferences: Vec<Preference>,
    /// The group's alerts holding now, page first.
    pub alerts: Vec<Alert>,
}

/// A group's page: its head and its partitions (shared, so that a read that changed no
/// owner or weight hands on the same list, and the viewers are not sent it again).
#[derive(Debug)]
pub struct GroupPage {
    /// Everything but the partitions (shared with the pages that only moves changed).
    pub head: Arc<GroupHead>,
    /// Every partition, in the order they were added.
    pub partitions: Arc<Vec<PartitionRow>>,
    /// The partitions as JSON, made once for every viewer that is sent them
    /// ([`GroupPage::partitions_json`]): at 100,000 partitions, some 8 MB.
    partitions_json: OnceLock<String>,
}

impl GroupPage {
    /// A page of `head` and `partitions`.
    pub fn new(head: Arc<GroupHead>, partitions: Arc<Vec<PartitionRow>>) -> Self {
        Self {
            head,
            partitions,
            partitions_json: OnceLock::new(),
        }
    }

    /// The partitions as a JSON array, serialized the first time it is asked for and
    /// shared by every viewer after.
    pub fn partitions_json(&self) -> &str {
        self.partitions_json.get_or_init(|| {
            serde_json::to_string(&*self.partitions).unwrap_or_else(|_| "[]".to_owned())
        })
    }
}

/// The JSON of a group's page (`GET /api/groups/{group}`, and each `group` event, which
/// leaves out what this viewer has already).
#[derive(Debug, Serialize)]
pub struct PageJson<'a> {
    /// The head, flattened.
    #[serde(flatten)]
    pub head: &'a GroupHead,
    /// The partitions; left out of an event if unchanged since the viewer's last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<&'a [PartitionRow]>,
    /// Moves of the ledger the viewer has not had yet, oldest first (events only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moves: Option<&'a [MoveJson]>,
    /// The last read failed (the page is the last good one): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

fn now_text(now: SystemTime) -> String {
    humantime::format_rfc3339_millis(now).to_string()
}

fn health(conditions: &[Condition]) -> &'static str {
    match conditions.iter().map(|c| c.severity).max() {
        Some(Severity::Page) => "page",
        Some(Severity::Warn) => "warn",
        None => "ok",
    }
}

impl Source {
    /// The admin of `group` on the dashboard's store.
    ///
    /// # Errors
    /// [`Error::BadArg`] for a name that breaks the naming rules.
    pub fn admin(&self, group: &str) -> Result<GroupAdmin<RedisStore>, Error> {
        self.target.admin(&self.store, group)
    }

    /// The overview: SCAN, then every group's status and every duty, once. A group
    /// that cannot be read is a row with its error; the others are read all the same.
    ///
    /// # Errors
    /// The scan's, a duty's, or a group's that says Redis is unreachable.
    pub async fn overview(&self, clock: &mut AlertClock) -> Result<Overview, Error> {
        let (groups, duties) = read_inventory_each(&self.target, &self.store).await?;
        let now = SystemTime::now();
        let mut conditions = Vec::new();
        let mut summaries = Vec::with_capacity(groups.len());
        for (group, read) in groups {
            let status = match read {
                Ok(status) => status,
                Err(e) => {
                    let failure = e.failure(&self.target);
                    if failure.code == EXIT_CONNECTION {
                        return Err(e);
                    }
                    summaries.push(GroupSummary {
                        entry: output::group_entry(&group, &GroupStatus::default()),
                        health: "page",
                        error: Some(failure.message),
                    });
                    continue;
                }
            };
            let found = alerts::group_conditions(&group, &status);
            summaries.push(GroupSummary {
                entry: output::group_entry(&group, &status),
                health: health(&found),
                error: None,
            });
            conditions.extend(found);
        }
        for duty in &duties {
            conditions.extend(alerts::duty_conditions(duty));
        }
        Ok(Overview {
            prefix: self.target.prefix.clone(),
            read_at: now_text(now),
            admin: self.admin,
            groups: summaries,
            duties,
            alerts: clock.stamp(conditions, now),
        })
    }

    /// One group's status; [`Error::NoGroup`] if it does not exist.
    ///
    /// # Errors
    /// A bad name, a missing group, or the store's error.
    pub async fn status(&self, group: &str) -> Result<GroupStatus, Error> {
        let admin = self.admin(group)?;
        match admin.status().await {
            Ok(Some(status)) => Ok(status),
            Ok(None) => Err(Error::NoGroup(group.to_owned())),
            Err(e) => Err(group_error(&self.target, &self.store, group, e, None).await),
        }
    }
}

/// A group's partitions, as its page shows them.
pub fn group_rows(status: &GroupStatus) -> Vec<PartitionRow> {
    status
        .partitions
        .iter()
        .map(|p| PartitionRow {
            partition: p.partition.clone(),
            owner: p.owner.clone(),
            weight: p.weight,
            fence: p.fence.get(),
            preferred: status.preferred(&p.partition).map(str::to_owned),
        })
        .collect()
}

/// A group's page from its status; `last`: the partitions of the page before, handed on
/// if they are the same.
pub fn group_page(
    prefix: &str,
    group: &str,
    status: &GroupStatus,
    clock: &mut AlertClock,
    last: Option<&Arc<Vec<PartitionRow>>>,
) -> GroupPage {
    let now = SystemTime::now();
    let rows = group_rows(status);
    let partitions = match last {
        Some(last) if **last == rows => last.clone(),
        _ => Arc::new(rows),
    };
    GroupPage::new(
        Arc::new(GroupHead {
            summary: output::summary_json(prefix, group, status),
            read_at: now_text(now),
            preferences: status
                .preferences
                .iter()
                .map(|(partition, replica)| Preference {
                    partition: partition.clone(),
                    replica: replica.clone(),
                })
                .collect(),
            alerts: clock.stamp(alerts::group_conditions(group, status), now),
        }),
        partitions,
    )
}

/// `page` with `moves` applied to its partitions (each moved partition's owner and
/// fence as its move says), the head as it was: what a read of the ledger alone shows.
/// `None` if no move changes a row (the page stays as it is).
pub fn with_moves(page: &GroupPage, moves: &[leasehold_partitions::Move]) -> Option<GroupPage> {
    if moves.is_empty() {
        return None;
    }
    let at: std::collections::HashMap<&str, usize> = page
        .partitions
        .iter()
        .enumerate()
        .map(|(i, r)| (r.partition.as_str(), i))
        .collect();
    let mut rows = page.partitions.to_vec();
    let mut changed = false;
    for m in moves {
        let Some(row) = at.get(m.partition.as_str()).map(|&i| &mut rows[i]) else {
            continue;
        };
        if row.fence < m.new_fence.get() {
            row.owner = Some(m.to.clone());
            row.fence = m.new_fence.get();
            changed = true;
        }
    }
    changed.then(|| GroupPage::new(page.head.clone(), Arc::new(rows)))
}
