//! `plan`: what a change would do to a group, read from its status and planned with
//! the replicas' own rules ([`GroupAdmin::plan`](leasehold_partitions::GroupAdmin::plan)).
//! It changes nothing.

use leasehold_partitions::{MAX_WEIGHT, WhatIf};

use super::{group_error, print};
use crate::error::{Error, check_name};
use crate::output;
use crate::target::Target;

/// The flags of `leasehold plan`, as given.
#[derive(Debug, Clone, Default)]
pub struct PlanArgs {
    /// `--add-replica ID[:CAPACITY]`.
    pub add: Vec<String>,
    /// `--remove-replica ID`.
    pub remove: Vec<String>,
    /// `--drain ID`.
    pub drain: Vec<String>,
    /// `--weight PARTITION=WEIGHT`.
    pub weights: Vec<String>,
}

/// `ID` or `ID:CAPACITY` (the capacity: digits after the last colon; default 1).
fn replica_and_capacity(text: &str) -> Result<(String, u32), Error> {
    let (id, capacity) = match text.rsplit_once(':') {
        Some((id, c)) if !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) => {
            // Too many digits for a u32 is out of range all the same.
            (id, c.parse::<u32>().unwrap_or(u32::MAX))
        }
        _ => (text, 1),
    };
    check_name("--add-replica", "replica id", id)?;
    Ok((id.to_owned(), capacity))
}

/// `PARTITION=WEIGHT` (split at the last `=`).
fn partition_and_weight(text: &str) -> Result<(String, u64), Error> {
    let Some((partition, weight)) = text.rsplit_once('=') else {
        return Err(Error::BadPlanArg {
            arg: "--weight".to_owned(),
            value: text.to_owned(),
            expected: "PARTITION=WEIGHT",
        });
    };
    check_name("--weight", "partition name", partition)?;
    let w: i64 = weight.parse().map_err(|_| Error::BadPlanArg {
        arg: "--weight".to_owned(),
        value: text.to_owned(),
        expected: "PARTITION=WEIGHT, the weight a whole number",
    })?;
    let weight = u64::try_from(w)
        .ok()
        .filter(|w| (1..=MAX_WEIGHT).contains(w))
        .ok_or(Error::BadWeight(w))?;
    Ok((partition.to_owned(), weight))
}

/// The change the flags describe; bad flags are usage errors, before anything is read.
pub fn what_if(args: &PlanArgs) -> Result<WhatIf, Error> {
    let mut change = WhatIf::new();
    for a in &args.add {
        let (id, capacity) = replica_and_capacity(a)?;
        change = change.add_replica(id, capacity);
    }
    for r in &args.remove {
        check_name("--remove-replica", "replica id", r)?;
        change = change.remove_replica(r.clone());
    }
    for r in &args.drain {
        check_name("--drain", "replica id", r)?;
        change = change.drain(r.clone());
    }
    for w in &args.weights {
        let (p, weight) = partition_and_weight(w)?;
        change = change.weight(p, weight);
    }
    Ok(change)
}

/// `leasehold plan`: the moves and loads `args` would lead to; nothing is changed.
pub async fn plan(target: &Target, group: &str, args: &PlanArgs, json: bool) -> Result<(), Error> {
    let store = target.store()?;
    let admin = target.admin(&store, group)?;
    let change = what_if(args)?;
    let plan = match admin.plan(&change).await {
        Ok(plan) => plan,
        Err(e) => return Err(group_error(target, &store, group, e, None).await),
    };
    print(&if json {
        output::to_json(&output::plan_json(&target.prefix, group, &change, &plan))
    } else {
        output::plan_text(&target.prefix, group, &change, &plan)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_a_change() {
        let args = PlanArgs {
            add: vec!["d".into(), "e:3".into(), "host:8080:2".into()],
            remove: vec!["a".into()],
            drain: vec!["b".into()],
            weights: vec!["tenant=7".into(), "x=y=2".into()],
        };
        let change = what_if(&args).unwrap();
        assert_eq!(
            change.add,
            [("d".into(), 1), ("e".into(), 3), ("host:8080".into(), 2)]
        );
        assert_eq!(change.remove, ["a"]);
        assert_eq!(change.drain, ["b"]);
        assert_eq!(change.weights, [("tenant".into(), 7), ("x=y".into(), 2)]);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        let bad = |weights: &[&str]| {
            what_if(&PlanArgs {
                weights: weights.iter().map(|w| (*w).to_owned()).collect(),
                ..PlanArgs::default()
            })
            .unwrap_err()
        };
        assert!(matches!(bad(&["p"]), Error::BadPlanArg { .. }));
        assert!(matches!(bad(&["p=x"]), Error::BadPlanArg { .. }));
        assert!(matches!(bad(&["p=0"]), Error::BadWeight(0)));
        assert!(matches!(bad(&["p=-3"]), Error::BadWeight(-3)));
        assert!(matches!(bad(&["p=1000001"]), Error::BadWeight(1_000_001)));
        assert!(matches!(bad(&["=3"]), Error::BadArg { .. }));
        let add = what_if(&PlanArgs {
            add: vec![":2".into()],
            ..PlanArgs::default()
        });
        assert!(matches!(add, Err(Error::BadArg { .. })));
    }
}
