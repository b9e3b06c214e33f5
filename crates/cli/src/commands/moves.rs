//! `moves`: reading a group's ledger of moves, once or following it.

use std::time::Duration;

use super::{poll_until_ctrl_c, print};
use crate::error::{Error, check_name};
use crate::output;
use crate::target::Target;
use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, Move};

/// How many entries one read of the ledger asks for.
const PAGE: usize = 1_000;

/// Every entry after `after` (the oldest kept if `None`), in pages.
pub async fn read_after(
    admin: &GroupAdmin<RedisStore>,
    group: &str,
    mut after: Option<String>,
) -> Result<Vec<Move>, Error> {
    let mut all = Vec::new();
    loop {
        let page = admin
            .moves(after.as_deref(), PAGE)
            .await
            .map_err(|error| Error::Group {
                group: group.to_owned(),
                error,
            })?;
        let Some(last) = page.last() else {
            return Ok(all);
        };
        after = Some(last.id.clone());
        let full = page.len() == PAGE;
        all.extend(page);
        if !full {
            return Ok(all);
        }
    }
}

/// `leasehold moves`: the ledger, oldest first (only `partition`'s moves if given);
/// `follow`: then every new move as it is written, until Ctrl-C (one JSON object per
/// line with `json`).
pub async fn moves(
    target: &Target,
    group: &str,
    partition: Option<&str>,
    json: bool,
    follow: Option<Duration>,
) -> Result<(), Error> {
    if let Some(p) = partition {
        check_name("--partition", "partition name", p)?;
    }
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    let exists = admin.exists().await.map_err(|error| Error::Group {
        group: group.to_owned(),
        error,
    })?;
    if !exists {
        return Err(Error::NoGroup(group.to_owned()));
    }
    let wanted = |m: &Move| partition.is_none_or(|p| m.partition == p);
    let read = read_after(&admin, group, None).await?;
    let mut last = read.last().map(|m| m.id.clone());
    let shown: Vec<Move> = read.into_iter().filter(wanted).collect();
    let Some(every) = follow else {
        return print(&if json {
            output::to_json(&output::moves_json(&target.prefix, group, &shown))
        } else {
            output::moves_text(group, &shown)
        });
    };
    let line = |m: &Move| {
        if json {
            // One compact object per line: the stream a script reads.
            format!(
                "{}\n",
                serde_json::to_string(&output::move_json(m)).unwrap_or_default()
            )
        } else {
            output::move_line(m)
        }
    };
    print(&shown.iter().map(line).collect::<String>())?;
    if !json {
        eprintln!(
            "following the ledger every {}; Ctrl-C to stop",
            humantime::format_duration(every)
        );
    }
    poll_until_ctrl_c(
        target,
        every,
        "the ledger",
        async || {
            let new = read_after(&admin, group, last.clone()).await?;
            if let Some(m) = new.last() {
                last = Some(m.id.clone());
            }
            Ok(new)
        },
        |new| {
            print(
                &new.iter()
                    .filter(|m| wanted(m))
                    .map(line)
                    .collect::<String>(),
            )
        },
    )
    .await
}
