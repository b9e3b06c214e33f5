//! The one parser of Redis replies: a cursor over the items of a reply, in the style of
//! mini-redis's `Parse`. Every script and command reply the election crate reads goes
//! through it, so a reply of the wrong shape is always a [`StoreError::Protocol`] that
//! names the reply.

use std::time::Duration;

use redis::Value;

use crate::error::StoreError;

/// A cursor over the items of one Redis reply.
///
/// An array reply yields its items in order; any other reply is a sequence of one item,
/// so `Parse::new("renew", reply).next_int()` reads an integer reply. Every accessor
/// takes the next item and fails with [`StoreError::Protocol`] (naming the reply) if it
/// is missing or has the wrong type; [`finish`](Self::finish) checks that nothing is
/// left over.
///
/// ```
/// use leasehold_election::ext::Parse;
/// use redis::Value;
///
/// let reply = Value::Array(vec![Value::Int(1), Value::BulkString(b"42".to_vec()), Value::Int(-1)]);
/// let mut p = Parse::new("example", reply);
/// assert_eq!(p.next_int().unwrap(), 1);
/// assert_eq!(p.next_u64().unwrap(), 42);
/// assert_eq!(p.next_pttl().unwrap(), None); // -1: no expiry
/// p.finish().unwrap();
/// ```
///
/// For Leasehold's own crates; no semver promise.
#[derive(Debug)]
pub struct Parse {
    what: &'static str,
    items: std::vec::IntoIter<Value>,
}

impl Parse {
    /// A cursor over `reply`; `what` names the reply in error messages.
    pub fn new(what: &'static str, reply: Value) -> Self {
        let items = match reply {
            Value::Array(items) => items,
            other => vec![other],
        };
        Self {
            what,
            items: items.into_iter(),
        }
    }

    /// Items not read yet.
    pub fn remaining(&self) -> usize {
        self.items.len()
    }

    /// The next item as it is.
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if there is none.
    pub fn next_value(&mut self) -> Result<Value, StoreError> {
        self.items
            .next()
            .ok_or_else(|| StoreError::Protocol(format!("{}: the reply is too short", self.what)))
    }

    /// The next item as an integer: an integer reply or a decimal string.
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if it is missing or not an integer.
    pub fn next_int(&mut self) -> Result<i64, StoreError> {
        let v = self.next_value()?;
        match &v {
            Value::Int(i) => Ok(*i),
            Value::BulkString(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| self.unexpected("an integer", &v)),
            Value::SimpleString(s) => s.parse().map_err(|_| self.unexpected("an integer", &v)),
            _ => Err(self.unexpected("an integer", &v)),
        }
    }

    /// The next item as a non-negative integer (a fence, a count).
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if it is missing, not an integer or negative.
    pub fn next_u64(&mut self) -> Result<u64, StoreError> {
        let i = self.next_int()?;
        u64::try_from(i).map_err(|_| {
            StoreError::Protocol(format!(
                "{}: expected a non-negative integer, got {i}",
                self.what
            ))
        })
    }

