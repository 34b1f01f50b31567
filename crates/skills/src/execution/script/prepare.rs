//! Before a script starts: the script found in the skill's `scripts/`, the
//! temporary copy of the skill it runs in and the message's files beside
//! it, handed to the user it runs as, and how to start it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::files::{ScriptFile, write_files};
use super::user::RunAs;
use crate::catalog::{check_relative, list_files, resolve_inside};
use crate::error::SkillError;

/// A script ready to start, in its own temporary folder.
#[derive(Debug)]
pub(super) struct Prepared {
    /// Removed when dropped. Only Herald writes its top level; `skill/`,
    /// `home/` and `out/` belong to the script's user.
    pub sandbox: tempfile::TempDir,
    /// The copy of the skill folder: the script's working folder.
    pub work: PathBuf,
    pub home: PathBuf,
    /// `files/`, holding the message's files, when it has any.
    pub files_dir: Option<PathBuf>,
    /// The names the message's files were written under, in order.
    pub file_names: Vec<String>,
    /// Where the script leaves files for the conversation (`HERALD_OUT_DIR`).
    pub out: PathBuf,
    /// `scripts/NAME`, as named in the receipt.
    pub script: String,
    /// The program to start and the arguments before the caller's.
    pub program: OsString,
    pub leading_args: Vec<OsString>,
    pub run_as: RunAs,
}

/// Finds `script` in `folder`'s `scripts/`, copies the skill to a new
/// temporary folder, writes the message's `files` beside it, and hands both
/// to the user the script runs as. Blocking: files are read, copied and
/// looked up.
pub(super) fn prepare(
    folder: &Path,
    script: &str,
    script_user: Option<&str>,
    files: &[ScriptFile],
) -> Result<Prepared, SkillError> {
    check_relative(script)?;
    let script = script.trim_start_matches("./");
    let script = script.strip_prefix("scripts/").unwrap_or(script);
    let relative = format!("scripts/{script}");
    let original = resolve_inside(folder, &relative)?;
    let scripts_dir = folder
        .join("scripts")
        .canonicalize()
        .map_err(|err| SkillError::io("opening", folder.join("scripts"), err))?;
    if !original.starts_with(&scripts_dir) {
        return Err(SkillError::refused(format!(
            "`{relative}` is not a file in the skill's scripts/"
        )));
    }
    let run_as = RunAs::resolve(script_user)?;

    let sandbox = tempfile::Builder::new()
        .prefix("herald-skill-")
        .tempdir()
        .map_err(|err| SkillError::io("creating a temporary folder in", std::env::temp_dir(), err))?;
    let work = sandbox.path().join("skill");
    let home = sandbox.path().join("home");
    copy_skill(folder, &work)?;
    std::fs::create_dir_all(&home).map_err(|err| SkillError::io("creating", &home, err))?;
    let (files_dir, file_names) = if files.is_empty() {
        (None, Vec::new())
    } else {
        let files_dir = sandbox.path().join("files");
        let names = write_files(&files_dir, files)?;
        (Some(files_dir), names)
    };
    let out = super::outputs::create(sandbox.path())?;
    if let Some((uid, gid)) = run_as.ids() {
        use std::os::unix::fs::PermissionsExt;
        // The user may pass through the top folder to its own ones, and
        // owns everything in those.
        std::fs::set_permissions(sandbox.path(), std::fs::Permissions::from_mode(0o711))
            .map_err(|err| SkillError::io("opening up", sandbox.path(), err))?;
        for path in [Some(&work), Some(&home), Some(&out), files_dir.as_ref()]
            .into_iter()
            .flatten()
        {
            hand_over(path, uid.as_raw(), gid.as_raw())?;
        }
    }
    let copied = work.join(&relative);
    let (program, leading_args) = interpreter(&copied)?;
    Ok(Prepared {
        sandbox,
        work,
        home,
        files_dir,
        file_names,
        out,
        script: script.to_owned(),
        program,
        leading_args,
        run_as,
    })
}

/// Copies the skill's files (those [`resolve_inside`] accepts, each checked
/// again right before it is read) into `to`.
fn copy_skill(from: &Path, to: &Path) -> Result<(), SkillError> {
    for file in list_files(from) {
        let source = resolve_inside(from, &file)?;
        let target: PathBuf = to.join(&file);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|err| SkillError::io("creating", parent, err))?;
        }
        std::fs::copy(&source, &target).map_err(|err| SkillError::io("copying", &source, err))?;
    }
    Ok(())
}

/// Makes `uid`/`gid` the owner of `path` and everything below it.
fn hand_over(path: &Path, uid: u32, gid: u32) -> Result<(), SkillError> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).map_err(|err| SkillError::io("handing over", path, err))?;
    if path.is_dir() && !path.is_symlink() {
        let entries = std::fs::read_dir(path).map_err(|err| SkillError::io("reading", path, err))?;
        for entry in entries {
            let entry = entry.map_err(|err| SkillError::io("reading", path, err))?;
            hand_over(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// How to start a script: itself when it is executable, otherwise by its
/// extension.
fn interpreter(script: &Path) -> Result<(OsString, Vec<OsString>), SkillError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = script.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if executable {
        return Ok((script.into(), Vec::new()));
    }
    let program = match script.extension().and_then(|e| e.to_str()) {
        Some("sh") => "sh",
        Some("bash") => "bash",
        Some("py") => "python3",
        Some("js" | "mjs") => "node",
        _ => {
            return Err(SkillError::refused(format!(
                "`{}` is not executable and has no known extension (.sh, .bash, .py, .js)",
                script
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            )));
        }
    };
    Ok((program.into(), vec![script.into()]))
}
