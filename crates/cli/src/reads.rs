//! What the CLI makes of the libraries' raw reads (each one read-only script under the
//! call timeout): a duty's keys (to tell a duty never elected, one nobody leads now and
//! a foreign value apart), and the names of the groups and duties under a prefix (SCAN,
//! step by step; never KEYS).

use std::collections::BTreeSet;
use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::DutyKeys;
use leasehold_election::ext::{
    DutyKeysRead, LuaScript, Parse, read_duty, replica_of_token, scan_step, validate_name,
};
use leasehold_election::{Fence, RedisStore, StoreError};

/// How many keys one SCAN step looks at (a hint to Redis: each step stays short).
const SCAN_COUNT: usize = 1000;

/// The type of each key (`TYPE`): `string`, `hash`, `list`, ..., `none`. Read-only; run
/// only after a read failed with `WRONGTYPE`, to name the key (Redis does not).
static KEY_TYPES: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::idempotent(include_str!("lua/key_types.lua")));

/// The holder of a duty's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// Its replica id.
    pub replica: String,
    /// The fence of its term.
    pub fence: Fence,
    /// Lease left; `None` when the key has no expiry (which Leasehold never writes).
    pub lease_left: Option<Duration>,
}

/// What a duty's keys say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Duty {
    /// Someone leads it.
    Led(Leader),
    /// Nobody leads it now; it was elected before (its fence key exists).
    Vacant {
        /// The last fence issued.
        last_fence: Fence,
    },
    /// It was never elected under this prefix: neither a lease nor a fence key.
    NeverElected,
    /// The lease key holds something that is not a Leasehold token.
    Foreign(String),
}

/// Whether `value` is a Leasehold lease token: `<replica id>:<32 lowercase hex digits>`.
pub fn is_token(value: &str) -> bool {
    value.rsplit_once(':').is_some_and(|(replica, hex)| {
        hex.len() == 32
            && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            && validate_name("replica id", replica).is_ok()
    })
}

/// Classifies one read of a duty's keys.
fn duty_of(read: DutyKeysRead) -> Duty {
    let fence = read.fence.unwrap_or_default();
    match read.lease {
        Some(value) if !is_token(&value) => Duty::Foreign(value),
        Some(token) => Duty::Led(Leader {
            replica: replica_of_token(&token).to_owned(),
            fence,
            lease_left: read.lease_left,
        }),
        None if read.fence.is_some() => Duty::Vacant { last_fence: fence },
        None => Duty::NeverElected,
    }
}

/// Reads `duty` under `prefix` in one script.
///
/// # Errors
/// The store's error; [`StoreError::Protocol`] if the fence is not a number.
pub async fn duty(store: &RedisStore, prefix: &str, duty: &str) -> Result<Duty, StoreError> {
    let read = read_duty(store, &DutyKeys::new(prefix, duty)).await?;
    Ok(duty_of(read))
}

/// The first of a duty's keys (lease, then fence) that holds another type than a string,
/// with that type; `None` if neither does (any more).
///
/// # Errors
/// The store's error (an ACL without `TYPE`, say).
pub async fn duty_key_of_wrong_type(
    store: &RedisStore,
    keys: &DutyKeys,
) -> Result<Option<(usize, String)>, StoreError> {
    let reply = store
        .eval(&KEY_TYPES, &[keys.lease(), keys.fence()], &[])
        .await?;
    let mut p = Parse::new("key types", reply);
    for i in 0..2 {
        let kind = p.next_string()?;
        if kind != "string" && kind != "none" {
            return Ok(Some((i, kind)));
        }
    }
    Ok(None)
}

/// The groups and duties under a prefix, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Groups: a `<prefix>:{<group>}:meta` key exists.
    pub groups: BTreeSet<String>,
    /// Duties: a `<prefix>:{<duty>}:lease` or `:fence` key exists.
    pub duties: BTreeSet<String>,
}

impl Inventory {
    /// Files `key` under its group or duty, if it is a group's metadata or a duty's
    /// lease or fence under `prefix`; other keys are left out.
    fn add(&mut self, prefix: &str, key: &str) {
        let Some(rest) = key.strip_prefix(prefix).and_then(|r| r.strip_prefix(":{")) else {
            return;
        };
        // Names contain no braces: the first `}` ends the hash tag.
        let Some((name, suffix)) = rest.split_once('}') else {
            return;
        };
        if validate_name("name", name).is_err() {
            return;
        }
        match suffix {
            ":meta" => self.groups.insert(name.to_owned()),
            ":lease" | ":fence" => self.duties.insert(name.to_owned()),
            _ => false,
        };
    }
}

/// `text` with the glob characters of SCAN's MATCH escaped.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Every group and duty under `prefix`: SCAN with MATCH `<prefix>:{*}:*`, a thousand
/// keys per step, each step one call under the timeout.
///
/// # Errors
/// The store's error.
pub async fn inventory(store: &RedisStore, prefix: &str) -> Result<Inventory, StoreError> {
    Ok(inventory_within(store, prefix, usize::MAX).await?.0)
}

/// As [`inventory`], in at most `steps` SCAN steps; and whether the scan got through
/// the whole key space.
///
/// # Errors
/// The store's error.
pub async fn inventory_within(
    store: &RedisStore,
    prefix: &str,
    steps: usize,
) -> Result<(Inventory, bool), StoreError> {
    let pattern = format!("{}:{{*}}:*", glob_escape(prefix));
    let mut found = Inventory::default();
    let mut cursor = "0".to_owned();
    for _ in 0..steps {
        let (next, keys) = scan_step(store, &cursor, &pattern, SCAN_COUNT).await?;
        for key in keys {
            found.add(prefix, &key);
        }
        cursor = next;
        if cursor == "0" {
            return Ok((found, true));
        }
    }
    Ok((found, false))
}

