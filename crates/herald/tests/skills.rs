//! Skills end to end: the real binary, a skill folder on disk, the scripted
//! model. What the model is shown is read from the requests it received.

mod common;

use common::{Herald, reply_texts, stderr};
use herald_testkit::Reply;
use herald_testkit::openai::{system_prompt, tool_names, tool_results};
use serde_json::json;

const BODY_MARKER: &str = "HAIKU-RULE-7f3a";

/// A config whose only skill folder holds `haiku` (plain) and `stamp`
/// (elevated, with a script that would leave a file behind).
fn skilled_herald(model: herald_testkit::ScriptedModel) -> (Herald, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    std::fs::create_dir_all(skills.join("haiku")).unwrap();
    std::fs::write(
        skills.join("haiku/SKILL.md"),
        format!(
            "---\nname: haiku\ndescription: Answer in a haiku. Use when someone asks for a poem.\n---\n\n# Haiku\n\n{BODY_MARKER}: three lines, five-seven-five.\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(skills.join("stamp/scripts")).unwrap();
    std::fs::write(
        skills.join("stamp/SKILL.md"),
        "---\nname: stamp\ndescription: Leave a stamp file on the host.\nmetadata:\n  elevated: \"true\"\n---\n\nRun scripts/stamp.sh.\n",
    )
    .unwrap();
    // Scripts run as `nobody` when the tests run as root: the stamp goes
    // where that user may write.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::create_dir_all(dir.path().join("stamps")).unwrap();
    std::fs::set_permissions(dir.path().join("stamps"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let stamp = dir.path().join("stamps/stamped");
    std::fs::write(
        skills.join("stamp/scripts/stamp.sh"),
        format!("#!/bin/sh\ntouch {}\n", stamp.display()),
    )
    .unwrap();
    let herald = Herald::with_model(
        model,
        &format!("skills:\n  dirs: [{}]\n  autonomy: full\n", skills.display()),
    );
    // Keep the skill folder alive as long as the test.
    std::mem::forget(dir);
    (herald, stamp)
}

#[tokio::test]
async fn a_skill_body_reaches_the_model_only_after_activation() {
    let (herald, _stamp) = skilled_herald(herald_testkit::ScriptedModel::start().await);
    let output = herald
        .chat("owner", "hello\nwrite me a poem about $haiku please\nand another\n")
        .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(reply_texts(&output).len(), 3);

    let requests = herald.model.requests();
    let first = system_prompt(&requests[0]).unwrap_or_default();
    assert!(
        first.contains("haiku") && first.contains("Answer in a haiku"),
        "the catalog lists the skill: {first}"
    );
    assert!(
        !first.contains(BODY_MARKER),
        "the body is not in the prompt before activation"
    );
    assert!(tool_names(&requests[0]).contains(&"activate_skill".to_owned()));

    let second = system_prompt(&requests[1]).unwrap_or_default();
    assert!(
        second.contains(BODY_MARKER),
        "after $haiku the body is in the prompt: {second}"
    );
    // Activation is per conversation and lasts.
    assert!(system_prompt(&requests[2]).unwrap_or_default().contains(BODY_MARKER));
}

#[tokio::test]
async fn the_model_can_activate_a_skill_and_gets_its_instructions() {
    let (herald, _stamp) = skilled_herald(herald_testkit::ScriptedModel::start().await);
    herald
        .model
        .push(Reply::tool_call("activate_skill", json!({"name": "haiku"})));
    herald.model.push(Reply::text("Autumn wind at dusk"));
    let output = herald.chat("owner", "a poem, please\n").await;
    assert_eq!(reply_texts(&output), ["Autumn wind at dusk"], "{}", stderr(&output));
    let requests = herald.model.requests();
    let results = tool_results(&requests[1]);
    assert!(
        results[0].1.contains(BODY_MARKER),
        "activate_skill returned the instructions: {results:?}"
    );
}

#[tokio::test]
async fn a_non_admin_cannot_see_or_run_an_elevated_skill() {
    let (herald, stamp) = skilled_herald(herald_testkit::ScriptedModel::start().await);
    // An injected or hallucinated call to the elevated script runner.
    herald.model.push(Reply::tool_call(
        "run_skill_script",
        json!({"name": "stamp", "script": "stamp.sh"}),
    ));
    herald.model.push(Reply::text("done"));
    let output = herald.chat("mallory", "stamp it\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = herald.model.requests();
    assert!(
        !tool_names(&requests[0]).contains(&"run_skill_script".to_owned()),
        "not offered to a non-admin"
    );
    assert!(
        !system_prompt(&requests[0]).unwrap_or_default().contains("stamp"),
        "not in a non-admin's catalog"
    );
    let results = tool_results(&requests[1]);
    assert!(results[0].1.starts_with("error:"), "the call was refused: {results:?}");
    assert!(!stamp.exists(), "the script did not run");

    // The same call in an admin's turn runs (autonomy is full in this config).
    herald.model.push(Reply::tool_call(
        "run_skill_script",
        json!({"name": "stamp", "script": "stamp.sh"}),
    ));
    herald.model.push(Reply::text("stamped"));
    let output = herald.chat("owner", "stamp it\n").await;
    assert_eq!(reply_texts(&output), ["stamped"], "{}", stderr(&output));
    assert!(stamp.exists(), "an admin's call ran the script");
}

#[tokio::test]
async fn skills_cli_lists_and_switches_skills_and_the_switch_persists() {
    let (herald, _stamp) = skilled_herald(herald_testkit::ScriptedModel::start().await);
    let list = herald.command(&["skills", "list"]).output().await.unwrap();
    let listing = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.status.success() && listing.contains("haiku"),
        "{listing}{}",
        stderr(&list)
    );

    let disable = herald.command(&["skills", "disable", "haiku"]).output().await.unwrap();
    assert!(disable.status.success(), "{}", stderr(&disable));
    let output = herald.chat("owner", "hello\n").await;
    assert!(output.status.success());
    let prompt = system_prompt(&herald.model.requests()[0]).unwrap_or_default();
    assert!(
        !prompt.contains("Answer in a haiku"),
        "a disabled skill is not offered: {prompt}"
    );

    let unknown = herald
        .command(&["skills", "enable", "no-such-skill"])
        .output()
        .await
        .unwrap();
    assert!(!unknown.status.success());
}

#[tokio::test]
async fn skills_validate_is_strict_and_exits_non_zero_on_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("Bad_Name");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("SKILL.md"), "---\nname: Bad_Name\ndescription: x\n---\nbody\n").unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["skills", "validate"])
        .arg(&bad)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../skills");
    let mut paths: Vec<_> = std::fs::read_dir(&shipped)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    paths.sort();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["skills", "validate"])
        .args(&paths)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "the bundled skills validate: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}
