//! The parsers against the Bot API's documented formatting rules.

use serde_json::{Value, json};

use super::{Parsed, link_url, parse};

fn ok(text: &str, mode: &str) -> Parsed {
    parse(text, Some(mode)).unwrap_or_else(|e| panic!("{text:?} as {mode}: {e}"))
}

fn refused(text: &str, mode: &str) -> String {
    match parse(text, Some(mode)) {
        Ok(parsed) => panic!("{text:?} as {mode} was accepted: {parsed:?}"),
        Err(description) => description
            .strip_prefix("Bad Request: can't parse entities: ")
            .unwrap_or_else(|| panic!("{description:?} lacks the prefix"))
            .to_owned(),
    }
}

fn entity(kind: &str, offset: usize, length: usize) -> Value {
    json!({ "type": kind, "offset": offset, "length": length })
}

fn with(mut entity: Value, key: &str, value: &str) -> Value {
    entity[key] = json!(value);
    entity
}

#[test]
fn without_a_parse_mode_the_text_is_left_as_it_is() {
    for mode in [None, Some(""), Some("none")] {
        let parsed = parse("<b>*x*</b> 1.", mode).unwrap();
        assert_eq!(parsed.text, "<b>*x*</b> 1.");
        assert!(parsed.entities.is_empty());
    }
    assert_eq!(parse("<b>x</b>", Some("html")).unwrap().text, "x", "modes ignore case");
    assert_eq!(
        parse("x", Some("Plain")),
        Err("Bad Request: unsupported parse_mode".to_owned())
    );
}

#[test]
fn html_tags_become_nested_entities() {
    for (html, text, entities) in [
        (
            "<b>bold <i>both</i></b> plain",
            "bold both plain",
            vec![entity("bold", 0, 9), entity("italic", 5, 4)],
        ),
        (
            "<strong>s</strong><em>e</em><u>u</u><ins>n</ins><s>t</s><strike>k</strike><del>d</del>",
            "seuntkd",
            vec![
                entity("bold", 0, 1),
                entity("italic", 1, 1),
                entity("underline", 2, 1),
                entity("underline", 3, 1),
                entity("strikethrough", 4, 1),
                entity("strikethrough", 5, 1),
                entity("strikethrough", 6, 1),
            ],
        ),
        (
            "<tg-spoiler>a</tg-spoiler><span class=\"tg-spoiler\">b</span>",
            "ab",
            vec![entity("spoiler", 0, 1), entity("spoiler", 1, 1)],
        ),
        (
            "<B>upper</B> and <b>empty:</b><i></i>",
            "upper and empty:",
            vec![entity("bold", 0, 5), entity("bold", 10, 6)],
        ),
        (
            "<b>closed by </> an empty end tag",
            "closed by  an empty end tag",
            vec![entity("bold", 0, 10)],
        ),
        (
            "<blockquote>q</blockquote><blockquote expandable>e</blockquote>",
            "qe",
            vec![entity("blockquote", 0, 1), entity("expandable_blockquote", 1, 1)],
        ),
        (
            "<blockquote>out <blockquote>in</blockquote></blockquote>",
            "out in",
            vec![entity("blockquote", 0, 6)],
        ),
    ] {
        let parsed = ok(html, "HTML");
        assert_eq!(parsed.text, text, "{html}");
        assert_eq!(parsed.entities, entities, "{html}");
    }
}

