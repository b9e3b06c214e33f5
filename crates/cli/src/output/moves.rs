//! `leasehold moves`: the ledger of moves, as lines and as JSON.

use std::time::{Duration, SystemTime};

use leasehold_partitions::Move;
use serde::Serialize;

use super::millis;

/// `leasehold moves --json`: the group and its moves, oldest first.
#[derive(Debug, Serialize)]
pub struct MovesJson {
    /// The group name.
    pub group: String,
    /// The key prefix.
    pub prefix: String,
    /// The moves read (those of `--partition` only, if given).
    pub moves: Vec<MoveJson>,
}

/// One move (`leasehold moves --json`, and each line of `--follow --json`).
#[derive(Debug, Clone, Serialize)]
pub struct MoveJson {
    /// The ledger entry's id: moves after it are newer.
    pub id: String,
    /// The partition.
    pub partition: String,
    /// The replica whose term ended; null for a first owner.
    pub from: Option<String>,
    /// The replica whose term started.
    pub to: String,
    /// Why the old term ended: `handoff`, `drain`, `leave`, `removal`, `released`,
    /// `expiry`, or `new` (no term before it known).
    pub cause: String,
    /// The old term's fence; null for a first owner.
    pub old_fence: Option<u64>,
    /// The new term's fence.
    pub new_fence: u64,
    /// When the old term ended (RFC 3339, the Redis server's clock); null if unknown.
    pub ended: Option<String>,
    /// When the new term started (RFC 3339, the Redis server's clock).
    pub started: String,
    /// How long the partition had no owner (ms); null if unknown.
    pub unowned_ms: Option<u64>,
    /// How long the old term lasted (ms); null if unknown.
    pub held_ms: Option<u64>,
    /// The bytes of state the old term handed the new one (`Ownership::hand_off`);
    /// null if it left none.
    pub state_bytes: Option<u64>,
}

fn at(ms: u64) -> String {
    humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// One move as its JSON object.
pub fn move_json(m: &Move) -> MoveJson {
    MoveJson {
        id: m.id.clone(),
        partition: m.partition.clone(),
        from: m.from.clone(),
        to: m.to.clone(),
        cause: m.cause.as_str().to_owned(),
        old_fence: m.old_fence.map(|f| f.get()),
        new_fence: m.new_fence.get(),
        ended: m.ended_ms.map(at),
        started: at(m.started_ms),
        unowned_ms: m.unowned.map(millis),
        held_ms: m
            .ended_ms
            .zip(m.held_since_ms)
            .map(|(e, s)| e.saturating_sub(s)),
        state_bytes: m.state_bytes,
    }
}

/// The whole answer of `leasehold moves --json`.
pub fn moves_json(prefix: &str, group: &str, moves: &[Move]) -> MovesJson {
    MovesJson {
        group: group.to_owned(),
        prefix: prefix.to_owned(),
        moves: moves.iter().map(move_json).collect(),
    }
}

/// One move, one line: when, the partition, from whom to whom, why, the fences, how
/// long it had no owner, and the state handed over, if any.
pub fn move_line(m: &Move) -> String {
    let from = m.from.as_deref().unwrap_or("-");
    let fences = match m.old_fence {
        Some(old) => format!("fence {old} -> {}", m.new_fence),
        None => format!("fence {}", m.new_fence),
    };
    let unowned = m
        .unowned
        .map_or(String::new(), |d| format!("  unowned {} ms", millis(d)));
    let state = m
        .state_bytes
        .map_or(String::new(), |b| format!("  state {b} B"));
    format!(
        "{}  {}  {from} -> {}  {}  {fences}{unowned}{state}\n",
        at(m.started_ms),
        m.partition,
        m.to,
        m.cause
    )
}

/// `leasehold moves` for people: a line per move, or a line saying there is none.
pub fn moves_text(group: &str, moves: &[Move]) -> String {
    if moves.is_empty() {
        return format!("group {group}: no moves in the ledger\n");
    }
    moves.iter().map(move_line).collect()
}
