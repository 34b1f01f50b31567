//! The files a script leaves for the conversation: `out/` in its temporary
//! folder (`HERALD_OUT_DIR`), read once the script and every process it
//! started are gone.
//!
//! Only plain files at the top of `out/` count: links, folders, devices and
//! dot-files are passed over, so a script cannot hand Herald a file of the
//! host by linking to it. At most [`MAX_OUTPUT_FILES`] files of at most
//! [`MAX_OUTPUT_FILE_BYTES`] each and [`MAX_OUTPUT_TOTAL_BYTES`] together
//! are kept; what is passed over is named, so the model knows.

use std::io::Read;
use std::path::{Path, PathBuf};

use herald_core::human_size;

use crate::error::SkillError;

/// Files kept from one run.
pub const MAX_OUTPUT_FILES: usize = 10;
/// One file: Telegram's limit for bots, the largest of the chat platforms.
pub const MAX_OUTPUT_FILE_BYTES: u64 = 50 * 1024 * 1024;
/// All files of one run.
pub const MAX_OUTPUT_TOTAL_BYTES: u64 = 100 * 1024 * 1024;
/// Names longer than this are passed over.
const MAX_NAME_BYTES: usize = 200;

/// A file a script left in `out/`.
#[derive(Clone, PartialEq, Eq)]
pub struct ScriptFile {
    pub name: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for ScriptFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ScriptFile({}, {}, {} bytes)",
            self.name,
            self.content_type,
            self.bytes.len()
        )
    }
}

/// What `out/` held after the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScriptFiles {
    pub kept: Vec<ScriptFile>,
    /// What was passed over, and why: `big.bin (over 50 MB)`.
    pub passed_over: Vec<String>,
}

/// Creates `out/` in the sandbox. Blocking.
pub(super) fn create(sandbox: &Path) -> Result<PathBuf, SkillError> {
    let out = sandbox.join("out");
    std::fs::create_dir(&out).map_err(|err| SkillError::io("creating", &out, err))?;
    Ok(out)
}

/// Reads the files the script left in `out`. Blocking; call only when
/// every process of the script has ended.
pub(super) fn collect(out: &Path) -> ScriptFiles {
    let mut files = ScriptFiles::default();
    let Ok(entries) = std::fs::read_dir(out) else {
        // The script removed its own out/ folder: it left nothing.
        return files;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    let mut total = 0u64;
    for entry in entries {
        let raw_name = entry.file_name();
        let Some(name) = raw_name.to_str().map(str::to_owned) else {
            files
                .passed_over
                .push(format!("{} (not a UTF-8 name)", raw_name.to_string_lossy()));
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !metadata.file_type().is_file() {
            files.passed_over.push(format!("{name} (not a plain file)"));
            continue;
        }
        if name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
            files
                .passed_over
                .push(format!("{} (not a usable name)", name.escape_debug()));
            continue;
        }
        if files.kept.len() == MAX_OUTPUT_FILES {
            files
                .passed_over
                .push(format!("{name} (more than {MAX_OUTPUT_FILES} files)"));
            continue;
        }
        if metadata.len() > MAX_OUTPUT_FILE_BYTES {
            files
                .passed_over
                .push(format!("{name} (over {})", human_size(MAX_OUTPUT_FILE_BYTES)));
            continue;
        }
        if total + metadata.len() > MAX_OUTPUT_TOTAL_BYTES {
            files.passed_over.push(format!(
                "{name} (the files together are over {})",
                human_size(MAX_OUTPUT_TOTAL_BYTES)
            ));
            continue;
        }
        match read_plain_file(&entry.path()) {
            Ok(bytes) => {
                total += bytes.len() as u64;
                files.kept.push(ScriptFile {
                    content_type: content_type_of(&name).to_owned(),
                    name,
                    bytes,
                });
            }
            Err(err) => files.passed_over.push(format!("{name} (could not be read: {err})")),
        }
    }
    files
}

/// Reads a file without following a link, at most the per-file cap.
fn read_plain_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other("not a plain file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_OUTPUT_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_OUTPUT_FILE_BYTES {
        return Err(std::io::Error::other("it grew over the cap"));
    }
    Ok(bytes)
}

/// The type a file is sent as, by its extension.
pub fn content_type_of(name: &str) -> &'static str {
    let extension = name
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" => "audio/ogg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_visible_files_within_the_caps_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let out = create(dir.path()).unwrap();
        std::fs::write(out.join("report.csv"), "a,b\n1,2\n").unwrap();
        std::fs::write(out.join(".hidden"), "secret").unwrap();
        std::fs::write(dir.path().join("outside.txt"), "host file").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), out.join("link.txt")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", out.join("passwd")).unwrap();
        std::fs::create_dir(out.join("folder")).unwrap();
        let big = std::fs::File::create(out.join("big.bin")).unwrap();
        big.set_len(MAX_OUTPUT_FILE_BYTES + 1).unwrap();
        let files = collect(&out);
        assert_eq!(files.kept.len(), 1, "{files:?}");
        assert_eq!(files.kept[0].name, "report.csv");
        assert_eq!(files.kept[0].content_type, "text/csv");
        assert_eq!(files.kept[0].bytes, b"a,b\n1,2\n");
        assert_eq!(
            files.passed_over,
            [
                "big.bin (over 50 MB)",
                "folder (not a plain file)",
                "link.txt (not a plain file)",
                "passwd (not a plain file)"
            ]
        );
    }

    #[test]
    fn at_most_ten_files_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let out = create(dir.path()).unwrap();
        for n in 0..12 {
            std::fs::write(out.join(format!("f{n:02}.txt")), "x").unwrap();
        }
        let files = collect(&out);
        assert_eq!(files.kept.len(), MAX_OUTPUT_FILES);
        assert_eq!(
            files.passed_over,
            ["f10.txt (more than 10 files)", "f11.txt (more than 10 files)"]
        );
    }
}
