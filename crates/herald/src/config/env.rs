//! `${VAR}` and `${VAR:-default}` in herald.yaml, expanded from the
//! environment before the YAML is parsed.
//!
//! Expansion is textual, line by line, so an error can name the line and the
//! key it is under. Comments are left alone (a `${VAR}` in a comment is not
//! an error), `$${` writes a literal `${`, and a `$` not followed by `{` is
//! kept as it is. Values that may contain YAML syntax (`#`, `: `) should be
//! quoted in the file: `api_key: "${OPENAI_API_KEY}"`.

/// A variable that could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpandError {
    /// 1-based line number.
    pub line: usize,
    /// The key path the line belongs to, such as `llm.api_key`.
    pub key: String,
    pub message: String,
}

/// Expands every `${…}` in `text`, asking `lookup` for variables.
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut keys = KeyPaths::default();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        keys.observe(line);
        let fail = |message: String| ExpandError {
            line: index + 1,
            key: keys.path(),
            message,
        };
        expand_line(line, &lookup, &mut out).map_err(fail)?;
    }
    Ok(out)
}

fn expand_line(line: &str, lookup: &impl Fn(&str) -> Option<String>, out: &mut String) -> Result<(), String> {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let c = bytes[i];
        match (quote, c) {
            (None, b'#') if i == 0 || bytes[i - 1].is_ascii_whitespace() => {
                out.push_str(&line[i..]);
                return Ok(());
            }
            (None, b'\'' | b'"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            _ => {}
        }
        if c == b'$' && line[i..].starts_with("$${") {
            out.push_str("${");
            i += 3;
            continue;
        }
        if c == b'$' && line[i..].starts_with("${") {
            let rest = &line[i + 2..];
            let end = rest
                .find('}')
                .ok_or_else(|| "unclosed `${` (expected `${VAR}` or `${VAR:-default}`)".to_owned())?;
            let inner = &rest[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            if name.is_empty() || !name.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
                return Err(format!(
                    "`${{{inner}}}` is not a variable reference (names are letters, digits and _)"
                ));
            }
            match (lookup(name), default) {
                (Some(value), _) if !value.is_empty() || default.is_none() => out.push_str(&value),
                (_, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(format!(
                        "environment variable {name} is not set (write ${{{name}:-}} to allow it to be empty)"
                    ));
                }
                (Some(value), None) => out.push_str(&value),
            }
            i += 2 + end + 1;
            continue;
        }
        let len = utf8_len(c);
        out.push_str(&line[i..i + len]);
        i += len;
    }
    Ok(())
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// Follows indentation to know which key path a line is under.
#[derive(Default)]
pub struct KeyPaths {
    stack: Vec<(usize, String)>,
}

impl KeyPaths {
    /// Takes in the next line of the file.
    pub fn observe(&mut self, line: &str) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return;
        }
        let mut indent = line.len() - trimmed.len();
        let mut content = trimmed;
        if let Some(item) = content.strip_prefix("- ") {
            indent += 2;
            content = item.trim_start();
        }
        let Some((key, _)) = content.split_once(':') else {
            return;
        };
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        if key.is_empty() || key.starts_with(['{', '[']) {
            return;
        }
        while self.stack.last().is_some_and(|(depth, _)| *depth >= indent) {
            self.stack.pop();
        }
        self.stack.push((indent, key.to_owned()));
    }

    /// The dotted key path of the last line observed, such as `llm.api_key`.
    pub fn path(&self) -> String {
        self.stack
            .iter()
            .map(|(_, key)| key.as_str())
            .collect::<Vec<_>>()
            .join(".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "KEY" => Some("sk-123".into()),
            "EMPTY" => Some(String::new()),
            "PORT" => Some("8080".into()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_and_defaults() {
        for (input, expected) in [
            ("api_key: ${KEY}\n", "api_key: sk-123\n"),
            ("api_key: \"${KEY}\"\n", "api_key: \"sk-123\"\n"),
            ("url: http://h:${PORT}/v1\n", "url: http://h:8080/v1\n"),
            ("a: ${MISSING:-fallback}\n", "a: fallback\n"),
            ("a: ${MISSING:-}\n", "a: \n"),
            ("a: ${EMPTY:-dflt}\n", "a: dflt\n"),
            ("a: ${EMPTY}\n", "a: \n"),
            ("a: $${KEY}\n", "a: ${KEY}\n"),
            ("a: $5 and $KEY\n", "a: $5 and $KEY\n"),
            ("a: 1 # see ${MISSING}\n", "a: 1 # see ${MISSING}\n"),
            ("# ${MISSING}\n", "# ${MISSING}\n"),
            ("a: \"x # ${KEY}\"\n", "a: \"x # sk-123\"\n"),
            ("name: ünïcødé ${KEY}\n", "name: ünïcødé sk-123\n"),
        ] {
            assert_eq!(expand(input, env).as_deref(), Ok(expected), "{input}");
        }
    }

    #[test]
    fn a_missing_variable_names_line_key_and_variable() {
        let text = "storage:\n  url: sqlite://x.db\nllm:\n  base_url: http://x\n  api_key: ${OPENAI_API_KEY}\n";
        let err = expand(text, env).unwrap_err();
        assert_eq!(err.line, 5);
        assert_eq!(err.key, "llm.api_key");
        assert!(err.message.contains("OPENAI_API_KEY is not set"), "{}", err.message);
    }

    #[test]
    fn key_paths_follow_indentation_and_lists() {
        let text = "a:\n  b:\n    c: 1\n  d: ${NOPE}\n";
        assert_eq!(expand(text, env).unwrap_err().key, "a.d");
        let text = "admins:\n  - ${NOPE}\n";
        assert_eq!(expand(text, env).unwrap_err().key, "admins");
        let text = "x:\n  - name: a\n    token: ${NOPE}\n";
        assert_eq!(expand(text, env).unwrap_err().key, "x.token");
    }

    #[test]
    fn malformed_references_are_errors() {
        assert!(expand("a: ${KEY\n", env).unwrap_err().message.contains("unclosed"));
        assert!(
            expand("a: ${bad name}\n", env)
                .unwrap_err()
                .message
                .contains("not a variable reference")
        );
    }
}
