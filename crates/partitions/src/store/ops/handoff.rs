//! handoff: the next owner of a partition takes the state its previous term left
//! (`lua/handoff.lua`; `lua/release.lua` writes it).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};

use super::Op;
use crate::MemoryGroupStore;
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

impl Group {
    /// The twin of `lua/handoff.lua`.
    pub(crate) fn take_hand_offs(&mut self, terms: &[Term], now: Now) -> Vec<Taken> {
        let keep = u64::try_from(KEEP_TAKEN.as_millis()).unwrap_or(u64::MAX);
        terms
            .iter()
            .map(|(n, want)| {
                let want = want.get();
                match self.ends.hand_offs.get_mut(n) {
                    Some((_, _, expires)) if *expires <= now.ms => {
                        self.ends.hand_offs.remove(n);
                        Taken::Gone
                    }
                    None => Taken::Gone,
                    Some((fence, state, expires)) if *fence == want => {
                        *expires = (*expires).min(now.ms + keep);
                        Taken::State(state.clone())
                    }
                    Some((fence, _, _)) => {
                        if *fence < want {
                            self.ends.hand_offs.remove(n);
                        }
                        Taken::Stale
                    }
                }
            })
            .collect()
    }
}

/// Takes the state each named term (partition, fence of the previous term) left for
/// the next one. Safe to retry for a while ([`Taken`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TakeHandOffs(pub(crate) Vec<Term>);

impl TakeHandOffs {
    /// Takes what `terms` left.
    pub(crate) fn new(terms: &[Term]) -> Self {
        Self(terms.to_vec())
    }
}

impl Op for TakeHandOffs {
    type Reply = Vec<Taken>;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<Vec<Taken>, StoreError> {
        let terms = self.0.as_slice();
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

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<Taken> {
        store.with(keys, |g, now| (g.take_hand_offs(&self.0, now), false))
    }
}

#[cfg(test)]
mod tests {
    use leasehold_election::Fence;
    use leasehold_testkit::RedisServer;

    use super::*;

    #[tokio::test]
    async fn a_hand_off_key_of_the_wrong_type_is_a_typed_error_and_a_state_written_over_it_is_taken()
     {
        let server = RedisServer::start();
        let store = RedisStore::builder(server.url()).build().unwrap();
        let keys = GroupKeys::new("leasehold", "g");
        let key = keys.hand_off("p1");
        server.redis_cli(&["HSET", &key, "f", "v"]);
        let terms = [("p1".to_owned(), Fence(7))];
        let err = TakeHandOffs::new(&terms)
            .redis(&store, &keys)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::WrongType(_)), "{err:?}");
        assert_eq!(
            server.redis_cli(&["TYPE", &key]).trim(),
            "hash",
            "untouched"
        );
        // A release's SET replaces whatever the key held.
        server.redis_cli(&["SET", &key, "7:offset=42"]);
        let taken = TakeHandOffs::new(&terms)
            .redis(&store, &keys)
            .await
            .unwrap();
        assert_eq!(taken, [Taken::State(b"offset=42".to_vec())]);
        let pttl = server.redis_cli(&["PTTL", &key]);
        let ttl: i64 = pttl.split_whitespace().last().unwrap().parse().unwrap();
        assert!(
            ttl > 0 && ttl <= KEEP_TAKEN.as_millis() as i64,
            "kept a little, for a retry: {ttl}"
        );
        // Binary state survives the trip, colons and all.
        let state: Vec<u8> = (0..=255u8).chain(*b":7:").collect();
        let mut value = b"8:".to_vec();
        value.extend_from_slice(&state);
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let () = redis::cmd("SET")
            .arg(&key)
            .arg(value)
            .query_async(&mut con)
            .await
            .unwrap();
        let taken = TakeHandOffs::new(&[("p1".to_owned(), Fence(8))])
            .redis(&store, &keys)
            .await
            .unwrap();
        assert_eq!(taken, [Taken::State(state)]);
    }
}
