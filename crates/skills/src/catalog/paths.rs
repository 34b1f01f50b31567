//! Where a skill's files may be: inside its folder. Every path the model
//! names is checked here before anything is opened.

use std::path::{Component, Path, PathBuf};

use crate::error::SkillError;

/// Refuses a path that is empty, absolute, or climbs with `..`.
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
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(refused("`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(refused("it must be relative to the skill folder"));
            }
        }
    }
    Ok(())
}

/// Resolves `relative` inside `folder`, refusing anything that could leave it.
pub fn resolve_inside(folder: &Path, relative: &str) -> Result<PathBuf, SkillError> {
    check_relative(relative)?;
    let path = Path::new(relative);
    let folder = folder
        .canonicalize()
        .map_err(|err| SkillError::io("opening skill folder", folder, err))?;
    let target = folder.join(path).canonicalize().map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => SkillError::MissingFile(relative.to_owned()),
        _ => SkillError::io("opening", folder.join(path), err),
    })?;
    if !target.starts_with(&folder) {
        return Err(SkillError::refused(format!(
            "path `{relative}` refused: it leads outside the skill folder"
        )));
    }
    Ok(target)
}
