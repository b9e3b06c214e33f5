//! `leader` and `list`: reading duties, and everything under a prefix.

use leasehold_election::DutyKeys;
use leasehold_election::{RedisStore, StoreError};
use leasehold_partitions::GroupStatus;

use super::print;
use crate::error::{Error, check_name};
use crate::output;
use crate::reads::{self, Duty};
use crate::target::Target;

/// `leasehold leader`: who leads, or that nobody does now; a duty never elected and a
/// lease that is not Leasehold's are errors.
pub async fn leader(target: &Target, duty: &str, json: bool) -> Result<(), Error> {
    let store = target.store()?;
    check_name("--duty", "duty", duty)?;
    let read = match reads::duty(&store, &target.prefix, duty).await {
        Err(StoreError::WrongType(_)) => return Err(wrong_type(&store, target, duty).await),
        read => read?,
    };
    let (leader, fence) = match read {
        Duty::Led(l) => {
            let fence = l.fence;
            (Some(l), fence)
        }
        Duty::Vacant { last_fence } => (None, last_fence),
        Duty::NeverElected => return Err(Error::NoDuty(duty.to_owned())),
        Duty::Foreign(value) => {
            return Err(Error::ForeignLease {
                key: DutyKeys::new(&target.prefix, duty).lease().to_owned(),
                value,
            });
        }
    };
    print(&if json {
        output::to_json(&output::leader_json(
            &target.prefix,
            duty,
            leader.as_ref(),
            fence,
        ))
    } else {
        output::leader_text(duty, leader.as_ref(), fence)
    })
}

/// The error of a duty whose keys hold the wrong type: which key, asked with `TYPE`
/// (only now: reads never pay for it). If asking fails, both keys are named.
async fn wrong_type(store: &RedisStore, target: &Target, duty: &str) -> Error {
    let keys = DutyKeys::new(&target.prefix, duty);
    let found = reads::duty_key_of_wrong_type(store, &keys)
        .await
        .ok()
        .flatten();
    Error::DutyKeyType {
        keys: [keys.lease().to_owned(), keys.fence().to_owned()],
        found,
    }
}

/// Every group under the prefix (found with SCAN) with its status, and every duty as
/// `list` shows it, each read once. A group deleted since the scan found it is left
/// out.
///
/// # Errors
/// The first read that fails.
pub async fn read_inventory(
    target: &Target,
    store: &RedisStore,
) -> Result<(Vec<(String, GroupStatus)>, Vec<output::DutyEntry>), Error> {
    let (groups, duties) = read_inventory_each(target, store).await?;
    let groups = groups
        .into_iter()
        .map(|(group, read)| read.map(|status| (group, status)))
        .collect::<Result<_, _>>()?;
    Ok((groups, duties))
}

/// As [`read_inventory`], each group's read on its own: a group that cannot be read (a
/// key of another type, a half-written group) is its own error, and the others are
/// read all the same.
///
/// # Errors
/// The scan's, or a duty's read that fails.
pub async fn read_inventory_each(
    target: &Target,
    store: &RedisStore,
) -> Result<(GroupReads, Vec<output::DutyEntry>), Error> {
    let found = reads::inventory(store, &target.prefix).await?;
    let mut groups = Vec::with_capacity(found.groups.len());
    for group in found.groups {
        let admin = target.admin(store, &group)?;
        match admin.status().await {
            Ok(Some(status)) => groups.push((group, Ok(status))),
            // Deleted since the scan found it.
            Ok(None) => {}
            Err(error) => {
                let e = Error::Group {
                    group: group.clone(),
                    error,
                };
                groups.push((group, Err(e)));
            }
        }
    }
    let mut duties = Vec::with_capacity(found.duties.len());
    for duty in &found.duties {
        let read = match reads::duty(store, &target.prefix, duty).await {
            // A key of another type, or a fence that is not a number, is no more
            // Leasehold's than a foreign lease value: listed as such, with the rest.
            Err(StoreError::WrongType(_) | StoreError::Protocol(_)) => Duty::Foreign(String::new()),
            read => read?,
        };
        duties.extend(output::duty_entry(duty, &read));
    }
    Ok((groups, duties))
}

/// Each group found, and its status or why it could not be read.
pub type GroupReads = Vec<(String, Result<GroupStatus, Error>)>;

/// `leasehold list`: the groups and duties under the prefix (found with SCAN), each
/// read once.
pub async fn list(target: &Target, json: bool) -> Result<(), Error> {
    let store = target.store()?;
    let (groups, duties) = read_inventory(target, &store).await?;
    let list = output::ListJson {
        prefix: target.prefix.clone(),
        groups: groups
            .iter()
            .map(|(group, status)| output::group_entry(group, status))
            .collect(),
        duties,
    };
    print(&if json {
        output::to_json(&list)
    } else {
        output::list_text(&list)
    })
}
