//! The parsers of the election scripts' replies: one per script in `lua/`, each
//! reading exactly the slots that script's header documents (a test below holds the
//! two together), and nothing else reads a script's reply.

use std::time::Duration;

use redis::Value;

use super::Parse;
use crate::error::StoreError;
use crate::fence::Fence;
use crate::store::Acquire;
use crate::token::replica_of_token;

/// `acquire.lua`.
pub(super) fn acquire(reply: Value) -> Result<Acquire, StoreError> {
    let mut p = Parse::new("acquire", reply);
    let acquire = match p.next_int()? {
        1 => Acquire::Won {
            fence: Fence(p.next_u64()?),
            regressed: p.next_int()? == 1,
        },
        3 => Acquire::Confirmed {
            fence: Fence(p.next_u64()?),
            remaining: p.next_pttl()?.unwrap_or(Duration::ZERO),
        },
        2 => Acquire::Recovering {
            wait: Duration::from_millis(p.next_u64()?),
        },
        0 => {
            let holder = p.next_opt_string()?.unwrap_or_default();
            Acquire::Lost {
                holder: replica_of_token(&holder).to_owned(),
                remaining: p.next_pttl()?,
                fence: Fence(p.next_u64()?),
            }
        }
        other => {
            return Err(StoreError::Protocol(format!(
                "acquire: unknown outcome {other}"
            )));
        }
    };
    p.finish()?;
    Ok(acquire)
}

/// `renew.lua` and `release.lua`: 1 or 0.
pub(super) fn flag(what: &'static str, reply: Value) -> Result<bool, StoreError> {
    let mut p = Parse::new(what, reply);
    let done = p.next_int()? == 1;
    p.finish()?;
    Ok(done)
}

/// A duty's keys as they are (`leader.lua`), for operators: whatever the lease key
/// holds, its time left, and the last fence issued.
///
/// For Leasehold's own crates; no semver promise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DutyKeysRead {
    /// The lease key's value: a holder's token, someone else's data, or `None`.
    pub lease: Option<String>,
    /// Time left on the lease key (zero when there is none; `None`: no expiry, which
    /// Leasehold never writes).
    pub lease_left: Option<Duration>,
    /// The last fence issued; `None` if the duty was never elected.
    pub fence: Option<Fence>,
}

/// `leader.lua`.
pub(super) fn duty(reply: Value) -> Result<DutyKeysRead, StoreError> {
    let mut p = Parse::new("leader", reply);
    let lease = p.next_opt_string()?;
    let lease_left = p.next_pttl()?;
    let fence = match p.next_opt_string()? {
        None => None,
        Some(f) => Some(Fence(f.parse().map_err(|_| {
            StoreError::Protocol(format!("leader: the fence {f:?} is not a number"))
        })?)),
    };
    p.finish()?;
    Ok(DutyKeysRead {
        lease,
        lease_left,
        fence,
    })
}

/// `fenced_write.lua` and `fenced_batch.lua`: whether the write was made, and the
/// fence the guard holds (a batch: the highest of its guards).
pub(crate) fn fenced_write(reply: Value) -> Result<(bool, Fence), StoreError> {
    let mut p = Parse::new("fenced write", reply);
    let accepted = p.next_int()? == 1;
    let highest = Fence(p.next_u64()?);
    p.finish()?;
    Ok((accepted, highest))
}

/// `scan.lua`: the next cursor and the keys of one step.
pub(super) fn scan(reply: Value) -> Result<(String, Vec<String>), StoreError> {
    let mut p = Parse::new("scan", reply);
    let cursor = p.next_string()?;
    let mut found = p.next_array()?;
    let mut keys = Vec::with_capacity(found.remaining());
    while found.remaining() > 0 {
        keys.push(found.next_string()?);
    }
    p.finish()?;
    Ok((cursor, keys))
}

#[cfg(test)]
mod tests {
    use leasehold_testkit::{documented_reply_shapes as documented_shapes, reply_of};

    use super::*;

    type Parser = fn(Value) -> Result<(), StoreError>;

    /// Every script with its parser.
    fn scripts() -> Vec<(&'static str, &'static str, Parser)> {
        vec![
            ("acquire", include_str!("lua/acquire.lua"), |v| {
                acquire(v).map(drop)
            }),
            ("renew", include_str!("lua/renew.lua"), |v| {
                flag("renew", v).map(drop)
            }),
            ("release", include_str!("lua/release.lua"), |v| {
                flag("release", v).map(drop)
            }),
            ("leader", include_str!("lua/leader.lua"), |v| {
                duty(v).map(drop)
            }),
            ("fenced_write", include_str!("lua/fenced_write.lua"), |v| {
                fenced_write(v).map(drop)
            }),
            ("fenced_batch", include_str!("lua/fenced_batch.lua"), |v| {
                fenced_write(v).map(drop)
            }),
            ("scan", include_str!("lua/scan.lua"), |v| scan(v).map(drop)),
        ]
    }

    #[test]
    fn every_documented_reply_parses_and_nothing_more_does() {
        for (name, source, parse) in scripts() {
            assert!(
                source.starts_with(&format!("-- {name}:")),
                "lua/{name}.lua opens with its name and what it does"
            );
            let shapes = documented_shapes(source);
            if shapes.is_empty() {
                parse(Value::Int(1)).unwrap_or_else(|e| panic!("{name}: 1: {e}"));
                parse(Value::Int(0)).unwrap_or_else(|e| panic!("{name}: 0: {e}"));
                assert!(parse(Value::Array(vec![Value::Int(1), Value::Int(1)])).is_err());
                continue;
            }
            for shape in shapes {
                parse(reply_of(&shape)).unwrap_or_else(|e| panic!("{name} {shape:?}: {e}"));
                let mut longer = shape.clone();
                longer.push("extra".into());
                assert!(
                    parse(reply_of(&longer)).is_err(),
                    "{name}: a reply longer than {shape:?} is refused"
                );
                let shorter = &shape[..shape.len() - 1];
                assert!(
                    parse(reply_of(shorter)).is_err(),
                    "{name}: a reply shorter than {shape:?} is refused"
                );
            }
        }
    }

    #[test]
    fn the_acquire_header_documents_all_four_outcomes() {
        let tags: Vec<String> = documented_shapes(include_str!("lua/acquire.lua"))
            .into_iter()
            .map(|s| s[0].clone())
            .collect();
        assert_eq!(tags, ["1", "3", "2", "0"]);
        assert!(acquire(Value::Array(vec![Value::Int(9)])).is_err());
    }

    #[test]
    fn a_duty_never_elected_has_no_fence() {
        let read = duty(Value::Array(vec![Value::Nil, Value::Int(-2), Value::Nil])).unwrap();
        assert_eq!(
            read,
            DutyKeysRead {
                lease: None,
                lease_left: Some(Duration::ZERO),
                fence: None
            }
        );
        let bad = Value::Array(vec![
            Value::Nil,
            Value::Int(-2),
            Value::BulkString(b"x".to_vec()),
        ]);
        assert!(matches!(duty(bad), Err(StoreError::Protocol(_))));
    }
}
