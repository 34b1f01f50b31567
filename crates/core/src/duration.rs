//! Human durations in configuration: `500ms`, `2s`, `30m`, `1h`, `1d`, and `0`.
//!
//! Pure parsing, shared by every crate's config struct through the
//! [`serde`] helpers below.

use std::time::Duration;

/// Parses `500ms`, `2s`, `30m`, `1h`, `1d`, a bare `0`, or a compound such as
/// `1h30m`.
pub fn parse(input: &str) -> Result<Duration, String> {
    let text = input.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err("empty duration: expected a number followed by ms, s, m, h or d".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "invalid duration `{input}`: expected a number followed by ms, s, m, h or d"
            ));
        }
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration `{input}`: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value.saturating_mul(60)),
            "h" => Duration::from_secs(value.saturating_mul(3600)),
            "d" => Duration::from_secs(value.saturating_mul(86_400)),
            "" => {
                return Err(format!("invalid duration `{input}`: missing unit (ms, s, m, h or d)"));
            }
            other => {
                return Err(format!(
                    "invalid duration `{input}`: unknown unit `{other}` (expected ms, s, m, h or d)"
                ));
            }
        };
        total += part;
    }
    Ok(total)
}

/// Formats a duration the way [`parse`] reads it.
pub fn format(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        "0".into()
    } else if millis.is_multiple_of(86_400_000) {
        format!("{}d", millis / 86_400_000)
    } else if millis.is_multiple_of(3_600_000) {
        format!("{}h", millis / 3_600_000)
    } else if millis.is_multiple_of(60_000) {
        format!("{}m", millis / 60_000)
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{millis}ms")
    }
}

/// `#[serde(with = "herald_core::duration::serde")]` for `Duration` fields.
pub mod serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = DurationText::deserialize(deserializer)?;
        match text {
            DurationText::Text(text) => super::parse(&text).map_err(serde::de::Error::custom),
            DurationText::Number(0) => Ok(Duration::ZERO),
            DurationText::Number(n) => Err(serde::de::Error::custom(format!(
                "invalid duration `{n}`: missing unit (ms, s, m, h or d)"
            ))),
        }
    }

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&super::format(*duration))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum DurationText {
        Number(u64),
        Text(String),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        for (text, expected) in [
            ("500ms", Duration::from_millis(500)),
            ("2s", Duration::from_secs(2)),
            ("30m", Duration::from_secs(1800)),
            ("1h", Duration::from_secs(3600)),
            ("1d", Duration::from_secs(86_400)),
            ("1h30m", Duration::from_secs(5400)),
            ("0", Duration::ZERO),
            (" 60s ", Duration::from_secs(60)),
        ] {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn rejects_what_it_cannot_read_with_a_reason() {
        for (text, reason) in [
            ("", "empty"),
            ("5", "missing unit"),
            ("5x", "unknown unit `x`"),
            ("s", "expected a number"),
            ("1.5s", "unknown unit `.`"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(reason), "{text}: {err}");
        }
    }

    #[test]
    fn format_round_trips() {
        for text in ["500ms", "2s", "30m", "1h", "1d", "0", "90s"] {
            assert_eq!(format(parse(text).unwrap()), text);
        }
    }
}
