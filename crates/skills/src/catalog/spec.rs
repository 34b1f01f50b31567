//! `SKILL.md`: YAML front matter and a Markdown body, read into a
//! [`SkillDocument`] and checked against the agentskills.io rules.
//!
//! Checking never fails outright: it returns what it could read and a list of
//! [`Finding`]s, each with a [`Level`]. Discovery loads leniently (only an
//! unusable skill is skipped); `herald skills validate` is strict (any rule
//! violation is an error). The YAML itself is read by [`crate::yaml`].

use std::collections::BTreeMap;

use serde_json::Value;

use crate::name::{SkillName, agent_skill_name_problems};

pub const MAX_DESCRIPTION_CHARS: usize = 1024;
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
pub const MAX_BODY_LINES: usize = 500;

const KNOWN_FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// A parsed `SKILL.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillDocument {
    pub name: SkillName,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    /// Free-form string pairs; Herald reads `requires-bins`, `requires-env`,
    /// `triggers` and `elevated` from here.
    pub metadata: BTreeMap<String, String>,
    pub allowed_tools: Vec<String>,
    /// The Markdown instructions after the front matter.
    pub body: String,
}

impl SkillDocument {
    /// Characters the body takes in a prompt.
    pub fn body_chars(&self) -> usize {
        self.body.chars().count()
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Worth fixing, never an error (a long body).
    Advice,
    /// Breaks a rule of the format: a warning when loading, an error when
    /// validating.
    Violation,
    /// The skill cannot be used at all and is skipped.
    Unusable,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub message: String,
}

/// Loading reports violations as warnings; validating reports them as errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Lenient,
    Strict,
}

/// What [`check`] read, and what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// `None` when the skill is unusable.
    pub document: Option<SkillDocument>,
    pub findings: Vec<Finding>,
}

impl Checked {
    /// The document when `mode` accepts it.
    pub fn accepted(&self, mode: Mode) -> Option<&SkillDocument> {
        if self.errors(mode).next().is_some() {
            None
        } else {
            self.document.as_ref()
        }
    }

    pub fn errors(&self, mode: Mode) -> impl Iterator<Item = &Finding> {
        let floor = match mode {
            Mode::Lenient => Level::Unusable,
            Mode::Strict => Level::Violation,
        };
        self.findings.iter().filter(move |f| f.level >= floor)
    }

    pub fn warnings(&self, mode: Mode) -> impl Iterator<Item = &Finding> {
        let ceiling = match mode {
            Mode::Lenient => Level::Unusable,
            Mode::Strict => Level::Violation,
        };
        self.findings.iter().filter(move |f| f.level < ceiling)
    }
}

/// Reads the text of a `SKILL.md` found in folder `folder_name`.
pub fn check(folder_name: &str, text: &str) -> Checked {
    let mut findings = Vec::new();
    let document = read(folder_name, text, &mut findings);
    let document = if findings.iter().any(|f| f.level == Level::Unusable) {
        None
    } else {
        document
    };
    Checked { document, findings }
}

