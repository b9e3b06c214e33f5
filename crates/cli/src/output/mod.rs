//! What the commands print: the tables, the one-line answers, the JSON shapes, the
//! lines of `watch` and what a change says. Pure functions of what was read, tested
//! without a server.
//!
//! The JSON shapes are a stable interface for scripts (documented in
//! `docs/operations.md`): fields may be added, never renamed or removed.

mod admin;
mod duty;
mod group;
mod moves;
mod plan;
mod watch;

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use leasehold_partitions::ReplicaState;
use serde::Serialize;

pub use self::admin::{
    added_text, drain_text, grant_delay_unused, nobody_takes_over, prefer_text, removed_text,
    weight_text,
};
pub use self::duty::{
    DutyEntry, GroupEntry, ListJson, duty_entry, group_entry, leader_json, leader_text, list_text,
};
pub use self::group::{
    SummaryJson, owner_json, owner_text, partitions_json, status_json, status_text, summary_json,
    summary_text,
};
pub use self::moves::{MoveJson, move_json, move_line, moves_json, moves_text};
pub use self::plan::{plan_json, plan_text};
pub use self::watch::changes;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Pretty-printed JSON plus a newline.
pub fn to_json<T: Serialize>(value: &T) -> String {
    // Serialising these plain structs cannot fail.
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

/// A duration, for people (a lease left, how long something has been held): `840ms`
/// below a second, `9.5s` below a minute, then whole seconds (`12m 5s`, `3h 2m 1s`).
pub fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

/// The instant `ago` before `now`, as RFC 3339 UTC with milliseconds.
pub fn since(now: SystemTime, ago: Duration) -> String {
    let at = now.checked_sub(ago).unwrap_or(SystemTime::UNIX_EPOCH);
    humantime::format_rfc3339_millis(at).to_string()
}

/// A replica state as the output names it.
pub fn state_name(state: ReplicaState) -> &'static str {
    match state {
        ReplicaState::Settling => "settling",
        ReplicaState::Active => "active",
        ReplicaState::Leaving => "leaving",
        ReplicaState::Draining => "draining",
        ReplicaState::Away => "away",
        _ => "unknown",
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

/// A header row.
fn header(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| (*c).to_owned()).collect()
}

/// `1 partition`, `2 partitions`.
fn plural(n: usize, noun: &str) -> String {
    plural_of(n, noun, &format!("{noun}s"))
}

/// `1 duty`, `2 duties`.
fn plural_of(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_switch_unit_at_one_second() {
        assert_eq!(human(Duration::from_millis(350)), "350ms");
        assert_eq!(human(Duration::from_millis(999)), "999ms");
        assert_eq!(human(Duration::from_millis(1_000)), "1.0s");
        assert_eq!(human(Duration::from_millis(1_234)), "1.2s");
        assert_eq!(human(Duration::from_millis(12_345)), "12.3s");
    }

    #[test]
    fn durations_count_whole_seconds_past_a_minute() {
        assert_eq!(human(Duration::from_millis(59_900)), "59.9s");
        assert_eq!(human(Duration::from_millis(125_400)), "2m 5s");
        assert_eq!(human(Duration::from_millis(725_400)), "12m 5s");
        assert_eq!(human(Duration::from_secs(3 * 3600 + 121)), "3h 2m 1s");
    }

    #[test]
    fn since_counts_back_from_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(
            since(now, Duration::from_millis(1_500)),
            "2027-01-15T07:59:58.500Z"
        );
    }
}
