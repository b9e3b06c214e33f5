//! Settings both ends use, so the child leader and the in-process follower agree.

use std::error::Error;
use std::path::Path;
use std::time::Duration;

use leasehold_election::{ElectorConfig, RedisStore};

use crate::topology::StoreSpec;

/// The error type of the bench: everything is reported to the user and ends the run.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// The store `spec` names, with a call timeout that suits `lease` (a third of it, at
/// most 1 s). The one place the bench and its children build a store.
///
/// # Errors
/// If a URL is malformed or a TLS file cannot be read.
///
/// # Panics
/// Outside a tokio runtime.
pub fn build_store(spec: &StoreSpec, lease: Duration) -> Result<RedisStore, BoxError> {
    let call_timeout = (lease / 3).min(Duration::from_secs(1));
    let builder = match spec {
        StoreSpec::Single { url } => RedisStore::builder(url.as_str()),
        StoreSpec::Tls {
            url,
            ca_file,
            cert_file,
            key_file,
        } => {
            let read = |path: &Path| {
                std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))
            };
            RedisStore::builder(url.as_str())
                .tls_root_ca(read(ca_file)?)
                .tls_client_cert(read(cert_file)?, read(key_file)?)
        }
        StoreSpec::Sentinel { master, sentinels } => {
            RedisStore::sentinel_builder(master.as_str(), sentinels.clone())
        }
        StoreSpec::Cluster { nodes } => RedisStore::cluster_builder(nodes.clone()),
    };
    Ok(builder.call_timeout(call_timeout).build()?)
}

/// The elector settings of `replica` on `duty`: the library defaults for `lease`.
///
/// # Errors
/// If a name or the lease is out of range.
pub fn config(duty: &str, replica: &str, lease: Duration) -> Result<ElectorConfig, BoxError> {
    Ok(ElectorConfig::builder(duty, replica).lease(lease).build()?)
}
