//! handoff: the next owner of a partition takes the state its previous term left
//! (`lua/handoff.lua`; `lua/release.lua` writes it).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};

use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};
use crate::store::protocol::Term;

/// Not a group script: it touches only the hand-off keys it is given.
pub(crate) static SCRIPT: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("../lua/handoff.lua")));

/// How long a taken state is kept, for a retry of the take whose reply was lost.
pub(crate) const KEEP_TAKEN: Duration = Duration::from_secs(10);

/// What the next owner found of the state a previous term left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The state the named term left.
    State(Vec<u8>),
    /// State of another term than the one named: never offered.
    Stale,
    /// No state: its time to live passed, or Redis lost it.
    Gone,
}

pub(crate) async fn redis(
    store: &RedisStore,
    keys: &GroupKeys,
    terms: &[Term],
) -> Result<Vec<Taken>, StoreError> {
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let state_keys: Vec<String> = terms.iter().map(|(n, _)| keys.hand_off(n)).collect();
    let keep = super::millis(KEEP_TAKEN);
    let fences: Vec<String> = terms.iter().map(|(_, f)| f.get().to_string()).collect();
    let mut args = vec![keep.as_str()];
    args.extend(fences.iter().map(String::as_str));
    let all: Vec<&str> = state_keys.iter().map(String::as_str).collect();
    let mut p = Parse::new("handoff", store.eval(&SCRIPT, &all, &args).await?);
    let mut out = Vec::with_capacity(terms.len());
    for _ in terms {
        let mut one = p.next_array()?;
        out.push(match one.next_string()?.as_str() {
            "ok" => Taken::State(one.next_bytes()?),
            "stale" => Taken::Stale,
            "gone" => Taken::Gone,
            other => return Err(StoreError::Protocol(format!("handoff replied {other:?}"))),
        });
    }
    p.finish()?;
    Ok(out)
}

impl Group {
    /// The twin of `lua/handoff.lua`.
    pub(crate) fn take_hand_offs(&mut self, terms: &[Term], now: Now) -> Vec<Taken> {
        let keep = u64::try_from(KEEP_TAKEN.as_millis()).unwrap_or(u64::MAX);
        terms
            .iter()
            .map(|(n, want)| {
                let want = want.get();
                match self.hand_offs.get_mut(n) {
                    Some((_, _, expires)) if *expires <= now.ms => {
                        self.hand_offs.remove(n);
                        Taken::Gone
                    }
                    None => Taken::Gone,
                    Some((fence, state, expires)) if *fence == want => {
                        *expires = (*expires).min(now.ms + keep);
                        Taken::State(state.clone())
                    }
                    Some((fence, _, _)) => {
                        if *fence < want {
                            self.hand_offs.remove(n);
                        }
                        Taken::Stale
                    }
                }
            })
            .collect()
    }
}
