//! A script's reply as named slots: the slots are named once, in Rust (an enum declared
//! with [`slots!`]), and the script is sent a Lua prelude generated from that table
//! (`local SLOT = {status = 1, resumed = 2, ...}`), so it fills its reply by name
//! (`r[SLOT.status] = ...`) and the parser reads each slot by name
//! ([`Reply::int`]`(TickSlot::Unowned)`). The reply on the wire is the same array of
//! values, in the same order, as a reply built by position: no names are sent.
//!
//! Redis ends a Lua array at its first nil, so a slot left unfilled shortens the reply:
//! [`Reply::new`] checks the count once, and the tests check that the script fills
//! every slot by name ([`assigned`]). A value that may be missing is sent as `false` (a
//! nil reply), never as nil.

use std::marker::PhantomData;

use leasehold_election::StoreError;
use leasehold_election::ext::Parse;
use redis::Value;

/// The slots of one script's reply, in the order the script sends them.
pub(crate) trait Slots: Copy + std::fmt::Debug + 'static {
    /// Every slot's name in the script, in order (the position is the enum's
    /// discriminant).
    const NAMES: &'static [&'static str];

    /// Every slot, in order.
    const ALL: &'static [Self];

    /// The slot's index in the reply (from 0).
    fn index(self) -> usize;

    /// The slot's name in the script.
    fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// The Lua prelude naming the slots: `local <var> = {name = 1, ...}`.
    fn lua_index(var: &str) -> String {
        let fields: Vec<String> = Self::ALL
            .iter()
            .map(|s| format!("{} = {}", s.name(), s.index() + 1))
            .collect();
        format!("local {var} = {{{}}}\n", fields.join(", "))
    }

    /// The Lua prelude listing the names in order: `local <var> = {'name', ...}` (the
    /// fields an `HMGET` reads, when the slots are a hash's fields).
    fn lua_names(var: &str) -> String {
        let names: Vec<String> = Self::ALL
            .iter()
            .map(|s| format!("'{}'", s.name()))
            .collect();
        format!("local {var} = {{{}}}\n", names.join(", "))
    }
}

/// Declares a script's reply slots: an enum of them in order, each with its name in
/// the script (a Lua identifier).
macro_rules! slots {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $slot:ident = $lua:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vmeta])* $slot ),+
        }

        impl $crate::store::ops::slots::Slots for $name {
            const NAMES: &'static [&'static str] = &[$($lua),+];
            const ALL: &'static [Self] = &[$(Self::$slot),+];

            fn index(self) -> usize {
                self as usize
            }
        }
    };
}
pub(crate) use slots;

/// A reply of the slots `S`, each read once, by name.
#[derive(Debug)]
pub(crate) struct Reply<S> {
    what: &'static str,
    values: Vec<Option<Value>>,
    slots: PhantomData<S>,
}

impl<S: Slots> Reply<S> {
    /// The reply `reply` (an array of exactly one value per slot); `what` names it in
    /// error messages.
    pub(crate) fn new(what: &'static str, reply: Value) -> Result<Self, StoreError> {
        let values = match reply {
            Value::Array(values) => values,
            other => {
                return Err(StoreError::Protocol(format!(
                    "{what}: expected {} slots, got {other:?}",
                    S::NAMES.len()
                )));
            }
        };
        if values.len() != S::NAMES.len() {
            return Err(StoreError::Protocol(format!(
                "{what}: {} slots, expected {}",
                values.len(),
                S::NAMES.len()
            )));
        }
        Ok(Self {
            what,
            values: values.into_iter().map(Some).collect(),
            slots: PhantomData,
        })
    }

    /// The slot's value as it is (each slot is read once).
    pub(crate) fn value(&mut self, slot: S) -> Result<Value, StoreError> {
        self.values[slot.index()].take().ok_or_else(|| {
            StoreError::Protocol(format!("{}: slot {} read twice", self.what, slot.name()))
        })
    }

    /// The slot as a cursor of one item, for [`Parse`]'s readers; their errors name
    /// the slot.
    fn read<T>(
        &mut self,
        slot: S,
        read: impl FnOnce(&mut Parse) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let value = self.value(slot)?;
        read(&mut Parse::new(self.what, Value::Array(vec![value]))).map_err(|e| match e {
            StoreError::Protocol(m) => StoreError::Protocol(format!("{m} (slot {})", slot.name())),
            other => other,
        })
    }

