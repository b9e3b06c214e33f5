//! Fenced writes to several keys in one script: all of them or none.

use std::collections::HashMap;

use metrics::counter;
use redis::cluster_routing::Slot;

use super::{FencedWriteError, FencedWriter};
use crate::fence::Fence;
use crate::metrics as m;
use crate::store::RedisStore;
use crate::store::redis::replies;
use crate::store::redis::scripts::{FENCED_BATCH, FENCED_BATCH_ONCE, LuaScript};

/// Fenced writes to several keys that one script makes all or none of
/// ([`FencedWriter::batch`]): an owner appends its output and moves its cursor
/// together, so no crash, pause or deposition can leave one without the other.
///
/// On [`commit`](Self::commit) the script reads the guard of every key first: if any
/// holds a higher fence, nothing is written and the batch is
/// [`Stale`](FencedWriteError::Stale). It also checks, before the first write, that no
/// write will fail on its key's type (a Redis script is not rolled back when a command
/// in it fails), so a key of the wrong type fails the batch
/// ([`StoreError::WrongType`](crate::StoreError::WrongType)) with nothing written.
/// Otherwise it makes the writes in the order they were added and raises every key's
/// guard to the fence.
///
/// **Keys**: one script can only touch keys of one Redis Cluster slot, so give every key
/// of a batch the same hash tag: `out:{tenant-7}` and `cursor:{tenant-7}`, not
/// `out:tenant-7` and `cursor:tenant-7`. A batch whose keys (or their guard keys) span
/// slots is refused before it is sent, on every topology, with
/// [`FencedWriteError::CrossSlot`].
///
/// ```no_run
/// # use leasehold_election::{FencedWriter, Leadership};
/// # async fn commit(writer: FencedWriter, lead: Leadership, entry: u64) -> leasehold_election::DutyResult {
/// // The output of entry `entry` and the cursor past it, together.
/// writer
///     .batch()
///     .rpush("out:{tenant-7}", format!("result of {entry}"))
///     .set("cursor:{tenant-7}", (entry + 1).to_string())
///     .commit(lead.fence())
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a batch writes nothing until it is committed"]
pub struct FencedBatch {
    store: RedisStore,
    /// The distinct keys, in the order they were first named.
    keys: Vec<String>,
    /// Each key's position in `keys`.
    index: HashMap<String, usize>,
    /// The operations as the script reads them: name, key number (from 1), arguments.
    argv: Vec<String>,
    ops: usize,
    /// Whether an operation appends: then the batch must never run twice.
    appends: bool,
}

impl FencedBatch {
    pub(super) fn new(store: RedisStore) -> Self {
        Self {
            store,
            keys: Vec::new(),
            index: HashMap::new(),
            argv: Vec::new(),
            ops: 0,
            appends: false,
        }
    }

    /// Adds `SET key value`.
    pub fn set(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.op("SET", key.into(), [value.into()])
    }

    /// Adds `HSET key field value`.
    pub fn hset(
        self,
        key: impl Into<String>,
        field: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.op("HSET", key.into(), [field.into(), value.into()])
    }

    /// Adds `RPUSH key value`. A batch holding one is never sent twice: if the
    /// connection breaks after the request went out, [`commit`](Self::commit) fails
    /// with a [`StoreError`](crate::StoreError) and the batch may or may not have been
    /// written (committing it again could append twice).
    pub fn rpush(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let mut batch = self.op("RPUSH", key.into(), [value.into()]);
        batch.appends = true;
        batch
    }

    /// Adds a raise of `key`'s guard to the batch's fence, without writing `key` (as
    /// [`FencedWriter::raise`], for several keys in one call).
    pub fn raise(self, key: impl Into<String>) -> Self {
        self.op("RAISE", key.into(), [])
    }

    /// How many operations the batch holds.
    pub fn len(&self) -> usize {
        self.ops
    }

    /// Whether the batch holds no operation (committing it fails with
    /// [`FencedWriteError::EmptyBatch`]).
    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    fn op<const N: usize>(mut self, name: &str, key: String, args: [String; N]) -> Self {
        let number = match self.index.get(&key) {
            Some(&i) => i + 1,
            None => {
                self.index.insert(key.clone(), self.keys.len());
                self.keys.push(key);
                self.keys.len()
            }
        };
        self.argv.push(name.to_owned());
        self.argv.push(number.to_string());
        self.argv.extend(args);
        self.ops += 1;
        self
    }

    /// Makes every write of the batch with `fence`, or none of them: only if no key's
    /// guard holds a higher fence, and only if every write can be made. Raises every
    /// key's guard to `fence`. An equal fence is accepted, so one term may commit many
    /// batches.
    ///
    /// A batch without [`rpush`](Self::rpush) may be committed again after an error
    /// (the store itself retries it once after a broken connection): it writes the
    /// same again. One with an `rpush` is never sent twice.
    ///
    /// # Errors
    /// [`FencedWriteError::Stale`] if a key's guard holds a higher fence (nothing was
    /// written); [`FencedWriteError::EmptyBatch`], [`FencedWriteError::EmptyKey`] or
    /// [`FencedWriteError::CrossSlot`] for a batch that can never be made (nothing was
    /// sent); [`FencedWriteError::Store`] otherwise, with
    /// [`StoreError::WrongType`](crate::StoreError::WrongType) for a key of the wrong
    /// type (nothing was written).
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// If the future is dropped, the batch may or may not have been written, but never
    /// in part: it is one script.
    pub async fn commit(&self, fence: Fence) -> Result<(), FencedWriteError> {
        self.commit_counted(fence, "batch").await
    }