    /// The next item as a string; `None` for a nil reply (Lua `false`).
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if it is missing or neither a string nor nil.
    pub fn next_opt_string(&mut self) -> Result<Option<String>, StoreError> {
        let v = self.next_value()?;
        match v {
            Value::Nil => Ok(None),
            Value::BulkString(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
            Value::SimpleString(s) => Ok(Some(s)),
            Value::Okay => Ok(Some("OK".to_owned())),
            other => Err(self.unexpected("a string", &other)),
        }
    }

    /// The next item as bytes (a bulk string, kept as it is); nil is an error.
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if it is missing, nil, or not a string.
    pub fn next_bytes(&mut self) -> Result<Vec<u8>, StoreError> {
        let v = self.next_value()?;
        match v {
            Value::BulkString(b) => Ok(b),
            Value::SimpleString(s) => Ok(s.into_bytes()),
            other => Err(self.unexpected("bytes", &other)),
        }
    }

    /// The next item as a string; nil is an error.
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if it is missing, nil, or not a string.
    pub fn next_string(&mut self) -> Result<String, StoreError> {
        self.next_opt_string()?.ok_or_else(|| {
            StoreError::Protocol(format!("{}: expected a string, got nil", self.what))
        })
    }

    /// The next item as a `PTTL` reply: the time left on a key; `None` for a key
    /// without expiry (-1); zero for a missing key (-2).
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if it is missing or not an integer.
    pub fn next_pttl(&mut self) -> Result<Option<Duration>, StoreError> {
        Ok(match self.next_int()? {
            -1 => None,
            p if p < 0 => Some(Duration::ZERO),
            p => Some(Duration::from_millis(p.unsigned_abs())),
        })
    }

    /// The next item as a nested reply, with its own cursor.
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if it is missing or not an array.
    pub fn next_array(&mut self) -> Result<Parse, StoreError> {
        match self.next_value()? {
            Value::Array(items) => Ok(Self {
                what: self.what,
                items: items.into_iter(),
            }),
            other => Err(self.unexpected("an array", &other)),
        }
    }

    /// Checks that every item has been read.
    ///
    /// # Errors
    /// [`StoreError::Protocol`] if items are left.
    pub fn finish(mut self) -> Result<(), StoreError> {
        match self.items.next() {
            None => Ok(()),
            Some(extra) => Err(StoreError::Protocol(format!(
                "{}: unexpected extra item {extra:?}",
                self.what
            ))),
        }
    }

    fn unexpected(&self, wanted: &str, got: &Value) -> StoreError {
        StoreError::Protocol(format!("{}: expected {wanted}, got {got:?}", self.what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn reads_items_in_order_and_checks_the_end() {
        let mut p = Parse::new(
            "t",
            Value::Array(vec![
                Value::Int(0),
                bulk("a:1"),
                Value::Int(1500),
                bulk("7"),
            ]),
        );
        assert_eq!(p.next_int().unwrap(), 0);
        assert_eq!(p.next_opt_string().unwrap().as_deref(), Some("a:1"));
        assert_eq!(p.next_pttl().unwrap(), Some(Duration::from_millis(1500)));
        assert_eq!(p.remaining(), 1);
        assert_eq!(p.next_u64().unwrap(), 7);
        p.finish().unwrap();
    }

    #[test]
    fn a_scalar_reply_is_one_item() {
        let mut p = Parse::new("renew", Value::Int(1));
        assert_eq!(p.next_int().unwrap(), 1);
        assert!(p.next_int().is_err(), "only one item");
    }

    #[test]
    fn shapes_and_types_are_checked_and_name_the_reply() {
        let e = Parse::new("acquire", Value::Array(vec![]))
            .next_int()
            .unwrap_err();
        assert!(
            matches!(&e, StoreError::Protocol(m) if m.starts_with("acquire: ")),
            "{e}"
        );
        assert!(Parse::new("t", bulk("x")).next_int().is_err());
        assert!(Parse::new("t", Value::Int(-3)).next_u64().is_err());
        assert!(Parse::new("t", Value::Nil).next_string().is_err());
        assert_eq!(Parse::new("t", Value::Nil).next_opt_string().unwrap(), None);
        assert!(Parse::new("t", Value::Int(1)).next_array().is_err());
        let left = Parse::new("t", Value::Array(vec![Value::Int(1)]));
        assert!(left.finish().is_err());
    }

    #[test]
    fn pttl_special_values() {
        let p = |v| Parse::new("t", Value::Int(v)).next_pttl().unwrap();
        assert_eq!(p(-1), None);
        assert_eq!(p(-2), Some(Duration::ZERO));
        assert_eq!(p(0), Some(Duration::ZERO));
    }

    #[test]
    fn nested_arrays_get_their_own_cursor() {
        let mut p = Parse::new(
            "t",
            Value::Array(vec![Value::Array(vec![Value::Int(4), Value::Int(5)])]),
        );
        let mut inner = p.next_array().unwrap();
        assert_eq!(inner.next_int().unwrap(), 4);
        assert_eq!(inner.next_int().unwrap(), 5);
        inner.finish().unwrap();
        p.finish().unwrap();
    }
}
