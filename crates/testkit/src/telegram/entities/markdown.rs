//! `parse_mode: MarkdownV2` and the legacy `Markdown`, as TDLib's
//! `parse_markdown_v2` and `parse_markdown` read them.
//!
//! MarkdownV2: every reserved character outside an entity must be escaped
//! with `\` (inside `code` and `pre` only `` ` ``, inside a link's `(...)`
//! only `)`); `>` at the start of a line quotes it, `**>` starts a quote
//! right after another, and `||` at the end of a quoted line makes the
//! quote expandable. Legacy Markdown knows `*bold*`, `_italic_`, `` `code` ``,
//! ```` ```pre``` ```` and `[text](url)`, escapes only `_ * ` [`, and nests nothing.

use super::{Entity, Output, at, is_space, link_url, refuse};

/// Characters MarkdownV2 reserves outside `code` and `pre`.
const RESERVED: &[u8] = b"_*[]()~`>#+-=|{}.!";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bold,
    Italic,
    Underline,
    Strikethrough,
    Spoiler,
    Code,
    Pre,
    TextUrl,
    CustomEmoji,
}

impl Kind {
    fn entity_type(self) -> &'static str {
        match self {
            Kind::Bold => "bold",
            Kind::Italic => "italic",
            Kind::Underline => "underline",
            Kind::Strikethrough => "strikethrough",
            Kind::Spoiler => "spoiler",
            Kind::Code => "code",
            Kind::Pre => "pre",
            Kind::TextUrl => "text_link",
            Kind::CustomEmoji => "custom_emoji",
        }
    }
}

/// An entity whose end has not been seen yet.
struct Open {
    kind: Kind,
    language: Option<String>,
    offset: usize,
    /// Where it starts in the text as sent, for the error.
    byte_offset: usize,
    /// Where its content starts in the visible text, in bytes.
    start: usize,
}

impl Open {
    /// TDLib's name of the entity type, as its errors print it.
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Bold => "Bold",
            Kind::Italic => "Italic",
            Kind::Underline => "Underline",
            Kind::Strikethrough => "Strikethrough",
            Kind::Spoiler => "Spoiler",
            Kind::Code => "Code",
            Kind::Pre if self.language.is_some() => "PreCode",
            Kind::Pre => "Pre",
            Kind::TextUrl => "TextUrl",
            Kind::CustomEmoji => "CustomEmoji",
        }
    }
}

/// A block quote being read: where it starts in the visible text.
struct Quote {
    offset: usize,
}

fn reserved(c: u8) -> String {
    refuse(format_args!(
        "Character '{}' is reserved and must be escaped with the preceding '\\'",
        char::from(c)
    ))
}

fn escapable(byte: u8) -> bool {
    (1..=126).contains(&byte)
}

