//! Markdown as the HTML part of a mail (`multipart/alternative` beside the
//! text part, which keeps the Markdown as written).
//!
//! A mail reader runs what HTML it is given, so nothing from the answer
//! passes through as HTML: the answer's own HTML is shown as text, an
//! image becomes a link to it (no remote content is loaded when the mail
//! is opened), links go only to `http`, `https` and `mailto`, and the page
//! has no script, no style sheet and no external reference.

use pulldown_cmark::{Event, Tag, TagEnd, html};

use super::{parser, safe_url};

/// The HTML document of `markdown`.
pub fn render(markdown: &str) -> String {
    let mut unsafe_links = Vec::new();
    let events = parser(markdown).flat_map(|event| -> Vec<Event<'_>> {
        match event {
            Event::Html(text) | Event::InlineHtml(text) => vec![Event::Text(text)],
            Event::Start(Tag::Image {
                dest_url, title, id, ..
            }) => {
                let safe = safe_url(&dest_url);
                unsafe_links.push(!safe);
                if safe {
                    vec![Event::Start(Tag::Link {
                        link_type: pulldown_cmark::LinkType::Inline,
                        dest_url,
                        title,
                        id,
                    })]
                } else {
                    Vec::new()
                }
            }
            Event::End(TagEnd::Image) => {
                if unsafe_links.pop() == Some(true) {
                    Vec::new()
                } else {
                    vec![Event::End(TagEnd::Link)]
                }
            }
            Event::Start(Tag::Link {
                dest_url,
                title,
                id,
                link_type,
            }) => {
                let safe = safe_url(&dest_url);
                unsafe_links.push(!safe);
                if safe {
                    vec![Event::Start(Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    })]
                } else {
                    Vec::new()
                }
            }
            Event::End(TagEnd::Link) => {
                if unsafe_links.pop() == Some(true) {
                    Vec::new()
                } else {
                    vec![Event::End(TagEnd::Link)]
                }
            }
            Event::SoftBreak => vec![Event::HardBreak],
            event => vec![event],
        }
    });
    let mut body = String::with_capacity(markdown.len() * 2);
    html::push_html(&mut body, events);
    format!("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head>\n<body>\n{body}</body></html>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_becomes_html_and_html_in_the_answer_stays_text() {
        let page = render("**Hi** <script>alert(1)</script> and <b>x</b>\n\n| a |\n|---|\n| 1 |");
        assert!(page.contains("<strong>Hi</strong>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{page}");
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("&lt;b&gt;x&lt;/b&gt;"), "{page}");
        assert!(page.contains("<table>"), "{page}");
    }

    #[test]
    fn nothing_remote_is_loaded_and_only_web_and_mail_links_are_links() {
        let page = render("![chart](https://tracker.test/pixel.png) [x](javascript:alert(1)) [ok](https://ok.test)");
        assert!(!page.contains("<img"), "{page}");
        assert!(
            page.contains("<a href=\"https://tracker.test/pixel.png\">chart</a>"),
            "{page}"
        );
        assert!(!page.contains("javascript:"), "{page}");
        assert!(page.contains("<a href=\"https://ok.test\">ok</a>"), "{page}");
    }
}
