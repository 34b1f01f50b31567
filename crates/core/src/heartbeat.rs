//! The `HEARTBEAT_OK` rule: how a heartbeat reply that means "nothing needs
//! attention" becomes silence.
//!
//! The rule lives in core because two crates apply it: the agent to a
//! heartbeat turn's reply, and the skill registry to anything else such a
//! turn sends (a tool's `send_message`), through
//! [`Outbound::send_in_turn`](crate::Outbound::send_in_turn), which applies
//! it when the turn's origin is a heartbeat. So an empty message is never
//! sent and the token never reaches a person, whichever path a reply takes.

/// What the model answers when a heartbeat finds nothing to report.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";

/// Characters a reply may add to the token and still count as "all clear".
pub const DEFAULT_ACK_MAX_CHARS: usize = 300;

/// Markup a model may wrap the token in: `**HEARTBEAT_OK**`, `` `HEARTBEAT_OK` ``.
const MARKUP: &[char] = &['*', '_', '`', '~', '"', '\''];

/// The text to send for a heartbeat reply, or `None` to send nothing.
///
/// The token at the start or the end of the reply is stripped; when what is
/// left is at most `ack_max_chars` characters, the reply was an
/// acknowledgement and nothing is sent. A reply without the token is an
/// alert and is sent, minus any token inside it. Blank text is never sent.
pub fn strip_ok_token(reply: &str, ack_max_chars: usize) -> Option<String> {
    let mut text = reply.trim();
    let mut acknowledged = false;
    if let Some(rest) = strip_leading(text) {
        text = rest;
        acknowledged = true;
    }
    if let Some(rest) = strip_trailing(text) {
        text = rest;
        acknowledged = true;
    }
    if acknowledged && text.chars().count() <= ack_max_chars {
        return None;
    }
    let cleaned = remove_token_words(text);
    let cleaned = cleaned.trim();
    (!cleaned.is_empty()).then(|| cleaned.to_owned())
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn strip_leading(text: &str) -> Option<&str> {
    let rest = text.trim_start_matches(MARKUP).strip_prefix(HEARTBEAT_OK)?;
    if rest.starts_with(is_word_char) {
        return None;
    }
    Some(rest.trim_start_matches(|c: char| MARKUP.contains(&c) || ".!:,;-—–".contains(c) || c.is_whitespace()))
}

fn strip_trailing(text: &str) -> Option<&str> {
    let rest = text
        .trim_end_matches(|c: char| MARKUP.contains(&c) || ".!".contains(c))
        .strip_suffix(HEARTBEAT_OK)?;
    if rest.ends_with(is_word_char) {
        return None;
    }
    Some(rest.trim_end_matches(|c: char| MARKUP.contains(&c) || ":-—–".contains(c) || c.is_whitespace()))
}

/// Removes the token where it stands as a word, with the space that would
/// be left doubled.
fn remove_token_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(index) = rest.find(HEARTBEAT_OK) {
        let (before, after) = (&rest[..index], &rest[index + HEARTBEAT_OK.len()..]);
        // The character before may be in the part already copied out.
        let previous = before.chars().next_back().or_else(|| out.chars().next_back());
        let bounded_before = previous.is_none_or(|c| !is_word_char(c));
        let bounded_after = after.chars().next().is_none_or(|c| !is_word_char(c));
        if !(bounded_before && bounded_after) {
            out.push_str(&rest[..index + HEARTBEAT_OK.len()]);
            rest = after;
            continue;
        }
        out.push_str(before);
        rest = match previous {
            None => after.trim_start_matches(' '),
            Some(c) if c.is_whitespace() => after.strip_prefix(' ').unwrap_or(after),
            Some(_) => after,
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_are_silent_and_alerts_are_sent_without_the_token() {
        let long_note = format!("HEARTBEAT_OK {}", "a".repeat(301));
        for (reply, expected) in [
            ("HEARTBEAT_OK", None),
            ("  HEARTBEAT_OK\n", None),
            ("**HEARTBEAT_OK**", None),
            ("`HEARTBEAT_OK`.", None),
            ("HEARTBEAT_OK — all three checks passed.", None),
            ("Everything looks fine. HEARTBEAT_OK", None),
            ("", None),
            ("   ", None),
            (
                "The backup job failed at 03:00.",
                Some("The backup job failed at 03:00."),
            ),
            (
                "The disk is 95% full.\n\nHEARTBEAT_OK for everything else",
                Some("The disk is 95% full.\n\nfor everything else"),
            ),
            (long_note.as_str(), Some(&long_note["HEARTBEAT_OK ".len()..])),
            // Words that merely begin with the token are not the token.
            (
                "HEARTBEAT_OKAY is not the token",
                Some("HEARTBEAT_OKAY is not the token"),
            ),
            (
                "Two alerts: HEARTBEAT_OK_X and HEARTBEAT_OK here",
                Some("Two alerts: HEARTBEAT_OK_X and here"),
            ),
        ] {
            assert_eq!(
                strip_ok_token(reply, DEFAULT_ACK_MAX_CHARS).as_deref(),
                expected,
                "{reply:?}"
            );
        }
    }

    #[test]
    fn the_limit_decides_how_much_commentary_still_counts_as_all_clear() {
        let reply = "HEARTBEAT_OK: the queue is empty";
        assert_eq!(strip_ok_token(reply, 300), None);
        assert_eq!(strip_ok_token(reply, 5).as_deref(), Some("the queue is empty"));
        assert_eq!(strip_ok_token("HEARTBEAT_OK", 0), None);
    }

    #[test]
    fn applying_the_rule_twice_changes_nothing_more() {
        for reply in [
            "The disk is 95% full. HEARTBEAT_OK for the rest",
            "HEARTBEAT_OK",
            "Backup failed",
        ] {
            let once = strip_ok_token(reply, 10);
            let twice = once.as_deref().and_then(|text| strip_ok_token(text, 10));
            assert_eq!(once, twice, "{reply}");
        }
    }
}
