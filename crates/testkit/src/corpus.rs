//! Model answers in Markdown (`corpus/answers/*.md`, sources in
//! `corpus/README.md`): what the rendering tests and benchmarks send
//! through Herald, and the seed of the Markdown fuzz target.

use std::path::PathBuf;

/// The folder of the answers.
pub fn answers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/answers")
}

/// Every answer, by file name, in name order.
pub fn answers() -> Vec<(String, String)> {
    let mut answers: Vec<(String, String)> = std::fs::read_dir(answers_dir())
        .expect("the corpus folder")
        .map(|entry| {
            let path = entry.expect("a corpus entry").path();
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("a corpus answer is UTF-8");
            (name, text)
        })
        .filter(|(name, _)| name.ends_with(".md"))
        .collect();
    answers.sort();
    answers
}
