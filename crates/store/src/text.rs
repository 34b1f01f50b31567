//! Text as the store writes it: without U+0000.
//!
//! PostgreSQL `text` cannot hold a NUL character, so a chat message carrying
//! one would fail to be queued or recorded on every attempt. The store drops
//! NUL from every text it binds ([`without_nul`], applied by
//! `Statement::text`) and from every string inside the JSON it writes
//! ([`json`]), on both engines, so they keep the same data. A NUL means
//! nothing to a reader; dropping it loses nothing a user would see.

use std::borrow::Cow;

use herald_core::StoreError;
use serde::Serialize;
use serde_json::Value;

use crate::error;

pub(crate) fn without_nul(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', ""))
    } else {
        Cow::Borrowed(text)
    }
}

/// `value` as JSON text, with NUL dropped from every string and key. `what`
/// names the value in an error.
pub(crate) fn json(value: &impl Serialize, what: &str) -> Result<String, StoreError> {
    let text = serde_json::to_string(value).map_err(|e| error::json(what, e))?;
    // serde_json writes a NUL only as the escape `\u0000`; without that
    // text there is nothing to drop (with it, there may be: walk the value).
    if !text.contains("\\u0000") {
        return Ok(text);
    }
    let mut value = serde_json::to_value(value).map_err(|e| error::json(what, e))?;
    drop_nul(&mut value);
    Ok(value.to_string())
}

fn drop_nul(value: &mut Value) {
    match value {
        Value::String(text) => text.retain(|c| c != '\0'),
        Value::Array(items) => items.iter_mut().for_each(drop_nul),
        Value::Object(map) => {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(key, mut item)| {
                    drop_nul(&mut item);
                    (without_nul(&key).into_owned(), item)
                })
                .collect();
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nul_is_dropped_from_text_and_from_json_strings_and_keys() {
        for (text, kept) in [("", ""), ("plain", "plain"), ("a\0b\0", "ab"), ("\0", "")] {
            assert_eq!(without_nul(text), kept);
        }
        for (value, kept) in [
            (json!({"a": "b"}), r#"{"a":"b"}"#),
            (
                json!({"k\u{0}": ["x\u{0}y", {"z": "\u{0}"}], "n": 1}),
                r#"{"k":["xy",{"z":""}],"n":1}"#,
            ),
            // A backslash followed by `u0000` is text, not a NUL: kept.
            (json!("\\u0000"), r#""\\u0000""#),
        ] {
            assert_eq!(json(&value, "test").unwrap(), kept);
        }
    }
}
