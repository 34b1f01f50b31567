//! The `/skills` commands, switches, reloads and installs.

use super::*;

#[tokio::test]
async fn switches_are_admin_commands_and_survive_a_restart() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let refused = toolbox.prepare(&scope(1, false), Some("/skills disable notes")).await;
    assert_eq!(refused.direct_reply.as_deref(), Some("Only an admin can do that."));
    let done = toolbox.prepare(&scope(1, true), Some("/skills disable notes")).await;
    assert_eq!(done.direct_reply.as_deref(), Some("Skill `notes` is disabled."));
    assert!(!activate_enum(&toolbox.prepare(&scope(2, false), None).await).contains(&"notes".to_owned()));

    let restarted = fixture.toolbox().await;
    let listing = restarted
        .prepare(&scope(3, false), Some("/skills"))
        .await
        .direct_reply
        .unwrap();
    assert!(listing.contains("- notes [disabled]: Keep short notes."), "{listing}");
    assert!(
        !listing.contains("ops"),
        "non-admins do not see elevated skills: {listing}"
    );
    let enabled = restarted.prepare(&scope(3, true), Some("/skills enable notes")).await;
    assert_eq!(enabled.direct_reply.as_deref(), Some("Skill `notes` is enabled."));
    let unknown = restarted.prepare(&scope(3, true), Some("/skills enable nope")).await;
    assert_eq!(unknown.direct_reply.as_deref(), Some("No skill named `nope`."));
    let info = restarted
        .prepare(&scope(3, true), Some("/skills info notes"))
        .await
        .direct_reply
        .unwrap();
    assert!(info.contains("State: enabled") && info.contains("Revision: "), "{info}");
}

#[tokio::test]
async fn reload_and_the_timed_rescan_pick_up_changes() {
    let fixture = Fixture::new().with_example_skills();
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let toolbox = SkillToolbox::builder(
        SkillsConfig {
            rescan_every: Duration::from_secs(5),
            ..fixture.config()
        },
        Arc::clone(&fixture.store) as Arc<dyn ConversationStore>,
        10_000,
    )
    .clock(Arc::clone(&clock) as Arc<dyn herald_core::Clock>)
    .build()
    .await
    .unwrap();
    write_skill(&fixture.skills_dir, "pdf", "PDF files.", "PDF BODY");
    let reply = toolbox
        .prepare(&scope(1, true), Some("/skills reload"))
        .await
        .direct_reply
        .unwrap();
    assert_eq!(
        reply,
        "Skills reloaded: 1 added (pdf), 0 changed, 0 removed; 3 unchanged."
    );

    std::fs::remove_dir_all(fixture.skills_dir.join("pdf")).unwrap();
    assert!(
        prompt(&toolbox.prepare(&scope(2, true), None).await).contains("- pdf:"),
        "not due yet"
    );
    clock.advance(Duration::from_secs(6));
    assert!(!prompt(&toolbox.prepare(&scope(3, true), None).await).contains("- pdf:"));
}

#[tokio::test]
async fn an_installed_skill_starts_disabled() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    let (_source_dir, source) = jokes_source();
    let installed = toolbox.install(&source).await.unwrap();
    assert_eq!(installed.folder, fixture.skills_dir.join("jokes"));
    let entry = toolbox
        .list(true)
        .into_iter()
        .find(|e| e.name.as_str() == "jokes")
        .unwrap();
    assert_eq!(entry.state(), "disabled");
    assert!(toolbox.prepare(&scope(1, true), None).await.sections.is_empty());
    toolbox.set_enabled("jokes", true).await.unwrap();
    assert!(prompt(&toolbox.prepare(&scope(1, true), None).await).contains("- jokes: Tells jokes."));
}

/// The store refuses to record the new skill as disabled: nothing is
/// installed, so nothing can come up enabled on the next scan.
#[tokio::test]
async fn an_install_whose_switch_cannot_be_written_leaves_nothing_behind() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    let (_source_dir, source) = jokes_source();
    *fixture.store.fail_writes.lock().unwrap() = true;
    let err = toolbox.install(&source).await.unwrap_err();
    assert!(err.to_string().contains("refuses writes"), "{err}");
    *fixture.store.fail_writes.lock().unwrap() = false;
    assert!(
        !fixture.skills_dir.join("jokes").exists(),
        "the skill was moved into place"
    );
    assert_eq!(leftovers(&fixture), Vec::<String>::new());
    toolbox.reload().await.unwrap();
    assert!(toolbox.list(true).iter().all(|e| e.name.as_str() != "jokes"));
}

/// Moving into place fails after the switch was recorded (a folder of the
/// same name appears in between): the switch is put back as it was, the
/// staged files are removed, and the other folder is left alone.
#[tokio::test]
async fn an_install_that_cannot_move_into_place_rolls_back_its_switch() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    let (_source_dir, source) = jokes_source();
    let target = fixture.skills_dir.join("jokes");
    let racing = target.clone();
    *fixture.store.before_put.lock().unwrap() = Some(Box::new(move |scope, key| {
        if scope == "skill_switches" && key == "jokes" {
            std::fs::create_dir_all(&racing).unwrap();
            std::fs::write(racing.join("NOTES.txt"), "someone else's").unwrap();
        }
    }));
    let err = toolbox.install(&source).await.unwrap_err();
    *fixture.store.before_put.lock().unwrap() = None;
    assert!(err.to_string().contains("jokes"), "{err}");
    assert_eq!(
        fixture.store.get_state("skill_switches", "jokes").await.unwrap(),
        None,
        "the disabled switch of a skill that was not installed is removed"
    );
    assert_eq!(
        std::fs::read_to_string(target.join("NOTES.txt")).unwrap(),
        "someone else's"
    );
    assert!(!target.join("SKILL.md").exists());
    assert_eq!(leftovers(&fixture), Vec::<String>::new());
}

/// Hidden staging folders left in the install folder.
fn leftovers(fixture: &Fixture) -> Vec<String> {
    std::fs::read_dir(&fixture.skills_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect()
}
