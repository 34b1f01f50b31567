//! Markdown as Discord writes it. Discord reads most of CommonMark itself
//! (`**`, `*`, `~~`, `` ` ``, fences with a language, `[words](url)`,
//! `#`–`###` headings, `-`/`1.` lists, `>` quotes), so this mostly writes
//! the answer back in the subset Discord shows: deeper headings become
//! bold lines, tables preformatted blocks, and characters Discord would
//! read as markup in the answer's text are escaped with `\` (except in
//! URLs, which Discord links only unescaped).
//!
//! Mentions are not this module's business: every message Herald posts on
//! Discord says `allowed_mentions: {parse: []}`, so `@everyone`, `@here`,
//! role and user mentions in an answer ping nobody.

use super::{Dialect, Style, walk};

/// The Discord Markdown of `markdown`.
pub fn render(markdown: &str) -> String {
    let mut writer = Writer::default();
    walk(markdown, &mut writer);
    writer.out.trim_end().to_owned()
}

#[derive(Default)]
struct Writer {
    out: String,
    quotes: usize,
    /// The URLs of open links (written after their words).
    links: Vec<String>,
    /// Headings written with `#` (closed by nothing) or `**`.
    headings: Vec<bool>,
    depth: [usize; 3],
}

fn at_line_start(out: &str) -> bool {
    let line = out.rsplit('\n').next().unwrap_or("");
    line.is_empty() || line == "> "
}

/// A URL in `(<…>)`: the characters that would end it, encoded.
fn link_target(url: &str) -> String {
    url.replace('>', "%3E").replace(' ', "%20")
}

impl Writer {
    fn escape(&mut self, text: &str) {
        for word in text.split_inclusive(char::is_whitespace) {
            let lower = word.to_ascii_lowercase();
            if lower.starts_with("http://") || lower.starts_with("https://") {
                self.out.push_str(word);
                continue;
            }
            for c in word.chars() {
                let markup = matches!(c, '\\' | '*' | '_' | '~' | '`' | '|' | '[' | ']')
                    || (matches!(c, '>' | '#' | '-' | '+') && at_line_start(&self.out));
                if markup {
                    self.out.push('\\');
                }
                self.out.push(c);
            }
        }
    }

    fn marker(style: &Style) -> Option<(usize, &'static str)> {
        match style {
            Style::Strong => Some((0, "**")),
            Style::Emphasis => Some((1, "*")),
            Style::Strike => Some((2, "~~")),
            _ => None,
        }
    }
}

impl Dialect for Writer {
    fn text(&mut self, text: &str) {
        self.escape(text);
    }

    fn layout(&mut self, text: &str) {
        self.out.push_str(text);
    }

    fn newline(&mut self) {
        self.out.push('\n');
        if self.quotes > 0 {
            self.out.push_str("> ");
        }
    }

    fn open(&mut self, style: &Style) {
        match style {
            Style::Quote => {
                self.quotes += 1;
                if self.quotes == 1 && (self.out.is_empty() || self.out.ends_with('\n')) {
                    self.out.push_str("> ");
                }
            }
            Style::Link(url) => {
                self.links.push(url.clone());
                self.out.push('[');
            }
            Style::Heading(level) => {
                let hashes = at_line_start(&self.out) && *level <= 3;
                self.out.push_str(if hashes {
                    &"### "[3 - usize::from(*level)..]
                } else {
                    "**"
                });
                self.headings.push(hashes);
            }
            style => {
                if let Some((index, marker)) = Self::marker(style) {
                    self.depth[index] += 1;
                    if self.depth[index] == 1 {
                        self.out.push_str(marker);
                    }
                }
            }
        }
    }

    fn close(&mut self, style: &Style) {
        match style {
            Style::Quote => self.quotes = self.quotes.saturating_sub(1),
            Style::Link(_) => {
                if let Some(url) = self.links.pop() {
                    self.out.push_str("](<");
                    self.out.push_str(&link_target(&url));
                    self.out.push_str(">)");
                }
            }
            Style::Heading(_) => {
                if self.headings.pop() == Some(false) {
                    self.out.push_str("**");
                }
            }
            style => {
                if let Some((index, marker)) = Self::marker(style) {
                    self.depth[index] = self.depth[index].saturating_sub(1);
                    if self.depth[index] == 0 {
                        self.out.push_str(marker);
                    }
                }
            }
        }
    }

    fn inline_code(&mut self, code: &str) {
        let fence = if code.contains('`') { "``" } else { "`" };
        let pad = if code.contains('`') { " " } else { "" };
        self.out.push_str(fence);
        self.out.push_str(pad);
        self.out.push_str(code);
        self.out.push_str(pad);
        self.out.push_str(fence);
    }

    fn code_block(&mut self, language: Option<&str>, code: &str) {
        self.out.push_str("```");
        if let Some(language) = language.filter(|language| {
            language
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '#' | '-' | '_'))
        }) {
            self.out.push_str(language);
        }
        // A fence inside the code would end the block early.
        for line in code.replace("```", "`\u{200b}``").split('\n') {
            self.newline();
            self.out.push_str(line);
        }
        self.newline();
        self.out.push_str("```");
    }

    fn bullet(&self, depth: usize, number: Option<u64>) -> String {
        let indent = "  ".repeat(depth.saturating_sub(1));
        match number {
            Some(number) => format!("{indent}{number}. "),
            None => format!("{indent}- "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discord_markdown_is_written_back_in_the_subset_discord_shows() {
        for (markdown, expected) in [
            ("**bold** *it* ~~x~~ `code`", "**bold** *it* ~~x~~ `code`"),
            ("# One\n\n#### Four", "# One\n\n**Four**"),
            (
                "[docs](https://discord.com/developers/docs)",
                "[docs](<https://discord.com/developers/docs>)",
            ),
            ("snake_case and 2 * 3 * 4", "snake\\_case and 2 \\* 3 \\* 4"),
            ("see https://x.test/a_b_c now", "see https://x.test/a_b_c now"),
            ("- a\n  - b\n1. c", "- a\n  - b\n\n1. c"),
            ("```py\nprint(1)\n```", "```py\nprint(1)\n```"),
            ("> quote\n> more", "> quote\n> more"),
            ("| a | b |\n|---|---|\n| 1 | 2 |", "```\na │ b\n──┼──\n1 │ 2\n```"),
        ] {
            assert_eq!(render(markdown), expected, "{markdown}");
        }
    }

    #[test]
    fn a_fence_inside_code_does_not_end_the_block() {
        let text = render("````md\n```inner```\n````");
        assert_eq!(text.matches("```").count(), 2, "{text}");
    }
}
