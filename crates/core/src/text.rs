//! Text from someone Herald does not control (an MCP server's stderr, its
//! instructions and tool descriptions, a file's name) made safe to show on
//! a terminal, in a log line or to a person. Pure.
//!
//! A terminal obeys escape sequences: OSC 52 writes the clipboard, OSC 0 sets
//! the window title, CSI 2J clears the screen, and bidirectional overrides
//! make text read other than it is. [`printable`] keeps none of them: every
//! C0 control but tab and line feed goes (ESC and carriage return included,
//! so a sequence is left as harmless letters), and so do DEL, the C1
//! controls (U+0080–U+009F, where a lone CSI lives) and the Unicode
//! bidirectional controls.
//!
//! Architecture invariant: whatever reaches `herald doctor`, `herald skills`,
//! a log line or a chat from such a source has passed through here.

/// `text` without control characters (but tab and line feed).
pub fn printable(text: &str) -> String {
    text.chars().filter(|c| is_printable(*c)).collect()
}

/// [`printable`] on one line: line ends and tabs become spaces, and runs of
/// whitespace one space.
pub fn printable_line(text: &str) -> String {
    printable(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_printable(c: char) -> bool {
    match c {
        '\t' | '\n' => true,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => false,
        // Bidirectional embeddings, overrides and isolates, and the marks.
        '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows: what a hostile source wrote → what may be shown.
    #[test]
    fn escapes_and_controls_are_taken_out() {
        for (given, shown) in [
            ("plain text", "plain text"),
            ("\u{1b}]0;pwned\u{7}title", "]0;pwnedtitle"),
            ("\u{1b}]52;c;Y2xpcGJvYXJk\u{7}", "]52;c;Y2xpcGJvYXJk"),
            ("\u{1b}[2Jcleared", "[2Jcleared"),
            ("\u{9b}2J single-byte CSI", "2J single-byte CSI"),
            ("progress 10%\rprogress 90%", "progress 10%progress 90%"),
            ("tab\tand\nline", "tab\tand\nline"),
            ("NUL\u{0} DEL\u{7f}", "NUL DEL"),
            ("admin\u{202e}txt.exe", "admintxt.exe"),
            ("émoji 🦀 and ünïcode", "émoji 🦀 and ünïcode"),
        ] {
            assert_eq!(printable(given), shown, "{given:?}");
        }
        assert_eq!(printable_line("two\nlines\t and  spaces"), "two lines and spaces");
    }
}
