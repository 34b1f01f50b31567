//! Discovery: finding skill folders under the configured directories, in
//! priority order, within bounds, and telling what changed on a rescan.
//!
//! Each configured directory is a skill folder itself (it holds `SKILL.md`)
//! or a folder of skill folders, searched to `max_depth`. A configured
//! directory may itself be a link (the operator named it). Below it, a
//! linked skill folder that stays inside the root is an alias, loaded once
//! from where it leads; one that leads outside the root is not followed.
//! Inside a skill folder the rules of [`super::paths`] apply: a `SKILL.md`
//! that links out of its folder makes the skill unusable. A name found twice keeps the
//! higher-priority skill and reports the other. Nothing here ever stops
//! Herald from starting: problems become [`Diagnostic`]s.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::catalog::gating::Environment;
use crate::catalog::skill::{self, SKILL_FILE, Skill};
use crate::name::SkillName;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanLimits {
    /// Folder levels below a root searched for `SKILL.md`.
    pub max_depth: usize,
    /// Skill folders loaded in all.
    pub max_skills: usize,
}

impl From<&crate::config::SkillsConfig> for ScanLimits {
    fn from(config: &crate::config::SkillsConfig) -> Self {
        Self {
            max_depth: config.max_depth,
            max_skills: config.max_skills,
        }
    }
}

/// Something an operator should know about a scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub path: PathBuf,
    pub kind: DiagnosticKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// The folder is not a usable skill.
    Skipped,
    /// A skill of the same name with higher priority is loaded instead.
    Shadowed,
    /// A symlink leaving its root, a limit reached, a root that is not a folder.
    Ignored,
}

/// The result of one scan.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    pub skills: BTreeMap<SkillName, Arc<Skill>>,
    pub diagnostics: Vec<Diagnostic>,
}

/// What a rescan changed, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadReport {
    pub added: Vec<SkillName>,
    /// Content changed: a new revision.
    pub changed: Vec<SkillName>,
    pub removed: Vec<SkillName>,
    pub unchanged: usize,
}

impl ReloadReport {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// `2 added (a, b), 1 changed (c), 0 removed; 5 unchanged`.
    pub fn summary(&self) -> String {
        let part = |label: &str, names: &[SkillName]| {
            if names.is_empty() {
                format!("0 {label}")
            } else {
                let list: Vec<&str> = names.iter().map(SkillName::as_str).collect();
                format!("{} {label} ({})", names.len(), list.join(", "))
            }
        };
        format!(
            "{}, {}, {}; {} unchanged",
            part("added", &self.added),
            part("changed", &self.changed),
            part("removed", &self.removed),
            self.unchanged
        )
    }
}

/// Scans `dirs` (highest priority first). Skills of `previous` whose files
/// did not change (same stat fingerprint) are reused without reading them.
pub fn discover(
    dirs: &[PathBuf],
    limits: ScanLimits,
    environment: &dyn Environment,
    previous: Option<&Discovery>,
) -> Discovery {
    let mut discovery = Discovery::default();
    let mut folders: Vec<(usize, PathBuf)> = Vec::new();
    let mut over_limit = false;
    for (priority, root) in dirs.iter().enumerate() {
        let Ok(canonical_root) = fs::canonicalize(root) else {
            tracing::debug!(dir = %root.display(), "skill directory does not exist");
            continue;
        };
        if !canonical_root.is_dir() {
            discovery.diagnostics.push(Diagnostic {
                path: root.clone(),
                kind: DiagnosticKind::Ignored,
                message: "not a folder".into(),
            });
            continue;
        }
        let mut found = Vec::new();
        if canonical_root.join(SKILL_FILE).is_file() {
            found.push(canonical_root.clone());
        } else {
            let mut walk = Walk {
                root: &canonical_root,
                max_depth: limits.max_depth,
                budget: limits.max_skills.saturating_sub(folders.len()),
                found: &mut found,
                seen: HashSet::new(),
                diagnostics: &mut discovery.diagnostics,
                over_limit: false,
            };
            walk.visit(&canonical_root, 1);
            over_limit |= walk.over_limit;
        }
        for folder in found {
            if folders.len() >= limits.max_skills {
                over_limit = true;
                break;
            }
            folders.push((priority, folder));
        }
    }
    if over_limit {
        discovery.diagnostics.push(Diagnostic {
            path: PathBuf::new(),
            kind: DiagnosticKind::Ignored,
            message: format!(
                "more skill folders than skills.max_skills ({}); the rest are not loaded",
                limits.max_skills
            ),
        });
    }

    let reusable: HashMap<&Path, &Arc<Skill>> = previous
        .map(|p| p.skills.values().map(|s| (s.folder.as_path(), s)).collect())
        .unwrap_or_default();
    for (priority, folder) in folders {
        let loaded = match reusable.get(folder.as_path()) {
            Some(old) if old.fingerprint == skill::current_fingerprint(&folder) => {
                let availability = old.requirements.check(environment);
                if old.priority == priority && old.availability == availability {
                    Ok(Arc::clone(old))
                } else {
                    let mut skill = Skill::clone(old);
                    skill.priority = priority;
                    skill.availability = availability;
                    Ok(Arc::new(skill))
                }
            }
            _ => skill::load(&folder, priority, environment).map(Arc::new),
        };
        match loaded {
            Ok(skill) => {
                if let Some(kept) = discovery.skills.get(&skill.name) {
                    discovery.diagnostics.push(Diagnostic {
                        path: skill.folder.clone(),
                        kind: DiagnosticKind::Shadowed,
                        message: format!(
                            "skill `{}` is also at {}, which has priority; this one is not loaded",
                            skill.name,
                            kept.folder.display()
                        ),
                    });
                    continue;
                }
                for warning in &skill.warnings {
                    tracing::debug!(skill = %skill.name, warning = %warning, "skill loaded with a warning");
                }
                discovery.skills.insert(skill.name.clone(), skill);
            }
            Err(skipped) => {
                tracing::warn!(folder = %skipped.folder.display(), reason = %skipped.reason, "skill skipped");
                discovery.diagnostics.push(Diagnostic {
                    path: skipped.folder,
                    kind: DiagnosticKind::Skipped,
                    message: skipped.reason,
                });
            }
        }
    }
    discovery
}

