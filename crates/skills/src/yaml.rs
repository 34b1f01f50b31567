//! The one place this crate reads YAML. serde_yaml 0.9 is archived upstream;
//! keeping it behind these two functions means a maintained fork replaces it
//! here and nowhere else.

/// Deserialises a YAML text into `T`; the error names the key and the line.
#[cfg(test)]
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_yaml::from_str(text).map_err(|err| err.to_string())
}

/// Reads a YAML text as a JSON value, so the rest of the crate works on
/// `serde_json::Value` only. Non-string keys are written as strings; YAML
/// tags are dropped.
pub fn to_json(text: &str) -> Result<serde_json::Value, String> {
    let value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|err| err.to_string())?;
    Ok(convert(value))
}

fn convert(value: serde_yaml::Value) -> serde_json::Value {
    use serde_json::Value as Json;
    use serde_yaml::Value as Yaml;
    match value {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Json::from(i)
            } else if let Some(u) = n.as_u64() {
                Json::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or_else(|| Json::String(n.to_string()), Json::Number)
            }
        }
        Yaml::String(s) => Json::String(s),
        Yaml::Sequence(items) => Json::Array(items.into_iter().map(convert).collect()),
        Yaml::Mapping(map) => Json::Object(
            map.into_iter()
                .map(|(key, value)| (scalar_key(key), convert(value)))
                .collect(),
        ),
        Yaml::Tagged(tagged) => convert(tagged.value),
    }
}

fn scalar_key(key: serde_yaml::Value) -> String {
    match key {
        serde_yaml::Value::String(s) => s,
        other => match convert(other) {
            serde_json::Value::String(s) => s,
            json => json.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn yaml_becomes_the_same_json() {
        for (yaml, expected) in [
            (
                "name: a\nn: 3\nf: 1.5\nb: true\nz: ~",
                json!({"name": "a", "n": 3, "f": 1.5, "b": true, "z": null}),
            ),
            (
                "list: [a, b]\nmap: {1: x, true: y}",
                json!({"list": ["a", "b"], "map": {"1": "x", "true": "y"}}),
            ),
            ("text: |\n  two\n  lines\n", json!({"text": "two\nlines\n"})),
        ] {
            assert_eq!(super::to_json(yaml).unwrap(), expected, "{yaml}");
        }
    }

    #[test]
    fn broken_yaml_says_where() {
        let err = super::to_json("name: [unclosed\n").unwrap_err();
        assert!(err.contains("line"), "{err}");
    }
}
