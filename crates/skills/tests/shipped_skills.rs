//! The example skills in the repository's `skills/` folder pass strict
//! validation, load, and their scripts do what their instructions promise.

use std::path::PathBuf;
use std::time::Duration;

use herald_skills::{
    FixedEnvironment, ScanLimits, ScriptContainment, ScriptRequest, discover, format_validation, run_skill_script,
    validate_paths,
};

fn shipped() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../skills")
}

#[test]
fn every_shipped_skill_passes_strict_validation() {
    let results = validate_paths(&[shipped()]);
    assert!(results.len() >= 3, "{results:?}");
    assert!(
        results.iter().all(|r| r.is_ok() && r.warnings.is_empty()),
        "{}",
        format_validation(&results)
    );
}

#[test]
fn shipped_skills_load_and_declare_their_needs() {
    let limits = ScanLimits {
        max_depth: 2,
        max_skills: 50,
    };
    let discovery = discover(&[shipped()], limits, &FixedEnvironment::default(), None);
    assert!(discovery.diagnostics.is_empty(), "{:?}", discovery.diagnostics);
    let csv = &discovery.skills["csv-summary"];
    assert_eq!(csv.files, vec!["references/csv-dialects.md", "scripts/summarise.sh"]);
    assert_eq!(csv.availability.describe(), "needs awk");
    assert!(
        discovery.skills["weather"]
            .trigger
            .as_ref()
            .unwrap()
            .is_match("What's the weather in Oslo?")
    );
    assert!(discovery.skills["meeting-notes"].availability.is_available());
}

#[tokio::test]
async fn the_csv_summary_script_summarises_stdin() {
    let folder = shipped().join("csv-summary").canonicalize().unwrap();
    let receipt = run_skill_script(ScriptRequest {
        folder: &folder,
        script: "summarise.sh",
        args: &[],
        stdin: Some("city,population,area\nOslo,709037,454\nBergen,291940,465\n\"Tromsø\",,2521\n"),
        timeout: Duration::from_secs(20),
        script_user: None,
        containment: ScriptContainment::Auto,
        files: &[],
    })
    .await
    .unwrap();
    assert!(receipt.succeeded(), "{receipt:?}");
    assert_eq!(
        receipt.output,
        "rows: 3\ncolumns: 3\n- city: text\n- population: numeric, min 291940, max 709037, mean 500488.50, 1 empty\n\
         - area: numeric, min 454, max 2521, mean 1146.67\n"
    );
}
