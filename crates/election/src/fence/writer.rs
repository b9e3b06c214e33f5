//! Fenced writes to Redis keys.

use metrics::counter;
use thiserror::Error;

use crate::error::StoreError;
use crate::fence::Fence;
use crate::metrics as m;
use crate::store::RedisStore;
use crate::store::redis::replies;
use crate::store::redis::scripts::{FENCED_PUSH, FENCED_WRITE};

/// A fenced write was not performed.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum FencedWriteError {
    /// The resource has already accepted a write with a higher fence: the caller is a
    /// deposed leader and must stop. Not retryable.
    #[error("stale fence {fence}: the resource has seen fence {highest}")]
    Stale {
        /// The caller's fence.
        fence: Fence,
        /// The highest fence the resource has accepted.
        highest: Fence,
    },
    /// The store failed; see [`StoreError::is_retryable`].
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes to Redis keys only if the caller's fence is not lower than the highest fence
/// the key has accepted, atomically (one script).
///
/// Each key `k` gets a guard key holding that highest fence, in the same Redis Cluster
/// slot as `k` (see [`FencedWriter::guard_key`]). Equal fences are accepted, so one term
/// may write many times; a lower fence is rejected with [`FencedWriteError::Stale`] and
/// counted in `leasehold_fence_rejections_total`.
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
    /// [`FencedWriteError::Stale`] if a higher fence has written; a store error otherwise.
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

    async fn write(
        &self,
        key: &str,
        fence: Fence,
        op: &'static str,
        args: &[&str],
    ) -> Result<(), FencedWriteError> {
        let guard = Self::guard_key(key);
        let fence_arg = fence.0.to_string();
        let mut argv = vec![fence_arg.as_str(), op];
        argv.extend_from_slice(args);
        let script = if op == "RPUSH" {
            &*FENCED_PUSH
        } else {
            &*FENCED_WRITE
        };
        let reply = self.store.eval(script, &[&guard, key], &argv).await?;
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
