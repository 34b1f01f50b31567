//! Reading a skill's bundled files for the model, a page at a time.
//!
//! The path the model gives is untrusted: [`crate::catalog::resolve_inside`]
//! decides whether it names a file the model may see. Files over 256 KiB are
//! refused rather than paged through.

use std::path::Path;

use crate::catalog::resolve_inside;
use crate::error::SkillError;

pub const MAX_READ_FILE_BYTES: u64 = 256 * 1024;
pub const DEFAULT_PAGE_CHARS: usize = 20_000;
pub const MAX_PAGE_CHARS: usize = 50_000;

/// One page of a text file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePage {
    pub path: String,
    pub text: String,
    /// Character offsets of this page.
    pub offset: usize,
    pub end: usize,
    pub total_chars: usize,
}

impl FilePage {
    /// The page as the model sees it, with a note on how to read on.
    pub fn render(&self) -> String {
        if self.offset == 0 && self.end == self.total_chars {
            return self.text.clone();
        }
        let mut out = self.text.clone();
        if self.end < self.total_chars {
            out.push_str(&format!(
                "\n[characters {}–{} of {}; read on with offset={}]",
                self.offset, self.end, self.total_chars, self.end
            ));
        } else {
            out.push_str(&format!(
                "\n[characters {}–{} of {}; end of file]",
                self.offset, self.end, self.total_chars
            ));
        }
        out
    }
}

/// Reads characters `offset..offset+max_chars` of `relative` in `folder`.
pub fn read_skill_file(
    folder: &Path,
    relative: &str,
    offset: usize,
    max_chars: Option<usize>,
) -> Result<FilePage, SkillError> {
    let path = resolve_inside(folder, relative)?;
    let metadata = std::fs::metadata(&path).map_err(|err| SkillError::io("reading", &path, err))?;
    if !metadata.is_file() {
        return Err(SkillError::refused(format!("`{relative}` is not a file")));
    }
    if metadata.len() > MAX_READ_FILE_BYTES {
        return Err(SkillError::refused(format!(
            "`{relative}` has {} bytes; files over {} KiB are not read",
            metadata.len(),
            MAX_READ_FILE_BYTES / 1024
        )));
    }
    let bytes = std::fs::read(&path).map_err(|err| SkillError::io("reading", &path, err))?;
    let text = String::from_utf8(bytes).map_err(|_| SkillError::refused(format!("`{relative}` is not UTF-8 text")))?;
    let total_chars = text.chars().count();
    let page = max_chars.unwrap_or(DEFAULT_PAGE_CHARS).clamp(1, MAX_PAGE_CHARS);
    let offset = offset.min(total_chars);
    let page_text: String = text.chars().skip(offset).take(page).collect();
    let end = offset + page_text.chars().count();
    Ok(FilePage {
        path: relative.to_owned(),
        text: page_text,
        offset,
        end,
        total_chars,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn folder() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().canonicalize().unwrap().join("skill");
        std::fs::create_dir_all(folder.join("references")).unwrap();
        std::fs::write(folder.join("references/guide.md"), "0123456789").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), folder.join("link-out")).unwrap();
        std::os::unix::fs::symlink(folder.join("references/guide.md"), folder.join("link-in")).unwrap();
        std::fs::write(folder.join("big.txt"), "x".repeat(MAX_READ_FILE_BYTES as usize + 1)).unwrap();
        std::fs::write(folder.join("binary.bin"), [0xff, 0x00, 0xfe]).unwrap();
        (dir, folder)
    }

    #[test]
    fn paths_that_could_leave_the_folder_are_refused() {
        let (_dir, folder) = folder();
        for (path, outcome) in [
            ("references/guide.md", "ok"),
            ("./references/guide.md", "ok"),
            ("link-in", "ok"),
            ("../secret.txt", "`..`"),
            ("references/../../secret.txt", "`..`"),
            ("/etc/passwd", "relative"),
            ("link-out", "outside"),
            ("references\\guide.md", "`/` separated"),
            ("", "empty"),
            ("missing.md", "no file `missing.md`"),
            ("big.txt", "over 256 KiB"),
            ("binary.bin", "not UTF-8"),
            ("references", "not a file"),
        ] {
            let result = read_skill_file(&folder, path, 0, None);
            match outcome {
                "ok" => assert_eq!(result.unwrap().text, "0123456789", "{path}"),
                fragment => {
                    let err = result.unwrap_err().to_string();
                    assert!(err.contains(fragment), "{path}: {err}");
                }
            }
        }
    }

    #[test]
    fn pages_cover_the_file_and_say_how_to_go_on() {
        let (_dir, folder) = folder();
        for (offset, max, text, rendered_note) in [
            (0, Some(4), "0123", Some("read on with offset=4")),
            (4, Some(4), "4567", Some("read on with offset=8")),
            (8, Some(4), "89", Some("end of file")),
            (20, Some(4), "", Some("end of file")),
            (0, None, "0123456789", None),
        ] {
            let page = read_skill_file(&folder, "references/guide.md", offset, max).unwrap();
            assert_eq!(page.text, text, "{offset}");
            assert_eq!(page.total_chars, 10);
            match rendered_note {
                Some(note) => assert!(page.render().contains(note), "{}", page.render()),
                None => assert_eq!(page.render(), text),
            }
        }
    }
}
