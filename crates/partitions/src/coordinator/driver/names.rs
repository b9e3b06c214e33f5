//! Names: partitions by a local index, and this process as operators see it.

use std::collections::HashMap;
use std::sync::Arc;

/// Partition names by a local index: interned as the group names them (claims,
/// revocations, reads), since the set changes at runtime.
#[derive(Debug, Default)]
pub(super) struct Names {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, usize>,
}

impl Names {
    pub(super) fn intern(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let name: Arc<str> = Arc::from(name);
        let i = self.names.len();
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }

    pub(super) fn get(&self, i: usize) -> Arc<str> {
        self.names[i].clone()
    }

    /// The index of `name`, if it has one.
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// This process, as operators see it in the group: `host pid`.
pub(super) fn instance() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host} {}", std::process::id())
}
