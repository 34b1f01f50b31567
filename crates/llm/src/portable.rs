//! Tool schemas as every OpenAI-compatible server accepts them.
//!
//! Servers do more with a tool's JSON schema than OpenAI does: llama.cpp and
//! its Python binding compile it into a grammar, turning `maxLength: N` into
//! N rules (2,000 of them overflow the stack and kill the whole server);
//! vLLM validates it against its own schema dialect. So Herald advertises a
//! portable subset — types, properties, required, items, enums, descriptions
//! and small bounds — and keeps the real limits in its own validation at
//! execution (`herald-skills` checks arguments against the full schema
//! before anything runs), which a model cannot skip whatever it was shown.

use serde_json::{Map, Value};

/// Bounds up to this size are kept; larger ones are Herald's to enforce.
/// A grammar with this many repetitions is cheap on every server tried.
pub const MAX_ADVERTISED_BOUND: u64 = 256;

/// Keywords whose value is a schema or a list of names, kept as they are
/// (after their own sub-schemas are made portable).
const KEPT: &[&str] = &[
    "type",
    "description",
    "title",
    "enum",
    "required",
    "properties",
    "items",
    "additionalProperties",
    "default",
];

/// Numeric bounds kept when small.
const BOUNDS: &[&str] = &["minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum"];

/// The portable form of a tool's parameter schema.
pub fn schema(schema: &Value) -> Value {
    match schema {
        Value::Object(object) => Value::Object(object_schema(object)),
        // `true`/`false` schemas and anything else pass as they are.
        other => other.clone(),
    }
}

fn object_schema(object: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in object {
        let key = key.as_str();
        if KEPT.contains(&key) {
            let value = match key {
                "properties" => match value {
                    Value::Object(properties) => Value::Object(
                        properties
                            .iter()
                            .map(|(name, property)| (name.clone(), schema(property)))
                            .collect(),
                    ),
                    other => other.clone(),
                },
                "items" | "additionalProperties" => schema(value),
                _ => value.clone(),
            };
            out.insert(key.to_owned(), value);
        } else if BOUNDS.contains(&key) && is_small(value) {
            out.insert(key.to_owned(), value.clone());
        }
    }
    out
}

fn is_small(value: &Value) -> bool {
    match value {
        Value::Number(number) => number
            .as_f64()
            .is_some_and(|n| n.is_finite() && n.abs() <= MAX_ADVERTISED_BOUND as f64),
        _ => false,
    }
}

/// Why `schema` is not portable, if it is not: what tests check every
/// advertised schema against.
pub fn check(schema: &Value) -> Result<(), String> {
    fn walk(value: &Value, path: &str) -> Result<(), String> {
        let Value::Object(object) = value else {
            return Ok(());
        };
        for (key, child) in object {
            let here = format!("{path}/{key}");
            if BOUNDS.contains(&key.as_str()) {
                if !is_small(child) {
                    return Err(format!("{here} is {child}, over {MAX_ADVERTISED_BOUND}"));
                }
            } else if !KEPT.contains(&key.as_str()) {
                return Err(format!("{here} is not in the portable subset"));
            }
            match key.as_str() {
                "properties" => {
                    if let Value::Object(properties) = child {
                        for (name, property) in properties {
                            walk(property, &format!("{here}/{name}"))?;
                        }
                    }
                }
                "items" | "additionalProperties" => walk(child, &here)?,
                _ => {}
            }
        }
        Ok(())
    }
    walk(schema, "")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn large_bounds_and_unportable_keywords_are_left_out() {
        let full = json!({
            "type": "object",
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": 20000, "description": "What to send"},
                "stdin": {"type": "string", "maxLength": 100000, "pattern": "^.*$", "format": "uri"},
                "args": {"type": "array", "items": {"type": "string", "maxLength": 4000}, "maxItems": 32},
                "count": {"type": "integer", "minimum": 0, "maximum": 1000000},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "nested": {"type": "object", "properties": {"x": {"type": "string", "maxLength": 9999}},
                           "additionalProperties": {"type": "string", "maxLength": 5000}},
                "choice": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["text"],
            "additionalProperties": false
        });
        let portable = schema(&full);
        assert_eq!(
            portable,
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "description": "What to send"},
                    "stdin": {"type": "string"},
                    "args": {"type": "array", "items": {"type": "string"}, "maxItems": 32},
                    "count": {"type": "integer", "minimum": 0},
                    "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                    "nested": {"type": "object", "properties": {"x": {"type": "string"}},
                               "additionalProperties": {"type": "string"}},
                    "choice": {}
                },
                "required": ["text"],
                "additionalProperties": false
            })
        );
        assert_eq!(check(&portable), Ok(()));
        assert!(check(&full).unwrap_err().contains("$schema"));
    }

    #[test]
    fn the_check_names_what_is_not_portable() {
        for (schema, problem) in [
            (
                json!({"properties": {"t": {"maxLength": 2000}}}),
                "/properties/t/maxLength is 2000",
            ),
            (
                json!({"items": {"pattern": "x"}}),
                "/items/pattern is not in the portable subset",
            ),
            (json!({"oneOf": []}), "/oneOf is not in the portable subset"),
        ] {
            assert!(check(&schema).unwrap_err().contains(problem), "{schema}");
        }
        assert_eq!(check(&json!({"type": "object"})), Ok(()));
    }
}
