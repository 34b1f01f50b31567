//! Where a skill's files may be: inside its folder. Every path the model
//! names, and every file Herald reads from a skill folder or copies out of
//! it, passes [`resolve_inside`] first.
//!
//! The rules, checked on the path as given and again after symlinks are
//! resolved:
//! - relative and `/`-separated, never empty, never climbing with `..`;
//! - no hidden component (`.env`, `.git/`): dot-files and dot-folders are
//!   neither read, listed, run nor copied, even through a link;
//! - inside the skill folder, and the folder still the one loaded: a skill
//!   folder later replaced by a link to elsewhere is not followed;
//! - a regular file with one name: a file with other hard links may be a
//!   file from anywhere on the disk that was linked in, and Herald cannot
//!   tell where its other names are.
//!
//! What remains is a race: someone who can write the skill folder and swaps
//! a folder for a link between the check and the open. That person can
//! already change what the skill says and runs.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::error::SkillError;

/// Refuses a path that is empty, absolute, climbs with `..`, or names a
/// hidden file or folder.
pub(crate) fn check_relative(relative: &str) -> Result<(), SkillError> {
    let refused = |why: &str| SkillError::refused(format!("path `{relative}` refused: {why}"));
    if relative.trim().is_empty() {
        return Err(refused("it is empty"));
    }
    if relative.contains('\\') || relative.contains('\0') {
        return Err(refused("use `/` separated relative paths"));
    }
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) if is_hidden(part) => {
                return Err(refused("hidden files and folders are not offered"));
            }
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(refused("`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(refused("it must be relative to the skill folder"));
            }
        }
    }
    Ok(())
}

fn is_hidden(part: &std::ffi::OsStr) -> bool {
    part.as_encoded_bytes().first() == Some(&b'.')
}

/// Where a resolved (canonical) path is, seen from a canonical skill folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    Inside,
    Outside,
    /// Inside, but at or below a hidden file or folder.
    Hidden,
}

pub(crate) fn where_target_is(folder: &Path, target: &Path) -> Place {
    match target.strip_prefix(folder) {
        Err(_) => Place::Outside,
        Ok(below)
            if below
                .components()
                .any(|c| matches!(c, Component::Normal(part) if is_hidden(part))) =>
        {
            Place::Hidden
        }
        Ok(_) => Place::Inside,
    }
}

/// Whether a file has no other hard link than the one Herald found.
pub(crate) fn has_one_name(metadata: &std::fs::Metadata) -> bool {
    metadata.nlink() <= 1
}

/// Resolves `relative` to a visible regular file inside `folder` (the
/// canonical folder the skill was loaded from), refusing anything that
/// could leave it. Returns the file's canonical path.
pub fn resolve_inside(folder: &Path, relative: &str) -> Result<PathBuf, SkillError> {
    check_relative(relative)?;
    let refused = |why: &str| SkillError::refused(format!("path `{relative}` refused: {why}"));
    let canonical_folder = folder
        .canonicalize()
        .map_err(|err| SkillError::io("opening skill folder", folder, err))?;
    if canonical_folder != folder {
        return Err(SkillError::refused(format!(
            "skill folder {} is no longer where the skill was loaded from; reload the skills",
            folder.display()
        )));
    }
    let joined = folder.join(relative);
    let target = joined.canonicalize().map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => SkillError::MissingFile(relative.to_owned()),
        _ => SkillError::io("opening", &joined, err),
    })?;
    match where_target_is(folder, &target) {
        Place::Inside => {}
        Place::Outside => return Err(refused("it leads outside the skill folder")),
        Place::Hidden => return Err(refused("it leads to a hidden file or folder")),
    }
    let metadata = std::fs::metadata(&target).map_err(|err| SkillError::io("reading", &target, err))?;
    if !metadata.is_file() {
        return Err(SkillError::refused(format!("`{relative}` is not a file")));
    }
    if !has_one_name(&metadata) {
        return Err(refused(
            "the file has other hard links, so it may be a file from elsewhere; copy it instead",
        ));
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    use super::*;

    /// A hostile skill folder: a dot-file, a hidden folder, links out, a link
    /// to a hidden file inside, and a hard link to a file outside.
    fn hostile() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let folder = root.join("skill");
        std::fs::create_dir_all(folder.join("references/.secret")).unwrap();
        std::fs::create_dir_all(folder.join("scripts")).unwrap();
        std::fs::write(folder.join("SKILL.md"), "---\nname: skill\ndescription: S.\n---\nbody").unwrap();
        std::fs::write(folder.join("references/guide.md"), "guide").unwrap();
        std::fs::write(folder.join("references/.secret/key"), "key").unwrap();
        std::fs::write(folder.join("scripts/ok.sh"), "true").unwrap();
        std::fs::write(folder.join(".env"), "TOKEN=secret").unwrap();
        std::fs::write(root.join("outside.txt"), "outside").unwrap();
        symlink(folder.join("references/guide.md"), folder.join("link-in")).unwrap();
        symlink("../outside.txt", folder.join("link-out")).unwrap();
        symlink("/etc/passwd", folder.join("references/passwd.md")).unwrap();
        symlink(".env", folder.join("link-dot")).unwrap();
        std::fs::hard_link(root.join("outside.txt"), folder.join("hard.txt")).unwrap();
        (dir, folder)
    }

    /// Rows: the path a model names → what happens.
    #[test]
    fn only_visible_regular_files_inside_the_folder_resolve() {
        let (_dir, folder) = hostile();
        for (path, outcome) in [
            ("references/guide.md", "ok"),
            ("./references/guide.md", "ok"),
            ("link-in", "ok"),
            ("scripts/ok.sh", "ok"),
            (".env", "hidden"),
            ("./.env", "hidden"),
            ("references/.secret/key", "hidden"),
            ("link-dot", "hidden"),
            ("link-out", "outside"),
            ("references/passwd.md", "outside"),
            ("hard.txt", "hard link"),
            ("../outside.txt", "`..`"),
            ("references/../../outside.txt", "`..`"),
            ("/etc/passwd", "relative"),
            ("", "empty"),
            ("missing.md", "no file `missing.md`"),
        ] {
            match (resolve_inside(&folder, path), outcome) {
                (Ok(resolved), "ok") => assert!(resolved.starts_with(&folder), "{path}: {resolved:?}"),
                (Err(err), fragment) if fragment != "ok" => {
                    assert!(err.to_string().contains(fragment), "{path}: {err}")
                }
                (got, expected) => panic!("{path}: got {got:?}, expected {expected}"),
            }
        }
    }

    #[test]
    fn a_skill_folder_replaced_by_a_link_is_not_followed() {
        let (dir, folder) = hostile();
        let elsewhere = dir.path().canonicalize().unwrap().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("passwd"), "root:x:0:0").unwrap();
        std::fs::rename(&folder, dir.path().join("moved")).unwrap();
        symlink(&elsewhere, &folder).unwrap();
        let err = resolve_inside(&folder, "passwd").unwrap_err().to_string();
        assert!(err.contains("no longer"), "{err}");
    }
}
