//! `partitions add|remove|list`, `drain` and `undrain`: changing a group through
//! [`GroupAdmin`](leasehold_partitions::GroupAdmin). A refused change changes nothing.

use leasehold_election::ext::validate_name;
use leasehold_partitions::{PartitionsError, ReplicaState};

use super::{group_error, partition_names, print};
use crate::error::Error;
use crate::output;
use crate::target::Target;

/// `leasehold partitions add`: to a group its replicas created (an add never creates
/// one).
pub async fn add(target: &Target, group: &str, names: &[String]) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    partition_names(group, names)?;
    let added = admin
        .add(names.iter().cloned())
        .await
        .map_err(|error| match error {
            PartitionsError::UnknownGroup(g) => Error::NoGroup(g),
            error => Error::Refused {
                group: group.to_owned(),
                error,
            },
        })?;
    print(&output::added_text(&target.prefix, group, added))
}

/// `leasehold partitions remove`.
pub async fn remove(target: &Target, group: &str, names: &[String]) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    partition_names(group, names)?;
    let removed = match admin.remove(names.iter().cloned()).await {
        Ok(n) => n,
        Err(e) => return Err(group_error(target, &store, group, e, true).await),
    };
    print(&output::removed_text(&target.prefix, group, removed))
}

/// `leasehold partitions weight`.
pub async fn set_weight(
    target: &Target,
    group: &str,
    partition: &str,
    weight: u64,
) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    let old = match admin.set_weight(partition, weight).await {
        Ok(old) => old,
        Err(e) => return Err(group_error(target, &store, group, e, true).await),
    };
    print(&output::weight_text(group, partition, weight, old))
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
pub async fn drain(target: &Target, group: &str, replica: &str, how: Drain) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    validate_name("replica id", replica)?;
    let result = match how {
        Drain::On => admin.drain(replica).await,
        Drain::Forced => admin.drain_forced(replica).await,
        Drain::Off => admin.undrain(replica).await,
    };
    let on = how != Drain::Off;
    if let Err(e) = result {
        return Err(group_error(target, &store, group, e, true).await);
    }
    print(&output::drain_text(group, replica, on))?;
    if !on {
        return Ok(());
    }
    // The drain is done; a failed read here only costs the warning.
    if let Ok(Some(status)) = admin.status().await {
        // Taking part as the drain script counts it: live, not leaving or draining, not
        // drained (an away replica takes its partitions back when it returns).
        let others = status.members.iter().any(|m| {
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
