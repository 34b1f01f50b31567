//! Models answer in Markdown; each platform shows a different markup. This
//! module reads an answer once, with `pulldown-cmark`, and writes it in
//! each platform's own terms: Telegram's HTML ([`telegram`]), Slack's
//! `mrkdwn` ([`mrkdwn`]), Discord's Markdown ([`discord`]) and the HTML part
//! of a mail ([`html`]). Pure: no I/O, so every renderer is tested directly
//! and fuzzed.
//!
//! The layout every chat platform shares (blocks apart by a blank line,
//! list items on lines of their own with `•` or their number, headings as
//! lines of their own, tables as preformatted text, quotes) is walked here
//! once ([`walk`]); a [`Dialect`] says how text, emphasis, links and code
//! are written on its platform.
//!
//! What a renderer never does: pass HTML from the answer through (it is
//! shown as text), link to anything but `http`, `https` and `mailto`
//! (another scheme is shown as text after the link's words), or load
//! anything (an image becomes a link to it).

pub mod discord;
#[cfg(feature = "email")]
pub mod html;
pub mod mrkdwn;
mod table;
pub mod telegram;

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use serde::Deserialize;

/// How a channel writes replies: `markdown` renders the model's Markdown in
/// the platform's markup, `plain` sends the text as the model wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Markdown,
    Plain,
}

/// The Markdown Herald reads: CommonMark with GitHub's tables,
/// strikethrough and task lists (what models write).
pub(crate) fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(
        text,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS,
    )
}

/// `&`, `<` and `>` as `&amp;`, `&lt;` and `&gt;`: the escapes Telegram's
/// HTML and Slack's message text both need (and all they need).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

pub(crate) fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
}

/// Whether a link may be followed: the schemes a chat client or a mail
/// reader opens without surprise.
pub(crate) fn safe_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme) && lower.len() > scheme.len())
}

/// Inline and block styles a dialect writes its own way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    Strong,
    Emphasis,
    Strike,
    /// A link to a [`safe_url`].
    Link(String),
    Quote,
    Heading(u8),
}

/// How one platform writes what [`walk`] finds.
pub(crate) trait Dialect {
    /// Text of the answer, escaped as the platform needs.
    fn text(&mut self, text: &str);
    /// Text Herald adds for layout (list markers, a rule): not escaped
    /// beyond what the platform requires of every character.
    fn layout(&mut self, text: &str) {
        self.text(text);
    }
    /// A line break; the dialect adds what continues a quote.
    fn newline(&mut self);
    fn open(&mut self, style: &Style);
    fn close(&mut self, style: &Style);
    fn inline_code(&mut self, code: &str);
    /// A preformatted block; `code` ends without a newline.
    fn code_block(&mut self, language: Option<&str>, code: &str);
    /// The marker of a list item at `depth` (1 for a top-level list):
    /// `number` for an ordered list.
    fn bullet(&self, depth: usize, number: Option<u64>) -> String {
        let indent = "  ".repeat(depth.saturating_sub(1));
        match number {
            Some(number) => format!("{indent}{number}. "),
            None => format!("{indent}• "),
        }
    }
}

/// A gap owed before the next block's content.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Gap {
    None,
    Line,
    Paragraph,
}

/// A table being read: its rows of plain cells.
struct TableState {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    header_rows: usize,
    in_head: bool,
}

/// Walks the Markdown of `text` into `dialect`.
pub(crate) fn walk(text: &str, dialect: &mut impl Dialect) {
    let mut walker = Walker {
        dialect,
        gap: Gap::None,
        started: false,
        fresh: false,
        lists: Vec::new(),
        code: None,
        table: None,
        link_fallback: Vec::new(),
        image: None,
    };
    for event in parser(text) {
        walker.event(event);
    }
}

struct Walker<'d, D> {
    dialect: &'d mut D,
    gap: Gap,
    /// Whether anything was written (no gap before the first block).
    started: bool,
    /// A list item's marker or a quote was just opened: its first block
    /// follows on the same line.
    fresh: bool,
    /// Open lists: the next item's number, `None` for bullets.
    lists: Vec<Option<u64>>,
    /// A code block being read: its language and text.
    code: Option<(Option<String>, String)>,
    table: Option<TableState>,
    /// For each open link: the URL to show after its words when it may
    /// not be linked (`None` when it is a [`Style::Link`]).
    link_fallback: Vec<Option<String>>,
    /// An image being read: its URL and the alternative text so far.
    image: Option<(String, String)>,
}

