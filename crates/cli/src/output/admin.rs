//! What the changes say when they succeed: `partitions add|remove`, `drain`, `undrain`.

use std::time::Duration;

use super::plural;

/// `partitions add`: `added` partitions, and the grant delay if the add created the
/// group (`None`: it existed).
pub fn added_text(prefix: &str, group: &str, added: usize, created: Option<Duration>) -> String {
    let n = plural(added, "partition");
    match created {
        None => format!("added {n} to group {group} (prefix {prefix})\n"),
        Some(delay) => format!(
            "created group {group} (prefix {prefix}) with {n}; nothing in it is granted for \
             {} ms (--grant-delay-ms)\n",
            delay.as_millis()
        ),
    }
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

/// `drain` (`drained`) and `undrain`.
pub fn drain_text(group: &str, replica: &str, drained: bool) -> String {
    if drained {
        format!(
            "replica {replica} of group {group} drained: it hands its partitions over and \
             claims nothing until undrained (for its current session)\n"
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
    fn an_add_says_whether_it_created_the_group() {
        assert_eq!(
            added_text("lh", "g", 1, None),
            "added 1 partition to group g (prefix lh)\n"
        );
        assert_eq!(
            added_text("lh", "g", 2, Some(Duration::from_secs(10))),
            "created group g (prefix lh) with 2 partitions; nothing in it is granted for \
             10000 ms (--grant-delay-ms)\n"
        );
        assert_eq!(
            removed_text("lh", "g", 3),
            "removed 3 partitions from group g (prefix lh); an owned one is handed back by \
             its owner\n"
        );
    }
}
