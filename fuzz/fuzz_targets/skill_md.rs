//! `SKILL.md` text, as found in a skill folder, through the front matter
//! parser and the agentskills.io checks (`herald_skills::spec::check`).
//!
//! Asserts that checking never panics, and what a caller relies on:
//! - a document is returned exactly when no finding makes it unusable;
//! - its name is a valid `SkillName`, its description is not blank and
//!   starts with text, its body and allowed tools are trimmed;
//! - a document that strict validation accepts obeys the agentskills.io name
//!   rules, is named after its folder and keeps the description and
//!   compatibility limits.

#![no_main]

use herald_skills::SkillName;
use herald_skills::spec::{self, Level, MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, Mode, agent_skill_name_problems};
use libfuzzer_sys::fuzz_target;

/// A folder name the agentskills.io rules accept, one they accept with a
/// hyphen, and one Herald loads with a warning (`_` is not allowed there).
const FOLDERS: [&str; 3] = ["weather", "meeting-notes", "csv_summary"];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for folder in FOLDERS {
        check_one(folder, text);
    }
});

fn check_one(folder: &str, text: &str) {
    let checked = spec::check(folder, text);
    let unusable = checked.findings.iter().any(|f| f.level == Level::Unusable);
    assert_eq!(checked.document.is_none(), unusable, "{:?}", checked.findings);
    let Some(document) = &checked.document else {
        assert!(checked.accepted(Mode::Lenient).is_none());
        return;
    };
    assert!(SkillName::new(document.name.as_str()).is_ok(), "{}", document.name);
    // A description taken from the body is cut at the limit, which may leave
    // a space at its end; it never starts with one.
    assert!(!document.description.trim().is_empty());
    assert_eq!(document.description, document.description.trim_start());
    assert_eq!(document.body, document.body.trim_end());
    assert!(!document.body.starts_with(['\n', '\r']));
    for tool in &document.allowed_tools {
        assert!(!tool.is_empty() && tool == tool.trim(), "{tool:?}");
    }
    // Lenient loading accepts whatever is usable.
    assert!(checked.accepted(Mode::Lenient).is_some());
    if checked.accepted(Mode::Strict).is_some() {
        assert!(
            agent_skill_name_problems(document.name.as_str()).is_empty(),
            "{}",
            document.name
        );
        assert_eq!(document.name.as_str(), folder);
        assert!(document.description.chars().count() <= MAX_DESCRIPTION_CHARS);
        if let Some(compatibility) = &document.compatibility {
            assert!((1..=MAX_COMPATIBILITY_CHARS).contains(&compatibility.chars().count()));
        }
    }
}
