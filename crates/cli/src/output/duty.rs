//! A duty's leader (`leader`).

use leasehold_election::LeaderInfo;
use serde::Serialize;

use super::{lease_left, millis};

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use leasehold_election::Fence;

    use super::*;

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
}
