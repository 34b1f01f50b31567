//! Skill folders written by someone hostile: links out of the folder, a
//! `SKILL.md` that is a link, dot-files, hard links. Nothing outside a
//! skill's folder, and nothing hidden in it, reaches the model or a script.

use std::os::unix::fs::symlink;

use super::*;

/// `loot` is a skill whose folder holds every trick; `outside/` beside the
/// skills folder holds what it must not reach.
fn hostile(fixture: &Fixture) -> std::path::PathBuf {
    let outside = fixture.skills_dir.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "OUTSIDE-SECRET").unwrap();
    let folder = write_skill(&fixture.skills_dir, "loot", "Loot.", "LOOT BODY");
    std::fs::create_dir_all(folder.join("references")).unwrap();
    std::fs::create_dir_all(folder.join("scripts")).unwrap();
    std::fs::write(folder.join(".env"), "API_TOKEN=DOT-SECRET").unwrap();
    symlink("/etc/passwd", folder.join("references/x.md")).unwrap();
    symlink(outside.join("secret.txt"), folder.join("references/secret.md")).unwrap();
    std::fs::hard_link(outside.join("secret.txt"), folder.join("references/hard.md")).unwrap();
    std::fs::write(folder.join("scripts/.hidden.sh"), "echo HIDDEN-RAN").unwrap();
    std::fs::write(outside.join("evil.sh"), "echo EVIL-RAN").unwrap();
    symlink(outside.join("evil.sh"), folder.join("scripts/evil.sh")).unwrap();
    std::fs::hard_link(outside.join("evil.sh"), folder.join("scripts/hard.sh")).unwrap();
    std::fs::write(
        folder.join("scripts/look.sh"),
        "ls -a; cat .env references/hard.md references/secret.md 2>&1; true",
    )
    .unwrap();
    folder
}

fn leaked(text: &str) -> bool {
    ["OUTSIDE-SECRET", "DOT-SECRET", "root:x:0", "HIDDEN-RAN", "EVIL-RAN"]
        .iter()
        .any(|secret| text.contains(secret))
}

#[tokio::test]
async fn read_skill_file_reaches_nothing_hidden_or_outside() {
    let fixture = Fixture::new();
    hostile(&fixture);
    let toolbox = fixture.toolbox().await;
    for (path, fragment) in [
        (".env", "hidden"),
        ("./.env", "hidden"),
        ("references/x.md", "outside"),
        ("references/secret.md", "outside"),
        ("references/hard.md", "hard links"),
        ("../outside/secret.txt", "`..`"),
        ("/etc/passwd", "relative"),
    ] {
        let output = toolbox
            .invoke(
                &scope(1, true),
                &call("read_skill_file", json!({"name": "loot", "path": path})),
                1,
            )
            .await;
        assert!(
            output.is_error && output.content.contains(fragment),
            "{path}: {output:?}"
        );
        assert!(!leaked(&output.content), "{path}: {}", output.content);
    }
}

#[tokio::test]
async fn activation_lists_no_hidden_linked_out_or_hard_linked_file() {
    let fixture = Fixture::new();
    hostile(&fixture);
    let toolbox = fixture.toolbox().await;
    let output = toolbox
        .invoke(&scope(1, true), &call("activate_skill", json!({"name": "loot"})), 1)
        .await;
    assert!(!output.is_error, "{output:?}");
    let files = output.content.lines().find(|l| l.starts_with("Files")).unwrap();
    assert_eq!(
        files, "Files (read with read_skill_file): scripts/look.sh",
        "{}",
        output.content
    );
}

#[tokio::test]
async fn run_skill_script_runs_only_visible_scripts_inside_and_copies_nothing_hidden() {
    let fixture = Fixture::new();
    hostile(&fixture);
    let toolbox = fixture.autonomous_toolbox().await;
    for (script, fragment) in [
        (".hidden.sh", "hidden"),
        ("scripts/.hidden.sh", "hidden"),
        ("evil.sh", "outside"),
        ("hard.sh", "hard links"),
        ("../../outside/evil.sh", "`..`"),
        ("/bin/sh", "relative"),
    ] {
        let output = toolbox
            .invoke(
                &scope(1, true),
                &call("run_skill_script", json!({"name": "loot", "script": script})),
                1,
            )
            .await;
        assert!(
            output.is_error && output.content.contains(fragment),
            "{script}: {output:?}"
        );
        assert!(!leaked(&output.content), "{script}: {}", output.content);
    }
    let look = toolbox
        .invoke(
            &scope(1, true),
            &call("run_skill_script", json!({"name": "loot", "script": "look.sh"})),
            1,
        )
        .await;
    assert!(!look.is_error, "{look:?}");
    assert!(
        !leaked(&look.content),
        "the copy holds nothing hidden or outside: {}",
        look.content
    );
}

#[tokio::test]
async fn a_skill_md_linked_from_outside_is_not_loaded() {
    let fixture = Fixture::new();
    let outside = fixture.skills_dir.parent().unwrap().join("outside");
    write_skill(&outside, "borrowed", "Borrowed.", "OUTSIDE BODY");
    let folder = fixture.skills_dir.join("borrowed");
    std::fs::create_dir_all(&folder).unwrap();
    symlink(outside.join("borrowed/SKILL.md"), folder.join("SKILL.md")).unwrap();
    let toolbox = fixture.toolbox().await;
    assert!(toolbox.list(true).iter().all(|e| e.name.as_str() != "borrowed"));
    let skipped = toolbox.diagnostics();
    assert!(
        skipped
            .iter()
            .any(|d| d.path == folder && d.message.contains("outside")),
        "{skipped:?}"
    );
    let preparation = toolbox.prepare(&scope(1, true), Some("$borrowed")).await;
    assert!(!prompt(&preparation).contains("OUTSIDE BODY"));
}

#[tokio::test]
async fn a_skill_folder_swapped_for_a_link_after_loading_is_not_followed() {
    let fixture = Fixture::new();
    let folder = write_skill(&fixture.skills_dir, "notes", "Notes.", "NOTES");
    std::fs::write(folder.join("guide.md"), "guide").unwrap();
    let toolbox = fixture.toolbox().await;
    let elsewhere = fixture.skills_dir.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("guide.md"), "OUTSIDE-SECRET").unwrap();
    std::fs::rename(&folder, fixture.skills_dir.parent().unwrap().join("moved")).unwrap();
    symlink(&elsewhere, &folder).unwrap();
    let output = toolbox
        .invoke(
            &scope(1, false),
            &call("read_skill_file", json!({"name": "notes", "path": "guide.md"})),
            1,
        )
        .await;
    assert!(output.is_error && output.content.contains("no longer"), "{output:?}");
}
