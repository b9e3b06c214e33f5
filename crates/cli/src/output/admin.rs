//! What the changes say when they succeed: `partitions add|remove`, `drain`, `undrain`.

use super::plural;

/// `partitions add`: `added` partitions.
pub fn added_text(prefix: &str, group: &str, added: usize) -> String {
    format!(
        "added {} to group {group} (prefix {prefix})\n",
        plural(added, "partition")
    )
}

/// The warning of `partitions add --grant-delay-ms`, a flag that no longer does anything.
pub fn grant_delay_unused() -> &'static str {
    "leasehold: warning: --grant-delay-ms is no longer used: `partitions add` never creates \
     a group (its replicas do, and restore it after a Redis restart that lost it)\n"
}

/// `partitions remove`.
pub fn removed_text(prefix: &str, group: &str, removed: usize) -> String {
    format!(
        "removed {} from group {group} (prefix {prefix}); an owned one is handed back by its \
         owner\n",
        plural(removed, "partition")
    )
}

/// `partitions weight`: `weight` set, `old` before.
pub fn weight_text(group: &str, partition: &str, weight: u64, old: u64) -> String {
    format!(
        "partition {partition} of group {group}: weight {weight} (was {old}); the group \
         balances by weight\n"
    )
}

/// `partitions prefer` (`replica`: the replica it is preferred on now, `None`: removed;
/// `old`: the one before).
pub fn prefer_text(
    group: &str,
    partition: &str,
    replica: Option<&str>,
    old: Option<&str>,
) -> String {
    let was = old.map_or_else(|| "none".to_owned(), str::to_owned);
    match replica {
        Some(r) => format!(
            "partition {partition} of group {group}: preferred on {r} (was {was}); it goes \
             there when that replica is live and the balance bound allows\n"
        ),
        None => format!("partition {partition} of group {group}: no preference (was {was})\n"),
    }
}

/// `drain` (`drained`) and `undrain`; `unchanged`: it was drained already (or, for an
/// undrain, it was not drained).
pub fn drain_text(group: &str, replica: &str, drained: bool, unchanged: bool) -> String {
    if unchanged {
        return if drained {
            format!(
                "replica {replica} of group {group} is already drained: nothing changed (it \
                 claims nothing until undrained)\n"
            )
        } else {
            format!("replica {replica} of group {group} is not drained: nothing changed\n")
        };
    }
    if drained {
        format!(
            "replica {replica} of group {group} drained: it hands its partitions over and \
             claims nothing until undrained (across restarts and lost sessions)\n"
        )
    } else {
        format!("replica {replica} of group {group} undrained: it takes its share again\n")
    }
}

/// The warning of a drain that leaves no replica to take the partitions over.
pub fn nobody_takes_over(group: &str) -> String {
    format!(
        "leasehold: warning: no other replica of group {group} takes part: its partitions \
         stay unowned until one joins or it is undrained\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_say_what_they_did() {
        assert_eq!(
            added_text("lh", "g", 1),
            "added 1 partition to group g (prefix lh)\n"
        );
        assert_eq!(
            removed_text("lh", "g", 3),
            "removed 3 partitions from group g (prefix lh); an owned one is handed back by \
             its owner\n"
        );
        assert_eq!(
            drain_text("g", "r", true, true),
            "replica r of group g is already drained: nothing changed (it claims nothing \
             until undrained)\n"
        );
        assert_eq!(
            drain_text("g", "r", false, true),
            "replica r of group g is not drained: nothing changed\n"
        );
        assert!(
            drain_text("g", "r", false, false).ends_with("undrained: it takes its share again\n")
        );
    }
}
