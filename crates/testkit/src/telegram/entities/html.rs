//! `parse_mode: HTML`, as TDLib's `parse_html` reads it: the supported
//! tags, attributes quoted with `"` or `'` or not at all, the four named
//! HTML entities and numeric ones; any other `<` is refused.

use super::{Entity, Output, at, is_space, link_url, refuse};

const TAGS: &[&str] = &[
    "a",
    "b",
    "strong",
    "i",
    "em",
    "s",
    "strike",
    "del",
    "u",
    "ins",
    "tg-spoiler",
    "tg-emoji",
    "span",
    "pre",
    "code",
    "blockquote",
];

/// A start tag waiting for its end tag.
struct OpenTag {
    name: String,
    /// `href`, the code's language, the span's class without `tg-`, or the emoji id.
    argument: String,
    expandable: bool,
    offset: usize,
    /// Where its content starts in the visible text, in bytes.
    start: usize,
}

pub(super) fn parse(text: &str) -> Result<(String, Vec<Entity>), String> {
    let src = text.as_bytes();
    let len = src.len();
    let mut out = Output::default();
    let mut open: Vec<OpenTag> = Vec::new();
    let mut entities = Vec::new();
    let mut i = 0;
    while i < len {
        let c = src[i];
        if c == b'&'
            && let Some((decoded, next)) = decode_entity(src, i)
        {
            out.push_char(decoded);
            i = next;
            continue;
        }
        if c != b'<' {
            out.push_byte(c);
            i += 1;
            continue;
        }
        let begin = i;
        i += 1;
        if at(src, i) == b'/' {
            i += 1;
            if open.is_empty() {
                return Err(refuse(format_args!("Unexpected end tag at byte offset {begin}")));
            }
            let name_start = i;
            while !is_space(at(src, i)) && at(src, i) != b'>' {
                i += 1;
            }
            let end_name = &text[name_start..i];
            while i < len && is_space(src[i]) {
                i += 1;
            }
            if at(src, i) != b'>' {
                return Err(refuse(format_args!("Unclosed end tag at byte offset {begin}")));
            }
            i += 1;
            let tag = open.pop().expect("checked above");
            if !end_name.is_empty() && end_name.to_ascii_lowercase() != tag.name {
                return Err(refuse(format_args!(
                    "Unmatched end tag at byte offset {begin}, expected \"</{}>\", found \"</{end_name}>\"",
                    tag.name
                )));
            }
            close(tag, &out, &mut entities)?;
            continue;
        }
        while !is_space(at(src, i)) && at(src, i) != b'>' {
            i += 1;
        }
        if i >= len {
            return Err(refuse(format_args!("Unclosed start tag at byte offset {begin}")));
        }
        let name = text[begin + 1..i].to_lowercase();
        if !TAGS.contains(&name.as_str()) {
            return Err(refuse(format_args!(
                "Unsupported start tag \"{name}\" at byte offset {begin}"
            )));
        }
        let unclosed = || refuse(format_args!("Unclosed start tag \"{name}\" at byte offset {begin}"));
        let mut argument = String::new();
        let mut expandable = false;
        loop {
            while i < len && is_space(src[i]) {
                i += 1;
            }
            if i >= len {
                return Err(unclosed());
            }
            if src[i] == b'>' {
                i += 1;
                break;
            }
            let attribute_start = i;
            while i < len && !is_space(src[i]) && src[i] != b'=' && src[i] != b'>' {
                i += 1;
            }
            let attribute = text[attribute_start..i].to_lowercase();
            if attribute.is_empty() {
                return Err(refuse(format_args!(
                    "Empty attribute name in the tag \"{name}\" at byte offset {begin}"
                )));
            }
            while i < len && is_space(src[i]) {
                i += 1;
            }
            if at(src, i) != b'=' {
                if name == "blockquote" && attribute == "expandable" {
                    expandable = true;
                    continue;
                }
                if i >= len {
                    return Err(unclosed());
                }
                return Err(refuse(format_args!(
                    "Expected equal sign in declaration of an attribute of the tag \"{name}\" at byte offset {begin}"
                )));
            }
            i += 1;
            while i < len && is_space(src[i]) {
                i += 1;
            }
            if i >= len {
                return Err(unclosed());
            }
            let value = if src[i] == b'"' || src[i] == b'\'' {
                let quote = src[i];
                let value_start = i + 1;
                i = value_start;
                while i < len && src[i] != quote {
                    i += 1;
                }
                if i >= len {
                    return Err(refuse(format_args!(
                        "Unclosed end of attribute value at byte offset {}",
                        value_start - 1
                    )));
                }
                i += 1;
                decode_text(&text[value_start..i - 1])
            } else {
                // A name token: letters, digits, periods and hyphens, not case-sensitive.
                let token_start = i;
                while at(src, i).is_ascii_alphanumeric() || matches!(at(src, i), b'.' | b'-') {
                    i += 1;
                }
                if !is_space(at(src, i)) && at(src, i) != b'>' {
                    return Err(refuse(format_args!(
                        "Unexpected end of name token at byte offset {token_start}"
                    )));
                }
                text[token_start..i].to_ascii_lowercase()
            };
            match (name.as_str(), attribute.as_str()) {
                ("a", "href") | ("tg-emoji", "emoji-id") => argument = value,
                ("code", "class") if value.starts_with("language-") => argument = value["language-".len()..].to_owned(),
                ("span", "class") if value.starts_with("tg-") => argument = value["tg-".len()..].to_owned(),
                ("blockquote", "expandable") => expandable = true,
                _ => {}
            }
        }
        if name == "span" && argument != "spoiler" {
            return Err(refuse(format_args!(
                "Tag \"span\" must have class \"tg-spoiler\" at byte offset {begin}"
            )));
        }
        open.push(OpenTag {
            name,
            argument,
            expandable,
            offset: out.utf16,
            start: out.bytes.len(),
        });
    }
    if let Some(tag) = open.last() {
        return Err(refuse(format_args!(
            "Can't find end tag corresponding to start tag \"{}\"",
            tag.name
        )));
    }
    Ok((out.into_string(), entities))
}

