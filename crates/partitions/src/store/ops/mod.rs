//! One module per operation of the group protocol, each holding all of it: the
//! operation as a type implementing [`Op`] (its request), its reply, the script that
//! runs it on Redis (`../lua/<op>.lua`, whose header says what it takes and replies)
//! with the arguments it is sent and the parser of its reply, and its in-memory twin (a
//! method on [`super::memory::Group`], the same rules step for step). The stores and
//! the simulation's fault link run any [`Op`] through one entry point
//! ([`super::protocol::Protocol::run`]), so adding an operation touches its module, its
//! script (and [`super::redis`]'s list of scripts) and its conformance test
//! (`../conformance/ops.rs`), nothing else.
//!
//! Every script starts with the shared libraries in `../lua/lib/`: the keys named once
//! (`keys.lua`), helpers (`util.lua`), the metadata and weights (`meta.lua`), giving
//! partitions back (`free.lua`), changing the set (`set.lua`) and sessions
//! (`session.lua`), the server's lifetime as read (`server.lua`), and the fence rule and
//! the granting server's lifetime the election crate uses too
//! (`leasehold_election::ext::{FENCE_LUA, LIFETIME_LUA}`).
//!
//! Public items here are public only in name: nothing in `store` is reachable from
//! outside the crate.
#![allow(unreachable_pub)]

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use leasehold_election::ext::Parse;
use leasehold_election::{Fence, RedisStore, StoreError};

use super::protocol::MemberInfo;
use super::protocol::ReplicaState;

pub(crate) mod adopt;
pub(crate) mod budget;
pub(crate) mod change;
pub(crate) mod claim;
pub(crate) mod drain;
pub(crate) mod handoff;
pub(crate) mod held;
pub(crate) mod leave;
pub(crate) mod moves;
pub(crate) mod prefer;
pub(crate) mod read;
pub(crate) mod release;
pub(crate) mod report;
pub(crate) mod restore;
pub(crate) mod routes;
pub(crate) mod slots;
pub(crate) mod tick;
pub(crate) mod version;
pub(crate) mod weight;

pub(crate) use self::budget::TakeBudget;
pub(crate) use self::change::{Add, Remove};
pub(crate) use self::drain::Drain;
pub(crate) use self::handoff::TakeHandOffs;
pub(crate) use self::held::Held;
pub(crate) use self::leave::Leave;
pub(crate) use self::moves::{Moves, NewestMoves};
pub(crate) use self::prefer::Prefer;
pub(crate) use self::read::{ListPage, Owner, ReadSetPage, ReadStatusHead, StatusPage};
pub(crate) use self::release::Release;
pub(crate) use self::report::Report;
pub(crate) use self::routes::Routes;
pub(crate) use self::version::SetVersion;
pub(crate) use self::weight::SetWeight;

/// An operation of the group protocol: its request (the fields of the implementing
/// type), the script that runs it on Redis with the parser of its reply, and its twin in
/// process memory. The stores and the simulation's fault link run every operation
/// through [`super::protocol::Protocol::run`]. Not reachable from outside the crate.
#[allow(unreachable_pub)]
pub trait Op: Debug + Clone + Send + Sync + 'static {
    /// What the operation replies.
    type Reply: Debug + Send + 'static;

    /// Runs the operation's script on Redis and parses its reply.
    fn redis(
        &self,
        store: &RedisStore,
        keys: &crate::keys::GroupKeys,
    ) -> impl Future<Output = Result<Self::Reply, StoreError>> + Send;

    /// Runs the operation's twin on the in-memory store (on the group of `keys`, at
    /// the store's clock).
    fn memory(&self, store: &crate::MemoryGroupStore, keys: &crate::keys::GroupKeys)
    -> Self::Reply;
}

/// How a group follows the server's lifetime (`../lua/lib/server.lua`): the tick puts
/// it in front with the lifetime's library, before its quiet part.
pub(crate) const SERVER_LUA: &str = include_str!("../lua/lib/server.lua");

/// The libraries every group script starts with, in order.
pub(crate) const LIBRARY: &[&str] = &[
    leasehold_election::ext::FENCE_LUA,
    leasehold_election::ext::LIFETIME_LUA,
    SERVER_LUA,
    include_str!("../lua/lib/keys.lua"),
    include_str!("../lua/lib/util.lua"),
    include_str!("../lua/lib/meta.lua"),
    include_str!("../lua/lib/free.lua"),
    include_str!("../lua/lib/set.lua"),
    include_str!("../lua/lib/session.lua"),
];

