//! What a turn offers: the catalog, active bodies, mentions, caps and the
//! tools for this sender.

use super::*;

#[tokio::test]
async fn without_skills_there_is_no_catalog_and_no_activation_tool() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    let preparation = toolbox.prepare(&scope(1, true), Some("hello")).await;
    assert!(preparation.sections.is_empty(), "{:?}", preparation.sections);
    assert_eq!(tool_names(&preparation), vec!["charge_card", "reboot", "send_message"]);
    let others = toolbox.prepare(&scope(1, false), Some("hello")).await;
    assert_eq!(tool_names(&others), vec!["charge_card", "send_message"]);
}

#[tokio::test]
async fn the_catalog_and_tools_are_filtered_for_the_sender() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let admin = toolbox.prepare(&scope(1, true), Some("hi")).await;
    assert!(prompt(&admin).contains("- ops: Server chores."));
    assert_eq!(activate_enum(&admin), vec!["notes", "ops", "weather"]);
    assert!(tool_names(&admin).contains(&"run_skill_script"));
    assert_eq!(admin.sections[0].label, "skill catalog: 3 listed, 0 left out");

    let user = toolbox.prepare(&scope(1, false), Some("hi")).await;
    assert!(prompt(&user).contains("- notes: Keep short notes."));
    assert!(!prompt(&user).contains("ops"), "{}", prompt(&user));
    assert_eq!(activate_enum(&user), vec!["notes", "weather"]);
    assert_eq!(
        tool_names(&user),
        vec!["activate_skill", "charge_card", "read_skill_file", "send_message"]
    );
    let send = user.tools.iter().find(|t| t.name == "send_message").unwrap();
    assert!(send.parameters["properties"].get("conversation").is_none());
}

#[tokio::test]
async fn a_body_reaches_the_prompt_only_after_activation_and_stays() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let before = toolbox.prepare(&scope(1, false), Some("take a note")).await;
    assert!(!prompt(&before).contains("NOTES BODY"));

    let output = toolbox
        .invoke(&scope(1, false), &call("activate_skill", json!({"name": "notes"})), 1)
        .await;
    assert!(!output.is_error, "{output:?}");
    assert!(output.content.contains("NOTES BODY"));
    assert!(output.content.contains("Folder: "));

    let after = toolbox.prepare(&scope(2, false), Some("and another")).await;
    assert!(
        prompt(&after).contains("<skill name=\"notes\">\nNOTES BODY"),
        "{}",
        prompt(&after)
    );
    assert!(after.sections.iter().any(|s| s.label == "active skills: 1"));
    // A restarted Herald still has it active: the set is in the store.
    let restarted = fixture.toolbox().await;
    assert!(prompt(&restarted.prepare(&scope(3, false), None).await).contains("NOTES BODY"));
}

/// With more skills than a schema lists, the tools stay small and the
/// name is checked when the tool runs: a known one activates, an unknown
/// one is an error for the model.
#[tokio::test]
async fn many_skills_keep_tool_schemas_small_and_names_checked_on_call() {
    let fixture = Fixture::new();
    let count = crate::execution::MAX_NAME_ENUM + 36;
    for i in 0..count {
        write_skill(
            &fixture.skills_dir,
            &format!("skill-{i:03}"),
            "Does one thing.",
            &format!("BODY {i}"),
        );
    }
    let toolbox = fixture.toolbox().await;
    let preparation = toolbox.prepare(&scope(1, false), Some("hi")).await;
    let activate = preparation.tools.iter().find(|t| t.name == "activate_skill").unwrap();
    assert!(
        activate.parameters["properties"]["name"].get("enum").is_none(),
        "{activate:?}"
    );
    let schemas: usize = preparation.tools.iter().map(|t| t.parameters.to_string().len()).sum();
    assert!(schemas < 3_000, "{schemas} characters of tool schemas");

    let known = toolbox
        .invoke(
            &scope(1, false),
            &call("activate_skill", json!({"name": "skill-099"})),
            0,
        )
        .await;
    assert!(!known.is_error && known.content.contains("BODY 99"), "{known:?}");
    let unknown = toolbox
        .invoke(
            &scope(1, false),
            &call("activate_skill", json!({"name": "skill-999"})),
            1,
        )
        .await;
    assert!(unknown.is_error && unknown.content.contains("skill-999"), "{unknown:?}");
}

#[tokio::test]
async fn dollar_mentions_activate_before_the_model_and_unknown_names_get_a_notice() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let preparation = toolbox
        .prepare(
            &scope(1, false),
            Some("use $weather and $ops and $nope, not \\$notes or $HOME"),
        )
        .await;
    let text = prompt(&preparation);
    assert!(text.contains("WEATHER BODY"));
    assert!(!text.contains("NOTES BODY") && !text.contains("OPS BODY"), "{text}");
    assert_eq!(
        preparation.notices,
        vec![
            "There is no skill `ops` available here.".to_owned(),
            "There is no skill `nope` available here.".to_owned()
        ]
    );
    assert_eq!(preparation.model_input, None);
}

