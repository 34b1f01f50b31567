//! How users activate skills from a message: `$skill-name` anywhere in the
//! text, or a message that starts with `/skill-name rest of request`.
//!
//! Pure text handling; whether a name is a visible skill is the toolbox's
//! question.

use crate::catalog::skill_block;

/// Mentions honoured per message; more are reported, not activated.
pub const MAX_MENTIONS: usize = 8;

/// The `$name` mentions of a message, distinct, in order of appearance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mentions {
    pub names: Vec<String>,
    /// Distinct mentions past [`MAX_MENTIONS`].
    pub dropped: usize,
}

/// Finds `$name` mentions. `\$name` is literal text, `$HOME`-style words with
/// uppercase letters are not skill names, `US$5` and bare numbers are not
/// mentions.
pub fn parse_mentions(text: &str) -> Mentions {
    let mut mentions = Mentions::default();
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((index, c)) = chars.next() {
        if c != '$' {
            previous = Some(c);
            continue;
        }
        let escaped = previous == Some('\\');
        let glued = previous.is_some_and(|p| p.is_alphanumeric() || p == '_' || p == '$');
        previous = Some(c);
        let start = index + 1;
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .map_or(text.len(), |offset| start + offset);
        // Skip over the token so `$a$b` is not read as two mentions.
        while chars.peek().is_some_and(|(i, _)| *i < end) {
            previous = chars.next().map(|(_, c)| c);
        }
        if escaped || glued {
            continue;
        }
        let token = text[start..end].trim_end_matches(['-', '_']);
        if !is_candidate(token) {
            continue;
        }
        if mentions.names.iter().any(|n| n == token) {
            continue;
        }
        if mentions.names.len() < MAX_MENTIONS {
            mentions.names.push(token.to_owned());
        } else {
            mentions.dropped += 1;
        }
    }
    mentions
}

fn is_candidate(token: &str) -> bool {
    token.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && token.bytes().any(|b| b.is_ascii_lowercase())
        && token
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// A message of the form `/name rest of request`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlashRequest<'a> {
    pub name: &'a str,
    pub rest: &'a str,
}

/// Reads `/name rest` where `name` could be a skill's.
pub fn parse_slash(text: &str) -> Option<SlashRequest<'_>> {
    let command = herald_core::command::slash_command(text)?;
    if !is_candidate(command.name) {
        return None;
    }
    Some(SlashRequest {
        name: command.name,
        rest: command.rest,
    })
}

/// What the model sees for `/name rest`: the skill's instructions, then the request.
pub fn expand_slash(name: &str, body: &str, rest: &str) -> String {
    let block = skill_block(name, body);
    if rest.is_empty() {
        block
    } else {
        format!("{block}\n\n{rest}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_found_with_escapes_uppercase_and_limits() {
        for (text, names, dropped) in [
            ("use $pdf please", vec!["pdf"], 0),
            ("$pdf and $notes, then $pdf again", vec!["pdf", "notes"], 0),
            ("start:$web-search.", vec!["web-search"], 0),
            ("trailing $notes- dash", vec!["notes"], 0),
            (r"literal \$pdf here", vec![], 0),
            ("echo $HOME and $Path and $homeDir", vec![], 0),
            ("costs $5 or US$10 or a$b", vec![], 0),
            ("$2fa works", vec!["2fa"], 0),
            ("$$ and $ alone and $-x", vec![], 0),
            (
                "$a1 $a2 $a3 $a4 $a5 $a6 $a7 $a8 $a9 $a10 $a1",
                vec!["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"],
                2,
            ),
            ("émoji ✨$notes ok", vec!["notes"], 0),
        ] {
            let mentions = parse_mentions(text);
            assert_eq!(mentions.names, names, "{text}");
            assert_eq!(mentions.dropped, dropped, "{text}");
        }
    }

    #[test]
    fn slash_requests_name_a_skill_and_keep_the_rest() {
        for (text, expected) in [
            ("/pdf summarise report.pdf", Some(("pdf", "summarise report.pdf"))),
            ("  /notes", Some(("notes", ""))),
            ("/web-search  rust   async ", Some(("web-search", "rust   async"))),
            // Telegram's adapter strips its own `@bot`; what is left names another bot.
            ("/web-search@other_bot rust", None),
            ("/PDF x", None),
            ("/ x", None),
            ("not /pdf at start", None),
            ("/path/to/file", None),
        ] {
            let parsed = parse_slash(text).map(|r| (r.name, r.rest));
            assert_eq!(parsed, expected, "{text}");
        }
    }

    #[test]
    fn expansion_puts_the_instructions_before_the_request() {
        assert_eq!(
            expand_slash("pdf", "Use pdftotext.", "summarise a.pdf"),
            "<skill name=\"pdf\">\nUse pdftotext.\n</skill>\n\nsummarise a.pdf"
        );
        assert_eq!(
            expand_slash("pdf", "Use it.", ""),
            "<skill name=\"pdf\">\nUse it.\n</skill>"
        );
    }
}
