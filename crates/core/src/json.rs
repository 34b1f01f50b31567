//! Canonical JSON: one text per value whatever the key order or spacing, so
//! two tool calls with the same arguments are recognised as the same call.

use serde_json::Value;

/// Serialises `value` with object keys sorted at every depth.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Canonical form of a JSON text; text that is not JSON is returned trimmed.
pub fn canonical_text(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => canonical(&value),
        Err(_) => text.trim().to_owned(),
    }
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_spacing_do_not_matter() {
        for (a, b, same) in [
            (r#"{"a":1,"b":2}"#, r#"{ "b": 2, "a": 1 }"#, true),
            (
                r#"{"a":{"y":1,"x":[2,{"q":1,"p":0}]}}"#,
                r#"{"a":{"x":[2,{"p":0,"q":1}],"y":1}}"#,
                true,
            ),
            (r#"{"a":1}"#, r#"{"a":2}"#, false),
            (r#"[1,2]"#, r#"[2,1]"#, false),
            ("not json", " not json ", true),
        ] {
            assert_eq!(canonical_text(a) == canonical_text(b), same, "{a} vs {b}");
        }
        assert_eq!(
            canonical_text(r#"{ "b": [1, "x"], "a": null }"#),
            r#"{"a":null,"b":[1,"x"]}"#
        );
    }
}
