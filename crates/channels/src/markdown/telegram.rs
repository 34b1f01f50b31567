//! Markdown as Telegram's HTML `parse_mode`, cut into messages.
//!
//! Telegram counts its 4,096 characters on the text a person sees, after
//! the HTML is read, and refuses a message whose tags do not close. So the
//! answer is rendered first into visible text with marks where tags open
//! and close ([`Rendered`]), the visible text is cut (at a paragraph, a
//! line, a word, as for every platform), and each chunk is written as HTML
//! on its own: a tag open at a cut is closed at the end of one chunk and
//! opened again at the start of the next. Each [`Chunk`] also carries its
//! visible text, sent as plain text if Telegram refuses the HTML anyway.
//!
//! Telegram's HTML: `b`, `i`, `s`, `code`, `pre` (with `code
//! class="language-…"`), `a href`, `blockquote` (not nested). Headings are
//! bold lines, lists `•`/`1.` lines, tables preformatted; `<`, `>` and `&`
//! in text are escaped; `||spoilers||` stay text.

use super::{Dialect, Style, escape, escape_into, walk};
use crate::chunk::{LengthUnit, split_within};

/// An answer as Telegram shows it: the visible text and where tags go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// What a person sees.
    pub text: String,
    marks: Vec<Mark>,
    tags: Vec<TagText>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct TagText {
    open: String,
    close: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    /// Byte offset in the visible text.
    at: usize,
    tag: usize,
    open: bool,
}

/// One message: its HTML and, should Telegram refuse that, its visible text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub html: String,
    pub text: String,
}

/// Telegram's limit on a message's visible text, in UTF-16 units.
pub const MAX_TEXT: usize = 4096;

/// Renders the Markdown of `markdown`.
pub fn render(markdown: &str) -> Rendered {
    let mut builder = Builder::default();
    walk(markdown, &mut builder);
    let mut rendered = builder.rendered;
    // What a person sees starts and ends with something to see.
    let end = rendered.text.trim_end().len();
    rendered.text.truncate(end);
    for mark in &mut rendered.marks {
        mark.at = mark.at.min(end);
    }
    rendered
}

/// The Markdown of `markdown` in messages of at most `max` UTF-16 units of
/// visible text each.
pub fn chunks(markdown: &str, max: usize) -> Vec<Chunk> {
    cut(&render(markdown), max)
}

/// Cuts a rendering into messages of at most `max` UTF-16 units of text.
pub fn cut(rendered: &Rendered, max: usize) -> Vec<Chunk> {
    let text = rendered.text.as_str();
    let max = max.max(1);
    let mut chunks = Vec::new();
    // Tags open at the current position, innermost last.
    let mut open: Vec<usize> = Vec::new();
    let mut next_mark = 0;
    let mut start = skip_space(text, 0);
    while start < text.len() {
        let rest = &text[start..];
        let (end, next) = if LengthUnit::Utf16.measure(rest) <= max {
            (text.len(), text.len())
        } else {
            let (piece, after) = split_within(rest, max, LengthUnit::Utf16);
            let mut end = start + piece.trim_end().len();
            if end == start {
                // Not one character fits: it goes alone.
                end += rest.chars().next().map_or(1, char::len_utf8);
                (end, skip_space(text, end))
            } else {
                (end, skip_space(text, text.len() - after.len()))
            }
        };
        // Marks before the chunk, and closes at its very start, belong to what came before.
        while let Some(mark) = rendered.marks.get(next_mark)
            && (mark.at < start || (mark.at == start && !mark.open))
        {
            apply(&mut open, mark);
            next_mark += 1;
        }
        if end > start {
            let mut html = String::new();
            for &tag in &open {
                html.push_str(&rendered.tags[tag].open);
            }
            let mut at = start;
            // Closes at the end are this chunk's; opens there, the next one's.
            while let Some(mark) = rendered.marks.get(next_mark)
                && (mark.at < end || (mark.at == end && !mark.open))
            {
                escape_into(&mut html, &text[at..mark.at.max(at)]);
                at = mark.at.max(at);
                let tag = &rendered.tags[mark.tag];
                html.push_str(if mark.open { &tag.open } else { tag.close });
                apply(&mut open, mark);
                next_mark += 1;
            }
            escape_into(&mut html, &text[at..end]);
            for &tag in open.iter().rev() {
                html.push_str(rendered.tags[tag].close);
            }
            chunks.push(Chunk {
                html,
                text: text[start..end].to_owned(),
            });
        }
        start = next;
    }
    chunks
}