    /// [`commit`](Self::commit), counting a refusal under `op`.
    pub(super) async fn commit_counted(
        &self,
        fence: Fence,
        op: &'static str,
    ) -> Result<(), FencedWriteError> {
        let keys = self.script_keys()?;
        let fence_arg = fence.0.to_string();
        let argv: Vec<&str> = std::iter::once(fence_arg.as_str())
            .chain(self.argv.iter().map(String::as_str))
            .collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .store
            .eval(self.script(), &key_refs, &argv)
            .await
            .map_err(|e| {
                let first = self.keys.first().map_or("", String::as_str);
                let last = keys.last().map_or("", String::as_str);
                FencedWriteError::from_store(e, first, last)
            })?;
        let (accepted, highest) = replies::fenced_write(reply)?;
        if accepted {
            return Ok(());
        }
        counter!(m::FENCE_REJECTIONS, "op" => op).increment(1);
        Err(FencedWriteError::Stale { fence, highest })
    }

    /// The script's `KEYS`: each key's guard, then the key; checked to be one call that
    /// can be made.
    fn script_keys(&self) -> Result<Vec<String>, FencedWriteError> {
        let Some(first) = self.keys.first() else {
            return Err(FencedWriteError::EmptyBatch);
        };
        if self.keys.iter().any(String::is_empty) {
            return Err(FencedWriteError::EmptyKey);
        }
        // Named by the caller's keys where those differ; by a key and its guard where
        // only that pair does (a key with a `}` but no hash tag).
        let slot = Slot::for_key(first);
        if let Some(other) = self.keys.iter().find(|k| Slot::for_key(k) != slot) {
            return Err(FencedWriteError::CrossSlot {
                key: first.clone(),
                other: other.clone(),
            });
        }
        let mut keys = Vec::with_capacity(self.keys.len() * 2);
        for key in &self.keys {
            let guard = FencedWriter::guard_key(key);
            if Slot::for_key(&guard) != slot {
                return Err(FencedWriteError::CrossSlot {
                    key: key.clone(),
                    other: guard,
                });
            }
            keys.push(guard);
            keys.push(key.clone());
        }
        Ok(keys)
    }

    /// Run once if the batch appends, else idempotent.
    fn script(&self) -> &'static LuaScript {
        if self.appends {
            &FENCED_BATCH_ONCE
        } else {
            &FENCED_BATCH
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> FencedBatch {
        let store = RedisStore::connect("redis://127.0.0.1:1/").expect("a valid url");
        FencedBatch::new(store)
    }

    #[test]
    fn operations_name_each_distinct_key_once_in_order() {
        let b = batch()
            .rpush("out:{t}", "r1")
            .set("cursor:{t}", "6")
            .rpush("out:{t}", "r2")
            .hset("state:{t}", "f", "v")
            .raise("cursor:{t}");
        assert_eq!(b.len(), 5);
        assert_eq!(
            b.script_keys().unwrap(),
            [
                "out:{t}:fence",
                "out:{t}",
                "cursor:{t}:fence",
                "cursor:{t}",
                "state:{t}:fence",
                "state:{t}"
            ]
        );
        assert_eq!(
            b.argv,
            [
                "RPUSH", "1", "r1", "SET", "2", "6", "RPUSH", "1", "r2", "HSET", "3", "f", "v",
                "RAISE", "2"
            ]
        );
    }

    #[test]
    fn only_a_batch_that_appends_is_never_retried() {
        let plain = batch()
            .set("a{t}", "1")
            .hset("b{t}", "f", "v")
            .raise("c{t}");
        assert!(plain.script().is_idempotent());
        let appends = plain.rpush("d{t}", "x");
        assert!(!appends.script().is_idempotent());
    }

    #[test]
    fn a_batch_that_cannot_be_made_says_why() {
        let empty = batch();
        assert!(empty.is_empty());
        assert!(matches!(
            empty.script_keys(),
            Err(FencedWriteError::EmptyBatch)
        ));
        assert!(matches!(
            batch().set("a{t}", "1").raise("").script_keys(),
            Err(FencedWriteError::EmptyKey)
        ));
        // Without a shared tag, `out:t` and `cursor:t` hash to different slots.
        let err = batch()
            .set("out:t", "1")
            .set("cursor:t", "1")
            .script_keys()
            .unwrap_err();
        assert!(
            matches!(&err, FencedWriteError::CrossSlot { key, other }
                if key == "out:t" && other == "cursor:t"),
            "{err:?}"
        );
        assert!(err.to_string().contains("same hash tag"), "{err}");
        // A key with a `}` but no tag: its guard `{a}b}:fence` hashes `a`, not `a}b`.
        assert!(matches!(
            batch().raise("a}b").script_keys(),
            Err(FencedWriteError::CrossSlot { key, other }) if key == "a}b" && other == "{a}b}:fence"
        ));
        // Two tags that hash to one slot are one slot.
        assert!(
            batch()
                .set("x{t}", "1")
                .set("{t}y", "2")
                .script_keys()
                .is_ok()
        );
    }
}
