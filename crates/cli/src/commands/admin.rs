//! `partitions add|remove|list`, `drain` and `undrain`: changing a group through
//! [`GroupAdmin`](leasehold_partitions::GroupAdmin). A refused change changes nothing.

use std::time::Duration;

use leasehold_election::config::validate_name;
use leasehold_partitions::{PartitionsError, ReplicaState};

use super::{group_error, partition_names, print};
use crate::error::Error;
use crate::output;
use crate::reads;
use crate::target::Target;

/// `leasehold partitions add`: creates the group if it does not exist, and then
/// grants nothing in it for `grant_delay`.
pub async fn add(
    target: &Target,
    group: &str,
    names: &[String],
    grant_delay: Duration,
) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?.grant_delay(grant_delay);
    partition_names(group, names)?;
    // Only to tell the operator (a mistyped group would be created): the add itself
    // creates the group if it is missing.
    let existed = reads::group_exists(&store, &target.prefix, group).await?;
    let added = admin
        .add(names.iter().cloned())
        .await
        .map_err(|error| Error::Refused {
            group: group.to_owned(),
            error,
        })?;
    let created = (!existed).then_some(grant_delay);
    print(&output::added_text(&target.prefix, group, added, created))
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

/// `leasehold drain` (`on`) and `leasehold undrain`.
pub async fn drain(target: &Target, group: &str, replica: &str, on: bool) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    validate_name("replica id", replica)?;
    let result = if on {
        admin.drain(replica).await
    } else {
        admin.undrain(replica).await
    };
    if let Err(e) = result {
        return Err(group_error(target, &store, group, e, true).await);
    }
    print(&output::drain_text(group, replica, on))?;
    if !on {
        return Ok(());
    }
    // The drain is done; a failed read here only costs the warning.
    if let Ok(Some(status)) = admin.status().await {
        let others = status.members.iter().any(|m| {
            m.replica != replica
                && !m.drained
                && matches!(m.state, ReplicaState::Active | ReplicaState::Settling)
        });
        if !others {
            eprint!("{}", output::nobody_takes_over(group));
        }
    }
    Ok(())
}