    /// The slot as an integer.
    pub(crate) fn int(&mut self, slot: S) -> Result<i64, StoreError> {
        self.read(slot, Parse::next_int)
    }

    /// The slot as a non-negative integer.
    pub(crate) fn u64(&mut self, slot: S) -> Result<u64, StoreError> {
        self.read(slot, Parse::next_u64)
    }

    /// The slot as a string; nil is an error.
    pub(crate) fn string(&mut self, slot: S) -> Result<String, StoreError> {
        self.read(slot, Parse::next_string)
    }

    /// The slot as a string, or `None` for nil.
    pub(crate) fn opt_string(&mut self, slot: S) -> Result<Option<String>, StoreError> {
        self.read(slot, Parse::next_opt_string)
    }

    /// The slot as a string, nil as the empty string.
    pub(crate) fn text(&mut self, slot: S) -> Result<String, StoreError> {
        Ok(self.opt_string(slot)?.unwrap_or_default())
    }

    /// The slot read by one of the list readers of `ops` (`strings`, `pairs`, ...).
    pub(crate) fn list<T>(
        &mut self,
        slot: S,
        read: fn(&mut Parse) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.read(slot, read)
    }
}

/// The slots a script's source fills by name (`<table>[<var>.<name>] =`), each as often
/// as it does; for the tests that check a script fills every slot once.
#[cfg(test)]
pub(crate) fn assigned<'a>(source: &'a str, table: &str, var: &str) -> Vec<&'a str> {
    let open = format!("{table}[{var}.");
    source
        .split(open.as_str())
        .skip(1)
        .filter_map(|rest| {
            let (name, after) = rest.split_once(']')?;
            after.trim_start().starts_with('=').then_some(name)
        })
        .collect()
}

/// Every slot name a script's source reads or writes (`<var>.<name>`; a comment's
/// `<var>.<name>` in angle brackets is none).
#[cfg(test)]
pub(crate) fn mentioned<'a>(source: &'a str, var: &str) -> Vec<&'a str> {
    let open = format!("{var}.");
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(open.as_str()) {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + open.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let ident = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if ident && end > 0 {
            out.push(&after[..end]);
        }
        rest = &after[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    slots! {
        /// Three slots, for the tests.
        enum Three {
            A = "a",
            Bee = "bee",
            C = "c",
        }
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_prelude_names_the_slots_in_order() {
        assert_eq!(Three::lua_index("S"), "local S = {a = 1, bee = 2, c = 3}\n");
        assert_eq!(Three::lua_names("N"), "local N = {'a', 'bee', 'c'}\n");
        assert_eq!(Three::Bee.name(), "bee");
        assert_eq!(Three::ALL, [Three::A, Three::Bee, Three::C]);
    }

    #[test]
    fn slots_are_read_by_name_in_any_order_once() {
        let reply = Value::Array(vec![Value::Int(7), bulk("x"), Value::Nil]);
        let mut r = Reply::<Three>::new("t", reply).unwrap();
        assert_eq!(r.text(Three::C).unwrap(), "");
        assert_eq!(r.int(Three::A).unwrap(), 7);
        let e = r.int(Three::Bee).unwrap_err();
        assert!(
            matches!(&e, StoreError::Protocol(m) if m.contains("slot bee")),
            "{e}"
        );
        let e = r.int(Three::A).unwrap_err();
        assert!(
            matches!(&e, StoreError::Protocol(m) if m.contains("a read twice")),
            "{e}"
        );
    }

    /// A reply with a slot left unfilled (Redis ends the array at the first nil) or
    /// one too many is a protocol error, never a misread.
    #[test]
    fn a_reply_of_another_count_is_a_protocol_error() {
        for n in [0, 2, 4] {
            let reply = Value::Array(vec![Value::Int(1); n]);
            let e = Reply::<Three>::new("t", reply).unwrap_err();
            assert!(
                matches!(&e, StoreError::Protocol(m) if m.contains("expected 3")),
                "{e}"
            );
        }
        assert!(Reply::<Three>::new("t", Value::Int(0)).is_err());
    }

    #[test]
    fn the_source_scans_find_what_is_filled_and_read() {
        let lua = "-- r[S.<name>]\nlocal r = {}\nr[S.a] = 1\nr[S.bee]= x.S.c\nif r[S.c] then end\nreturn r";
        assert_eq!(assigned(lua, "r", "S"), ["a", "bee"]);
        assert_eq!(mentioned(lua, "S"), ["a", "bee", "c"]);
    }
}
