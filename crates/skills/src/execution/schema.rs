//! A small JSON-schema subset, enough to check a tool call's arguments
//! before a skill runs: `type` (one or a list), `properties`, `required`,
//! `additionalProperties: false`, `enum`, `items`, `minimum`, `maximum`,
//! `minLength`, `maxLength`, `maxItems`. Keywords it does not know are
//! ignored, so a schema may carry descriptions and more.

use serde_json::Value;

/// Checks `value` against `schema`; the errors name the offending path.
pub fn validate(value: &Value, schema: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    check(value, schema, "arguments", &mut errors);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

fn check(value: &Value, schema: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    if let Some(expected) = schema.get("type") {
        let types: Vec<&str> = match expected {
            Value::String(t) => vec![t.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
            errors.push(format!(
                "{path} should be {}, not {}",
                types.join(" or "),
                type_name(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let shown: Vec<String> = options.iter().take(20).map(Value::to_string).collect();
        let more = if options.len() > 20 { ", …" } else { "" };
        errors.push(format!("{path} must be one of {}{more}", shown.join(", ")));
    }
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for key in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(key) {
                        errors.push(format!("{path}.{key} is required"));
                    }
                }
            }
            for (key, item) in map {
                match properties.and_then(|p| p.get(key)) {
                    Some(property) => check(item, property, &format!("{path}.{key}"), errors),
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        errors.push(format!("{path}.{key} is not a known argument"))
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                errors.push(format!("{path} has more than {max} items"));
            }
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item, item_schema, &format!("{path}[{index}]"), errors);
                }
            }
        }
        Value::String(text) => {
            let chars = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && chars < min
            {
                errors.push(format!("{path} must have at least {min} characters"));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && chars > max
            {
                errors.push(format!("{path} must have at most {max} characters"));
            }
        }
        Value::Number(number) => {
            let n = number.as_f64().unwrap_or_default();
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && n < min
            {
                errors.push(format!("{path} must be at least {min}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && n > max
            {
                errors.push(format!("{path} must be at most {max}"));
            }
        }
        _ => {}
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        _ => true,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arguments_are_checked_against_the_subset() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": ["pdf", "notes"]},
                "path": {"type": "string", "minLength": 1, "maxLength": 10},
                "offset": {"type": "integer", "minimum": 0},
                "args": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "maybe": {"type": ["string", "null"]}
            },
            "required": ["name"],
            "additionalProperties": false
        });
        for (arguments, expected) in [
            (json!({"name": "pdf"}), vec![]),
            (
                json!({"name": "pdf", "path": "a.md", "offset": 3, "args": ["x"], "maybe": null}),
                vec![],
            ),
            (json!({}), vec!["arguments.name is required"]),
            (
                json!({"name": "web"}),
                vec![r#"arguments.name must be one of "pdf", "notes""#],
            ),
            (json!({"name": 3}), vec!["arguments.name should be string, not integer"]),
            (
                json!({"name": "pdf", "offset": -1}),
                vec!["arguments.offset must be at least 0"],
            ),
            (
                json!({"name": "pdf", "offset": 1.5}),
                vec!["arguments.offset should be integer, not number"],
            ),
            (
                json!({"name": "pdf", "path": ""}),
                vec!["arguments.path must have at least 1 characters"],
            ),
            (
                json!({"name": "pdf", "args": ["a", 2]}),
                vec!["arguments.args[1] should be string, not integer"],
            ),
            (
                json!({"name": "pdf", "args": ["a", "b", "c"]}),
                vec!["arguments.args has more than 2 items"],
            ),
            (
                json!({"name": "pdf", "extra": 1}),
                vec!["arguments.extra is not a known argument"],
            ),
            (json!("pdf"), vec!["arguments should be object, not string"]),
        ] {
            let result = validate(&arguments, &schema).err().unwrap_or_default();
            assert_eq!(result, expected, "{arguments}");
        }
    }
}
