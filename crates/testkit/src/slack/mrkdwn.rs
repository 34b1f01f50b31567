//! Slack's `mrkdwn` as Slack reads a message's `text`, so the fake can say
//! what Herald got wrong in what it wrote and what a person would see.
//!
//! Slack ("Formatting text for app surfaces") treats `&`, `<` and `>` as
//! control characters: `<…>` is a control sequence (a mention, a channel
//! link, a special mention like `<!here>`, a date, a link), and a literal
//! `&`, `<` or `>` must be written `&amp;`, `&lt;`, `&gt;`. Slack does not
//! refuse a message that breaks this; it shows something else than was
//! meant. So this module only reports: [`check`] lists the findings and the
//! mentions that would notify people, [`visible_text`] gives what a person
//! reads.
//!
//! Architecture invariant: pure functions of the text; no state, no I/O.
//! Formatting marks (`*bold*`, `_italic_`, `~strike~`, `` `code` ``, and `>`
//! opening a line as a block quote) are mrkdwn, not errors, and are left as
//! written in the visible text; only the control syntax is resolved.

/// What [`check`] found in one text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MrkdwnCheck {
    /// Each place the text breaks Slack's escaping rules, in order.
    pub findings: Vec<String>,
    /// Who the text would notify: `here`, `channel`, `everyone`,
    /// `subteam:S…` (a user group) or `user:U…`, in order of appearance.
    pub mentions: Vec<String>,
}