pub(super) fn parse_v2(text: &str) -> Result<(String, Vec<Entity>), String> {
    let src = text.as_bytes();
    let len = src.len();
    let line_start = |i: usize| i == 0 || src[i - 1] == b'\n';
    let mut out = Output::default();
    let mut open: Vec<Open> = Vec::new();
    let mut entities = Vec::new();
    let mut quote: Option<Quote> = None;
    let mut i = 0;
    while i < len {
        let c = src[i];
        let in_code = open.last().is_some_and(|o| matches!(o.kind, Kind::Code | Kind::Pre));
        // A line that does not start with '>' ends the quote before it.
        if !in_code
            && line_start(i)
            && c != b'>'
            && let Some(ended) = quote.take()
        {
            let end = out.utf16 - usize::from(out.bytes.last() == Some(&b'\n'));
            entities.push(Entity::new(
                "blockquote",
                ended.offset,
                end.saturating_sub(ended.offset),
            ));
        }
        if c == b'\\' && escapable(at(src, i + 1)) {
            out.push_byte(src[i + 1]);
            i += 2;
            continue;
        }
        let reserved_here: &[u8] = if in_code { b"`" } else { RESERVED };
        if !reserved_here.contains(&c) {
            out.push_byte(c);
            i += 1;
            continue;
        }
        // '>' opening a quoted line, also after "**" (an empty bold that
        // separates two quotes).
        let after_separator = i >= 2 && &src[i - 2..i] == b"**" && line_start(i - 2);
        if c == b'>' && out.ends_line() && (line_start(i) || after_separator) {
            if quote.is_none() {
                quote = Some(Quote { offset: out.utf16 });
            }
            i += 1;
            continue;
        }
        // "||" ending a quoted line, when it does not close a spoiler: the
        // quote is expandable and ends here.
        let at_line_end = i + 2 == len || at(src, i + 2) == b'\n';
        if c == b'|'
            && at(src, i + 1) == b'|'
            && at_line_end
            && !open.last().is_some_and(|o| o.kind == Kind::Spoiler)
            && let Some(ended) = quote.take()
        {
            entities.push(Entity::new(
                "expandable_blockquote",
                ended.offset,
                out.utf16 - ended.offset,
            ));
            i += 2;
            continue;
        }
        let next = at(src, i + 1);
        let ends_open = open.last().is_some_and(|o| match o.kind {
            Kind::Bold => c == b'*',
            Kind::Italic => c == b'_' && next != b'_',
            Kind::Underline => c == b'_' && next == b'_',
            Kind::Strikethrough => c == b'~',
            Kind::Spoiler => c == b'|' && next == b'|',
            Kind::Code => c == b'`',
            Kind::Pre => c == b'`' && next == b'`' && at(src, i + 2) == b'`',
            Kind::TextUrl | Kind::CustomEmoji => c == b']',
        });
        if !ends_open {
            let byte_offset = i;
            let mut language = None;
            let kind = match c {
                b'_' if next == b'_' => {
                    i += 2;
                    Kind::Underline
                }
                b'_' => {
                    i += 1;
                    Kind::Italic
                }
                b'*' => {
                    i += 1;
                    Kind::Bold
                }
                b'~' => {
                    i += 1;
                    Kind::Strikethrough
                }
                b'|' if next == b'|' => {
                    i += 2;
                    Kind::Spoiler
                }
                b'[' => {
                    i += 1;
                    Kind::TextUrl
                }
                b'!' if next == b'[' => {
                    i += 2;
                    Kind::CustomEmoji
                }
                b'`' if next == b'`' && at(src, i + 2) == b'`' => {
                    i += 3;
                    let (found, after) = pre_language(text, i);
                    language = found;
                    i = after;
                    Kind::Pre
                }
                b'`' => {
                    i += 1;
                    Kind::Code
                }
                _ => return Err(reserved(c)),
            };
            open.push(Open {
                kind,
                language,
                offset: out.utf16,
                byte_offset,
                start: out.bytes.len(),
            });
            continue;
        }
        let closing = open.pop().expect("ends_open needs an open entity");
        let mut entity = Entity::new(closing.kind.entity_type(), closing.offset, out.utf16 - closing.offset);
        let mut keep = entity.length > 0;
        match closing.kind {
            Kind::Underline | Kind::Spoiler => i += 2,
            Kind::Pre => {
                i += 3;
                entity.language = closing.language;
            }
            Kind::TextUrl => {
                let url = if at(src, i + 1) == b'(' {
                    let (url, after) = link_target(src, i + 2)
                        .ok_or_else(|| refuse(format_args!("Can't find end of a URL at byte offset {}", i + 2)))?;
                    i = after;
                    url
                } else {
                    i += 1;
                    out.since(closing.start)
                };
                entity.url = link_url(&url);
                keep &= entity.url.is_some();
            }
            Kind::CustomEmoji => {
                if at(src, i + 1) != b'(' {
                    return Err(refuse("Custom emoji entity must contain a tg://emoji URL"));
                }
                let (url, after) = link_target(src, i + 2).ok_or_else(|| {
                    refuse(format_args!(
                        "Can't find end of a custom emoji URL at byte offset {}",
                        i + 2
                    ))
                })?;
                i = after;
                entity.custom_emoji_id = Some(custom_emoji_id(&url)?);
            }
            _ => i += 1,
        }
        if keep {
            entities.push(entity);
        }
    }
    if let Some(unclosed) = open.last() {
        return Err(refuse(format_args!(
            "Can't find end of {} entity at byte offset {}",
            unclosed.name(),
            unclosed.byte_offset
        )));
    }
    if let Some(ended) = quote {
        entities.push(Entity::new("blockquote", ended.offset, out.utf16 - ended.offset));
    }
    Ok((out.into_string(), entities))
}

