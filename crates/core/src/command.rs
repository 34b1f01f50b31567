//! The one reading of a chat command: `/name rest of the line`.
//!
//! Platforms that address a command to one bot (Telegram's `/skills@herald_bot`
//! in a group) are normalized by their channel adapter, which alone knows the
//! bot's name: a command meant for another bot keeps its `@other_bot` and is
//! not Herald's. So no parser here strips an `@` suffix.

/// A message that starts with `/name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlashCommand<'a> {
    /// The word after `/`, as written.
    pub name: &'a str,
    /// The rest of the message, trimmed.
    pub rest: &'a str,
}

/// Reads `/name rest`; `None` when the text does not start with `/` and a word.
pub fn slash_command(text: &str) -> Option<SlashCommand<'_>> {
    let after = text.trim_start().strip_prefix('/')?;
    let end = after.find(char::is_whitespace).unwrap_or(after.len());
    if end == 0 {
        return None;
    }
    Some(SlashCommand {
        name: &after[..end],
        rest: after[end..].trim(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_command_word_and_the_rest() {
        for (text, expected) in [
            ("/skills", Some(("skills", ""))),
            ("  /skills   info  pdf ", Some(("skills", "info  pdf"))),
            ("/approve\tK7Q2M9", Some(("approve", "K7Q2M9"))),
            ("/skills@other_bot list", Some(("skills@other_bot", "list"))),
            ("/ skills", None),
            ("/", None),
            ("skills", None),
            ("please /skills", None),
            ("", None),
        ] {
            let parsed = slash_command(text).map(|c| (c.name, c.rest));
            assert_eq!(parsed, expected, "{text:?}");
        }
    }
}
