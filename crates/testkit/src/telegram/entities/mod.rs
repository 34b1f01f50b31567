//! Telegram's formatting options: the visible text and the `MessageEntity`
//! objects the Bot API makes of a `text` (or `caption`) sent with a
//! `parse_mode` of `HTML`, `MarkdownV2` or legacy `Markdown`, or the
//! description it refuses the request with.
//!
//! It exists so the fake refuses what Telegram refuses: a reply Herald
//! formats wrongly fails on Telegram, and a fake that ignored `parse_mode`
//! would let that pass every test.
//!
//! The parsers follow the ones the Bot API server runs (TDLib's
//! `parse_html`, `parse_markdown_v2`, `parse_markdown`), error wording
//! included: each refusal is `Bad Request: can't parse entities: ...` with
//! byte offsets into the text as sent. Entities nested where Telegram does
//! not allow it (anything inside `code` or `pre`, a quote inside a quote, a
//! link inside a link) are dropped, not refused, as Telegram drops them.
//! Links whose URL Telegram would not accept are dropped too.
//!
//! Deviations: `tg://user?id=` links stay `text_link` (a `text_mention`
//! needs the user, which this pure module does not know); URLs, mentions
//! and hashtags in plain text are not detected; leading and trailing
//! whitespace is not trimmed.
//!
//! Architecture invariant: pure, no state and no I/O; the fake's handlers
//! call [`parse`] and decide what to do with the answer.

mod html;
mod markdown;

use std::cmp::Reverse;

use serde_json::{Map, Value, json};

/// A text as Telegram shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The visible text: markup removed, HTML entities decoded.
    pub text: String,
    /// `MessageEntity` objects, offsets and lengths in UTF-16 code units,
    /// sorted as the Bot API sorts them (by offset, the outer one first).
    pub entities: Vec<Value>,
}

/// Parses `text` as the Bot API does for `parse_mode` (case-insensitive;
/// `None`, empty or `none` leave the text as it is).
pub fn parse(text: &str, parse_mode: Option<&str>) -> Result<Parsed, String> {
    let mode = parse_mode.unwrap_or_default().to_ascii_lowercase();
    let plain = || Parsed {
        text: text.to_owned(),
        entities: Vec::new(),
    };
    // The Bot API does not look at the mode of an empty text.
    if mode.is_empty() || mode == "none" || text.is_empty() {
        return Ok(plain());
    }
    let (visible, entities) = match mode.as_str() {
        "html" => html::parse(text)?,
        "markdownv2" => markdown::parse_v2(text)?,
        "markdown" => markdown::parse_legacy(text)?,
        _ => return Err("Bad Request: unsupported parse_mode".to_owned()),
    };
    Ok(finish(visible, entities))
}

/// A refusal in the Bot API's words.
fn refuse(detail: impl std::fmt::Display) -> String {
    format!("Bad Request: can't parse entities: {detail}")
}

/// One entity while parsing; `language` is kept for `code` too, because an
/// enclosing `pre` takes it over.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entity {
    kind: &'static str,
    offset: usize,
    length: usize,
    url: Option<String>,
    language: Option<String>,
    custom_emoji_id: Option<String>,
}

impl Entity {
    fn new(kind: &'static str, offset: usize, length: usize) -> Self {
        Self {
            kind,
            offset,
            length,
            url: None,
            language: None,
            custom_emoji_id: None,
        }
    }

    fn end(&self) -> usize {
        self.offset + self.length
    }

    fn contains(&self, other: &Entity) -> bool {
        self.offset <= other.offset && other.end() <= self.end()
    }

    fn json(&self) -> Value {
        let mut entity = Map::new();
        entity.insert("offset".into(), json!(self.offset));
        entity.insert("length".into(), json!(self.length));
        entity.insert("type".into(), json!(self.kind));
        match self.kind {
            "text_link" => {
                entity.insert("url".into(), json!(self.url));
            }
            "pre" => {
                if let Some(language) = &self.language {
                    entity.insert("language".into(), json!(language));
                }
            }
            "custom_emoji" => {
                entity.insert("custom_emoji_id".into(), json!(self.custom_emoji_id));
            }
            _ => {}
        }
        Value::Object(entity)
    }
}

fn is_formatting(kind: &str) -> bool {
    matches!(kind, "bold" | "italic" | "underline" | "strikethrough" | "spoiler")
}

fn is_quote(kind: &str) -> bool {
    matches!(kind, "blockquote" | "expandable_blockquote")
}

/// The Bot API's nesting rules: formatting goes anywhere but inside `pre`
/// and `code` (it is cut out of them before this is asked); quotes hold
/// anything but quotes; links, custom emoji, `pre` and `code` do not hold
/// one another.
fn may_contain(outer: &Entity, inner: &Entity) -> bool {
    match outer.kind {
        "pre" | "code" => false,
        kind if is_quote(kind) => !is_quote(inner.kind),
        kind if is_formatting(kind) => kind != inner.kind,
        _ => is_formatting(inner.kind),
    }
}

