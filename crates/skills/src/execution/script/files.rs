//! The files of the message a turn answers, handed to a script: written
//! into `files/` of its temporary folder under names made safe, and named
//! to it by `HERALD_FILES_DIR`.
//!
//! A file's name is whatever its sender typed, so it is never used as a
//! path: separators and control characters become `_`, leading dots go (no
//! `..`, no hidden files), and the length is bounded. Two files that end up
//! with one name are told apart by a number, so no file hides another. The
//! files are created anew in a folder Herald just made, and never follow a
//! link.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::SkillError;

/// The variable that names the folder of the message's files.
pub const FILES_DIR_VARIABLE: &str = "HERALD_FILES_DIR";

/// The longest file name written, in bytes (most file systems allow 255).
const MAX_NAME_BYTES: usize = 120;

/// A file of the message, with its bytes read from the file store.
#[derive(Clone, PartialEq, Eq)]
pub struct ScriptFile {
    /// The name its sender gave it.
    pub name: String,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for ScriptFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScriptFile({:?}, {} bytes)", self.name, self.bytes.len())
    }
}

/// `name` as one plain file name: no separators, no control characters,
/// no leading dot, at most [`MAX_NAME_BYTES`], never empty.
pub fn safe_name(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    let trimmed = replaced.trim().trim_start_matches('.').trim_end_matches('.').trim();
    let name = if trimmed.is_empty() { "file" } else { trimmed };
    bounded(name, MAX_NAME_BYTES)
}

/// `name` within `limit` bytes, keeping its extension when it has a short one.
fn bounded(name: &str, limit: usize) -> String {
    if name.len() <= limit {
        return name.to_owned();
    }
    let (_, extension) = split_extension(name);
    let mut stem_end = limit - extension.len();
    while !name.is_char_boundary(stem_end) {
        stem_end -= 1;
    }
    format!("{}{extension}", &name[..stem_end])
}

/// `name` as stem and extension (`.pdf`): an extension is a dot and one to
/// ten letters or digits, at the end, after a stem.
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot)
            if dot > 0
                && (2..=11).contains(&(name.len() - dot))
                && name[dot + 1..].chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            name.split_at(dot)
        }
        _ => (name, ""),
    }
}

/// Safe names for `names`, in order, no two alike: a repeated name becomes
/// `report-2.pdf`, `report-3.pdf`, …
pub fn unique_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut chosen = Vec::new();
    for name in names {
        let safe = safe_name(name);
        let mut candidate = safe.clone();
        let mut number = 2;
        while taken.contains(&candidate) {
            let (stem, extension) = split_extension(&safe);
            let suffix = format!("-{number}{extension}");
            candidate = format!("{}{suffix}", bounded(stem, MAX_NAME_BYTES - suffix.len()));
            number += 1;
        }
        taken.insert(candidate.clone());
        chosen.push(candidate);
    }
    chosen
}

/// Writes `files` into a new `folder` under their safe names; returns the
/// names written, in order. Blocking.
pub(super) fn write_files(folder: &Path, files: &[ScriptFile]) -> Result<Vec<String>, SkillError> {
    std::fs::create_dir(folder).map_err(|err| SkillError::io("creating", folder, err))?;
    let names = unique_names(files.iter().map(|file| file.name.as_str()));
    for (file, name) in files.iter().zip(&names) {
        let path: PathBuf = folder.join(name);
        // `create_new` refuses what is already there, a link included.
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|err| SkillError::io("creating", &path, err))?;
        out.write_all(&file.bytes)
            .map_err(|err| SkillError::io("writing", &path, err))?;
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_and_odd_names_become_plain_file_names() {
        let cases = [
            ("report.pdf", "report.pdf"),
            ("../../etc/x", "_.._etc_x"),
            ("/etc/passwd", "_etc_passwd"),
            ("..", "file"),
            (".", "file"),
            ("", "file"),
            ("   ", "file"),
            (".bashrc", "bashrc"),
            ("a\\b.txt", "a_b.txt"),
            ("line\nbreak\0.txt", "line_break_.txt"),
            ("résumé café.txt", "résumé café.txt"),
            ("trailing dots...", "trailing dots"),
        ];
        for (name, expected) in cases {
            assert_eq!(safe_name(name), expected, "{name:?}");
        }
    }

    #[test]
    fn a_long_name_is_cut_on_a_character_and_keeps_its_extension() {
        let long = format!("{}.pdf", "é".repeat(200));
        let safe = safe_name(&long);
        assert!(safe.len() <= MAX_NAME_BYTES, "{}", safe.len());
        assert!(safe.ends_with(".pdf"), "{safe}");
        assert!(safe.starts_with('é'));
    }

    #[test]
    fn names_that_end_up_alike_are_numbered() {
        let names = unique_names(["a.txt", "a.txt", "../a.txt", "b", "b", "a-2.txt"]);
        assert_eq!(names, ["a.txt", "a-2.txt", "_a.txt", "b", "b-2", "a-2-2.txt"]);
        let long = "x".repeat(300);
        let names = unique_names([long.as_str(), long.as_str()]);
        assert_ne!(names[0], names[1]);
        assert!(names.iter().all(|n| n.len() <= MAX_NAME_BYTES));
    }

    #[test]
    fn files_are_written_inside_the_folder_only() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("files");
        let files = [
            ScriptFile {
                name: "../../etc/x".into(),
                bytes: b"one".to_vec(),
            },
            ScriptFile {
                name: "../../etc/x".into(),
                bytes: b"two".to_vec(),
            },
        ];
        let names = write_files(&folder, &files).unwrap();
        assert_eq!(names, ["_.._etc_x", "_.._etc_x-2"]);
        assert_eq!(std::fs::read(folder.join("_.._etc_x")).unwrap(), b"one");
        assert_eq!(std::fs::read(folder.join("_.._etc_x-2")).unwrap(), b"two");
        let listed: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(listed, ["files"], "nothing was written beside files/");
    }
}