fn read(folder_name: &str, text: &str, findings: &mut Vec<Finding>) -> Option<SkillDocument> {
    let mut note = |level: Level, message: String| findings.push(Finding { level, message });
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (fields, body) = match split_front_matter(text) {
        Split::None => {
            note(
                Level::Violation,
                "no YAML front matter: named after its folder, described by its first paragraph".into(),
            );
            (serde_json::Map::new(), text)
        }
        Split::Unclosed => {
            note(
                Level::Unusable,
                "front matter starts with `---` but is never closed".into(),
            );
            return None;
        }
        Split::Found { yaml, body } => match crate::yaml::to_json(yaml) {
            Ok(Value::Object(map)) => (map, body),
            Ok(Value::Null) => (serde_json::Map::new(), body),
            Ok(_) => {
                note(Level::Unusable, "front matter is not a mapping of fields".into());
                return None;
            }
            Err(err) => {
                note(Level::Unusable, format!("front matter is not valid YAML: {err}"));
                return None;
            }
        },
    };
    let body = body.trim_start_matches(['\n', '\r']).trim_end().to_owned();
    let has_front_matter = !matches!(split_front_matter(text), Split::None);

    for key in fields.keys() {
        if !KNOWN_FIELDS.contains(&key.as_str()) {
            note(Level::Violation, format!("unknown front matter field `{key}`"));
        }
    }

    let name = read_name(folder_name, fields.get("name"), has_front_matter, &mut note)?;

    let description = match fields.get("description") {
        Some(Value::String(s)) if !shown(s).is_empty() => shown(s),
        Some(Value::String(_)) | None if !has_front_matter => match first_paragraph(&body) {
            Some(paragraph) => paragraph,
            None => {
                note(Level::Unusable, "no description, and no body to take one from".into());
                return None;
            }
        },
        Some(Value::String(_)) | None => {
            note(
                Level::Unusable,
                "no description: the model could not know when to use it".into(),
            );
            return None;
        }
        Some(_) => {
            note(Level::Unusable, "description is not a string".into());
            return None;
        }
    };
    let description_chars = description.chars().count();
    if description_chars > MAX_DESCRIPTION_CHARS {
        note(
            Level::Violation,
            format!("description has {description_chars} characters, more than {MAX_DESCRIPTION_CHARS}"),
        );
    }

    let license = optional_string("license", fields.get("license"), &mut note).map(|s| shown(&s));
    let compatibility = optional_string("compatibility", fields.get("compatibility"), &mut note).map(|s| shown(&s));
    if let Some(compatibility) = &compatibility {
        let chars = compatibility.chars().count();
        if chars == 0 || chars > MAX_COMPATIBILITY_CHARS {
            note(
                Level::Violation,
                format!("compatibility has {chars} characters; it must be 1 to {MAX_COMPATIBILITY_CHARS}"),
            );
        }
    }
    let metadata = read_metadata(fields.get("metadata"), &mut note);
    let allowed_tools = read_allowed_tools(fields.get("allowed-tools"), &mut note);

    let lines = body.lines().count();
    if lines > MAX_BODY_LINES {
        note(
            Level::Advice,
            format!("body has {lines} lines; over {MAX_BODY_LINES}, move detail into references/"),
        );
    }
    if body.is_empty() {
        note(
            Level::Advice,
            "body is empty: activating the skill gives the model nothing".into(),
        );
    }

    Some(SkillDocument {
        name,
        description,
        license,
        compatibility,
        metadata,
        allowed_tools,
        body,
    })
}

fn read_name(
    folder_name: &str,
    declared: Option<&Value>,
    has_front_matter: bool,
    note: &mut impl FnMut(Level, String),
) -> Option<SkillName> {
    let declared = match declared {
        Some(Value::String(s)) => Some(s.trim()),
        Some(_) => {
            note(Level::Violation, "name is not a string; named after its folder".into());
            None
        }
        None => {
            if has_front_matter {
                note(Level::Violation, "no name: named after its folder".into());
            }
            None
        }
    };
    if let Some(declared) = declared {
        for problem in agent_skill_name_problems(declared) {
            note(Level::Violation, problem);
        }
        if declared != folder_name {
            note(
                Level::Violation,
                format!("name `{declared}` differs from its folder `{folder_name}`"),
            );
        }
        if let Ok(name) = SkillName::new(declared) {
            return Some(name);
        }
    } else {
        for problem in agent_skill_name_problems(folder_name) {
            note(Level::Violation, format!("folder {problem}"));
        }
    }
    match SkillName::new(folder_name) {
        Ok(name) => Some(name),
        Err(err) => {
            note(Level::Unusable, format!("no usable name: {err}"));
            None
        }
    }
}

fn optional_string(key: &str, value: Option<&Value>, note: &mut impl FnMut(Level, String)) -> Option<String> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_owned()),
        Some(_) => {
            note(Level::Violation, format!("{key} is not a string; ignored"));
            None
        }
    }
}

fn read_metadata(value: Option<&Value>, note: &mut impl FnMut(Level, String)) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (key, value) in map {
                match value {
                    Value::String(s) => {
                        metadata.insert(key.clone(), s.clone());
                    }
                    Value::Number(_) | Value::Bool(_) => {
                        note(Level::Violation, format!("metadata.{key} should be a string"));
                        metadata.insert(key.clone(), value.to_string());
                    }
                    _ => note(Level::Violation, format!("metadata.{key} is not a string; ignored")),
                }
            }
        }
        Some(_) => note(Level::Violation, "metadata is not a mapping; ignored".into()),
    }
    metadata
}

fn read_allowed_tools(value: Option<&Value>, note: &mut impl FnMut(Level, String)) -> Vec<String> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        Some(_) => {
            note(
                Level::Violation,
                "allowed-tools is neither a space-separated string nor a list of strings; ignored".into(),
            );
            Vec::new()
        }
    }
}

