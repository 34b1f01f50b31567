//! Token estimates without a tokenizer: what prompt budgets are counted in.
//!
//! Herald talks to any model, so it cannot know the tokenizer. The estimate
//! errs on the side of more tokens: one token per three ASCII characters
//! (English runs near four with common tokenizers, code and small models'
//! vocabularies nearer three) and one per other character (CJK, emoji and
//! accented text often take one or more each). A prompt Herald thinks fits
//! then fits on every server it was tried with; when a server still refuses
//! it, the turn shrinks the prompt and tries again.

/// Tokens a chat template adds around each message (role markers, separators).
pub const MESSAGE_OVERHEAD: usize = 4;

/// Tokens one image part is counted as: about what OpenAI charges for an
/// image downscaled to 1024 pixels at high detail (765), with margin for
/// servers that tile differently.
pub const IMAGE_TOKENS: usize = 1000;

/// ASCII characters per estimated token.
pub const ASCII_CHARS_PER_TOKEN: usize = 3;

/// The estimated tokens of `text`.
pub fn estimate(text: &str) -> usize {
    let ascii = text.bytes().filter(u8::is_ascii).count();
    let other = text.chars().count() - ascii;
    ascii.div_ceil(ASCII_CHARS_PER_TOKEN) + other
}

/// About how many characters of mostly-ASCII text fit in `tokens`: the
/// conversion for budgets still kept in characters (a skill catalog's).
pub fn chars_for(tokens: usize) -> usize {
    tokens.saturating_mul(ASCII_CHARS_PER_TOKEN)
}

/// The longest prefix of `text` whose estimate is at most `tokens`, cut at a
/// character boundary.
pub fn prefix_within(text: &str, tokens: usize) -> &str {
    let mut ascii = 0usize;
    let mut other = 0usize;
    for (index, c) in text.char_indices() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
        if ascii.div_ceil(ASCII_CHARS_PER_TOKEN) + other > tokens {
            return &text[..index];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_err_on_the_side_of_more_tokens() {
        for (text, tokens) in [
            ("", 0),
            ("a", 1),
            ("abc", 1),
            ("abcd", 2),
            ("The quick brown fox jumps over the lazy dog.", 15),
            ("日本語", 3),
            ("héllo", 3),
            ("🙂🙂", 2),
        ] {
            assert_eq!(estimate(text), tokens, "{text:?}");
        }
    }

    #[test]
    fn a_prefix_stays_within_the_tokens_on_a_character_boundary() {
        for (text, tokens, prefix) in [
            ("abcdefghij", 2, "abcdef"),
            ("abcdefghij", 0, ""),
            ("abcdefghij", 100, "abcdefghij"),
            ("ab日本語", 2, "ab日"),
            ("日本語", 1, "日"),
        ] {
            let cut = prefix_within(text, tokens);
            assert_eq!(cut, prefix, "{text:?} in {tokens}");
            assert!(estimate(cut) <= tokens);
        }
    }
}
