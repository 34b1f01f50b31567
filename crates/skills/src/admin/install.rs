//! Importing a skill from a folder or a `.zip` into the install directory.
//!
//! Everything from outside is untrusted: limits on files, bytes per file,
//! total bytes and archive entries; paths that climb out (`..`), absolute
//! paths, links and duplicate entries refuse the whole import. Files are
//! written to a hidden staging folder first ([`stage_skill`]) and moved into
//! place ([`Staged::commit`]) only once the skill parses, so a refused
//! import leaves nothing behind. Whether the new skill is enabled is not
//! decided here: the caller records it disabled between the two steps, so a
//! skill is never in place without its switch.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::catalog::{Mode, SKILL_FILE, check_document};
use crate::config::InstallLimits;
use crate::error::SkillError;
use crate::name::SkillName;

/// A skill that was installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub name: SkillName,
    pub folder: PathBuf,
    pub files: usize,
    pub bytes: u64,
    pub warnings: Vec<String>,
}

/// A skill written to a hidden staging folder in the install directory,
/// not yet in place. Dropping it removes the staged files.
#[derive(Debug)]
pub(crate) struct Staged {
    staging: tempfile::TempDir,
    staged: PathBuf,
    target: PathBuf,
    installed: Installed,
}

impl Staged {
    pub fn installed(&self) -> &Installed {
        &self.installed
    }

    /// Moves the skill into place. The target folder is claimed first (a
    /// new, empty folder, which fails if anything is there), then replaced
    /// by the staged one; whatever fails leaves no folder of ours behind.
    pub fn commit(self) -> Result<Installed, SkillError> {
        let exists = || {
            SkillError::refused(format!(
                "{} exists already; remove it first to reinstall `{}`",
                self.target.display(),
                self.installed.name
            ))
        };
        match std::fs::create_dir(&self.target) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Err(exists()),
            Err(err) => return Err(SkillError::io("creating", &self.target, err)),
        }
        if let Err(err) = std::fs::rename(&self.staged, &self.target) {
            // Only an empty folder is removed: anything put in it is not ours.
            let _ = std::fs::remove_dir(&self.target);
            return Err(SkillError::io("moving into place", &self.target, err));
        }
        drop(self.staging);
        tracing::info!(
            skill = %self.installed.name,
            folder = %self.target.display(),
            files = self.installed.files,
            "skill installed"
        );
        Ok(self.installed)
    }
}

/// Installs the skill at `source` (a skill folder or a `.zip`) into `install_dir`.
#[cfg(test)]
pub fn install_skill(source: &Path, install_dir: &Path, limits: &InstallLimits) -> Result<Installed, SkillError> {
    stage_skill(source, install_dir, limits)?.commit()
}

