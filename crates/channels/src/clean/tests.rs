use super::*;

#[test]
fn controls_go_and_whitespace_stays() {
    for (text, expected) in [
        ("plain", "plain"),
        ("nul\u{0}byte", "nulbyte"),
        ("bell\u{7}escape\u{1b}[31m", "bellescape[31m"),
        ("tab\tnew\nline\r\n", "tab\tnew\nline\r\n"),
        ("\u{0}\u{1}\u{1f}", ""),
        // Not C0: kept.
        ("del\u{7f} é 漢 🎉", "del\u{7f} é 漢 🎉"),
    ] {
        assert_eq!(strip_controls(text), expected, "{text:?}");
    }
}

#[test]
fn long_texts_are_cut_at_a_character_boundary_with_the_marker() {
    let (short, cut) = cap("héllo", 5);
    assert_eq!((short.as_str(), cut), ("héllo", false));

    // Multi-byte characters right at the cap: no half character survives.
    let (long, cut) = cap("ééééééé", 3);
    assert!(cut);
    assert_eq!(long, format!("ééé{}", cut_marker(3)));

    let (emoji, cut) = cap(&"🎉".repeat(20_000), DEFAULT_MAX_MESSAGE_CHARS);
    assert!(cut);
    assert!(emoji.starts_with(&"🎉".repeat(DEFAULT_MAX_MESSAGE_CHARS)));
    assert_eq!(
        emoji.chars().count(),
        DEFAULT_MAX_MESSAGE_CHARS + cut_marker(DEFAULT_MAX_MESSAGE_CHARS).chars().count()
    );
}
