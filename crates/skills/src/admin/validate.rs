//! `herald skills validate`: strict checks of skill folders before they are
//! installed or shipped.

use std::path::{Path, PathBuf};

use crate::catalog::{Mode, SKILL_FILE, check_document};

/// One path of `herald skills validate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    pub path: PathBuf,
    pub name: Option<String>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl Validation {
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// `herald skills validate PATH…`: strict checks of skill folders, `SKILL.md`
/// files, or folders of skill folders.
pub fn validate_paths(paths: &[PathBuf]) -> Vec<Validation> {
    let mut results = Vec::new();
    for path in paths {
        let folders = if path.is_file() {
            vec![path.parent().map(Path::to_path_buf).unwrap_or_default()]
        } else if path.join(SKILL_FILE).is_file() {
            vec![path.clone()]
        } else {
            let mut children: Vec<PathBuf> = std::fs::read_dir(path)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.join(SKILL_FILE).is_file())
                        .collect()
                })
                .unwrap_or_default();
            children.sort();
            if children.is_empty() {
                results.push(Validation {
                    path: path.clone(),
                    name: None,
                    errors: vec![format!("no {SKILL_FILE} here or in the folders below")],
                    warnings: Vec::new(),
                });
            }
            children
        };
        results.extend(folders.into_iter().map(|folder| validate_folder(&folder)));
    }
    results
}

fn validate_folder(folder: &Path) -> Validation {
    let folder_name = folder
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let text = match std::fs::read_to_string(folder.join(SKILL_FILE)) {
        Ok(text) => text,
        Err(err) => {
            return Validation {
                path: folder.to_path_buf(),
                name: None,
                errors: vec![format!("cannot read {SKILL_FILE}: {err}")],
                warnings: Vec::new(),
            };
        }
    };
    let checked = check_document(&folder_name, &text);
    Validation {
        path: folder.to_path_buf(),
        name: checked.document.as_ref().map(|d| d.name.to_string()),
        errors: checked.errors(Mode::Strict).map(|f| f.message.clone()).collect(),
        warnings: checked.warnings(Mode::Strict).map(|f| f.message.clone()).collect(),
    }
}

/// `herald skills validate` output; the caller exits non-zero when any failed.
pub fn format_validation(results: &[Validation]) -> String {
    let mut out = String::new();
    for result in results {
        let label = result.name.clone().unwrap_or_else(|| result.path.display().to_string());
        out.push_str(&format!(
            "{} {label} ({})\n",
            if result.is_ok() { "ok  " } else { "FAIL" },
            result.path.display()
        ));
        for error in &result.errors {
            out.push_str(&format!("  error: {error}\n"));
        }
        for warning in &result.warnings {
            out.push_str(&format!("  warning: {warning}\n"));
        }
    }
    out
}