#[tokio::test]
async fn admins_are_told_why_a_skill_is_hidden() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    toolbox.set_enabled("notes", false).await.unwrap();
    let preparation = toolbox.prepare(&scope(1, true), Some("$notes")).await;
    assert_eq!(
        preparation.notices,
        vec!["Skill `notes` is disabled; /skills enable notes turns it on.".to_owned()]
    );
}

#[tokio::test]
async fn a_slash_request_is_expanded_for_the_model() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let preparation = toolbox.prepare(&scope(1, false), Some("/weather in Paris")).await;
    assert_eq!(
        preparation.model_input.as_deref(),
        Some("<skill name=\"weather\">\nWEATHER BODY: ask wttr.in.\n</skill>\n\nin Paris")
    );
    let unknown = toolbox.prepare(&scope(1, false), Some("/ops restart")).await;
    assert_eq!(unknown.model_input, None);
}

#[tokio::test]
async fn reaching_the_count_cap_evicts_the_least_recently_used() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture
        .toolbox_with(SkillsConfig {
            max_active: 1,
            ..fixture.config()
        })
        .await;
    toolbox.prepare(&scope(1, false), Some("$notes")).await;
    let second = toolbox.prepare(&scope(2, false), Some("$weather")).await;
    assert_eq!(
        second.notices,
        vec!["Deactivated `notes` to make room for `weather`.".to_owned()]
    );
    assert!(!prompt(&second).contains("NOTES BODY"));
    let refusing = fixture
        .toolbox_with(SkillsConfig {
            max_active: 1,
            on_cap: crate::OnCap::Refuse,
            ..fixture.config()
        })
        .await;
    let refused = refusing.prepare(&scope(3, false), Some("$notes")).await;
    assert!(refused.notices[0].contains("not activated"), "{:?}", refused.notices);
    let output = refusing
        .invoke(&scope(3, false), &call("activate_skill", json!({"name": "notes"})), 1)
        .await;
    assert!(
        output.is_error && output.content.contains("1 skills are active already"),
        "{output:?}"
    );
}

#[tokio::test]
async fn eager_mode_puts_bodies_in_the_prompt_without_an_activation_tool() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture
        .toolbox_with(SkillsConfig {
            eager: true,
            ..fixture.config()
        })
        .await;
    let preparation = toolbox.prepare(&scope(1, false), Some("hi")).await;
    assert!(prompt(&preparation).contains("NOTES BODY") && prompt(&preparation).contains("WEATHER BODY"));
    assert!(!tool_names(&preparation).contains(&"activate_skill"));
}

#[tokio::test]
async fn trigger_patterns_activate_a_skill() {
    let fixture = Fixture::new();
    let folder = fixture.skills_dir.join("forecast");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        "---\nname: forecast\ndescription: Forecasts.\nmetadata:\n  triggers: '(?i)\\bforecast\\b'\n---\nFORECAST BODY",
    )
    .unwrap();
    let toolbox = fixture.toolbox().await;
    assert!(prompt(&toolbox.prepare(&scope(1, false), Some("Forecast for Oslo?")).await).contains("FORECAST BODY"));
    let off = fixture
        .toolbox_with(SkillsConfig {
            triggers: false,
            ..fixture.config()
        })
        .await;
    let other = scope(1, false);
    let other = TurnScope {
        conversation: conversation("local:bob"),
        ..other
    };
    assert!(!prompt(&off.prepare(&other, Some("forecast please")).await).contains("FORECAST BODY"));
}

#[tokio::test]
async fn an_elevated_skill_active_in_a_group_is_not_shown_to_others_and_stays_active() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    assert!(prompt(&toolbox.prepare(&scope(1, true), Some("$ops")).await).contains("OPS BODY"));
    assert!(!prompt(&toolbox.prepare(&scope(2, false), Some("hi")).await).contains("OPS BODY"));
    assert!(prompt(&toolbox.prepare(&scope(3, true), Some("hi")).await).contains("OPS BODY"));
    std::fs::remove_dir_all(fixture.skills_dir.join("ops")).unwrap();
    toolbox.reload().await.unwrap();
    toolbox.prepare(&scope(4, true), Some("hi")).await;
    let stored = crate::activation::load_active(fixture.store.as_ref(), &conversation("local:alice").id)
        .await
        .unwrap();
    assert!(stored.is_empty(), "a removed skill leaves the active set: {stored:?}");
}
