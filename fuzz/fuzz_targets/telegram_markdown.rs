//! Any Markdown a model may write, rendered for Telegram and cut into
//! messages (`markdown::telegram::chunks`), as Herald sends it with
//! `parse_mode: HTML`.
//!
//! Asserts what Telegram requires and what a person must get: every
//! chunk's HTML parses under the Bot API's rules (the test kit's parser,
//! the one the fake Telegram refuses with) to exactly the chunk's plain
//! text, that text is at most 4,096 UTF-16 units, and the chunks' texts in
//! order are the whole rendered text (only the whitespace at a cut is
//! dropped).

#![no_main]

use herald_channels::markdown::telegram::{MAX_TEXT, chunks, render};
use libfuzzer_sys::fuzz_target;

// The fake Telegram's entity parser, pure and dependency-light: compiled
// in here rather than pulling the whole test kit (its servers) into the
// fuzz build.
#[path = "../../crates/testkit/src/telegram/entities/mod.rs"]
#[allow(dead_code)]
mod entities;

fuzz_target!(|data: &[u8]| {
    let Ok(markdown) = std::str::from_utf8(data) else {
        return;
    };
    let rendered = render(markdown).text;
    let mut rest = rendered.as_str();
    for chunk in chunks(markdown, MAX_TEXT) {
        let parsed = entities::parse(&chunk.html, Some("HTML"))
            .unwrap_or_else(|refusal| panic!("Telegram refuses {:?}: {refusal}", chunk.html));
        assert_eq!(parsed.text, chunk.text, "the HTML shows what its plain text says");
        let units = chunk.text.encode_utf16().count();
        assert!(units <= MAX_TEXT, "{units} UTF-16 units in one message");
        assert!(!chunk.text.trim().is_empty(), "an empty message");
        rest = rest.trim_start();
        assert!(rest.starts_with(&chunk.text), "chunks out of order or text lost");
        rest = &rest[chunk.text.len()..];
    }
    assert!(rest.trim().is_empty(), "text left unsent: {rest:?}");
});
