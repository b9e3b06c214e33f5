//! release: gives back a session's terms, named by term, with the state each leaves its
//! successor (`lua/release.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};
use redis::Value;

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};
use crate::store::protocol::{MoveCause, Term};

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("release.lua");

/// A term given back: which, why it ended, and the state it leaves its successor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenBack {
    pub term: Term,
    pub cause: MoveCause,
    /// The bytes the term leaves for the next term of its partition
    /// (`Ownership::hand_off`), if any.
    pub state: Option<Vec<u8>>,
    /// The replica the partition is handed to, if the move names one: it is reserved
    /// for that replica for the release's hold.
    pub to: Option<String>,
    /// The server lifetime the replica's last tick named when it decided the release:
    /// the state is noted with it, and offered only if the server that grants the next
    /// term is still in it (a retry that reaches a server promoted since leaves state
    /// nobody is offered).
    pub lifetime: String,
}

impl GivenBack {
    /// A term given back for `cause`, leaving no state.
    #[cfg(test)]
    pub fn plain(term: Term, cause: MoveCause) -> Self {
        Self {
            term,
            cause,
            state: None,
            to: None,
            lifetime: String::new(),
        }
    }
}

impl Group {
    /// The twin of `lua/release.lua`; whether to publish the notice.
    pub(crate) fn release(
        &mut self,
        session: &str,
        terms: &[GivenBack],
        state_ttl: Duration,
        hold: Duration,
        now: Now,
    ) -> (Vec<bool>, bool) {
        let names: Vec<String> = terms.iter().map(|t| t.term.0.clone()).collect();
        let fences: Vec<u64> = terms.iter().map(|t| t.term.1.get()).collect();
        // Noted with the server lifetime the replica named, as release.lua does (0, no
        // lifetime's, if it names none).
        let (flags, gone) = self.give_back(session, &names, Some(&fences), now.ms, &|j| {
            let life = terms[j].lifetime.parse::<u64>().unwrap_or(0);
            (
                terms[j].cause,
                terms[j].state.as_ref().map(|s| (s.len() as u64, life)),
            )
        });
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        for (t, flag) in terms.iter().zip(&flags) {
            // Only for a term whose end ENDED notes now (so free, and not followed).
            let last = *flag
                && self
                    .ends
                    .ended
                    .get(&t.term.0)
                    .is_some_and(|l| l.fence == t.term.1.get());
            if !last {
                continue;
            }
            if let Some(state) = &t.state {
                let expires = now.ms.saturating_add(ms(state_ttl));
                self.ends
                    .hand_offs
                    .insert(t.term.0.clone(), (t.term.1.get(), state.clone(), expires));
            }
            if let Some(to) = &t.to {
                self.add_free(&t.term.0, now.ms.saturating_add(ms(hold).max(1)));
                self.ends.reserved.insert(t.term.0.clone(), to.clone());
            }
        }
        (flags, gone > 0)
    }
}

/// Gives back `session`'s terms among `terms`, keeping the state each leaves its
/// successor for `state_ttl` and reserving each one handed to a named receiver for it
/// for `hold`; one flag per term (true: no term of the session holds it and no later
/// one was granted). Safe to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Release {
    pub(crate) session: String,
    pub(crate) terms: Vec<GivenBack>,
    pub(crate) state_ttl: Duration,
    pub(crate) hold: Duration,
}

impl Release {
    /// Gives back `session`'s `terms`, keeping their state for `state_ttl` and named receivers' holds for `hold`.
    pub(crate) fn new(
        session: &str,
        terms: &[GivenBack],
        state_ttl: Duration,
        hold: Duration,
    ) -> Self {
        Self {
            session: session.to_owned(),
            terms: terms.to_vec(),
            state_ttl,
            hold,
        }
    }
}

impl Op for Release {
    type Reply = Vec<bool>;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<Vec<bool>, StoreError> {
        let Self {
            session,
            terms,
            state_ttl,
            hold,
        } = self;
        let fences: Vec<String> = terms.iter().map(|t| t.term.1.get().to_string()).collect();
        let states: Vec<Vec<u8>> = terms
            .iter()
            .map(|t| {
                t.state.as_ref().map_or_else(Vec::new, |s| {
                    let mut v = Vec::with_capacity(s.len() + 1);
                    v.push(b'=');
                    v.extend_from_slice(s);
                    v
                })
            })
            .collect();
        let ttl = super::millis(*state_ttl);
        let hold = super::millis(*hold);
        let mut args: Vec<&[u8]> = vec![
            session.as_bytes(),
            keys.channel.as_bytes(),
            keys.notice.as_bytes(),
            ttl.as_bytes(),
            hold.as_bytes(),
        ];
        let mut state_keys: Vec<String> = Vec::new();
        for ((t, fence), state) in terms.iter().zip(&fences).zip(&states) {
            args.push(t.term.0.as_bytes());
            args.push(fence.as_bytes());
            args.push(t.cause.as_str().as_bytes());
            args.push(state);
            args.push(t.to.as_deref().unwrap_or("").as_bytes());
            // Only a term that leaves state needs its lifetime: the others send nothing (a
            // release of 250 plain terms would otherwise carry 250 copies of an 81-byte id).
            if t.state.is_some() {
                args.push(t.lifetime.as_bytes());
                state_keys.push(keys.hand_off(&t.term.0));
            } else {
                args.push(b"");
            }
        }
        let mut all: Vec<&str> = keys.all().to_vec();
        all.extend(state_keys.iter().map(String::as_str));
        let reply = leasehold_election::ext::eval_bytes(store, &SCRIPT, &all, &args).await?;
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

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<bool> {
        store.with(keys, |g, now| {
            g.release(&self.session, &self.terms, self.state_ttl, self.hold, now)
        })
    }
}
