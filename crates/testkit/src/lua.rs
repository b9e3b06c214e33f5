//! The reply shapes a Lua script's header documents, and replies of those shapes, for
//! tests that hold a script's parser to its header.

use redis::Value;

/// The reply shapes a script's header (its leading `--` lines) documents: every `{...}`
/// after the first `Reply` is one, as its items. None: the script replies an integer.
///
/// # Panics
/// If the header does not mention `Reply`.
pub fn documented_reply_shapes(source: &str) -> Vec<Vec<String>> {
    let header: String = source
        .lines()
        .take_while(|l| l.starts_with("--"))
        .map(|l| l.trim_start_matches('-').trim())
        .collect::<Vec<_>>()
        .join(" ");
    let reply = &header[header.find("Reply").expect("the header documents a reply")..];
    reply
        .split('{')
        .skip(1)
        .map(|rest| {
            let inner = rest.split('}').next().unwrap_or_default();
            inner
                .split(',')
                .map(|item| item.trim().to_owned())
                .collect()
        })
        .collect()
}

/// A reply of `shape`: a numeric first item as an integer (an outcome's tag), a quoted
/// item as that string (`'ok'`), an item named `...[]` as an empty array, and every
/// other item `"0"` (which reads as a string, an integer or a duration).
pub fn reply_of(shape: &[String]) -> Value {
    Value::Array(
        shape
            .iter()
            .enumerate()
            .map(|(i, item)| match item.parse::<i64>() {
                Ok(tag) if i == 0 => Value::Int(tag),
                _ if item.ends_with("[]") => Value::Array(vec![]),
                _ if item.len() >= 2 && item.starts_with('\'') && item.ends_with('\'') => {
                    Value::BulkString(item.as_bytes()[1..item.len() - 1].to_vec())
                }
                _ => Value::BulkString(b"0".to_vec()),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_come_from_the_header_after_reply() {
        let src = "-- x: {not this}.\n-- Reply {'ok', n}, {1, names[]} or {'stale'}.\nreturn {1}";
        let shapes = documented_reply_shapes(src);
        assert_eq!(
            shapes,
            [vec!["'ok'", "n"], vec!["1", "names[]"], vec!["'stale'"]]
        );
        assert_eq!(
            reply_of(&shapes[0]),
            Value::Array(vec![
                Value::BulkString(b"ok".to_vec()),
                Value::BulkString(b"0".to_vec())
            ])
        );
        assert_eq!(
            reply_of(&shapes[1]),
            Value::Array(vec![Value::Int(1), Value::Array(vec![])])
        );
        assert!(documented_reply_shapes("-- y: Reply 1/0.\nreturn 1").is_empty());
    }
}
