//! Fenced writes to Redis keys.

use metrics::counter;
use thiserror::Error;

use super::FencedBatch;
use crate::error::StoreError;
use crate::fence::Fence;
use crate::metrics as m;
use crate::store::RedisStore;
use crate::store::redis::replies;
use crate::store::redis::scripts::{FENCED_PUSH, FENCED_WRITE};

/// A fenced write (or raise) was not performed.
///
/// Only [`Store`](Self::Store) errors may be retryable (see
/// [`StoreError::is_retryable`]); every other variant says that the same call can never
/// succeed.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum FencedWriteError {
    /// The resource has already accepted a write with a higher fence, or a newer term
    /// has [raised](FencedWriter::raise) it: the caller is a deposed leader and must
    /// stop. Not retryable.
    #[error("stale fence {fence}: the resource has seen fence {highest}")]
    Stale {
        /// The caller's fence.
        fence: Fence,
        /// The highest fence the resource has accepted (of a batch: the highest of its
        /// keys').
        highest: Fence,
    },
    /// A key is the empty string (a bug in the caller: its guard key would not share
    /// its Redis Cluster slot). Nothing was sent. Not retryable.
    #[error("a fenced key must not be empty")]
    EmptyKey,
    /// [`FencedBatch::commit`] of a batch with no operation in it. Nothing was sent.
    /// Not retryable.
    #[error("a fenced batch must write or raise at least one key")]
    EmptyBatch,
    /// The keys of one call (a batch's keys and their guard keys) do not all hash to
    /// one Redis Cluster slot, so one script cannot touch them all. Give them one hash
    /// tag, such as `out:{tenant-7}` and `cursor:{tenant-7}`. A batch is checked before
    /// anything is sent, on every topology (so that code tested against one server
    /// runs unchanged on a Cluster); a single write finds out from the Cluster's
    /// `CROSSSLOT` refusal. Nothing was written. Not retryable.
    #[error(
        "keys {key:?} and {other:?} hash to different redis cluster slots: give every key \
         of one fenced call the same hash tag, such as `out:{{tenant}}` and `cursor:{{tenant}}`"
    )]
    CrossSlot {
        /// A key of the call.
        key: String,
        /// A key (or guard key) of the same call in another slot.
        other: String,
    },
    /// The store failed; see [`StoreError::is_retryable`].
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl FencedWriteError {
    /// `CrossSlot` for a Cluster's `CROSSSLOT` refusal of a script touching `key` and
    /// `other`; any other store error as it is.
    pub(super) fn from_store(e: StoreError, key: &str, other: &str) -> Self {
        match &e {
            StoreError::Server(inner) if inner.code() == Some("CROSSSLOT") => Self::CrossSlot {
                key: key.to_owned(),
                other: other.to_owned(),
            },
            _ => Self::Store(e),
        }
    }
}

/// Writes to Redis keys only if the caller's fence is not lower than the highest fence
/// the key has accepted, atomically (one script).
///
/// Each key `k` gets a guard key holding that highest fence, in the same Redis Cluster
/// slot as `k` (see [`FencedWriter::guard_key`]). Equal fences are accepted, so one term
/// may write many times; a lower fence is rejected with [`FencedWriteError::Stale`] and
/// counted in `leasehold_fence_rejections_total`.
///
/// A new term that *reads* what its predecessor committed (a cursor, an offset) first
/// [raises](FencedWriter::raise) the guards of the keys it will write, so that a deposed
/// owner's write still in flight cannot land after the read; then it writes its output
/// and cursor together in one [batch](FencedWriter::batch). `docs/fencing.md` says
/// why, in that order.
#[derive(Debug, Clone)]
pub struct FencedWriter {
    store: RedisStore,
}

impl FencedWriter {
    /// A writer using the store's connection.
    pub fn new(store: RedisStore) -> Self {
        Self { store }
    }

    /// The guard key of `key`: `{key}:fence` if `key` has no hash tag (same slot, since
    /// the tag is then the whole key), `key:fence` if it has one.
    pub fn guard_key(key: &str) -> String {
        let tagged = key
            .find('{')
            .is_some_and(|open| key[open + 1..].find('}').is_some_and(|len| len > 0));
        if tagged {
            format!("{key}:fence")
        } else {
            format!("{{{key}}}:fence")
        }
    }

    /// `SET key value`, fenced.
    ///
    /// # Errors
    /// [`FencedWriteError::Stale`] if a higher fence has written (or raised the key);
    /// [`FencedWriteError::EmptyKey`] for an empty key; [`FencedWriteError::CrossSlot`]
    /// if a Cluster refuses the key with its guard (a key with a `}` but no hash tag); a
    /// store error otherwise.
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// If the future is dropped, the write may or may not have happened (it is atomic:
    /// all of it or none).
    pub async fn set(&self, key: &str, value: &str, fence: Fence) -> Result<(), FencedWriteError> {
        self.write(key, fence, "SET", &[value]).await
    }

