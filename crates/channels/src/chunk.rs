//! Message chunking, once for every channel: a reply longer than the
//! platform's limit is split at paragraph, then line, then word boundaries,
//! and a code fence open at a cut is closed and reopened so that every chunk
//! renders on its own.

/// How a platform counts message length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LengthUnit {
    /// Unicode scalar values (Discord, Slack).
    Chars,
    /// UTF-16 code units (Telegram counts its 4096 this way).
    Utf16,
}

impl LengthUnit {
    pub fn measure(self, text: &str) -> usize {
        match self {
            LengthUnit::Chars => text.chars().count(),
            LengthUnit::Utf16 => text.encode_utf16().count(),
        }
    }

    pub(crate) fn of(self, c: char) -> usize {
        match self {
            LengthUnit::Chars => 1,
            LengthUnit::Utf16 => c.len_utf16(),
        }
    }
}

/// A platform's message size limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub max: usize,
    pub unit: LengthUnit,
}

impl Limit {
    pub const TELEGRAM: Limit = Limit {
        max: 4096,
        unit: LengthUnit::Utf16,
    };
    pub const DISCORD: Limit = Limit {
        max: 2000,
        unit: LengthUnit::Chars,
    };
    /// Slack accepts 40,000 characters but truncates display near 4,000;
    /// chunks stay readable below that.
    pub const SLACK: Limit = Limit {
        max: 3900,
        unit: LengthUnit::Chars,
    };
    /// No limit (email).
    pub const NONE: Limit = Limit {
        max: usize::MAX,
        unit: LengthUnit::Chars,
    };
}

const FENCE: &str = "```";
const FENCE_CLOSE: &str = "\n```";

/// Splits `text` into chunks within `limit`, in order. Empty text gives no
/// chunks.
pub fn chunk(text: &str, limit: Limit) -> Vec<String> {
    let text = text.trim_end();
    if text.trim().is_empty() {
        return Vec::new();
    }
    if limit.unit.measure(text) <= limit.max {
        return vec![text.to_owned()];
    }
    let mut chunks = Vec::new();
    let mut rest = text;
    // The opening line of a fence left open by the previous chunk (```lang).
    let mut open_fence: Option<String> = None;
    while !rest.is_empty() {
        let prefix = open_fence.as_ref().map(|f| format!("{f}\n")).unwrap_or_default();
        let whole = format!("{prefix}{rest}");
        if limit.unit.measure(&whole) <= limit.max {
            chunks.push(whole);
            break;
        }
        // Cut as late as the limit allows; if that leaves a fence open, cut
        // again leaving room to close it.
        let budget = limit.max.saturating_sub(limit.unit.measure(&prefix)).max(1);
        let (mut piece, mut next) = split_within(rest, budget, limit.unit);
        let mut fence_after = fence_state_after(open_fence.clone(), piece);
        if fence_after.is_some() {
            let budget = budget.saturating_sub(limit.unit.measure(FENCE_CLOSE)).max(1);
            (piece, next) = split_within(rest, budget, limit.unit);
            fence_after = fence_state_after(open_fence.clone(), piece);
        }
        let mut body = format!("{prefix}{}", piece.trim_end());
        if fence_after.is_some() {
            body.push_str(FENCE_CLOSE);
        }
        if !piece.trim().is_empty() {
            chunks.push(body);
        }
        open_fence = fence_after;
        rest = next;
    }
    chunks
}

/// The longest prefix of `text` within `budget`, cut at the best boundary,
/// and what follows it (without the separator it was cut at).
pub(crate) fn split_within(text: &str, budget: usize, unit: LengthUnit) -> (&str, &str) {
    let mut end = 0;
    let mut used = 0;
    for (index, c) in text.char_indices() {
        let cost = unit.of(c);
        if used + cost > budget {
            break;
        }
        used += cost;
        end = index + c.len_utf8();
    }
    if end >= text.len() {
        return (text, "");
    }
    let window = &text[..end];
    for separator in ["\n\n", "\n", " "] {
        if let Some(at) = window.rfind(separator).filter(|&at| at > 0) {
            return (&text[..at], &text[at + separator.len()..]);
        }
    }
    (&text[..end], &text[end..])
}

/// Whether a fence is open after `piece`, given the one open before it.
fn fence_state_after(mut open: Option<String>, piece: &str) -> Option<String> {
    for line in piece.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with(FENCE) {
            open = match open {
                Some(_) => None,
                None => Some(trimmed.trim_end().to_owned()),
            };
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(max: usize) -> Limit {
        Limit {
            max,
            unit: LengthUnit::Chars,
        }
    }

    fn fences_balanced(chunk: &str) -> bool {
        chunk.lines().filter(|l| l.trim_start().starts_with(FENCE)).count() % 2 == 0
    }

    #[test]
    fn short_text_is_one_chunk_and_blank_text_none() {
        assert_eq!(chunk("hello", limit(10)), ["hello"]);
        assert_eq!(chunk("hello\n\n", limit(10)), ["hello"]);
        assert!(chunk("  \n", limit(10)).is_empty());
    }

    #[test]
    fn splits_at_the_best_boundary_available() {
        for (text, max, expected) in [
            ("para one\n\npara two", 12, vec!["para one", "para two"]),
            ("line one\nline two", 12, vec!["line one", "line two"]),
            ("one two three four", 9, vec!["one two", "three", "four"]),
            ("abcdefghij", 4, vec!["abcd", "efgh", "ij"]),
            ("aa bb\n\ncc dd ee", 8, vec!["aa bb", "cc dd ee"]),
        ] {
            assert_eq!(chunk(text, limit(max)), expected, "{text:?} in {max}");
        }
    }

    #[test]
    fn code_fences_are_closed_and_reopened_across_chunks() {
        let code: String = (0..30).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Here:\n\n```rust\n{code}```\n\nDone.");
        let chunks = chunk(&text, limit(120));
        assert!(chunks.len() > 3);
        for c in &chunks {
            assert!(c.chars().count() <= 120, "{c:?}");
            assert!(fences_balanced(c), "unbalanced fence in {c:?}");
        }
        assert!(chunks[1].starts_with("```rust\n"), "{:?}", chunks[1]);
        // Every line of code arrives, in order.
        let joined = chunks.join("\n");
        let expected: Vec<String> = (0..30).map(|i| format!("let x{i} = {i};")).collect();
        let lines: Vec<&str> = joined.lines().filter(|l| l.starts_with("let ")).collect();
        assert_eq!(lines, expected);
    }

    #[test]
    fn a_long_reply_keeps_every_word_in_order_within_the_limit() {
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let mut text = String::new();
        for (i, w) in words.iter().enumerate() {
            text.push_str(w);
            text.push(if i % 50 == 49 { '\n' } else { ' ' });
        }
        for limit in [Limit::DISCORD, Limit::TELEGRAM, Limit::SLACK] {
            let chunks = chunk(&text, limit);
            assert!(chunks.iter().all(|c| limit.unit.measure(c) <= limit.max));
            let rejoined: Vec<String> = chunks.join(" ").split_whitespace().map(str::to_owned).collect();
            assert_eq!(rejoined, words);
        }
    }

    #[test]
    fn telegram_counts_utf16_units() {
        // Each emoji is two UTF-16 units.
        let text = "😀".repeat(3000);
        let chunks = chunk(&text, Limit::TELEGRAM);
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| c.encode_utf16().count() <= 4096));
        assert_eq!(chunks.concat(), text);
    }
}
