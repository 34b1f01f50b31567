//! Markdown as Slack's `mrkdwn`: `*bold*`, `_italic_`, `~strike~`,
//! `` `code` ``, fenced blocks without a language, `<url|words>` links and
//! `>` quotes; headings are bold lines, lists `•` lines, tables
//! preformatted.
//!
//! Slack reads `&`, `<` and `>` as the start of an entity, a link or a
//! mention, so every one of them in the answer's text is escaped: a model
//! that writes `<!channel>` or `<@U123>` shows those characters and pings
//! nobody. A marker is written once however deeply a style nests (Slack
//! does not nest `*` in `*`), and nothing is styled inside a link's words,
//! which Slack would show as raw markers.

use super::{Dialect, Style, walk};

/// The `mrkdwn` text of `markdown`.
pub fn render(markdown: &str) -> String {
    let mut writer = Writer::default();
    walk(markdown, &mut writer);
    writer.out.trim_end().to_owned()
}

/// Slack's three escapes for message text (the same as HTML's).
pub use super::escape;
use super::escape_into;

/// A URL inside `<…|…>`: the characters that would end it, encoded.
fn link_target(url: &str) -> String {
    url.replace('&', "&amp;")
        .replace('<', "%3C")
        .replace('>', "%3E")
        .replace('|', "%7C")
        .replace(' ', "%20")
}

#[derive(Default)]
struct Writer {
    out: String,
    quotes: usize,
    links: usize,
    /// How deep each marker's style is open: `*`, `_`, `~`.
    depth: [usize; 3],
}

impl Writer {
    fn marker(style: &Style) -> Option<(usize, &'static str)> {
        match style {
            Style::Strong | Style::Heading(_) => Some((0, "*")),
            Style::Emphasis => Some((1, "_")),
            Style::Strike => Some((2, "~")),
            Style::Link(_) | Style::Quote => None,
        }
    }

    fn line_start(&mut self) {
        if self.quotes > 0 {
            self.out.push_str("> ");
        }
    }
}

impl Dialect for Writer {
    fn text(&mut self, text: &str) {
        escape_into(&mut self.out, text);
    }

    fn newline(&mut self) {
        self.out.push('\n');
        self.line_start();
    }

    fn open(&mut self, style: &Style) {
        match style {
            Style::Quote => {
                self.quotes += 1;
                if self.quotes == 1 && (self.out.is_empty() || self.out.ends_with('\n')) {
                    self.line_start();
                }
            }
            Style::Link(url) => {
                self.links += 1;
                if self.links == 1 {
                    self.out.push('<');
                    self.out.push_str(&link_target(url));
                    self.out.push('|');
                }
            }
            style => {
                if let Some((index, marker)) = Self::marker(style) {
                    self.depth[index] += 1;
                    if self.depth[index] == 1 && self.links == 0 {
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
                self.links = self.links.saturating_sub(1);
                if self.links == 0 {
                    self.out.push('>');
                }
            }
            style => {
                if let Some((index, marker)) = Self::marker(style) {
                    self.depth[index] = self.depth[index].saturating_sub(1);
                    if self.depth[index] == 0 && self.links == 0 {
                        self.out.push_str(marker);
                    }
                }
            }
        }
    }

    fn inline_code(&mut self, code: &str) {
        self.out.push('`');
        escape_into(&mut self.out, code);
        self.out.push('`');
    }

    fn code_block(&mut self, _language: Option<&str>, code: &str) {
        self.out.push_str("```");
        for line in code.split('\n') {
            self.newline();
            escape_into(&mut self.out, line);
        }
        self.newline();
        self.out.push_str("```");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emphasis_links_and_code_are_written_as_slack_reads_them() {
        for (markdown, expected) in [
            ("**bold** and *italic* and ~~gone~~", "*bold* and _italic_ and ~gone~"),
            ("***both***", "_*both*_"),
            ("**bold _italic_ bold**", "*bold _italic_ bold*"),
            (
                "[the docs](https://api.slack.com/a_b?x=1&y=2)",
                "<https://api.slack.com/a_b?x=1&amp;y=2|the docs>",
            ),
            ("[**bold** words](https://x.test)", "<https://x.test|bold words>"),
            ("`a < b && c`", "`a &lt; b &amp;&amp; c`"),
            ("# Title\n\nText", "*Title*\n\nText"),
            ("- one\n- two\n  1. deep", "• one\n• two\n  1. deep"),
            ("> quoted\n> lines", "> quoted\n> lines"),
            ("```rust\nfn main() {}\n```", "```\nfn main() {}\n```"),
        ] {
            assert_eq!(render(markdown), expected, "{markdown}");
        }
    }

    #[test]
    fn mentions_and_entities_a_model_writes_are_shown_not_obeyed() {
        let text = render("Hey <!channel> and <@U0123> see <#C9>, a<b>c & 2 > 1");
        assert_eq!(
            text,
            "Hey &lt;!channel&gt; and &lt;@U0123&gt; see &lt;#C9&gt;, a&lt;b&gt;c &amp; 2 &gt; 1"
        );
    }

    #[test]
    fn a_link_to_anything_but_the_web_or_mail_is_not_a_link() {
        assert_eq!(render("[click](javascript:alert(1))"), "click (javascript:alert(1))");
        assert_eq!(render("[mail me](mailto:a@b.test)"), "<mailto:a@b.test|mail me>");
    }
}