/// One `<…>` control sequence, as Slack reads it.
#[derive(Debug, PartialEq, Eq)]
enum Control<'a> {
    /// `<@U…>` or `<@W…>`, optionally `|name`.
    User { id: &'a str, label: Option<&'a str> },
    /// `<#C…>` or `<#C…|name>`.
    Channel { id: &'a str, label: Option<&'a str> },
    /// `<!here>`, `<!channel>`, `<!everyone>`.
    Broadcast(&'a str),
    /// `<!subteam^ID>`, optionally `|@handle`.
    Subteam { id: &'a str, label: Option<&'a str> },
    /// `<!date^…|fallback>`: a person sees the date, or the fallback.
    Date { fallback: &'a str },
    /// `<http(s)://…>`, `<mailto:…>`, optionally `|text`.
    Link { target: &'a str, label: Option<&'a str> },
}

fn is_id(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Reads the inside of `<…>` (without the brackets); `None` when it is not
/// a control sequence Slack knows.
fn parse_control(inner: &str) -> Option<Control<'_>> {
    let (head, label) = match inner.split_once('|') {
        Some((head, label)) => (head, Some(label)),
        None => (inner, None),
    };
    if let Some(id) = head.strip_prefix('@') {
        return (is_id(id) && (id.starts_with('U') || id.starts_with('W'))).then_some(Control::User { id, label });
    }
    if let Some(id) = head.strip_prefix('#') {
        return (is_id(id) && id.starts_with('C')).then_some(Control::Channel { id, label });
    }
    if let Some(special) = head.strip_prefix('!') {
        return match special {
            "here" | "channel" | "everyone" => Some(Control::Broadcast(special)),
            _ => {
                if let Some(id) = special.strip_prefix("subteam^") {
                    is_id(id).then_some(Control::Subteam { id, label })
                } else if special.starts_with("date^") {
                    // The fallback is required: it is what older clients show.
                    let fallback = label?;
                    (special.split('^').count() >= 3).then_some(Control::Date { fallback })
                } else {
                    None
                }
            }
        };
    }
    let is_url = ["http://", "https://"]
        .iter()
        .any(|scheme| head.len() > scheme.len() && head.starts_with(scheme));
    let is_mailto = head.len() > "mailto:".len() && head.starts_with("mailto:");
    let no_blanks = !head.chars().any(char::is_whitespace);
    ((is_url || is_mailto) && no_blanks).then_some(Control::Link { target: head, label })
}

/// The entity an `&` opens, if it is one of the three Slack decodes.
fn entity_at(text: &str) -> Option<(&'static str, char)> {
    [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
        .into_iter()
        .find(|(entity, _)| text.starts_with(entity))
}

/// Whether the byte at `index` is the first non-blank of its line.
fn opens_line(text: &str, index: usize) -> bool {
    text[..index]
        .chars()
        .rev()
        .take_while(|c| *c != '\n')
        .all(|c| c == ' ' || c == '\t')
}

/// One piece of the text: plain text (entities still encoded) or a control sequence.
enum Piece<'a> {
    Text(&'a str),
    Control(Control<'a>),
}

/// Splits the text into plain runs and control sequences. A `<` that does
/// not open a known control sequence is plain text.
fn pieces(text: &str) -> Vec<(usize, Piece<'_>)> {
    let mut pieces = Vec::new();
    let mut plain_from = 0;
    let mut index = 0;
    while let Some(offset) = text[index..].find('<') {
        let start = index + offset;
        let rest = &text[start + 1..];
        // A sequence ends at the first `>`, and holds no `<` and no line break.
        let control = rest
            .find('>')
            .map(|end| &rest[..end])
            .filter(|inner| !inner.contains(['<', '\n']))
            .and_then(|inner| parse_control(inner).map(|control| (inner.len(), control)));
        match control {
            Some((length, control)) => {
                if plain_from < start {
                    pieces.push((plain_from, Piece::Text(&text[plain_from..start])));
                }
                pieces.push((start, Piece::Control(control)));
                index = start + length + 2;
                plain_from = index;
            }
            None => index = start + 1,
        }
    }
    if plain_from < text.len() {
        pieces.push((plain_from, Piece::Text(&text[plain_from..])));
    }
    pieces
}

/// Checks `text` as `chat.postMessage` and `chat.update` take it.
pub fn check(text: &str) -> MrkdwnCheck {
    let mut result = MrkdwnCheck::default();
    let character = |byte: usize| text[..byte].chars().count();
    for (start, piece) in pieces(text) {
        match piece {
            Piece::Text(run) => {
                for (offset, c) in run.char_indices() {
                    let at = start + offset;
                    let finding = match c {
                        '&' if entity_at(&run[offset..]).is_none() => "unescaped `&`",
                        '<' => "unescaped `<` (not a Slack control sequence)",
                        '>' if !opens_line(text, at) => "unescaped `>`",
                        _ => continue,
                    };
                    result
                        .findings
                        .push(format!("{finding} at character {}", character(at)));
                }
            }
            Piece::Control(control) => {
                let mention = match control {
                    Control::User { id, .. } => format!("user:{id}"),
                    Control::Broadcast(who) => who.to_owned(),
                    Control::Subteam { id, .. } => format!("subteam:{id}"),
                    _ => continue,
                };
                result.mentions.push(mention);
            }
        }
    }
    result
}

/// Decodes `&amp;`, `&lt;` and `&gt;`; any other `&` stays as it is.
fn decode(run: &str, out: &mut String) {
    let mut rest = run;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        match entity_at(&rest[at..]) {
            Some((entity, c)) => {
                out.push(c);
                rest = &rest[at + entity.len()..];
            }
            None => {
                out.push('&');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
}

/// What a person reads in a Slack client: entities decoded, `<url|text>`
/// as `text`, `<url>` as the url, mentions as `@…` and channels as `#…`.
pub fn visible_text(mrkdwn: &str) -> String {
    let mut out = String::with_capacity(mrkdwn.len());
    for (_, piece) in pieces(mrkdwn) {
        match piece {
            Piece::Text(run) => decode(run, &mut out),
            Piece::Control(control) => match control {
                Control::User { id, label } => {
                    out.push('@');
                    decode(label.unwrap_or(id), &mut out);
                }
                Control::Channel { id, label } => {
                    out.push('#');
                    decode(label.unwrap_or(id), &mut out);
                }
                Control::Broadcast(who) => {
                    out.push('@');
                    out.push_str(who);
                }
                Control::Subteam { id, label } => match label {
                    Some(label) => decode(label, &mut out),
                    None => {
                        out.push('@');
                        out.push_str(id);
                    }
                },
                Control::Date { fallback } => decode(fallback, &mut out),
                Control::Link { target, label } => match label {
                    Some(label) => decode(label, &mut out),
                    None => decode(target.strip_prefix("mailto:").unwrap_or(target), &mut out),
                },
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_text_is_clean_and_bare_control_characters_are_findings() {
        let cases: &[(&str, &[&str])] = &[
            ("a &lt; b &amp; c &gt; d", &[]),
            (
                "a < b & c",
                &[
                    "unescaped `<` (not a Slack control sequence) at character 2",
                    "unescaped `&` at character 6",
                ],
            ),
            ("x > y", &["unescaped `>` at character 2"]),
            ("> a quote\n  > another", &[]),
            (
                "<b>bold</b>",
                &[
                    "unescaped `<` (not a Slack control sequence) at character 0",
                    "unescaped `>` at character 2",
                    "unescaped `<` (not a Slack control sequence) at character 7",
                    "unescaped `>` at character 10",
                ],
            ),
            (
                "&quot;quoted&quot;",
                &["unescaped `&` at character 0", "unescaped `&` at character 12"],
            ),
            ("<https://example.com|docs> and <mailto:a@example.com|mail>", &[]),
            (
                "<https://exa mple.com>",
                &[
                    "unescaped `<` (not a Slack control sequence) at character 0",
                    "unescaped `>` at character 21",
                ],
            ),
            ("<#C0GENERAL1> <#C0GENERAL1|general> <@U0ADMIN001>", &[]),
            ("<!date^1392734382^{date_num}|2014-02-18>", &[]),
            (
                "<!date^1392734382^{date_num}>",
                &[
                    "unescaped `<` (not a Slack control sequence) at character 0",
                    "unescaped `>` at character 28",
                ],
            ),
            (
                "é < ü",
                &["unescaped `<` (not a Slack control sequence) at character 2"],
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(check(text).findings, *expected, "{text}");
        }
    }

    #[test]
    fn mentions_that_notify_are_listed_and_links_are_not() {
        let text = "<!here> <!channel> <!everyone> <!subteam^S0123|@team> <@U0ADMIN001> <@W0ENTERPRS> <#C0GENERAL1> <https://x.io>";
        assert_eq!(
            check(text).mentions,
            [
                "here",
                "channel",
                "everyone",
                "subteam:S0123",
                "user:U0ADMIN001",
                "user:W0ENTERPRS"
            ]
        );
        assert!(check("@here and @channel written plainly").mentions.is_empty());
        assert!(check("&lt;!channel&gt;").mentions.is_empty(), "escaped, it is text");
    }

    #[test]
    fn the_visible_text_resolves_links_mentions_and_entities() {
        let cases = [
            ("a &lt; b &amp; c &gt; d", "a < b & c > d"),
            ("see <https://example.com|the docs>", "see the docs"),
            ("see <https://example.com>", "see https://example.com"),
            (
                "<mailto:bob@example.com|Email Bob> or <mailto:bob@example.com>",
                "Email Bob or bob@example.com",
            ),
            (
                "<@U0ADMIN001> in <#C0GENERAL1|general> or <#C0GENERAL1>",
                "@U0ADMIN001 in #general or #C0GENERAL1",
            ),
            ("<!here> <!subteam^S0123|@team> <!subteam^S0123>", "@here @team @S0123"),
            ("<!date^1392734382^{date_num}|Feb 18th>", "Feb 18th"),
            ("<https://x.io|a &amp; b>", "a & b"),
            ("a < b & c", "a < b & c"),
            ("*bold* _it_ > quote", "*bold* _it_ > quote"),
        ];
        for (mrkdwn, visible) in cases {
            assert_eq!(visible_text(mrkdwn), visible, "{mrkdwn}");
        }
    }
}