/// Reads and checks the skill at `source` (a skill folder or a `.zip`) and
/// writes it to a staging folder in `install_dir`.
pub(crate) fn stage_skill(source: &Path, install_dir: &Path, limits: &InstallLimits) -> Result<Staged, SkillError> {
    let invalid = |reason: String| SkillError::Invalid {
        path: source.to_path_buf(),
        reason,
    };
    let metadata = std::fs::symlink_metadata(source).map_err(|err| SkillError::io("reading", source, err))?;
    let files = if metadata.is_dir() {
        read_folder(source, limits).map_err(invalid)?
    } else if source.extension().is_some_and(|e| e.eq_ignore_ascii_case("zip")) {
        let file = std::fs::File::open(source).map_err(|err| SkillError::io("opening", source, err))?;
        read_zip(file, limits).map_err(invalid)?
    } else {
        return Err(invalid("expected a skill folder or a .zip file".into()));
    };
    let files = strip_single_top_folder(files).map_err(invalid)?;

    let text = files
        .iter()
        .find(|f| f.path == SKILL_FILE)
        .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
        .ok_or_else(|| invalid(format!("no {SKILL_FILE} at the top of the skill")))?;
    let source_name = source
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let name = check_document(&source_name, &text)
        .document
        .map(|d| d.name)
        .ok_or_else(|| {
            let checked = check_document(&source_name, &text);
            let reasons: Vec<String> = checked.errors(Mode::Lenient).map(|f| f.message.clone()).collect();
            invalid(reasons.join("; "))
        })?;
    // Installed under its own name, so the folder rule holds by construction.
    let warnings: Vec<String> = check_document(name.as_str(), &text)
        .warnings(Mode::Lenient)
        .map(|f| f.message.clone())
        .collect();

    std::fs::create_dir_all(install_dir).map_err(|err| SkillError::io("creating", install_dir, err))?;
    let target = install_dir.join(name.as_str());
    if std::fs::symlink_metadata(&target).is_ok() {
        return Err(SkillError::refused(format!(
            "{} exists already; remove it first to reinstall `{name}`",
            target.display()
        )));
    }
    let staging = tempfile::Builder::new()
        .prefix(".install-")
        .tempdir_in(install_dir)
        .map_err(|err| SkillError::io("creating a staging folder in", install_dir, err))?;
    let staged = staging.path().join(name.as_str());
    let mut bytes = 0;
    for file in &files {
        let path = staged.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|err| SkillError::io("creating", parent, err))?;
        }
        std::fs::write(&path, &file.bytes).map_err(|err| SkillError::io("writing", &path, err))?;
        use std::os::unix::fs::PermissionsExt;
        let mode = if file.executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|err| SkillError::io("writing", &path, err))?;
        bytes += file.bytes.len() as u64;
    }
    Ok(Staged {
        staging,
        staged,
        installed: Installed {
            name,
            folder: target.clone(),
            files: files.len(),
            bytes,
            warnings,
        },
        target,
    })
}

struct IncomingFile {
    /// Relative, `/`-separated, checked.
    path: String,
    bytes: Vec<u8>,
    executable: bool,
}

/// Tracks the limits while files come in.
struct Budget<'a> {
    limits: &'a InstallLimits,
    files: usize,
    total: u64,
    seen: BTreeSet<String>,
}

impl Budget<'_> {
    fn admit(&mut self, path: &str, size: u64) -> Result<(), String> {
        if !self.seen.insert(path.to_owned()) {
            return Err(format!("`{path}` appears twice"));
        }
        self.files += 1;
        if self.files > self.limits.max_files {
            return Err(format!("more than {} files", self.limits.max_files));
        }
        if size > self.limits.max_file_bytes {
            return Err(format!("`{path}` has more than {} bytes", self.limits.max_file_bytes));
        }
        self.total += size;
        if self.total > self.limits.max_total_bytes {
            return Err(format!("more than {} bytes in all", self.limits.max_total_bytes));
        }
        Ok(())
    }
}

fn read_folder(source: &Path, limits: &InstallLimits) -> Result<Vec<IncomingFile>, String> {
    let mut budget = Budget {
        limits,
        files: 0,
        total: 0,
        seen: BTreeSet::new(),
    };
    let mut files = Vec::new();
    let mut pending = vec![(source.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|err| format!("cannot read {}: {err}", dir.display()))?
            .filter_map(Result::ok)
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry
                .file_name()
                .into_string()
                .map_err(|_| format!("a file name in {} is not UTF-8", dir.display()))?;
            if name.starts_with('.') {
                continue;
            }
            let relative = format!("{prefix}{name}");
            let metadata =
                std::fs::symlink_metadata(entry.path()).map_err(|err| format!("cannot read `{relative}`: {err}"))?;
            if metadata.file_type().is_symlink() {
                return Err(format!("`{relative}` is a link; links are not installed"));
            }
            if metadata.is_dir() {
                pending.push((entry.path(), format!("{relative}/")));
            } else if metadata.is_file() {
                budget.admit(&relative, metadata.len())?;
                let bytes = std::fs::read(entry.path()).map_err(|err| format!("cannot read `{relative}`: {err}"))?;
                use std::os::unix::fs::PermissionsExt;
                files.push(IncomingFile {
                    path: relative,
                    bytes,
                    executable: metadata.permissions().mode() & 0o111 != 0,
                });
            } else {
                return Err(format!("`{relative}` is not a regular file"));
            }
        }
    }
    Ok(files)
}