impl<D: Dialect> Walker<'_, D> {
    fn owe(&mut self, gap: Gap) {
        self.gap = self.gap.max(gap);
    }

    /// Writes the gap owed before new content.
    fn flush(&mut self) {
        if self.started {
            match self.gap {
                Gap::None => {}
                Gap::Line => self.dialect.newline(),
                Gap::Paragraph => {
                    self.dialect.newline();
                    self.dialect.newline();
                }
            }
        }
        self.gap = Gap::None;
        self.started = true;
        self.fresh = false;
    }

    fn text(&mut self, text: &str) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        if let Some((_, alt)) = &mut self.image {
            alt.push_str(text);
            return;
        }
        if let Some(table) = &mut self.table {
            if let Some(cell) = table.rows.last_mut().and_then(|row| row.last_mut()) {
                cell.push_str(text);
            }
            return;
        }
        if text.is_empty() {
            return;
        }
        self.flush();
        // Lines inside a paragraph (hard breaks in the source's text are
        // events of their own; a newline here came from an HTML block).
        let mut lines = text.split('\n');
        if let Some(first) = lines.next() {
            self.dialect.text(first);
        }
        for line in lines {
            self.dialect.newline();
            self.dialect.text(line);
        }
    }

    fn block_start(&mut self) {
        if !self.fresh {
            self.owe(Gap::Paragraph);
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                if self.code.is_some() || self.image.is_some() || self.table.is_some() {
                    self.text(&code);
                } else {
                    self.flush();
                    self.dialect.inline_code(&code);
                }
            }
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::Html(html) | Event::InlineHtml(html) => {
                // HTML is shown as the model wrote it, except a line break.
                let tag = html.trim().to_ascii_lowercase();
                if matches!(tag.as_str(), "<br>" | "<br/>" | "<br />") {
                    if let Some(table) = &mut self.table {
                        if let Some(cell) = table.rows.last_mut().and_then(|row| row.last_mut()) {
                            cell.push(' ');
                        }
                    } else {
                        self.owe(Gap::Line);
                    }
                } else {
                    self.text(html.trim_end_matches('\n'));
                    if html.ends_with('\n') {
                        self.owe(Gap::Line);
                    }
                }
            }
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            Event::SoftBreak | Event::HardBreak => {
                if self.table.is_some() || self.image.is_some() {
                    self.text(" ");
                } else {
                    self.owe(Gap::Line);
                }
            }
            Event::Rule => {
                self.block_start();
                self.flush();
                self.dialect.layout("──────────");
                self.owe(Gap::Paragraph);
            }
            Event::TaskListMarker(done) => {
                self.flush();
                self.dialect.layout(if done { "☑ " } else { "☐ " });
                self.fresh = true;
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock | Tag::MetadataBlock(_) => self.block_start(),
            Tag::Heading { level, .. } => {
                self.block_start();
                self.flush();
                self.dialect.open(&Style::Heading(heading_level(level)));
            }
            Tag::BlockQuote(_) => {
                self.block_start();
                self.flush();
                self.dialect.open(&Style::Quote);
                self.fresh = true;
            }
            Tag::CodeBlock(kind) => {
                self.block_start();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
                        .next()
                        .filter(|language| !language.is_empty())
                        .map(str::to_owned),
                    CodeBlockKind::Indented => None,
                };
                self.code = Some((language, String::new()));
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_start();
                } else {
                    self.owe(Gap::Line);
                }
                self.lists.push(start);
            }
            Tag::Item => {
                if !self.fresh {
                    self.owe(Gap::Line);
                }
                self.flush();
                let depth = self.lists.len();
                let number = self.lists.last_mut().and_then(|next| {
                    let number = next.as_mut()?;
                    let this = *number;
                    *number += 1;
                    Some(this)
                });
                let bullet = self.dialect.bullet(depth.max(1), number);
                self.dialect.layout(&bullet);
                self.fresh = true;
            }
            Tag::Table(alignments) => {
                self.block_start();
                self.table = Some(TableState {
                    alignments,
                    rows: Vec::new(),
                    header_rows: 0,
                    in_head: false,
                });
            }
            Tag::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = true;
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|table| table.rows.last_mut()) {
                    row.push(String::new());
                }
            }
            Tag::Emphasis => self.inline(Style::Emphasis),
            Tag::Strong => self.inline(Style::Strong),
            Tag::Strikethrough => self.inline(Style::Strike),
            Tag::Link { dest_url, .. } => {
                if self.code.is_some() || self.table.is_some() || self.image.is_some() {
                    return;
                }
                self.flush();
                if safe_url(&dest_url) {
                    self.link_fallback.push(None);
                    self.dialect.open(&Style::Link(dest_url.into_string()));
                } else {
                    self.link_fallback.push(Some(dest_url.into_string()));
                }
            }
            Tag::Image { dest_url, .. } if self.image.is_none() => {
                self.image = Some((dest_url.into_string(), String::new()));
            }
            Tag::FootnoteDefinition(name) => {
                self.block_start();
                self.flush();
                self.dialect.text(&format!("[^{name}]: "));
            }
            _ => {}
        }
    }

    fn inline(&mut self, style: Style) {
        if self.code.is_some() || self.table.is_some() || self.image.is_some() {
            return;
        }
        self.flush();
        self.dialect.open(&style);
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock | TagEnd::MetadataBlock(_) | TagEnd::FootnoteDefinition => {
                self.owe(Gap::Paragraph)
            }
            TagEnd::Heading(level) => {
                self.dialect.close(&Style::Heading(heading_level(level)));
                self.owe(Gap::Paragraph);
            }
            TagEnd::BlockQuote(_) => {
                self.dialect.close(&Style::Quote);
                self.owe(Gap::Paragraph);
            }
            TagEnd::CodeBlock => {
                if let Some((language, code)) = self.code.take() {
                    self.flush();
                    self.dialect
                        .code_block(language.as_deref(), code.trim_end_matches('\n'));
                    self.owe(Gap::Paragraph);
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.owe(if self.lists.is_empty() {
                    Gap::Paragraph
                } else {
                    Gap::Line
                });
            }
            TagEnd::Item => self.owe(Gap::Line),
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.flush();
                    let laid_out = table::lay_out(&table.rows, table.header_rows, &table.alignments);
                    self.dialect.code_block(None, &laid_out);
                    self.owe(Gap::Paragraph);
                }
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = false;
                    table.header_rows = table.rows.len();
                }
            }
            TagEnd::Emphasis => self.inline_end(Style::Emphasis),
            TagEnd::Strong => self.inline_end(Style::Strong),
            TagEnd::Strikethrough => self.inline_end(Style::Strike),
            TagEnd::Link => {
                if self.code.is_some() || self.table.is_some() || self.image.is_some() {
                    return;
                }
                match self.link_fallback.pop() {
                    Some(Some(url)) => {
                        self.dialect.text(&format!(" ({url})"));
                    }
                    // The URL is only known at the start; the dialect kept it.
                    Some(None) => self.dialect.close(&Style::Link(String::new())),
                    None => {}
                }
            }
            TagEnd::Image => {
                if let Some((url, alt)) = self.image.take() {
                    let words = if alt.trim().is_empty() { url.clone() } else { alt };
                    if let Some(table) = &mut self.table {
                        if let Some(cell) = table.rows.last_mut().and_then(|row| row.last_mut()) {
                            cell.push_str(&words);
                        }
                        return;
                    }
                    if self.code.is_some() {
                        return;
                    }
                    self.flush();
                    if safe_url(&url) {
                        self.dialect.open(&Style::Link(url));
                        self.dialect.text(&words);
                        self.dialect.close(&Style::Link(String::new()));
                    } else {
                        self.dialect.text(&words);
                    }
                }
            }
            _ => {}
        }
    }

    fn inline_end(&mut self, style: Style) {
        if self.code.is_some() || self.table.is_some() || self.image.is_some() {
            return;
        }
        self.dialect.close(&style);
    }
}

fn heading_level(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

#[cfg(test)]
mod tests;
