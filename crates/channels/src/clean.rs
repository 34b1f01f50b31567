//! What the gateway does to every inbound text before anything else reads
//! it, whatever channel it came from: control characters out, and a cap on
//! its length. Pure.
//!
//! U+0000 and the other C0 controls (but tab, line feed and carriage return)
//! have no business in a chat message: PostgreSQL refuses NUL in text, and
//! the model would read the rest as it pleases. A message longer than the
//! cap (`channels.max_message_chars`) is cut at a character boundary with a
//! marker, so a 5 MB paste costs what 16,000 characters cost.

/// The default of `channels.max_message_chars`.
pub const DEFAULT_MAX_MESSAGE_CHARS: usize = 16_000;

/// What ends a cut text, so the model (and history) can tell.
pub fn cut_marker(max_chars: usize) -> String {
    format!("\n[… message cut by Herald: only the first {max_chars} characters were kept]")
}

/// `text` without C0 control characters other than tab, LF and CR.
pub fn strip_controls(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_ascii_control() || matches!(c, '\t' | '\n' | '\r') || *c == '\u{7f}')
        .collect()
}

/// `text` cut to at most `max_chars` characters (then the marker), and
/// whether it was cut.
pub fn cap(text: &str, max_chars: usize) -> (String, bool) {
    match text.char_indices().nth(max_chars) {
        None => (text.to_owned(), false),
        Some((end, _)) => {
            let mut kept = text[..end].to_owned();
            kept.push_str(&cut_marker(max_chars));
            (kept, true)
        }
    }
}

#[cfg(test)]
mod tests;
