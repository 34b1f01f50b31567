//! One loaded Agent Skill: its parsed `SKILL.md`, its folder, the files it
//! bundles and its revision (a hash of all of that content).
//!
//! Loading a folder reads every file once to hash it; a cheap stat-only
//! fingerprint lets a rescan reuse a skill whose files did not change.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use crate::catalog::gating::{Availability, Environment, Requirements};
use crate::catalog::paths::{Place, has_one_name, resolve_inside, where_target_is};
use crate::catalog::spec::{self, Mode, SkillDocument};
use crate::name::SkillName;

pub const SKILL_FILE: &str = "SKILL.md";
/// A `SKILL.md` larger than this is not read.
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;
/// Files listed (and hashed) per skill folder.
pub const MAX_FILES_PER_SKILL: usize = 500;
const MAX_FILE_DEPTH: usize = 6;
const MAX_TRIGGER_PATTERN_BYTES: usize = 1 << 16;

#[derive(Clone, Debug)]
pub struct Skill {
    pub name: SkillName,
    pub document: SkillDocument,
    /// The canonical path of the skill folder.
    pub folder: PathBuf,
    /// Index of the configured directory it was found under (0 is highest).
    pub priority: usize,
    /// Hash of `SKILL.md` and every bundled file: unchanged content keeps it.
    pub revision: String,
    /// Bundled files relative to the folder, `/`-separated, sorted, without `SKILL.md`.
    pub files: Vec<String>,
    /// Lenient-load findings worth telling an operator.
    pub warnings: Vec<String>,
    pub requirements: Requirements,
    pub availability: Availability,
    /// `metadata.triggers`: a pattern that activates the skill when a message matches.
    pub trigger: Option<regex::Regex>,
    /// `metadata.elevated: "true"`: only admins see and use it.
    pub elevated: bool,
    pub(crate) fingerprint: String,
}

impl Skill {
    pub fn description(&self) -> &str {
        &self.document.description
    }

    pub fn body(&self) -> &str {
        &self.document.body
    }

    pub fn scripts(&self) -> impl Iterator<Item = &str> {
        self.files.iter().filter_map(|f| f.strip_prefix("scripts/"))
    }
}

/// Why a folder did not become a skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub folder: PathBuf,
    pub reason: String,
}

/// Loads the skill in `folder` (canonical), leniently.
pub fn load(folder: &Path, priority: usize, environment: &dyn Environment) -> Result<Skill, Skipped> {
    let skip = |reason: String| Skipped {
        folder: folder.to_path_buf(),
        reason,
    };
    let folder_name = folder
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| skip("folder name is not UTF-8".into()))?;
    let files = list_files(folder);
    let text = read_skill_file(folder).map_err(skip)?;
    let checked = spec::check(folder_name, &text);
    let document = match checked.accepted(Mode::Lenient) {
        Some(document) => document.clone(),
        None => {
            let reasons: Vec<&str> = checked.errors(Mode::Lenient).map(|f| f.message.as_str()).collect();
            return Err(skip(reasons.join("; ")));
        }
    };
    let mut warnings: Vec<String> = checked.warnings(Mode::Lenient).map(|f| f.message.clone()).collect();
    let trigger = document.metadata.get("triggers").and_then(|pattern| {
        match regex::RegexBuilder::new(pattern)
            .size_limit(MAX_TRIGGER_PATTERN_BYTES * 16)
            .build()
        {
            Ok(regex) if pattern.len() <= MAX_TRIGGER_PATTERN_BYTES => Some(regex),
            Ok(_) => {
                warnings.push("metadata.triggers is too long; ignored".into());
                None
            }
            Err(err) => {
                warnings.push(format!("metadata.triggers is not a valid pattern ({err}); ignored"));
                None
            }
        }
    });
    let revision = revision(folder, &files);
    let fingerprint = fingerprint(folder, &files);
    let requirements = Requirements::from_metadata(&document.metadata);
    let elevated = document.metadata.get("elevated").is_some_and(|v| v.trim() == "true");
    Ok(Skill {
        name: document.name.clone(),
        availability: requirements.check(environment),
        requirements,
        document,
        folder: folder.to_path_buf(),
        priority,
        revision,
        files: files.into_iter().filter(|f| f != SKILL_FILE).collect(),
        warnings,
        trigger,
        elevated,
        fingerprint,
    })
}

/// The stat-only fingerprint of a folder as it is now.
pub(crate) fn current_fingerprint(folder: &Path) -> String {
    fingerprint(folder, &list_files(folder))
}

fn read_skill_file(folder: &Path) -> Result<String, String> {
    let path = resolve_inside(folder, SKILL_FILE).map_err(|err| format!("cannot read {SKILL_FILE}: {err}"))?;
    let metadata = fs::metadata(&path).map_err(|err| format!("cannot read {SKILL_FILE}: {err}"))?;
    if metadata.len() > MAX_SKILL_FILE_BYTES {
        return Err(format!(
            "{SKILL_FILE} has {} bytes, more than {MAX_SKILL_FILE_BYTES}",
            metadata.len()
        ));
    }
    let bytes = fs::read(&path).map_err(|err| format!("cannot read {SKILL_FILE}: {err}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{SKILL_FILE} is not UTF-8 text"))
}

/// Every regular file under `folder` (with `SKILL.md`), relative, sorted:
/// the files [`resolve_inside`] accepts. Hidden entries and files with other
/// hard links are left out; symlinks count only when they stay inside and
/// lead to no hidden file.
pub(crate) fn list_files(folder: &Path) -> Vec<String> {
    let mut files = Vec::new();
    walk_files(folder, folder, "", 0, &mut files);
    files.sort();
    files
}

