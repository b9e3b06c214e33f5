//! report: a replica's damped loads become its partitions' weights
//! (`lua/report.lua`).

use std::sync::LazyLock;

use leasehold_election::ext::{LuaScript, Parse};
use leasehold_election::{RedisStore, StoreError};

use super::Op;
use super::group_script;
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;
use crate::store::memory::{Group, Now};
use crate::store::protocol::Reported;

pub(crate) static SCRIPT: LazyLock<LuaScript> = group_script!("report.lua");

impl Group {
    /// The twin of `lua/report.lua`; whether to publish the notice (the group became
    /// weighted).
    pub(crate) fn report(
        &mut self,
        session: &str,
        weights: &[Reported],
        now: Now,
    ) -> (Vec<bool>, bool) {
        let mut out = vec![false; weights.len()];
        if self.meta.is_none() || self.restoring(now).is_some() || self.live(session, now).is_none()
        {
            return (out, false);
        }
        let (mut switched, mut delta) = (false, 0i128);
        for (j, (n, fence, w)) in weights.iter().enumerate() {
            let holds = self.owners.get(n).map(String::as_str) == Some(session)
                && self.fences.get(n).copied() == Some(fence.get())
                && !self.revoked.contains_key(n)
                && self.set.positions.contains_key(n);
            if !holds {
                continue;
            }
            out[j] = true;
            let old = self.weight(n);
            if *w == old {
                continue;
            }
            if !self.weighted() {
                self.make_weighted();
                switched = true;
            }
            if *w == 1 {
                self.set.weights.remove(n);
            } else {
                self.set.weights.insert(n.clone(), *w);
            }
            delta += i128::from(*w) - i128::from(old);
        }
        let add = |x: u64| u64::try_from((i128::from(x) + delta).max(0)).unwrap_or(0);
        if delta != 0 {
            if let Some(m) = self.meta.as_mut() {
                m.total = add(m.total);
            }
            if let Some(l) = self.loads.get_mut(session) {
                *l = add(*l);
            }
        }
        if switched {
            if let Some(m) = self.meta.as_mut() {
                m.wver += 1;
            }
            self.bump_set();
        }
        (out, switched)
    }
}

/// Sets the weights `session` reports for the terms it holds (its damped loads); one
/// flag per weight (true: the partition now has it; false: the session no longer holds
/// that term). Safe to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) session: String,
    pub(crate) weights: Vec<Reported>,
}

impl Report {
    /// Reports `session`'s `weights`.
    pub(crate) fn new(session: &str, weights: &[Reported]) -> Self {
        Self {
            session: session.to_owned(),
            weights: weights.to_vec(),
        }
    }
}

impl Op for Report {
    type Reply = Vec<bool>;

    async fn redis(&self, store: &RedisStore, keys: &GroupKeys) -> Result<Vec<bool>, StoreError> {
        let (session, weights) = (self.session.as_str(), self.weights.as_slice());
        if weights.is_empty() {
            return Ok(Vec::new());
        }
        let numbers: Vec<(String, String)> = weights
            .iter()
            .map(|(_, f, w)| (f.get().to_string(), w.to_string()))
            .collect();
        let mut args = vec![session, keys.channel.as_str(), keys.notice.as_str()];
        for ((name, _, _), (fence, weight)) in weights.iter().zip(&numbers) {
            args.extend([name.as_str(), fence.as_str(), weight.as_str()]);
        }
        let mut p = Parse::new("report", store.eval(&SCRIPT, &keys.all(), &args).await?);
        let flags = weights
            .iter()
            .map(|_| p.next_int().map(|f| f == 1))
            .collect::<Result<Vec<_>, _>>()?;
        p.finish()?;
        Ok(flags)
    }

    fn memory(&self, store: &MemoryGroupStore, keys: &GroupKeys) -> Vec<bool> {
        store.with(keys, |g, now| g.report(&self.session, &self.weights, now))
    }
}

#[cfg(test)]
mod tests {
    use leasehold_election::Fence;
    use leasehold_testkit::RedisServer;

    use super::*;

    #[tokio::test]
    async fn a_weights_key_of_the_wrong_type_is_a_typed_error_and_nothing_is_written() {
        let server = RedisServer::start();
        let store = RedisStore::builder(server.url()).build().unwrap();
        let keys = GroupKeys::new("leasehold", "g");
        let weights = keys.all()[14].to_owned();
        server.redis_cli(&["SET", &weights, "not a sorted set"]);
        server.redis_cli(&["HSET", keys.all()[3], "count", "1"]);
        let report = [("p0".to_owned(), Fence(1), 5)];
        let err = Report::new("a:1", &report)
            .redis(&store, &keys)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::WrongType(_)), "{err:?}");
        assert_eq!(
            server.redis_cli(&["GET", &weights]).trim(),
            "not a sorted set",
            "untouched"
        );
        assert_eq!(
            server
                .redis_cli(&["HGET", keys.all()[3], "weighted"])
                .trim(),
            "(nil)",
            "the group was not made weighted"
        );
    }
}