    /// `HSET key field value`, fenced.
    ///
    /// # Errors
    /// As [`FencedWriter::set`].
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// As [`FencedWriter::set`].
    pub async fn hset(
        &self,
        key: &str,
        field: &str,
        value: &str,
        fence: Fence,
    ) -> Result<(), FencedWriteError> {
        self.write(key, fence, "HSET", &[field, value]).await
    }

    /// `RPUSH key value`, fenced: append to a ledger.
    ///
    /// Never sent twice: if the connection breaks after the request went out, this
    /// fails with a [`StoreError`](crate::StoreError) and the record may or may not have
    /// been appended (a retry could append it twice).
    ///
    /// # Errors
    /// As [`FencedWriter::set`].
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// As [`FencedWriter::set`].
    pub async fn rpush(
        &self,
        key: &str,
        value: &str,
        fence: Fence,
    ) -> Result<(), FencedWriteError> {
        self.write(key, fence, "RPUSH", &[value]).await
    }

    /// Raises `key`'s guard to `fence` without writing `key`: from now on every write
    /// (and raise) of `key` with a lower fence is refused
    /// ([`FencedWriteError::Stale`]), even from a term that has not written since.
    ///
    /// A new term calls it on the keys it will write *before* it reads what its
    /// predecessor committed there, so that nothing a deposed owner still has in flight
    /// can change what it read (`docs/fencing.md`, "Resuming exactly once"). An equal
    /// fence is accepted and changes nothing, so it is safe to retry (the store retries
    /// it itself after a broken connection). To raise several keys in one call (atomic,
    /// one round trip), use [`FencedBatch::raise`].
    ///
    /// ```no_run
    /// # use leasehold_election::{FencedWriter, Leadership};
    /// # async fn resume(writer: FencedWriter, lead: Leadership) -> leasehold_election::DutyResult {
    /// // Before the first read of the term: a deposed owner's late write is refused.
    /// writer.raise("cursor:{tenant-7}", lead.fence()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`FencedWriteError::Stale`] if a higher fence has written or raised the key;
    /// [`FencedWriteError::EmptyKey`] for an empty key; [`FencedWriteError::CrossSlot`]
    /// for a key whose guard lies in another Cluster slot (a key with a `}` but no hash
    /// tag); a store error otherwise.
    ///
    /// # Panics
    /// Never.
    ///
    /// # Cancel safety
    /// If the future is dropped, the guard may or may not have been raised; calling it
    /// again is safe.
    pub async fn raise(&self, key: &str, fence: Fence) -> Result<(), FencedWriteError> {
        self.batch().raise(key).commit_counted(fence, "raise").await
    }

    /// A batch of fenced writes to several keys that one script makes all or none of:
    /// say, an owner's output and its cursor. Add operations with
    /// [`FencedBatch::set`], [`FencedBatch::hset`], [`FencedBatch::rpush`] and
    /// [`FencedBatch::raise`], then [`FencedBatch::commit`] with the term's fence. The
    /// keys must share one Redis Cluster slot (one hash tag, such as `{tenant-7}`).
    pub fn batch(&self) -> FencedBatch {
        FencedBatch::new(self.store.clone())
    }

    async fn write(
        &self,
        key: &str,
        fence: Fence,
        op: &'static str,
        args: &[&str],
    ) -> Result<(), FencedWriteError> {
        if key.is_empty() {
            return Err(FencedWriteError::EmptyKey);
        }
        let guard = Self::guard_key(key);
        let fence_arg = fence.0.to_string();
        let mut argv = vec![fence_arg.as_str(), op];
        argv.extend_from_slice(args);
        let script = if op == "RPUSH" {
            &*FENCED_PUSH
        } else {
            &*FENCED_WRITE
        };
        let reply = self
            .store
            .eval(script, &[&guard, key], &argv)
            .await
            .map_err(|e| FencedWriteError::from_store(e, key, &guard))?;
        let (accepted, highest) = replies::fenced_write(reply)?;
        if accepted {
            return Ok(());
        }
        counter!(m::FENCE_REJECTIONS, "op" => op).increment(1);
        Err(FencedWriteError::Stale { fence, highest })
    }
}

#[cfg(test)]
mod tests {
    use super::FencedWriter;

    #[test]
    fn guard_key_shares_the_slot() {
        assert_eq!(FencedWriter::guard_key("ledger"), "{ledger}:fence");
        assert_eq!(FencedWriter::guard_key("a{t}b"), "a{t}b:fence");
        // An empty tag `{}` is not a tag for Redis: the whole key is hashed.
        assert_eq!(FencedWriter::guard_key("a{}b"), "{a{}b}:fence");
    }
}