fn apply(open: &mut Vec<usize>, mark: &Mark) {
    if mark.open {
        open.push(mark.tag);
    } else if let Some(position) = open.iter().rposition(|&tag| tag == mark.tag) {
        open.remove(position);
    }
}

fn skip_space(text: &str, from: usize) -> usize {
    from + (text[from..].len() - text[from..].trim_start().len())
}

fn escape_attribute(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

/// A code block's language, when it is one Telegram can take as a class.
fn language(language: &str) -> Option<&str> {
    (language.len() <= 32
        && language
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '#' | '-' | '_' | '.')))
    .then_some(language)
}

#[derive(Default)]
struct Builder {
    rendered: Rendered,
    /// For each open style: its tag, or `None` when Telegram cannot show it
    /// there (a quote in a quote).
    styles: Vec<Option<usize>>,
    quotes: usize,
}

impl Builder {
    fn open_tag(&mut self, open: String, close: &'static str) -> usize {
        let tag = self.rendered.tags.len();
        self.rendered.tags.push(TagText { open, close });
        self.rendered.marks.push(Mark {
            at: self.rendered.text.len(),
            tag,
            open: true,
        });
        tag
    }

    fn close_tag(&mut self, tag: usize) {
        let at = self.rendered.text.len();
        // A tag around nothing is left out (Telegram has no empty entities).
        if self.rendered.marks.last() == Some(&Mark { at, tag, open: true }) {
            self.rendered.marks.pop();
            return;
        }
        self.rendered.marks.push(Mark { at, tag, open: false });
    }
}

impl Dialect for Builder {
    fn text(&mut self, text: &str) {
        self.rendered.text.push_str(text);
    }

    fn newline(&mut self) {
        self.rendered.text.push('\n');
    }

    fn open(&mut self, style: &Style) {
        let tag = match style {
            Style::Strong | Style::Heading(_) => Some(self.open_tag("<b>".into(), "</b>")),
            Style::Emphasis => Some(self.open_tag("<i>".into(), "</i>")),
            Style::Strike => Some(self.open_tag("<s>".into(), "</s>")),
            Style::Link(url) => Some(self.open_tag(format!("<a href=\"{}\">", escape_attribute(url)), "</a>")),
            Style::Quote => {
                self.quotes += 1;
                (self.quotes == 1).then(|| self.open_tag("<blockquote>".into(), "</blockquote>"))
            }
        };
        self.styles.push(tag);
    }

    fn close(&mut self, style: &Style) {
        if *style == Style::Quote {
            self.quotes = self.quotes.saturating_sub(1);
        }
        if let Some(Some(tag)) = self.styles.pop() {
            self.close_tag(tag);
        }
    }

    fn inline_code(&mut self, code: &str) {
        let tag = self.open_tag("<code>".into(), "</code>");
        self.rendered.text.push_str(code);
        self.close_tag(tag);
    }

    fn code_block(&mut self, language_name: Option<&str>, code: &str) {
        let tag = match language_name.and_then(language) {
            Some(language) => self.open_tag(format!("<pre><code class=\"language-{language}\">"), "</code></pre>"),
            None => self.open_tag("<pre>".into(), "</pre>"),
        };
        self.rendered.text.push_str(code);
        self.close_tag(tag);
    }
}

#[cfg(test)]
mod tests;
