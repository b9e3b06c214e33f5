//! release: gives back a session's terms, named by term (`lua/release.lua`).

use std::sync::LazyLock;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};
use redis::Value;

use super::group_script;
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};
use crate::store::protocol::{MoveCause, Term};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("release.lua");

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    session: &str,
    terms: &[(Term, MoveCause)],
) -> Result<Vec<bool>, StoreError> {
    let fences: Vec<String> = terms
        .iter()
        .map(|((_, f), _)| f.get().to_string())
        .collect();
    let mut args = vec![session, keys.channel.as_str(), keys.notice.as_str()];
    for (((name, _), cause), fence) in terms.iter().zip(&fences) {
        args.push(name);
        args.push(fence);
        args.push(cause.as_str());
    }
    let reply = store.eval(&SCRIPT, &keys.all(), &args).await?;
    let items = match reply {
        // An empty table comes back as an empty array (or nil from older servers).
        Value::Nil => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut p = Parse::new("release", Value::Array(items));
    let mut out = Vec::with_capacity(p.remaining());
    while p.remaining() > 0 {
        out.push(p.next_int()? == 1);
    }
    Ok(out)
}

impl Group {
    /// The twin of `lua/release.lua`; whether to publish the notice.
    pub(crate) fn release(
        &mut self,
        session: &str,
        terms: &[(Term, MoveCause)],
        now: Now,
    ) -> (Vec<bool>, bool) {
        let names: Vec<String> = terms.iter().map(|((n, _), _)| n.clone()).collect();
        let fences: Vec<u64> = terms.iter().map(|((_, f), _)| f.get()).collect();
        let (flags, gone) = self.give_back(session, &names, Some(&fences), now.ms, &|j| terms[j].1);
        (flags, gone > 0)
    }
}
