//! The layout every platform shares, seen through Telegram's visible text.

use super::telegram::render;

fn visible(markdown: &str) -> String {
    render(markdown).text
}

#[test]
fn blocks_are_a_blank_line_apart_and_list_items_a_line() {
    assert_eq!(
        visible("# Plan\n\nFirst this.\nThen that.\n\n- eggs\n- flour\n  - sifted\n\n1. mix\n2. bake\n\n---\n\nDone."),
        "Plan\n\nFirst this.\nThen that.\n\n• eggs\n• flour\n  • sifted\n\n1. mix\n2. bake\n\n──────────\n\nDone."
    );
}

#[test]
fn loose_lists_task_lists_and_numbering_from_the_source() {
    assert_eq!(visible("3. three\n4. four"), "3. three\n4. four");
    assert_eq!(visible("- [ ] todo\n- [x] done"), "• ☐ todo\n• ☑ done");
    assert_eq!(
        visible("- first\n\n  more about it\n\n- second"),
        "• first\n\nmore about it\n\n• second"
    );
}

#[test]
fn quotes_code_and_tables_keep_their_text() {
    assert_eq!(visible("> a quote\n> - with a list"), "a quote\n\n• with a list");
    assert_eq!(
        visible("```\nlet x = 1;\n\nlet y = 2;\n```"),
        "let x = 1;\n\nlet y = 2;"
    );
    assert_eq!(visible("| a | b |\n|---|--:|\n| 1 | 22 |"), "a │  b\n──┼───\n1 │ 22");
}

#[test]
fn html_in_the_answer_is_text_and_images_are_links() {
    assert_eq!(visible("a <b>bold</b> claim<br>next"), "a <b>bold</b> claim\nnext");
    assert_eq!(visible("<div>\nblock\n</div>"), "<div>\nblock\n</div>");
    assert_eq!(visible("![a chart](https://x.test/c.png)"), "a chart");
    assert_eq!(visible("[run](javascript:alert(1))"), "run (javascript:alert(1))");
}

#[test]
fn nothing_but_whitespace_renders_as_nothing() {
    assert_eq!(visible(""), "");
    assert_eq!(visible("   \n\n  "), "");
}