/// A group script: the libraries, then the body of `lua/<file>` (after `prelude`, Lua
/// generated in Rust, such as the names of its reply's slots: [`slots`]). Every group
/// script is safe to run twice (its header says why), so the store may retry it.
macro_rules! group_script {
    ($file:literal) => {
        std::sync::LazyLock::new(|| {
            leasehold_election::ext::LuaScript::idempotent($crate::store::ops::group_code(
                "",
                include_str!(concat!("../lua/", $file)),
            ))
        })
    };
    ($file:literal, $prelude:expr) => {
        std::sync::LazyLock::new(|| {
            leasehold_election::ext::LuaScript::idempotent($crate::store::ops::group_code(
                &$prelude,
                include_str!(concat!("../lua/", $file)),
            ))
        })
    };
}
pub(crate) use group_script;

/// A group script's code: the libraries, `prelude`, then `body`.
pub(crate) fn group_code(prelude: &str, body: &str) -> String {
    let mut code = LIBRARY.concat();
    code.push_str(prelude);
    code.push_str(body);
    code
}

/// A duration as script milliseconds (at least 1).
pub(crate) fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

/// Script milliseconds as a duration (never negative).
pub(crate) fn ms(i: i64) -> Duration {
    Duration::from_millis(i.max(0).unsigned_abs())
}

/// A script count as a `usize` (never negative).
pub(crate) fn count(i: i64) -> usize {
    usize::try_from(i.max(0)).unwrap_or(usize::MAX)
}

/// The next item as a list of strings (nil items as empty strings).
pub(crate) fn strings(p: &mut Parse) -> Result<Vec<String>, StoreError> {
    let mut list = p.next_array()?;
    let mut out = Vec::with_capacity(list.remaining());
    while list.remaining() > 0 {
        out.push(list.next_opt_string()?.unwrap_or_default());
    }
    Ok(out)
}

/// The next item as a list of integers.
pub(crate) fn ints(p: &mut Parse) -> Result<Vec<i64>, StoreError> {
    let mut list = p.next_array()?;
    let mut out = Vec::with_capacity(list.remaining());
    while list.remaining() > 0 {
        out.push(list.next_int()?);
    }
    Ok(out)
}

/// The next item as a flat list of pairs.
pub(crate) fn pairs(p: &mut Parse) -> Result<Vec<(String, String)>, StoreError> {
    let flat = strings(p)?;
    Ok(flat
        .chunks(2)
        .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
        .collect())
}

/// The next item as a flat list of `name, fence, weight` triples.
pub(crate) fn triples(p: &mut Parse) -> Result<Vec<(String, Fence, u64)>, StoreError> {
    let mut flat = p.next_array()?;
    let mut out = Vec::with_capacity(flat.remaining() / 3);
    while flat.remaining() > 0 {
        out.push((
            flat.next_string()?,
            Fence(flat.next_u64()?),
            flat.next_u64()?,
        ));
    }
    Ok(out)
}

/// A roster as scripts send it: names[], states[], ms left[], held[], then (later in
/// the reply, see [`loads`]) loads[] and capacities[].
pub(crate) fn roster(p: &mut Parse) -> Result<Vec<MemberInfo>, StoreError> {
    let names = strings(p)?;
    let states = strings(p)?;
    let lefts = ints(p)?;
    let helds = ints(p)?;
    Ok(names
        .into_iter()
        .enumerate()
        .map(|(i, replica)| {
            let held = count(helds.get(i).copied().unwrap_or(0));
            MemberInfo {
                replica,
                state: ReplicaState::parse(states.get(i).map_or("", String::as_str)),
                left: ms(lefts.get(i).copied().unwrap_or(0)),
                held,
                load: held as u64,
                capacity: 1,
            }
        })
        .collect())
}

/// The roster's loads[] and capacities[].
pub(crate) fn loads(p: &mut Parse, members: &mut [MemberInfo]) -> Result<(), StoreError> {
    let loads = ints(p)?;
    let caps = ints(p)?;
    for (i, m) in members.iter_mut().enumerate() {
        m.load = loads
            .get(i)
            .map_or(m.held as u64, |l| l.max(&0).unsigned_abs());
        m.capacity = caps
            .get(i)
            .map_or(1, |c| u32::try_from((*c).max(1)).unwrap_or(u32::MAX));
    }
    Ok(())
}

/// An operator's change's reply, as the in-memory store keeps it for a retry (the
/// scripts keep it under the request's key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpReply {
    Add(change::AddReply),
    Remove(change::RemoveReply),
    Weight(weight::WeightReply),
    Drain(drain::DrainReply),
    Prefer(prefer::PreferReply),
}

/// The key under which an operator's request `op` keeps its reply (the admin scripts'
/// `KEYS[26]`).
pub(crate) fn op_key(keys: &crate::keys::GroupKeys, op: &str) -> String {
    format!("{}:{{{}}}:op:{op}", keys.prefix, keys.group)
}