fn read_zip<R: Read + std::io::Seek>(reader: R, limits: &InstallLimits) -> Result<Vec<IncomingFile>, String> {
    let mut archive = zip::ZipArchive::new(reader).map_err(|err| format!("not a readable zip archive: {err}"))?;
    if archive.len() > limits.max_entries {
        return Err(format!(
            "the archive has {} entries, more than {}",
            archive.len(),
            limits.max_entries
        ));
    }
    if archive.has_duplicate_names() {
        return Err("the archive holds the same name twice".into());
    }
    let mut budget = Budget {
        limits,
        files: 0,
        total: 0,
        seen: BTreeSet::new(),
    };
    let mut files = Vec::new();
    for index in 0..archive.len() {
        let mut entry = archive
            .by_index(index)
            .map_err(|err| format!("entry {index} is unreadable: {err}"))?;
        let raw = entry
            .name()
            .map_err(|err| format!("entry {index} has no usable name: {err}"))?
            .into_owned();
        let Some(path) = checked_entry_path(&raw)? else {
            continue;
        };
        if entry.is_symlink() {
            return Err(format!("`{raw}` is a link; links are not installed"));
        }
        if entry.is_dir() {
            continue;
        }
        budget.admit(&path, entry.size())?;
        // The declared size can lie: read one byte past the limit to notice.
        let mut bytes = Vec::new();
        (&mut entry)
            .take(limits.max_file_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| format!("`{raw}` cannot be decompressed: {err}"))?;
        if bytes.len() as u64 > limits.max_file_bytes || bytes.len() as u64 != entry.size() {
            return Err(format!(
                "`{raw}` is larger than it says or than {} bytes",
                limits.max_file_bytes
            ));
        }
        files.push(IncomingFile {
            path,
            bytes,
            executable: entry.unix_mode().is_some_and(|mode| mode & 0o111 != 0),
        });
    }
    Ok(files)
}

/// The checked relative path of an archive entry, `None` for entries that
/// are skipped (hidden files, `__MACOSX`), an error for unsafe names.
fn checked_entry_path(raw: &str) -> Result<Option<String>, String> {
    if raw.contains('\\') || raw.contains('\0') {
        return Err(format!(
            "`{raw}` uses `\\` or NUL; only `/`-separated relative paths are accepted"
        ));
    }
    if raw.starts_with('/') || raw.get(1..2) == Some(":") {
        return Err(format!("`{raw}` is an absolute path"));
    }
    let mut parts = Vec::new();
    for component in Path::new(raw).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => return Err(format!("`{raw}` climbs out of the archive with `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(format!("`{raw}` is an absolute path")),
        }
    }
    if parts.is_empty() || parts.iter().any(|p| p.starts_with('.') || p == "__MACOSX") {
        return Ok(None);
    }
    Ok(Some(parts.join("/")))
}

/// Archives of a folder hold `name/SKILL.md`: strip that one folder.
fn strip_single_top_folder(files: Vec<IncomingFile>) -> Result<Vec<IncomingFile>, String> {
    if files.iter().any(|f| f.path == SKILL_FILE) {
        return Ok(files);
    }
    let tops: BTreeSet<&str> = files
        .iter()
        .map(|f| f.path.split('/').next().unwrap_or_default())
        .collect();
    let [top] = tops.into_iter().collect::<Vec<_>>()[..] else {
        return Err(format!("no {SKILL_FILE} at the top, and not one folder holding it"));
    };
    let prefix = format!("{top}/");
    Ok(files
        .into_iter()
        .map(|f| IncomingFile {
            path: f.path.strip_prefix(&prefix).unwrap_or(&f.path).to_owned(),
            ..f
        })
        .collect())
}

#[cfg(test)]
mod tests;