/// Which of two entities on the same span comes first (TDLib's order).
fn priority(kind: &str) -> u8 {
    match kind {
        "blockquote" | "expandable_blockquote" => 0,
        "pre" => 11,
        "code" => 20,
        "text_link" | "text_mention" => 49,
        "bold" => 90,
        "italic" => 91,
        "underline" => 92,
        "strikethrough" => 93,
        "spoiler" => 94,
        _ => 99,
    }
}

/// Cuts formatting out of `pre` and `code`, drops empty and forbidden
/// nested entities and sorts the rest.
fn finish(text: String, mut entities: Vec<Entity>) -> Parsed {
    entities.retain(|entity| entity.length > 0);
    let code_spans: Vec<(usize, usize)> = entities
        .iter()
        .filter(|entity| matches!(entity.kind, "pre" | "code"))
        .map(|entity| (entity.offset, entity.end()))
        .collect();
    let mut entities: Vec<Entity> = entities
        .into_iter()
        .flat_map(|entity| outside_code(entity, &code_spans))
        .collect();
    entities.sort_by_key(|entity| (entity.offset, Reverse(entity.length), priority(entity.kind)));
    let mut kept: Vec<Entity> = Vec::new();
    for entity in entities {
        let allowed = kept
            .iter()
            .filter(|outer| outer.contains(&entity))
            .all(|outer| may_contain(outer, &entity));
        if allowed {
            kept.push(entity);
        }
    }
    Parsed {
        text,
        entities: kept.iter().map(Entity::json).collect(),
    }
}

/// A formatting entity in the pieces that lie outside every code span;
/// other entities as they are.
fn outside_code(entity: Entity, code_spans: &[(usize, usize)]) -> Vec<Entity> {
    if !is_formatting(entity.kind) {
        return vec![entity];
    }
    let mut pieces = vec![(entity.offset, entity.end())];
    for &(code_start, code_end) in code_spans {
        pieces = pieces
            .into_iter()
            .flat_map(|(start, end)| {
                let before = (start < code_start.min(end)).then(|| (start, code_start.min(end)));
                let after = (code_end.max(start) < end).then(|| (code_end.max(start), end));
                before.into_iter().chain(after)
            })
            .collect();
    }
    pieces
        .into_iter()
        .map(|(start, end)| Entity {
            offset: start,
            length: end - start,
            ..entity.clone()
        })
        .collect()
}

/// The visible text being built, with its length in UTF-16 code units.
#[derive(Default)]
struct Output {
    bytes: Vec<u8>,
    utf16: usize,
}

impl Output {
    /// Copies one byte of the (valid UTF-8) source text.
    fn push_byte(&mut self, byte: u8) {
        self.bytes.push(byte);
        if byte & 0xC0 != 0x80 {
            self.utf16 += if byte >= 0xF0 { 2 } else { 1 };
        }
    }

    fn push_char(&mut self, c: char) {
        let mut buffer = [0; 4];
        self.bytes.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
        self.utf16 += c.len_utf16();
    }

    fn since(&self, start: usize) -> String {
        String::from_utf8_lossy(&self.bytes[start..]).into_owned()
    }

    fn ends_line(&self) -> bool {
        self.bytes.last().is_none_or(|b| *b == b'\n')
    }

    fn into_string(self) -> String {
        // Whole UTF-8 sequences are copied and only chars are added.
        String::from_utf8(self.bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// The byte at `i`, or 0 past the end (the parsers read like C strings).
fn at(src: &[u8], i: usize) -> u8 {
    src.get(i).copied().unwrap_or(0)
}

/// TDLib's `is_space`, which counts the end of the text as a space.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n' | 0 | 0x0B)
}

/// The URL Telegram stores for a text link, or `None` when it drops the
/// link: `http`, `https`, `tg`, `ton` and `tonsite` links, and bare domains
/// (which become `http://`); an HTTP URL without a path gets `/`.
fn link_url(url: &str) -> Option<String> {
    let url = url.trim();
    if url.is_empty() || url.chars().any(char::is_whitespace) {
        return None;
    }
    let lower = url.to_ascii_lowercase();
    if ["tg:", "ton:", "tonsite:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
    {
        return Some(url.to_owned());
    }
    let (scheme, rest) = match lower.find("://") {
        Some(at) => (lower[..at].to_owned(), &url[at + 3..]),
        None if url.contains(':') && !url.split(':').nth(1).is_some_and(|p| p.starts_with(char::is_numeric)) => {
            return None;
        }
        None => ("http".to_owned(), url),
    };
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..host_end];
    if host.is_empty() || !host.contains('.') && !host.starts_with("localhost") {
        return None;
    }
    let path = &rest[host_end..];
    let slash = if path.starts_with('/') { "" } else { "/" };
    Some(format!("{scheme}://{host}{slash}{path}"))
}

#[cfg(test)]
mod tests;