#[test]
fn html_links_code_and_custom_emoji_carry_their_arguments() {
    for (html, text, entities) in [
        (
            "<a href=\"https://example.com\">site</a>",
            "site",
            vec![with(entity("text_link", 0, 4), "url", "https://example.com/")],
        ),
        (
            "<a href='http://x.org/p?q=1&amp;r=2'>x</a>",
            "x",
            vec![with(entity("text_link", 0, 1), "url", "http://x.org/p?q=1&r=2")],
        ),
        (
            "<a href=\"tg://user?id=42\">Ada</a>",
            "Ada",
            vec![with(entity("text_link", 0, 3), "url", "tg://user?id=42")],
        ),
        ("<a href=\"javascript:alert(1)\">no</a>", "no", vec![]),
        (
            "<pre><code class=\"language-rust\">fn x</code></pre>",
            "fn x",
            vec![with(entity("pre", 0, 4), "language", "rust")],
        ),
        (
            "<pre><code class=language-c>c</code></pre>",
            "c",
            vec![with(entity("pre", 0, 1), "language", "c")],
        ),
        (
            "<pre>p</pre><code>c</code>",
            "pc",
            vec![entity("pre", 0, 1), entity("code", 1, 1)],
        ),
        ("<pre><code>p</code></pre>", "p", vec![entity("pre", 0, 1)]),
        (
            "<code class=\"language-rust\">c</code>",
            "c",
            vec![entity("code", 0, 1)],
        ),
        ("<code><b>no bold</b></code>", "no bold", vec![entity("code", 0, 7)]),
        ("<b><code>no bold</code></b>", "no bold", vec![entity("code", 0, 7)]),
        (
            "<b>a<code>b</code>c</b>",
            "abc",
            vec![entity("bold", 0, 1), entity("code", 1, 1), entity("bold", 2, 1)],
        ),
        (
            "<tg-emoji emoji-id=\"5368324170671202286\">👍</tg-emoji>",
            "👍",
            vec![with(
                entity("custom_emoji", 0, 2),
                "custom_emoji_id",
                "5368324170671202286",
            )],
        ),
    ] {
        let parsed = ok(html, "HTML");
        assert_eq!(parsed.text, text, "{html}");
        assert_eq!(parsed.entities, entities, "{html}");
    }
}

#[test]
fn only_four_named_html_entities_and_numeric_ones_are_decoded() {
    let parsed = ok(
        "&lt;b&gt; &amp; &quot;q&quot; &#65;&#x42; &lt &copy; &nbsp; & &#0; x",
        "HTML",
    );
    assert_eq!(parsed.text, "<b> & \"q\" AB < &copy; &nbsp; & &#0; x");
    assert!(parsed.entities.is_empty());
    assert_eq!(ok("a > b", "HTML").text, "a > b", "a bare '>' is text");
}

#[test]
fn offsets_and_lengths_count_utf16_units() {
    let parsed = ok("😀 <b>é😀</b> <i>x</i>", "HTML");
    assert_eq!(parsed.text, "😀 é😀 x");
    assert_eq!(parsed.entities, vec![entity("bold", 3, 3), entity("italic", 7, 1)]);
    let parsed = ok("😀😀 *b😀*", "MarkdownV2");
    assert_eq!(parsed.entities, vec![entity("bold", 5, 3)]);
}

#[test]
fn html_the_bot_api_refuses() {
    for (html, description) in [
        (
            "Hello there <foo>x</foo>",
            "Unsupported start tag \"foo\" at byte offset 12",
        ),
        ("1 < 2", "Unsupported start tag \"\" at byte offset 2"),
        ("line<br>", "Unsupported start tag \"br\" at byte offset 4"),
        ("<b>bold", "Can't find end tag corresponding to start tag \"b\""),
        (
            "<b><i>x</b></i>",
            "Unmatched end tag at byte offset 7, expected \"</i>\", found \"</b>\"",
        ),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("<b>x</b", "Unclosed end tag at byte offset 4"),
        ("text <b", "Unclosed start tag at byte offset 5"),
        ("<a href=\"x>y</a>", "Unclosed end of attribute value at byte offset 8"),
        ("<a href=x/y>y</a>", "Unexpected end of name token at byte offset 8"),
        (
            "<span>x</span>",
            "Tag \"span\" must have class \"tg-spoiler\" at byte offset 0",
        ),
        (
            "<a href>x</a>",
            "Expected equal sign in declaration of an attribute of the tag \"a\" at byte offset 0",
        ),
        (
            "<tg-emoji emoji-id=\"abc\">x</tg-emoji>",
            "Invalid custom emoji identifier specified",
        ),
    ] {
        assert_eq!(refused(html, "HTML"), description, "{html}");
    }
}