/// After "```": the language up to the first space (when one follows it),
/// and one line break skipped; returns where the content starts.
fn pre_language(text: &str, mut i: usize) -> (Option<String>, usize) {
    let src = text.as_bytes();
    let mut end = i;
    while !is_space(at(src, end)) && at(src, end) != b'`' {
        end += 1;
    }
    let mut language = None;
    if end != i && end < src.len() && src[end] != b'`' {
        language = Some(text[i..end].to_owned());
        i = end;
    }
    match (at(src, i), at(src, i + 1)) {
        (b'\n' | b'\r', second @ (b'\n' | b'\r')) if second != src[i] => i += 2,
        (b'\n' | b'\r', _) => i += 1,
        _ => {}
    }
    (language, i)
}

/// The `(...)` of a link from `start` (after the parenthesis), escapes
/// removed, and where the text goes on after `)`; `None` without `)`.
fn link_target(src: &[u8], start: usize) -> Option<(String, usize)> {
    let mut url = Vec::new();
    let mut i = start;
    while i < src.len() && src[i] != b')' {
        if src[i] == b'\\' && escapable(at(src, i + 1)) {
            url.push(src[i + 1]);
            i += 2;
            continue;
        }
        url.push(src[i]);
        i += 1;
    }
    (i < src.len()).then(|| (String::from_utf8_lossy(&url).into_owned(), i + 1))
}

/// The id in `tg://emoji?id=N`, or TDLib's refusal.
fn custom_emoji_id(url: &str) -> Result<String, String> {
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("tg:") else {
        return Err(refuse("Custom emoji URL must have scheme tg"));
    };
    let rest = rest.trim_start_matches('/');
    let (host, query) = rest.split_once('?').unwrap_or((rest, ""));
    if host.trim_end_matches('/') != "emoji" {
        return Err(refuse("Custom emoji URL must have host \"emoji\""));
    }
    let Some(id) = query.split('&').find_map(|pair| pair.strip_prefix("id=")) else {
        return Err(refuse("Custom emoji URL must have an emoji identifier"));
    };
    match id.parse::<i64>() {
        Ok(number) if number != 0 => Ok(id.to_owned()),
        _ => Err(refuse("Invalid custom emoji identifier specified")),
    }
}

pub(super) fn parse_legacy(text: &str) -> Result<(String, Vec<Entity>), String> {
    let src = text.as_bytes();
    let len = src.len();
    let mut out = Output::default();
    let mut entities = Vec::new();
    let mut i = 0;
    while i < len {
        let c = src[i];
        if c == b'\\' && matches!(at(src, i + 1), b'_' | b'*' | b'`' | b'[') {
            out.push_byte(src[i + 1]);
            i += 2;
            continue;
        }
        if !matches!(c, b'_' | b'*' | b'`' | b'[') {
            out.push_byte(c);
            i += 1;
            continue;
        }
        let begin = i;
        let end_character = if c == b'[' { b']' } else { c };
        i += 1;
        let mut is_pre = false;
        let mut language = None;
        if c == b'`' && at(src, i) == b'`' && at(src, i + 1) == b'`' {
            is_pre = true;
            let (found, after) = pre_language(text, i + 2);
            language = found;
            i = after;
        }
        let offset = out.utf16;
        let content_start = i;
        while i < len && (src[i] != end_character || is_pre && !(at(src, i + 1) == b'`' && at(src, i + 2) == b'`')) {
            out.push_byte(src[i]);
            i += 1;
        }
        if i == len {
            return Err(refuse(format_args!(
                "Can't find end of the entity starting at byte offset {begin}"
            )));
        }
        let length = out.utf16 - offset;
        let mut entity = match c {
            b'_' => Entity::new("italic", offset, length),
            b'*' => Entity::new("bold", offset, length),
            b'`' if is_pre => Entity::new("pre", offset, length),
            b'`' => Entity::new("code", offset, length),
            _ => Entity::new("text_link", offset, length),
        };
        entity.language = language;
        if c == b'[' {
            let url = if at(src, i + 1) == b'(' {
                let start = i + 2;
                i = start;
                while i < len && src[i] != b')' {
                    i += 1;
                }
                String::from_utf8_lossy(&src[start..i]).into_owned()
            } else {
                String::from_utf8_lossy(&src[content_start..i]).into_owned()
            };
            entity.url = link_url(&url);
        }
        if length > 0 && (c != b'[' || entity.url.is_some()) {
            entities.push(entity);
        }
        i += if is_pre { 3 } else { 1 };
    }
    Ok((out.into_string(), entities))
}
