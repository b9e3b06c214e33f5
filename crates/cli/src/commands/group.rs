//! `status`, `watch` and `owner`: reading a group.

use std::time::{Duration, SystemTime};

use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, GroupStatus};

use super::{group_error, now, poll_until_ctrl_c, print};
use crate::error::{Error, check_name};
use crate::output;
use crate::target::Target;

/// The whole group; [`Error::NoGroup`] if it does not exist.
async fn read(admin: &GroupAdmin<RedisStore>, group: &str) -> Result<GroupStatus, Error> {
    admin
        .status()
        .await
        .map_err(|error| Error::Group {
            group: group.to_owned(),
            error,
        })?
        .ok_or_else(|| Error::NoGroup(group.to_owned()))
}

/// `leasehold status`; `summary`: the group's counts and one line per replica.
pub async fn status(target: &Target, group: &str, json: bool, summary: bool) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    let status = read(&admin, group).await?;
    let prefix = &target.prefix;
    print(&match (json, summary) {
        (true, false) => output::to_json(&output::status_json(prefix, group, &status)),
        (true, true) => output::to_json(&output::summary_json(prefix, group, &status)),
        (false, false) => output::status_text(prefix, group, &status),
        (false, true) => output::summary_text(prefix, group, &status),
    })
}

/// `leasehold owner`: one partition's owner, with its instance and address from the
/// group's members.
pub async fn owner(target: &Target, group: &str, partition: &str, json: bool) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    check_name("PARTITION", "partition name", partition)?;
    let owner = match admin.owner(partition).await {
        Ok(owner) => owner,
        Err(e) => return Err(group_error(target, &store, group, e, None).await),
    };
    let member = match &owner.owner {
        Some(replica) => admin
            .status()
            .await
            .map_err(|error| Error::Group {
                group: group.to_owned(),
                error,
            })?
            .and_then(|s| s.members.into_iter().find(|m| &m.replica == replica)),
        None => None,
    };
    let now = SystemTime::now();
    print(&if json {
        output::to_json(&output::owner_json(
            &target.prefix,
            group,
            &owner,
            member.as_ref(),
            now,
        ))
    } else {
        output::owner_text(&owner, member.as_ref(), now)
    })
}

/// `leasehold watch`: the status once, then one line per change until Ctrl-C.
///
/// The first read fails like `status`. Afterwards a failed read is reported once on
/// stderr and retried; only data of the wrong shape ends the watch.
pub async fn watch(target: &Target, group: &str, every: Duration) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    let mut last = read(&admin, group).await?;
    print(&output::status_text(&target.prefix, group, &last))?;
    print(&format!(
        "\nwatching for changes every {}; Ctrl-C to stop\n",
        humantime::format_duration(every)
    ))?;
    poll_until_ctrl_c(
        target,
        every,
        "the group",
        async || read(&admin, group).await,
        |status| {
            let at = now();
            let lines: String = output::changes(&last, &status)
                .iter()
                .map(|c| format!("{at}  {c}\n"))
                .collect();
            last = status;
            print(&lines)
        },
    )
    .await
}