#[test]
fn markdown_v2_entities() {
    for (markdown, text, entities) in [
        (
            "*bold _italic_* __under__ ~gone~ ||hidden|| `c.d`",
            "bold italic under gone hidden c.d",
            vec![
                entity("bold", 0, 11),
                entity("italic", 5, 6),
                entity("underline", 12, 5),
                entity("strikethrough", 18, 4),
                entity("spoiler", 23, 6),
                entity("code", 30, 3),
            ],
        ),
        ("Done\\. 1\\+1\\=2\\!", "Done. 1+1=2!", vec![]),
        (
            "```rust\nfn main() {}\n```",
            "fn main() {}\n",
            vec![with(entity("pre", 0, 13), "language", "rust")],
        ),
        ("```\nplain . pre\n```", "plain . pre\n", vec![entity("pre", 0, 12)]),
        ("`a \\` b`", "a ` b", vec![entity("code", 0, 5)]),
        (
            "[site](https://example.com/a\\)b)",
            "site",
            vec![with(entity("text_link", 0, 4), "url", "https://example.com/a)b")],
        ),
        (
            "*[bold link](http://x.org)*",
            "bold link",
            vec![
                with(entity("text_link", 0, 9), "url", "http://x.org/"),
                entity("bold", 0, 9),
            ],
        ),
        (
            "![👍](tg://emoji?id=5368324170671202286)",
            "👍",
            vec![with(
                entity("custom_emoji", 0, 2),
                "custom_emoji_id",
                "5368324170671202286",
            )],
        ),
        (">one\n>two\nthree", "one\ntwo\nthree", vec![entity("blockquote", 0, 7)]),
        (
            ">a\n**>b\n>c||\nafter",
            "a\nb\nc\nafter",
            vec![entity("blockquote", 0, 1), entity("expandable_blockquote", 2, 3)],
        ),
        ("`*not bold*`", "*not bold*", vec![entity("code", 0, 10)]),
    ] {
        let parsed = ok(markdown, "MarkdownV2");
        assert_eq!(parsed.text, text, "{markdown}");
        assert_eq!(parsed.entities, entities, "{markdown}");
    }
}

#[test]
fn markdown_v2_the_bot_api_refuses() {
    for (markdown, description) in [
        (
            "Hello world.",
            "Character '.' is reserved and must be escaped with the preceding '\\'",
        ),
        (
            "a - b",
            "Character '-' is reserved and must be escaped with the preceding '\\'",
        ),
        (
            "x|y",
            "Character '|' is reserved and must be escaped with the preceding '\\'",
        ),
        (
            "*bold (x)*",
            "Character '(' is reserved and must be escaped with the preceding '\\'",
        ),
        (
            "a > b",
            "Character '>' is reserved and must be escaped with the preceding '\\'",
        ),
        ("*bold", "Can't find end of Bold entity at byte offset 0"),
        ("ok _it", "Can't find end of Italic entity at byte offset 3"),
        ("```rust\ncode", "Can't find end of PreCode entity at byte offset 0"),
        ("[x", "Can't find end of TextUrl entity at byte offset 0"),
        ("[x](http://x.org", "Can't find end of a URL at byte offset 4"),
        ("![x]", "Custom emoji entity must contain a tg://emoji URL"),
        ("![x](http://x.org)", "Custom emoji URL must have scheme tg"),
    ] {
        assert_eq!(refused(markdown, "MarkdownV2"), description, "{markdown}");
    }
}

#[test]
fn legacy_markdown_knows_four_entities_and_nests_none() {
    let parsed = ok("*b* _i_ `c` [l](http://x.org) 1.5 (ok) \\*", "Markdown");
    assert_eq!(parsed.text, "b i c l 1.5 (ok) *");
    assert_eq!(
        parsed.entities,
        vec![
            entity("bold", 0, 1),
            entity("italic", 2, 1),
            entity("code", 4, 1),
            with(entity("text_link", 6, 1), "url", "http://x.org/"),
        ]
    );
    let parsed = ok("```py\nx = 1```", "markdown");
    assert_eq!(parsed.entities, vec![with(entity("pre", 0, 5), "language", "py")]);
    assert_eq!(
        refused("a *b", "Markdown"),
        "Can't find end of the entity starting at byte offset 2"
    );
}

#[test]
fn links_are_kept_as_telegram_stores_them() {
    for (url, stored) in [
        ("https://example.com", Some("https://example.com/")),
        ("https://example.com/a?b", Some("https://example.com/a?b")),
        ("example.com", Some("http://example.com/")),
        ("tg://user?id=1", Some("tg://user?id=1")),
        ("ftp://example.com", None),
        ("mailto:a@b.c", None),
        ("not a url", None),
        ("", None),
    ] {
        assert_eq!(link_url(url).as_deref(), stored, "{url}");
    }
}
