//! Skill names. One newtype for every skill, programmatic or from a
//! `SKILL.md`, so the registry, the caps and the store agree on one key.
//!
//! A [`SkillName`] is always usable as a tool name and in a `$name` mention
//! (lowercase ASCII letters, digits, `-` and `_`, at most 64). The stricter
//! agentskills.io rules for `SKILL.md` names are checked by
//! [`agent_skill_name_problems`], so a slightly-off name loads with a warning
//! instead of disappearing.

use std::fmt;

use serde::{Deserialize, Serialize};

pub const MAX_NAME_CHARS: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SkillName(String);

impl SkillName {
    pub fn new(name: impl Into<String>) -> Result<Self, String> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_NAME_CHARS {
            return Err(format!("skill name `{name}` must be 1 to {MAX_NAME_CHARS} characters"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "skill name `{name}` may only contain lowercase letters, digits, `-` and `_`"
            ));
        }
        if !name.as_bytes()[0].is_ascii_alphanumeric() {
            return Err(format!("skill name `{name}` must start with a letter or a digit"));
        }
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SkillName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for SkillName {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        SkillName::new(value)
    }
}

impl From<SkillName> for String {
    fn from(value: SkillName) -> Self {
        value.0
    }
}

impl std::borrow::Borrow<str> for SkillName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// What is wrong with `name` by the agentskills.io rules: 1 to 64
/// characters, lowercase letters, digits and single hyphens, no hyphen at
/// either end. Empty when the name is fine.
pub fn agent_skill_name_problems(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        problems.push(format!(
            "name must be 1 to {MAX_NAME_CHARS} characters (it has {chars})"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        problems.push(format!(
            "name `{name}` may only contain lowercase letters, digits and hyphens"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push(format!("name `{name}` must not start or end with a hyphen"));
    }
    if name.contains("--") {
        problems.push(format!("name `{name}` must not contain consecutive hyphens"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_agentskills_rules() {
        let long = "a".repeat(65);
        let max = "a".repeat(64);
        for (name, ok) in [
            ("pdf", true),
            ("data-analysis", true),
            ("v2-notes", true),
            ("2fa", true),
            (max.as_str(), true),
            ("", false),
            (long.as_str(), false),
            ("PDF", false),
            ("-pdf", false),
            ("pdf-", false),
            ("pdf--tools", false),
            ("pdf_tools", false),
            ("pdf tools", false),
            ("café", false),
        ] {
            assert_eq!(agent_skill_name_problems(name).is_empty(), ok, "{name:?}");
        }
    }

    #[test]
    fn skill_names_are_tool_names() {
        for (name, ok) in [
            ("send_message", true),
            ("activate_skill", true),
            ("web-search", true),
            ("a", true),
            ("", false),
            ("_hidden", false),
            ("-x", false),
            ("Upper", false),
            ("dot.name", false),
            ("$x", false),
        ] {
            assert_eq!(SkillName::new(name).is_ok(), ok, "{name:?}");
        }
    }

    #[test]
    fn serde_refuses_an_invalid_name() {
        assert!(serde_json::from_str::<SkillName>("\"ok-name\"").is_ok());
        assert!(serde_json::from_str::<SkillName>("\"Bad\"").is_err());
    }
}