/// The hint for a `group` (or duty) not found among `names`, those under `prefix`: the
/// closest name if one is close (an edit or two away), else the names there are (ten at
/// most). `None` if there is nothing to say (`complete`: every key was scanned).
pub fn not_found_hint(
    kind: (&str, &str),
    name: &str,
    names: &BTreeSet<String>,
    prefix: &str,
    complete: bool,
) -> Option<String> {
    let (one, many) = kind;
    let len = name.chars().count();
    let close = names
        .iter()
        .filter(|n| n.as_str() != name)
        .map(|n| (strsim::osa_distance(name, n), n))
        .filter(|(d, _)| *d <= (len / 4).max(2) && *d < len)
        .min();
    if let Some((_, n)) = close {
        return Some(format!("did you mean {n:?}?"));
    }
    if !complete {
        return None;
    }
    if names.is_empty() {
        return Some(format!(
            "there are no {many} under prefix {prefix:?} (is --prefix right?)"
        ));
    }
    let shown: Vec<String> = names.iter().take(10).map(|n| format!("{n:?}")).collect();
    let more = match names.len().saturating_sub(shown.len()) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let label = if names.len() == 1 {
        format!("the only {one}")
    } else {
        format!("the {many}")
    };
    Some(format!(
        "{label} under prefix {prefix:?}: {}{more}",
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn tokens_are_a_replica_and_32_hex_digits() {
        assert!(is_token(&format!("replica-a:{HEX}")));
        assert!(is_token(&format!("node:a:{HEX}")), "ids may hold colons");
        for foreign in [
            "x".to_owned(),
            "replica-a:0123".to_owned(),
            format!(":{HEX}"),
            format!("replica-a:{}", HEX.to_uppercase()),
            format!("replica-a:{HEX}0"),
            format!("a{{b}}:{HEX}"),
        ] {
            assert!(!is_token(&foreign), "{foreign:?}");
        }
    }

    fn read(lease: Option<String>, left: Option<Duration>, fence: Option<u64>) -> DutyKeysRead {
        let mut r = DutyKeysRead::default();
        r.lease = lease;
        r.lease_left = left;
        r.fence = fence.map(Fence);
        r
    }

    #[test]
    fn a_duty_is_led_vacant_never_elected_or_foreign() {
        let left = Some(Duration::from_millis(900));
        assert_eq!(
            duty_of(read(Some(format!("r1:{HEX}")), left, Some(7))),
            Duty::Led(Leader {
                replica: "r1".into(),
                fence: Fence(7),
                lease_left: left
            })
        );
        assert_eq!(
            duty_of(read(None, Some(Duration::ZERO), Some(7))),
            Duty::Vacant {
                last_fence: Fence(7)
            }
        );
        assert_eq!(
            duty_of(read(None, Some(Duration::ZERO), None)),
            Duty::NeverElected
        );
        assert_eq!(
            duty_of(read(Some("x".into()), None, None)),
            Duty::Foreign("x".into())
        );
    }

    #[test]
    fn inventory_keeps_group_metadata_and_duty_keys_only() {
        let mut inv = Inventory::default();
        for key in [
            "lh:{tenants}:meta",
            "lh:{tenants}:members",
            "lh:{tenants}:fences",
            "lh:{tenants}:p1:lease", // a grouped elector's key, not a duty
            "lh:{scheduler}:lease",
            "lh:{scheduler}:fence",
            "lh:{scheduler}:boot",
            "lh:{reports}:fence",
            "lh:{}:fence",
            "lhx:{other}:fence",
            "lh:released",
        ] {
            inv.add("lh", key);
        }
        assert_eq!(inv.groups.into_iter().collect::<Vec<_>>(), ["tenants"]);
        assert_eq!(
            inv.duties.into_iter().collect::<Vec<_>>(),
            ["reports", "scheduler"]
        );
    }

    #[test]
    fn a_name_not_found_suggests_a_close_one_or_lists_the_others() {
        let names: BTreeSet<String> = ["reports", "scheduler"].map(String::from).into();
        let hint = |name| not_found_hint(("duty", "duties"), name, &names, "lh", true);
        assert_eq!(
            hint("reprots").as_deref(),
            Some("did you mean \"reports\"?")
        );
        assert_eq!(
            hint("schedular").as_deref(),
            Some("did you mean \"scheduler\"?")
        );
        assert_eq!(
            hint("billing").as_deref(),
            Some("the duties under prefix \"lh\": \"reports\", \"scheduler\"")
        );
        // One letter off a one-letter name is no suggestion.
        assert_eq!(
            not_found_hint(("group", "groups"), "a", &["b".into()].into(), "lh", true).as_deref(),
            Some("the only group under prefix \"lh\": \"b\"")
        );
        assert_eq!(
            not_found_hint(("group", "groups"), "g", &BTreeSet::new(), "lh", true).as_deref(),
            Some("there are no groups under prefix \"lh\" (is --prefix right?)")
        );
        // An incomplete scan lists nothing: the name may be among those not scanned.
        assert_eq!(
            not_found_hint(("duty", "duties"), "billing", &names, "lh", false),
            None
        );
        let many: BTreeSet<String> = (0..12).map(|i| format!("group-{i:02}")).collect();
        let h = not_found_hint(("group", "groups"), "x", &many, "lh", true).unwrap();
        assert!(h.ends_with("\"group-09\" and 2 more"), "{h}");
    }

    #[test]
    fn glob_characters_of_the_prefix_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escape("leasehold"), "leasehold");
    }
}