/// Makes the entity of a closed tag; empty tags make none.
fn close(tag: OpenTag, out: &Output, entities: &mut Vec<Entity>) -> Result<(), String> {
    let offset = tag.offset;
    let length = out.utf16 - offset;
    if length == 0 {
        return Ok(());
    }
    let same_span = |entity: &Entity| entity.offset == offset && entity.length == length;
    let kind = match tag.name.as_str() {
        "b" | "strong" => "bold",
        "i" | "em" => "italic",
        "u" | "ins" => "underline",
        "s" | "strike" | "del" => "strikethrough",
        "tg-spoiler" | "span" => "spoiler",
        "blockquote" if tag.expandable => "expandable_blockquote",
        "blockquote" => "blockquote",
        "a" => {
            let url = if tag.argument.is_empty() {
                out.since(tag.start)
            } else {
                tag.argument
            };
            if let Some(url) = link_url(&url) {
                let mut entity = Entity::new("text_link", offset, length);
                entity.url = Some(url);
                entities.push(entity);
            }
            return Ok(());
        }
        "tg-emoji" => {
            if !tag.argument.parse::<i64>().is_ok_and(|id| id != 0) {
                return Err(refuse("Invalid custom emoji identifier specified"));
            }
            let mut entity = Entity::new("custom_emoji", offset, length);
            entity.custom_emoji_id = Some(tag.argument);
            entities.push(entity);
            return Ok(());
        }
        // `<pre><code class="language-x">`: the pre takes the code's language.
        "pre" => {
            if let Some(code) = entities.last_mut()
                && code.kind == "code"
                && same_span(code)
                && code.language.is_some()
            {
                code.kind = "pre";
            } else {
                entities.push(Entity::new("pre", offset, length));
            }
            return Ok(());
        }
        "code" => {
            let language = (!tag.argument.is_empty()).then_some(tag.argument);
            if let Some(pre) = entities.last_mut()
                && pre.kind == "pre"
                && same_span(pre)
                && language.is_some()
            {
                pre.language = language;
            } else {
                let mut entity = Entity::new("code", offset, length);
                entity.language = language;
                entities.push(entity);
            }
            return Ok(());
        }
        other => unreachable!("tag {other} is not in TAGS"),
    };
    entities.push(Entity::new(kind, offset, length));
    Ok(())
}

/// The character an HTML entity at `pos` stands for and where the text
/// goes on, or `None` when `&` is text: `&lt;` `&gt;` `&amp;` `&quot;` and
/// numeric references, the `;` optional, as Telegram reads them.
fn decode_entity(src: &[u8], pos: usize) -> Option<(char, usize)> {
    let mut end = pos + 1;
    let code = if at(src, end) == b'#' {
        end += 1;
        let radix = if matches!(at(src, end), b'x' | b'X') {
            end += 1;
            16
        } else {
            10
        };
        let mut value: u32 = 0;
        while let Some(digit) = char::from(at(src, end)).to_digit(radix) {
            value = value * radix + digit;
            end += 1;
            if value >= 0x10_FFFF {
                return None;
            }
        }
        if value == 0 || end - pos >= 10 {
            return None;
        }
        value
    } else {
        while at(src, end).is_ascii_alphabetic() {
            end += 1;
        }
        match &src[pos + 1..end] {
            b"lt" => u32::from('<'),
            b"gt" => u32::from('>'),
            b"amp" => u32::from('&'),
            b"quot" => u32::from('"'),
            _ => return None,
        }
    };
    if at(src, end) == b';' {
        end += 1;
    }
    char::from_u32(code).map(|c| (c, end))
}

/// An attribute value with its HTML entities decoded.
fn decode_text(text: &str) -> String {
    let src = text.as_bytes();
    let mut out = Output::default();
    let mut i = 0;
    while i < src.len() {
        if src[i] == b'&'
            && let Some((decoded, next)) = decode_entity(src, i)
        {
            out.push_char(decoded);
            i = next;
            continue;
        }
        out.push_byte(src[i]);
        i += 1;
    }
    out.into_string()
}