/// The keys of a group script that may carry an operator's request: the group's, and
/// the request's reply key when there is one.
pub(crate) fn keys_with_op(keys: &crate::keys::GroupKeys, op: Option<&str>) -> Vec<String> {
    let mut all: Vec<String> = keys.all().iter().map(|k| (*k).to_owned()).collect();
    all.extend(op.map(|op| op_key(keys, op)));
    all
}

/// Runs an operator's script with `args` on the group's keys and the reply key of its
/// request `op`, if there is one.
pub(crate) async fn eval_with_op(
    store: &leasehold_election::RedisStore,
    script: &leasehold_election::ext::LuaScript,
    keys: &crate::keys::GroupKeys,
    op: Option<&str>,
    args: &[&str],
) -> Result<redis::Value, StoreError> {
    let all = keys_with_op(keys, op);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    store.eval(script, &all, args).await
}

#[cfg(test)]
mod tests {
    use leasehold_testkit::{documented_reply_shapes as documented_shapes, reply_of};

    use super::*;

    /// Every script says in its header what it replies (the tick's and the
    /// heartbeat's slots are named in Rust: `tick::TickSlot`, checked by tick's tests).
    #[test]
    fn every_script_header_names_its_reply() {
        for (name, body) in super::super::redis::sources() {
            assert!(
                body.starts_with(&format!("-- {name}:")),
                "lua/{name}.lua opens with its name and what it does"
            );
            assert!(
                body.contains("ARGV") || body.contains("Read-only"),
                "{name}"
            );
            assert!(
                body.contains("Reply"),
                "lua/{name}.lua says what it replies"
            );
        }
    }

    type Parser = fn(redis::Value) -> Result<(), StoreError>;

    /// The scripts whose replies have a fixed shape per outcome, with their parsers (the
    /// tick's and the heartbeat's named slots are checked by tick's tests; the
    /// variable-length replies of claim, held, list, owner, release and the status
    /// reads by the conformance test).
    fn fixed_shape_scripts() -> Vec<(&'static str, &'static str, Parser)> {
        vec![
            ("add", include_str!("../lua/add.lua"), |v| {
                change::parse_add(v).map(drop)
            }),
            ("remove", include_str!("../lua/remove.lua"), |v| {
                change::parse_remove(v).map(drop)
            }),
            ("drain", include_str!("../lua/drain.lua"), |v| {
                drain::parse(v).map(drop)
            }),
            ("weight", include_str!("../lua/weight.lua"), |v| {
                weight::parse(v).map(drop)
            }),
            ("prefer", include_str!("../lua/prefer.lua"), |v| {
                prefer::parse(v).map(drop)
            }),
            ("restore", include_str!("../lua/restore.lua"), |v| {
                restore::parse(v).map(drop)
            }),
            ("adopt", include_str!("../lua/adopt.lua"), |v| {
                adopt::parse(v).map(drop)
            }),
            ("version", include_str!("../lua/version.lua"), |v| {
                version::parse(v).map(drop)
            }),
        ]
    }

    #[test]
    fn every_documented_reply_parses_and_nothing_more_does() {
        for (name, source, parse) in fixed_shape_scripts() {
            let shapes = documented_shapes(source);
            if shapes.is_empty() {
                parse(redis::Value::Int(1)).unwrap_or_else(|e| panic!("{name}: {e}"));
                parse(redis::Value::Int(0)).unwrap_or_else(|e| panic!("{name}: {e}"));
                let two = redis::Value::Array(vec![redis::Value::Int(1), redis::Value::Int(1)]);
                assert!(parse(two).is_err(), "{name}: a longer reply is refused");
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
                if shape.len() > 1 {
                    assert!(
                        parse(reply_of(&shape[..shape.len() - 1])).is_err(),
                        "{name}: a reply shorter than {shape:?} is refused"
                    );
                }
            }
        }
    }

    /// Every command a group script calls, from its source: each `call('X'` of redis.
    fn commands(source: &str) -> Vec<String> {
        let call = ["redis", ".call('"].concat();
        source
            .split(call.as_str())
            .skip(1)
            .filter_map(|rest| rest.split('\'').next())
            .map(str::to_lowercase)
            .collect()
    }

    #[test]
    fn every_script_calls_only_what_the_minimal_acl_rule_allows() {
        let allowed: Vec<&str> = leasehold_testkit::MINIMAL_ACL_COMMANDS
            .split_whitespace()
            .filter_map(|c| c.strip_prefix('+'))
            .collect();
        let mut sources: Vec<(&str, &str)> = super::super::redis::sources();
        for lib in LIBRARY {
            sources.push(("a library", lib));
        }
        let mut seen = 0;
        for (name, body) in sources {
            for command in commands(body) {
                seen += 1;
                assert!(
                    allowed.contains(&command.as_str()),
                    "{name} calls {command}, which docs/topologies.md's minimal ACL rule \
                     does not allow"
                );
            }
        }
        assert!(seen > 100, "the scan found the calls: {seen}");
    }
}