enum Split<'a> {
    None,
    Unclosed,
    Found { yaml: &'a str, body: &'a str },
}

fn split_front_matter(text: &str) -> Split<'_> {
    let Some(first_end) = text.find('\n') else {
        return if text.trim_end() == "---" {
            Split::Unclosed
        } else {
            Split::None
        };
    };
    if text[..first_end].trim_end() != "---" {
        return Split::None;
    }
    let rest = &text[first_end + 1..];
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            return Split::Found {
                yaml: &rest[..offset],
                body: &rest[offset + line.len()..],
            };
        }
        offset += line.len();
    }
    Split::Unclosed
}

/// The first paragraph of a body that is not a heading (or the first heading
/// when there is nothing else), as one line, at most the description limit.
/// Text from the file as `herald skills` may show it on a terminal: no
/// control characters or escape sequences, trimmed after they are gone.
fn shown(text: &str) -> String {
    herald_core::text::printable(text).trim().to_owned()
}

fn first_paragraph(body: &str) -> Option<String> {
    let paragraphs: Vec<String> = body
        .split("\n\n")
        .map(|p| p.lines().map(shown).collect::<Vec<_>>().join(" ").trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let chosen = paragraphs
        .iter()
        .find(|p| !p.starts_with('#'))
        .or_else(|| paragraphs.first())?;
    let text = chosen.trim_start_matches('#').trim();
    if text.is_empty() {
        return None;
    }
    Some(text.chars().take(MAX_DESCRIPTION_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(front: &str, body: &str) -> String {
        format!("---\n{front}---\n{body}")
    }

    fn levels(checked: &Checked) -> Vec<(Level, String)> {
        checked.findings.iter().map(|f| (f.level, f.message.clone())).collect()
    }

    #[test]
    fn a_complete_skill_reads_every_field() {
        let text = skill(
            "name: pdf\ndescription: Work with PDF files.\nlicense: MIT\ncompatibility: needs poppler\n\
             metadata:\n  requires-bins: pdftotext\n  author: me\nallowed-tools: Bash Read\n",
            "\n# PDF\n\nUse pdftotext.\n",
        );
        let checked = check("pdf", &text);
        assert_eq!(levels(&checked), vec![]);
        let doc = checked.document.unwrap();
        assert_eq!(doc.name.as_str(), "pdf");
        assert_eq!(doc.description, "Work with PDF files.");
        let escaped = skill(
            "name: x\ndescription: \"Clears \\e[2J the \\e]52;c;eA==\\a screen\"\n",
            "b",
        );
        let shown = check("x", &escaped).document.unwrap();
        assert_eq!(shown.description, "Clears [2J the ]52;c;eA== screen");
        assert_eq!(doc.license.as_deref(), Some("MIT"));
        assert_eq!(doc.compatibility.as_deref(), Some("needs poppler"));
        assert_eq!(doc.metadata.get("requires-bins").map(String::as_str), Some("pdftotext"));
        assert_eq!(doc.allowed_tools, vec!["Bash", "Read"]);
        assert_eq!(doc.body, "# PDF\n\nUse pdftotext.");
    }

    /// Found by the fuzz target: control characters before a space were
    /// taken out after trimming, leaving the description a leading space.
    #[test]
    fn controls_are_taken_out_before_text_is_trimmed() {
        let from_body = check("notes", "\u{0}\u{0} Keep notes.\n");
        assert_eq!(from_body.document.unwrap().description, "Keep notes.");
        let from_field = check("x", &skill("name: x\ndescription: \"\\e \\a Reads mail.\"\n", "b"));
        assert_eq!(from_field.document.unwrap().description, "Reads mail.");
        let blank = check("x", &skill("name: x\ndescription: \"\\e\\a\"\n", "b"));
        assert!(blank.document.is_none(), "{:?}", levels(&blank));
    }

    #[test]
    fn allowed_tools_as_a_list() {
        let checked = check(
            "x",
            &skill("name: x\ndescription: d\nallowed-tools: [Bash, ' Read ']\n", "b"),
        );
        assert_eq!(checked.document.unwrap().allowed_tools, vec!["Bash", "Read"]);
    }

    #[test]
    fn without_front_matter_the_folder_names_it_and_the_body_describes_it() {
        let checked = check("notes", "# Notes\n\nKeep short notes\nin a list.\n\nMore.\n");
        let doc = checked.document.as_ref().unwrap();
        assert_eq!(doc.name.as_str(), "notes");
        assert_eq!(doc.description, "Keep short notes in a list.");
        assert!(checked.accepted(Mode::Lenient).is_some());
        assert!(checked.accepted(Mode::Strict).is_none());
    }

    /// Each row: folder, SKILL.md text, whether lenient loading keeps it,
    /// whether strict validation accepts it, and a fragment of a finding.
    #[test]
    fn validation_rules() {
        let long_description = skill(&format!("name: x\ndescription: {}\n", "d".repeat(1025)), "b");
        let long_compat = skill(
            &format!("name: x\ndescription: d\ncompatibility: {}\n", "c".repeat(501)),
            "b",
        );
        let long_body = "line\n".repeat(501);
        let cases: Vec<(&str, String, bool, bool, &str)> = vec![
            ("x", skill("name: x\ndescription: d\n", "body"), true, true, ""),
            (
                "x",
                skill("name: y\ndescription: d\n", "body"),
                true,
                false,
                "differs from its folder",
            ),
            (
                "x",
                skill("name: X\ndescription: d\n", "body"),
                true,
                false,
                "lowercase",
            ),
            (
                "a--b",
                skill("name: a--b\ndescription: d\n", "body"),
                true,
                false,
                "consecutive",
            ),
            (
                "x-",
                skill("name: x-\ndescription: d\n", "body"),
                true,
                false,
                "start or end",
            ),
            ("x", skill("description: d\n", "body"), true, false, "no name"),
            ("x", skill("name: x\n", "body"), false, false, "no description"),
            (
                "x",
                skill("name: x\ndescription: '  '\n", "body"),
                false,
                false,
                "no description",
            ),
            (
                "x",
                skill("name: x\ndescription: [a]\n", "body"),
                false,
                false,
                "not a string",
            ),
            ("x", long_description, true, false, "more than 1024"),
            ("x", long_compat, true, false, "compatibility has 501"),
            (
                "x",
                skill("name: x\ndescription: d\n", &long_body),
                true,
                true,
                "501 lines",
            ),
            (
                "x",
                skill("name: x\ndescription: d\nversion: 2\n", "b"),
                true,
                false,
                "unknown front matter field",
            ),
            (
                "x",
                skill("name: x\ndescription: d\nmetadata: {n: 3}\n", "b"),
                true,
                false,
                "should be a string",
            ),
            (
                "x",
                skill("name: x\ndescription: d\nmetadata: {n: [3]}\n", "b"),
                true,
                false,
                "ignored",
            ),
            (
                "x",
                skill("name: x\ndescription: d\nallowed-tools: 3\n", "b"),
                true,
                false,
                "allowed-tools",
            ),
            (
                "x",
                skill("name: [x\ndescription: d\n", "b"),
                false,
                false,
                "not valid YAML",
            ),
            (
                "x",
                "---\nname: x\ndescription: d\n".into(),
                false,
                false,
                "never closed",
            ),
            ("x", skill("- a\n- b\n", "b"), false, false, "not a mapping"),
            ("Bad Folder", "just a body".into(), false, false, "no usable name"),
            ("x", String::new(), false, false, "no body"),
        ];
        for (folder, text, lenient, strict, fragment) in cases {
            let checked = check(folder, &text);
            let all: Vec<String> = checked.findings.iter().map(|f| f.message.clone()).collect();
            assert_eq!(checked.accepted(Mode::Lenient).is_some(), lenient, "{text:?}: {all:?}");
            assert_eq!(checked.accepted(Mode::Strict).is_some(), strict, "{text:?}: {all:?}");
            if fragment.is_empty() {
                assert!(all.is_empty(), "{text:?}: {all:?}");
            } else {
                assert!(
                    all.iter().any(|m| m.contains(fragment)),
                    "{text:?}: want `{fragment}` in {all:?}"
                );
            }
        }
    }

    #[test]
    fn an_invalid_declared_name_falls_back_to_the_folder() {
        let checked = check("good-name", &skill("name: Bad Name\ndescription: d\n", "b"));
        assert_eq!(checked.document.unwrap().name.as_str(), "good-name");
    }

    #[test]
    fn windows_line_endings_and_a_bom_are_read() {
        let text = "\u{feff}---\r\nname: x\r\ndescription: d\r\n---\r\nbody\r\n";
        let doc = check("x", text).document.unwrap();
        assert_eq!(doc.description, "d");
        assert_eq!(doc.body, "body");
    }
}
