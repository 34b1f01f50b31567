use super::*;

fn html(markdown: &str) -> String {
    let chunks = chunks(markdown, MAX_TEXT);
    assert_eq!(chunks.len(), 1, "{chunks:?}");
    chunks[0].html.clone()
}

/// The tags of `html` in order, checking that each closes what opened last.
fn balanced(html: &str) -> bool {
    let mut open = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        let end = rest[at..].find('>').map(|e| at + e).expect("a tag ends");
        let tag = &rest[at + 1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            if open.pop().as_deref() != Some(name) {
                return false;
            }
        } else {
            open.push(tag.split_whitespace().next().unwrap_or("").to_owned());
        }
    }
    open.is_empty()
}

#[test]
fn inline_formatting_becomes_telegram_tags() {
    for (markdown, expected) in [
        (
            "**bold** and *italic* and ~~gone~~",
            "<b>bold</b> and <i>italic</i> and <s>gone</s>",
        ),
        ("***both***", "<i><b>both</b></i>"),
        ("**bold _it_ bold**", "<b>bold <i>it</i> bold</b>"),
        ("`a < b && c`", "<code>a &lt; b &amp;&amp; c</code>"),
        (
            "[docs](https://core.telegram.org/bots/api?a=1&b=\"2\")",
            "<a href=\"https://core.telegram.org/bots/api?a=1&amp;b=&quot;2&quot;\">docs</a>",
        ),
        ("## Heading\n\ntext", "<b>Heading</b>\n\ntext"),
        ("> wise words", "<blockquote>wise words</blockquote>"),
        ("> outer\n>> inner", "<blockquote>outer\n\ninner</blockquote>"),
        (
            "```python\nprint('<hi>')\n```",
            "<pre><code class=\"language-python\">print('&lt;hi&gt;')</code></pre>",
        ),
        ("```\nplain\n```", "<pre>plain</pre>"),
        (
            "```bad lang!\nx\n```",
            "<pre><code class=\"language-bad\">x</code></pre>",
        ),
        (
            "||not a spoiler|| 2 < 3 & 5 > 4",
            "||not a spoiler|| 2 &lt; 3 &amp; 5 &gt; 4",
        ),
        ("**not closed", "**not closed"),
        ("a <b>raw</b> tag", "a &lt;b&gt;raw&lt;/b&gt; tag"),
    ] {
        assert_eq!(html(markdown), expected, "{markdown}");
    }
}

#[test]
fn a_long_answer_is_cut_on_its_text_with_tags_closed_and_opened_again() {
    let paragraph = format!("**{}**", "bold words go on ".repeat(40).trim_end());
    let markdown = format!("{paragraph}\n\n{paragraph}\n\n{paragraph}");
    let rendered = render(&markdown);
    let chunks = cut(&rendered, 1000);
    assert!(chunks.len() >= 3, "{}", chunks.len());
    for chunk in &chunks {
        assert!(chunk.text.encode_utf16().count() <= 1000);
        assert!(
            chunk.html.starts_with("<b>") && chunk.html.ends_with("</b>"),
            "{}",
            chunk.html
        );
        assert!(balanced(&chunk.html), "{}", chunk.html);
    }
    let joined: String = chunks
        .iter()
        .map(|chunk| chunk.text.replace(char::is_whitespace, ""))
        .collect();
    assert_eq!(joined, rendered.text.replace(char::is_whitespace, ""));
}

#[test]
fn a_code_block_cut_in_two_keeps_its_language_in_both() {
    let code: String = (0..400).map(|n| format!("let value_{n} = {n};\n")).collect();
    let chunks = chunks(&format!("Here:\n\n```rust\n{code}```\n\nThat's it."), MAX_TEXT);
    assert!(chunks.len() >= 2, "{}", chunks.len());
    let with_code: Vec<_> = chunks
        .iter()
        .filter(|chunk| chunk.html.contains("let value_"))
        .collect();
    assert!(with_code.len() >= 2);
    for chunk in with_code {
        assert!(
            chunk.html.contains("<pre><code class=\"language-rust\">"),
            "{}",
            &chunk.html[..80]
        );
        assert!(balanced(&chunk.html));
    }
    assert!(chunks.last().unwrap().text.ends_with("That's it."));
}

#[test]
fn telegram_counts_utf16_so_emoji_count_twice() {
    let markdown = "😀".repeat(3000);
    let chunks = chunks(&markdown, MAX_TEXT);
    assert_eq!(chunks.len(), 2);
    assert!(chunks.iter().all(|chunk| chunk.text.encode_utf16().count() <= MAX_TEXT));
    assert_eq!(chunks[0].text.chars().count(), 2048);
}

#[test]
fn a_line_with_no_space_is_cut_where_it_must_be() {
    let url = format!("https://example.test/{}", "a".repeat(9000));
    let chunks = chunks(&url, MAX_TEXT);
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks.iter().map(|chunk| chunk.text.as_str()).collect::<String>(), url);
}

#[test]
fn the_plain_text_of_a_chunk_is_what_its_html_shows() {
    let chunks = chunks("**Note:** `x < y` & [link](https://a.test)", MAX_TEXT);
    assert_eq!(chunks[0].text, "Note: x < y & link");
}

#[test]
fn empty_answers_give_no_chunks() {
    assert!(chunks("", MAX_TEXT).is_empty());
    assert!(chunks("\n\n   \n", MAX_TEXT).is_empty());
}
