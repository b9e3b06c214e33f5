//! `partitions add|remove|weight|prefer|list`, `drain` and `undrain`: changing a group through
//! [`GroupAdmin`](leasehold_partitions::GroupAdmin). A refused change changes nothing.

use leasehold_partitions::{MAX_WEIGHT, PartitionsError, ReplicaState};

use super::{group_error, partition_names, print};
use crate::error::{Change, Error, check_name};
use crate::output;
use crate::target::Target;

/// `leasehold partitions add`: to a group its replicas created (an add never creates
/// one).
pub async fn add(target: &Target, group: &str, names: &[String]) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    partition_names(group, names, Change::Add)?;
    let added = admin
        .add(names.iter().cloned())
        .await
        .map_err(|error| match error {
            PartitionsError::UnknownGroup(g) => Error::NoGroup(g),
            error => Error::Refused {
                group: group.to_owned(),
                error,
                change: Change::Add,
            },
        })?;
    print(&output::added_text(&target.prefix, group, added))
}

/// `leasehold partitions remove`.
pub async fn remove(target: &Target, group: &str, names: &[String]) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    partition_names(group, names, Change::Remove)?;
    let removed = match admin.remove(names.iter().cloned()).await {
        Ok(n) => n,
        Err(e) => return Err(group_error(target, &store, group, e, Some(Change::Remove)).await),
    };
    print(&output::removed_text(&target.prefix, group, removed))
}

/// `leasehold partitions weight` (the weight as given, checked here: a negative one
/// too).
pub async fn set_weight(
    target: &Target,
    group: &str,
    partition: &str,
    weight: i64,
) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    check_name("PARTITION", "partition name", partition)?;
    let weight = u64::try_from(weight)
        .ok()
        .filter(|w| (1..=MAX_WEIGHT).contains(w))
        .ok_or(Error::BadWeight(weight))?;
    let old = match admin.set_weight(partition, weight).await {
        Ok(old) => old,
        Err(e) => return Err(group_error(target, &store, group, e, Some(Change::Weight)).await),
    };
    print(&output::weight_text(group, partition, weight, old))
}

/// `leasehold partitions prefer`: prefers a partition on a replica (`None`: removes its
/// preference).
pub async fn prefer(
    target: &Target,
    group: &str,
    partition: &str,
    replica: Option<&str>,
) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    check_name("PARTITION", "partition name", partition)?;
    if let Some(r) = replica {
        check_name("REPLICA", "replica id", r)?;
    }
    let done = match replica {
        Some(r) => admin.prefer(partition, r).await,
        None => admin.unprefer(partition).await,
    };
    let old = match done {
        Ok(old) => old,
        Err(e) => return Err(group_error(target, &store, group, e, Some(Change::Prefer)).await),
    };
    print(&output::prefer_text(
        group,
        partition,
        replica,
        old.as_deref(),
    ))
}

/// `leasehold partitions list`: one name per line, in the order they were added.
pub async fn list_partitions(target: &Target, group: &str, json: bool) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    let names = admin.list().await.map_err(|error| match error {
        PartitionsError::UnknownGroup(g) => Error::NoGroup(g),
        error => Error::Group {
            group: group.to_owned(),
            error,
        },
    })?;
    print(&if json {
        output::to_json(&output::partitions_json(&target.prefix, group, names))
    } else {
        names.iter().map(|n| format!("{n}\n")).collect()
    })
}

/// What `leasehold drain` and `undrain` do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// `drain`: refused for the last replica taking part.
    On,
    /// `drain --force`.
    Forced,
    /// `undrain`.
    Off,
}

/// `leasehold drain` and `leasehold undrain`.
///
/// The admin answers a drain of a drained replica (and an undrain of one that is not
/// drained) as done, like any other: the group is read first, to say so (and, for a
/// drain, whether another replica takes part). That read changes nothing; if it fails,
/// nothing is sent.
pub async fn drain(target: &Target, group: &str, replica: &str, how: Drain) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    check_name("--replica", "replica id", replica)?;
    let change = if how == Drain::Off {
        Change::Undrain
    } else {
        Change::Drain
    };
    let before = admin.status().await.map_err(|error| Error::Group {
        group: group.to_owned(),
        error,
    })?;
    let result = match how {
        Drain::On => admin.drain(replica).await,
        Drain::Forced => admin.drain_forced(replica).await,
        Drain::Off => admin.undrain(replica).await,
    };
    let on = how != Drain::Off;
    if let Err(e) = result {
        return Err(group_error(target, &store, group, e, Some(change)).await);
    }
    // `None`: the group was created between the two calls; nothing to compare with.
    let Some(before) = before else {
        return print(&output::drain_text(group, replica, on, false));
    };
    let was_drained = before.drained.iter().any(|r| r == replica);
    print(&output::drain_text(group, replica, on, was_drained == on))?;
    if on {
        // Taking part as the drain script counts it: live, not leaving or draining, not
        // drained (an away replica takes its partitions back when it returns).
        let others = before.members.iter().any(|m| {
            m.replica != replica
                && !m.drained
                && !matches!(m.state, ReplicaState::Leaving | ReplicaState::Draining)
        });
        if !others {
            eprint!("{}", output::nobody_takes_over(group));
        }
    }
    Ok(())
}
