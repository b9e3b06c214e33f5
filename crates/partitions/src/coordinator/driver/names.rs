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

/// This process, as operators see it in the group: `host pid`, then a tab and the
/// address it advertises, if it does (the value of its field in the group's `INFO`
/// hash; see [`info_value`]).
pub(super) fn instance(address: Option<&str>) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    info_value(&host, std::process::id(), address)
}

/// The value of a replica's field in the group's `INFO` hash: `host pid`, then a tab
/// and the advertised address if there is one. A control character in the host name
/// (from `HOSTNAME`, say) becomes `?`, so the first tab is always the address's.
pub(super) fn info_value(host: &str, pid: u32, address: Option<&str>) -> String {
    let host: String = host
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    match address {
        Some(address) => format!("{host} {pid}\t{address}"),
        None => format!("{host} {pid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::split_info;

    #[test]
    fn the_info_value_is_host_pid_then_a_tab_and_the_address() {
        assert_eq!(info_value("h", 7, None), "h 7");
        assert_eq!(
            info_value("h", 7, Some("10.0.0.7:8080")),
            "h 7\t10.0.0.7:8080"
        );
        assert_eq!(info_value("a\tb", 7, Some("x")), "a?b 7\tx");
        assert_eq!(split_info("a?b 7\tx"), ("a?b 7", Some("x")));
        assert_eq!(split_info("h 7"), ("h 7", None));
        for address in ["10.0.0.7:8080", "http://a b/?q=1"] {
            let value = info_value("host", 42, Some(address));
            assert_eq!(split_info(&value), ("host 42", Some(address)));
        }
    }
}