fn walk_files(folder: &Path, dir: &Path, prefix: &str, depth: usize, files: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if files.len() >= MAX_FILES_PER_SKILL {
            return;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        let (is_dir, is_file) = if kind.is_symlink() {
            match fs::canonicalize(&path) {
                Ok(target) if where_target_is(folder, &target) == Place::Inside => match fs::metadata(&target) {
                    Ok(metadata) => (metadata.is_dir(), metadata.is_file() && has_one_name(&metadata)),
                    Err(_) => continue,
                },
                _ => continue,
            }
        } else if kind.is_file() {
            (false, entry.metadata().is_ok_and(|metadata| has_one_name(&metadata)))
        } else {
            (kind.is_dir(), false)
        };
        let relative = format!("{prefix}{name}");
        if is_file {
            files.push(relative);
        } else if is_dir && depth < MAX_FILE_DEPTH {
            walk_files(folder, &path, &format!("{relative}/"), depth + 1, files);
        }
    }
}

fn revision(folder: &Path, files: &[String]) -> String {
    let mut hasher = Sha256::new();
    for file in files {
        let content = fs::read(folder.join(file)).unwrap_or_default();
        hasher.update(file.as_bytes());
        hasher.update([0]);
        hasher.update((content.len() as u64).to_le_bytes());
        hasher.update(&content);
    }
    hex::encode(&hasher.finalize()[..8])
}

fn fingerprint(folder: &Path, files: &[String]) -> String {
    let mut hasher = Sha256::new();
    for file in files {
        let metadata = fs::metadata(folder.join(file)).ok();
        let len = metadata.as_ref().map_or(0, |m| m.len());
        let modified = metadata
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        hasher.update(file.as_bytes());
        hasher.update([0]);
        hasher.update(len.to_le_bytes());
        hasher.update(modified.to_le_bytes());
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::gating::FixedEnvironment;
    use crate::test_support::write_skill;

    #[test]
    fn a_folder_loads_with_its_files_and_a_revision() {
        let dir = tempfile::tempdir().unwrap();
        let folder = write_skill(dir.path(), "notes", "Keep notes.", "Write notes.");
        fs::create_dir_all(folder.join("scripts")).unwrap();
        fs::write(folder.join("scripts/add.sh"), "echo hi").unwrap();
        fs::write(folder.join("references.md"), "ref").unwrap();
        fs::write(folder.join(".hidden"), "x").unwrap();
        let skill = load(&folder, 0, &FixedEnvironment::default()).unwrap();
        assert_eq!(skill.name.as_str(), "notes");
        assert_eq!(skill.files, vec!["references.md", "scripts/add.sh"]);
        assert_eq!(skill.scripts().collect::<Vec<_>>(), vec!["add.sh"]);
        assert_eq!(skill.revision.len(), 16);
        assert!(skill.availability.is_available());
    }

    #[test]
    fn revision_follows_content_not_time() {
        let dir = tempfile::tempdir().unwrap();
        let folder = write_skill(dir.path(), "notes", "Keep notes.", "Write notes.");
        let env = FixedEnvironment::default();
        let first = load(&folder, 0, &env).unwrap();
        // Same bytes written again: the fingerprint may move, the revision does not.
        write_skill(dir.path(), "notes", "Keep notes.", "Write notes.");
        assert_eq!(load(&folder, 0, &env).unwrap().revision, first.revision);
        fs::write(folder.join("extra.md"), "new file").unwrap();
        let with_file = load(&folder, 0, &env).unwrap();
        assert_ne!(with_file.revision, first.revision);
        write_skill(dir.path(), "notes", "Keep notes.", "Write better notes.");
        assert_ne!(load(&folder, 0, &env).unwrap().revision, with_file.revision);
    }

    #[test]
    fn unusable_folders_are_skipped_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("broken");
        fs::create_dir_all(&folder).unwrap();
        fs::write(folder.join(SKILL_FILE), "---\nname: broken\n---\nbody").unwrap();
        let skipped = load(&folder, 0, &FixedEnvironment::default()).unwrap_err();
        assert!(skipped.reason.contains("no description"), "{}", skipped.reason);
        fs::write(folder.join(SKILL_FILE), [0xff, 0xfe]).unwrap();
        let skipped = load(&folder, 0, &FixedEnvironment::default()).unwrap_err();
        assert!(skipped.reason.contains("not UTF-8"), "{}", skipped.reason);
    }

    #[test]
    fn metadata_sets_gating_triggers_and_elevation() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("deploy");
        fs::create_dir_all(&folder).unwrap();
        fs::write(
            folder.join(SKILL_FILE),
            "---\nname: deploy\ndescription: Deploy.\nmetadata:\n  requires-bins: kubectl\n  \
             triggers: '(?i)\\bdeploy\\b'\n  elevated: 'true'\n---\nSteps.",
        )
        .unwrap();
        let skill = load(&folder, 0, &FixedEnvironment::default()).unwrap();
        assert_eq!(skill.availability.describe(), "needs kubectl");
        assert!(skill.trigger.as_ref().unwrap().is_match("please Deploy now"));
        assert!(skill.elevated);
        fs::write(
            folder.join(SKILL_FILE),
            "---\nname: deploy\ndescription: Deploy.\nmetadata:\n  triggers: '(unclosed'\n---\nSteps.",
        )
        .unwrap();
        let skill = load(&folder, 0, &FixedEnvironment::default()).unwrap();
        assert!(skill.trigger.is_none());
        assert!(
            skill.warnings.iter().any(|w| w.contains("triggers")),
            "{:?}",
            skill.warnings
        );
    }
}
