//! The workspace's layering rule, checked: a library crate depends on
//! `herald-core` (and, for HTTP and TLS, `herald-net`) and on no other sibling; only
//! the binaries (`herald`, `herald-bench`) wire them all.
//! (Dev-dependencies are free: tests may use the real store and the testkit.)

use std::path::Path;

/// Our crates each library crate may depend on (normal dependencies only).
const ALLOWED: &[(&str, &[&str])] = &[
    ("core", &[]),
    // How Herald speaks HTTP and TLS: infrastructure beside core, depending
    // on no crate of ours, so every adapter serves the public the same
    // bounded way and every client trusts the same roots.
    ("net", &[]),
    ("store", &["herald-core"]),
    ("llm", &["herald-core", "herald-net"]),
    ("agent", &["herald-core"]),
    ("skills", &["herald-core"]),
    ("channels", &["herald-core", "herald-net"]),
    ("testkit", &["herald-core"]),
    // The scheduling skills are core skills: they implement the skill
    // registry's `CoreSkill` (as memory's will), so scheduling sits on top
    // of the registry, never the other way round.
    ("schedule", &["herald-core", "herald-skills"]),
    ("mcp", &["herald-core", "herald-net"]),
];

/// Names of `herald-*` crates listed under `[dependencies]` of a manifest.
fn herald_dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies =
                line == "[dependencies]" || line.starts_with("[target.") && line.ends_with(".dependencies]");
            continue;
        }
        if in_dependencies
            && let Some(name) = line.split(['=', '.', ' ']).next()
            && name.starts_with("herald")
        {
            found.push(name.to_owned());
        }
    }
    found
}

#[test]
fn library_crates_depend_only_on_core() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("crates folder");
    let mut checked = 0;
    for entry in std::fs::read_dir(crates).expect("read crates/") {
        let folder = entry.expect("entry").path();
        let name = folder
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        // The binaries wire everything: `herald`, and `herald-bench`, which
        // measures the same composition.
        if name == "herald" || name == "bench" || !folder.join("Cargo.toml").exists() {
            continue;
        }
        let allowed = ALLOWED
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .unwrap_or_else(|| {
                panic!("crates/{name} is new: add it to ALLOWED in this test with its permitted dependencies")
            })
            .1;
        let manifest = std::fs::read_to_string(folder.join("Cargo.toml")).expect("read manifest");
        for dependency in herald_dependencies(&manifest) {
            assert!(
                allowed.contains(&dependency.as_str()),
                "crates/{name} depends on {dependency}; library crates may depend on {allowed:?} only"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, ALLOWED.len(), "every library crate was checked");
}

#[test]
fn the_manifest_reader_sees_dependencies_and_not_dev_dependencies() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nherald-core.workspace = true\nherald-store = { path = \"../store\" }\nserde = \"1\"\n\n[dev-dependencies]\nherald-testkit.workspace = true\n";
    assert_eq!(herald_dependencies(manifest), ["herald-core", "herald-store"]);
}
