//! How much of a tool's output Herald keeps and shows, and the one way text
//! is cut to fit: the beginning and the end kept (where scripts print what
//! they did and how they failed), the middle replaced by a marked gap.
//!
//! These are per-tool caps; the agent also caps every tool result to a share
//! of the context budget.

/// The most of a tool result the model is given, in bytes.
pub(crate) const MODEL_OUTPUT_BYTES: usize = 16 * 1024;
/// The most of a tool result kept in a call record or a receipt, in bytes.
pub(crate) const STORED_OUTPUT_BYTES: usize = 16 * 1024;
/// The most of one script argument kept in a receipt, in bytes.
pub(crate) const STORED_ARGUMENT_BYTES: usize = 256;

/// `text` within `max_bytes` (the marker included), and how many bytes were
/// left out (0 when it fitted).
pub(crate) fn cut_middle(text: &str, max_bytes: usize) -> (String, usize) {
    if text.len() <= max_bytes {
        return (text.to_owned(), 0);
    }
    // The marker's number has at most 20 digits.
    let room = max_bytes.saturating_sub(marker(u64::MAX as usize).len());
    let head_end = floor_boundary(text, room * 3 / 4);
    let tail_start = ceil_boundary(text, text.len() - (room - head_end));
    let left_out = tail_start - head_end;
    let cut = format!("{}{}{}", &text[..head_end], marker(left_out), &text[tail_start..]);
    (cut, left_out)
}

/// `text` cut at its end to `max_bytes`, the cut marked.
pub(crate) fn cut_end(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    format!(
        "{}…",
        &text[..floor_boundary(text, max_bytes.saturating_sub('…'.len_utf8()))]
    )
}

fn marker(left_out: usize) -> String {
    format!("\n[… {left_out} bytes left out …]\n")
}

fn floor_boundary(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_boundary(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows: text, cap → whether it was cut; every result fits its cap,
    /// keeps both ends and stays valid UTF-8.
    #[test]
    fn cuts_keep_both_ends_within_the_cap() {
        let long = format!("BEGIN{}END", "é".repeat(10_000));
        for (text, cap, cut) in [
            ("short", 100, false),
            (long.as_str(), 1000, true),
            (long.as_str(), 100, true),
            (long.as_str(), long.len(), false),
        ] {
            let (shown, left_out) = cut_middle(text, cap);
            assert_eq!(left_out > 0, cut, "{cap}");
            assert!(shown.len() <= cap, "{} > {cap}", shown.len());
            if cut {
                assert!(shown.starts_with("BEGIN") && shown.ends_with("END"), "{shown}");
                assert!(shown.contains(&format!("[… {left_out} bytes left out …]")));
                assert_eq!(shown.len() - marker(left_out).len() + left_out, text.len());
            }
        }
        assert_eq!(cut_end("ünïcode", 5), "ü…");
        assert_eq!(cut_end("fits", 4), "fits");
    }
}