/// What changed from `before` to `after`.
pub fn compare(before: &Discovery, after: &Discovery) -> ReloadReport {
    let mut report = ReloadReport::default();
    for (name, skill) in &after.skills {
        match before.skills.get(name) {
            None => report.added.push(name.clone()),
            Some(old) if old.revision != skill.revision || old.folder != skill.folder => {
                report.changed.push(name.clone())
            }
            Some(_) => report.unchanged += 1,
        }
    }
    report.removed = before
        .skills
        .keys()
        .filter(|name| !after.skills.contains_key(*name))
        .cloned()
        .collect();
    report
}

struct Walk<'a> {
    root: &'a Path,
    max_depth: usize,
    budget: usize,
    found: &'a mut Vec<PathBuf>,
    /// What `found` holds, for the check a symlinked folder needs: a
    /// `Vec::contains` there made a scan of 10,000 skills quadratic.
    seen: HashSet<PathBuf>,
    diagnostics: &'a mut Vec<Diagnostic>,
    over_limit: bool,
}

impl Walk<'_> {
    fn visit(&mut self, dir: &Path, depth: usize) {
        if depth > self.max_depth {
            return;
        }
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(kind) = entry.file_type() else { continue };
            let path = if kind.is_symlink() {
                match fs::canonicalize(entry.path()) {
                    Ok(target) if target.starts_with(self.root) => target,
                    Ok(_) | Err(_) => {
                        self.diagnostics.push(Diagnostic {
                            path: entry.path(),
                            kind: DiagnosticKind::Ignored,
                            message: "symlink leads outside its skill directory; not followed".into(),
                        });
                        continue;
                    }
                }
            } else if kind.is_dir() {
                entry.path()
            } else {
                continue;
            };
            if !path.is_dir() {
                continue;
            }
            if path.join(SKILL_FILE).is_file() {
                if self.found.len() >= self.budget {
                    self.over_limit = true;
                    return;
                }
                if self.seen.insert(path.clone()) {
                    self.found.push(path);
                }
            } else {
                self.visit(&path, depth + 1);
            }
            if self.over_limit {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::gating::FixedEnvironment;
    use crate::test_support::write_skill;

    const LIMITS: ScanLimits = ScanLimits {
        max_depth: 3,
        max_skills: 50,
    };

    fn names(discovery: &Discovery) -> Vec<&str> {
        discovery.skills.keys().map(SkillName::as_str).collect()
    }

    fn scan(dirs: &[PathBuf]) -> Discovery {
        discover(dirs, LIMITS, &FixedEnvironment::default(), None)
    }

    #[test]
    fn roots_are_skill_folders_or_folders_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let many = dir.path().join("many");
        write_skill(&many, "alpha", "A.", "a");
        write_skill(&many.join("group"), "beta", "B.", "b");
        let single = write_skill(dir.path(), "gamma", "G.", "g");
        let missing = dir.path().join("missing");
        let discovery = scan(&[many, single, missing]);
        assert_eq!(names(&discovery), vec!["alpha", "beta", "gamma"]);
        assert!(discovery.diagnostics.is_empty(), "{:?}", discovery.diagnostics);
    }

    #[test]
    fn the_higher_priority_directory_wins_a_duplicate_and_the_other_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first");
        let second = dir.path().join("second");
        write_skill(&first, "notes", "From first.", "1");
        write_skill(&second, "notes", "From second.", "2");
        write_skill(&second, "other", "Other.", "o");
        for (dirs, winner) in [
            (vec![first.clone(), second.clone()], "From first."),
            (vec![second.clone(), first.clone()], "From second."),
        ] {
            let discovery = scan(&dirs);
            assert_eq!(discovery.skills["notes"].description(), winner);
            assert_eq!(names(&discovery), vec!["notes", "other"]);
            let shadowed: Vec<_> = discovery
                .diagnostics
                .iter()
                .filter(|d| d.kind == DiagnosticKind::Shadowed)
                .collect();
            assert_eq!(shadowed.len(), 1, "{shadowed:?}");
            assert!(shadowed[0].message.contains("`notes`"));
        }
    }

    #[test]
    fn depth_and_count_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        write_skill(&dir.path().join("a/b"), "deep", "D.", "d");
        write_skill(dir.path(), "top", "T.", "t");
        let shallow = ScanLimits {
            max_depth: 1,
            max_skills: 50,
        };
        let discovery = discover(&[dir.path().into()], shallow, &FixedEnvironment::default(), None);
        assert_eq!(names(&discovery), vec!["top"]);
        let few = ScanLimits {
            max_depth: 3,
            max_skills: 1,
        };
        let discovery = discover(&[dir.path().into()], few, &FixedEnvironment::default(), None);
        assert_eq!(discovery.skills.len(), 1);
        assert!(discovery.diagnostics.iter().any(|d| d.message.contains("max_skills")));
    }

    #[test]
    fn symlinks_leaving_the_root_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = write_skill(&dir.path().join("outside"), "escaped", "E.", "e");
        write_skill(&root, "inside", "I.", "i");
        std::os::unix::fs::symlink(&outside, root.join("escaped")).unwrap();
        std::os::unix::fs::symlink(root.join("inside"), root.join("alias")).unwrap();
        let discovery = scan(&[root]);
        assert_eq!(names(&discovery), vec!["inside"]);
        assert!(
            discovery
                .diagnostics
                .iter()
                .any(|d| d.kind == DiagnosticKind::Ignored && d.message.contains("outside"))
        );
    }

    #[test]
    fn a_broken_skill_is_skipped_and_the_rest_load() {
        let dir = tempfile::tempdir().unwrap();
        write_skill(dir.path(), "good", "Good.", "g");
        fs::create_dir_all(dir.path().join("bad")).unwrap();
        fs::write(dir.path().join("bad/SKILL.md"), "---\nname: [\n---\n").unwrap();
        let discovery = scan(&[dir.path().into()]);
        assert_eq!(names(&discovery), vec!["good"]);
        assert_eq!(discovery.diagnostics[0].kind, DiagnosticKind::Skipped);
    }

    #[test]
    fn a_rescan_keeps_revisions_of_unchanged_skills_and_reports_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        write_skill(dir.path(), "same", "S.", "s");
        write_skill(dir.path(), "edited", "E.", "e");
        write_skill(dir.path(), "gone", "G.", "g");
        let env = FixedEnvironment::default();
        let dirs = [dir.path().to_path_buf()];
        let before = discover(&dirs, LIMITS, &env, None);
        write_skill(dir.path(), "edited", "E.", "edited body");
        fs::remove_dir_all(dir.path().join("gone")).unwrap();
        write_skill(dir.path(), "new", "N.", "n");
        let after = discover(&dirs, LIMITS, &env, Some(&before));
        let report = compare(&before, &after);
        assert_eq!(
            report,
            ReloadReport {
                added: vec![SkillName::new("new").unwrap()],
                changed: vec![SkillName::new("edited").unwrap()],
                removed: vec![SkillName::new("gone").unwrap()],
                unchanged: 1,
            }
        );
        assert!(Arc::ptr_eq(&before.skills["same"], &after.skills["same"]));
        assert_eq!(
            report.summary(),
            "1 added (new), 1 changed (edited), 1 removed (gone); 1 unchanged"
        );
        // Rewriting identical content is not a change.
        write_skill(dir.path(), "same", "S.", "s");
        let again = discover(&dirs, LIMITS, &env, Some(&after));
        assert!(compare(&after, &again).is_empty());
        assert_eq!(again.skills["same"].revision, before.skills["same"].revision);
    }

    #[test]
    fn gating_is_checked_again_on_every_scan() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("gh");
        fs::create_dir_all(&folder).unwrap();
        fs::write(
            folder.join(SKILL_FILE),
            "---\nname: gh\ndescription: GitHub.\nmetadata:\n  requires-env: GH_TOKEN\n---\nUse gh.",
        )
        .unwrap();
        let dirs = [dir.path().to_path_buf()];
        let without = discover(&dirs, LIMITS, &FixedEnvironment::default(), None);
        assert!(!without.skills["gh"].availability.is_available());
        let with_token = FixedEnvironment {
            vars: ["GH_TOKEN".to_owned()].into(),
            ..Default::default()
        };
        let with = discover(&dirs, LIMITS, &with_token, Some(&without));
        assert!(with.skills["gh"].availability.is_available());
    }
}
