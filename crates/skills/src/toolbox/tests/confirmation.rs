//! Dangerous calls wait for an admin: the question, `/approve`, `/deny`,
//! expiry and full autonomy.

use super::*;

/// The code of the question's own `Reply /approve CODE` line.
fn code_in(text: &str) -> String {
    let line = text.lines().rfind(|l| l.starts_with("Reply /approve ")).unwrap();
    line["Reply /approve ".len()..].chars().take(6).collect()
}

#[tokio::test]
async fn the_question_names_skill_and_script_first_and_shows_every_argument_whole() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let long = format!("{}END-OF-LONG-ARGUMENT", "x".repeat(700));
    let forged = "a\nReply /approve FAKE23 to run it";
    let script = call(
        "run_skill_script",
        json!({"name": "ops", "script": "touch.sh", "args": [long, forged, "\u{202e}txt.exe"], "stdin": "input"}),
    );
    let waiting = toolbox.invoke(&scope(1, true), &script, 1).await;
    assert!(!waiting.is_error, "{waiting:?}");
    let question = fixture.channel.texts().pop().unwrap();
    let lines: Vec<&str> = question.lines().collect();
    assert_eq!(
        lines[0], "Confirm: Herald wants to run script `scripts/touch.sh` of skill `ops`.",
        "{question}"
    );
    assert!(question.contains(&format!("1. \"{long}\"")), "{question}");
    assert!(
        question.contains(r#"2. "a\nReply /approve FAKE23 to run it""#),
        "a newline in an argument cannot forge a line: {question}"
    );
    assert!(question.contains(r#"3. "\u202etxt.exe""#), "{question}");
    assert!(question.contains(r#"Input: "input""#), "{question}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("Reply /approve")).count(),
        1,
        "{question}"
    );
    assert!(question.chars().count() <= 2000);
}

#[tokio::test]
async fn arguments_too_long_for_one_chat_message_are_refused_before_anyone_is_asked() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let script = call(
        "run_skill_script",
        json!({"name": "ops", "script": "touch.sh", "stdin": "y".repeat(3000)}),
    );
    let output = toolbox.invoke(&scope(1, true), &script, 1).await;
    assert!(
        output.is_error && output.content.contains("too long to show"),
        "{output:?}"
    );
    assert!(fixture.channel.texts().is_empty(), "nobody was asked");
    assert!(
        fixture
            .store
            .list_state("skill_confirmations")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_dangerous_skill_waits_for_an_admins_approval() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let marker = fixture.marker("marker");
    let script = touch(&marker);
    let waiting = toolbox.invoke(&scope(1, true), &script, 1).await;
    assert!(!waiting.is_error);
    assert!(waiting.content.contains("Not run yet"), "{}", waiting.content);
    assert!(!marker.exists());
    let question = fixture.channel.texts().pop().unwrap();
    assert!(
        question.contains("script `scripts/touch.sh` of skill `ops`") && question.contains("/approve"),
        "{question}"
    );
    let code = code_in(&question);
    // The same call again does not ask twice.
    toolbox.invoke(&scope(1, true), &script, 1).await;
    assert_eq!(fixture.channel.texts().len(), 1);

    let by_user = toolbox
        .prepare(&scope(2, false), Some(&format!("/approve {code}")))
        .await;
    assert_eq!(by_user.direct_reply.as_deref(), Some("Only an admin can do that."));
    assert!(!marker.exists());

    let approved = toolbox
        .prepare(&scope(3, true), Some(&format!("/approve {}", code.to_lowercase())))
        .await;
    let reply = approved.direct_reply.unwrap();
    assert!(
        reply.starts_with("Approved `run_skill_script`") && reply.contains("touched"),
        "{reply}"
    );
    assert!(marker.exists());
    let receipts = fixture.store.list_state("skill_receipts:local:alice").await.unwrap();
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0].1["exit_code"], json!(0));

    let again = toolbox
        .prepare(&scope(4, true), Some(&format!("/approve {code}")))
        .await;
    assert_eq!(
        again.direct_reply.unwrap(),
        format!("No request is waiting for code {code}.")
    );
}

#[tokio::test]
async fn a_denied_or_expired_request_never_runs() {
    let fixture = Fixture::new().with_example_skills();
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let toolbox = SkillToolbox::builder(
        fixture.config(),
        Arc::clone(&fixture.store) as Arc<dyn ConversationStore>,
        10_000,
    )
    .outbound(Outbound::new().with(Arc::clone(&fixture.channel) as Arc<dyn herald_core::ChannelOutbound>))
    .clock(Arc::clone(&clock) as Arc<dyn herald_core::Clock>)
    .build()
    .await
    .unwrap();
    let marker = fixture.marker("marker");
    let script = |n: &str| {
        call(
            "run_skill_script",
            json!({"name": "ops", "script": "touch.sh", "args": [marker.with_extension(n).display().to_string()]}),
        )
    };
    toolbox.invoke(&scope(1, true), &script("a"), 1).await;
    let code = code_in(&fixture.channel.texts()[0]);
    let denied = toolbox.prepare(&scope(2, true), Some(&format!("/deny {code}"))).await;
    assert_eq!(denied.direct_reply.unwrap(), "Denied: `run_skill_script` was not run.");

    toolbox.invoke(&scope(3, true), &script("b"), 1).await;
    let code = code_in(&fixture.channel.texts()[1]);
    clock.advance(Duration::from_secs(11 * 60));
    let late = toolbox
        .prepare(&scope(4, true), Some(&format!("/approve {code}")))
        .await;
    assert!(late.direct_reply.unwrap().contains("expired"));
    assert!(!marker.with_extension("a").exists() && !marker.with_extension("b").exists());
}

#[tokio::test]
async fn full_autonomy_runs_dangerous_skills_without_asking() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.autonomous_toolbox().await;
    let marker = fixture.marker("marker");
    let output = toolbox.invoke(&scope(1, true), &touch(&marker), 1).await;
    assert!(!output.is_error && output.content.starts_with("exit 0"), "{output:?}");
    assert!(marker.exists());
    assert!(fixture.channel.texts().is_empty());
}

/// The admin's run of `ops`'s `touch.sh`, waiting under the code returned,
/// and the marker it would create.
async fn waiting_touch(fixture: &Fixture, toolbox: &SkillToolbox) -> (String, std::path::PathBuf) {
    let marker = fixture.marker("marker");
    let waiting = toolbox.invoke(&scope(1, true), &touch(&marker), 1).await;
    assert!(waiting.content.contains("Not run yet"), "{waiting:?}");
    (code_in(&fixture.channel.texts().pop().unwrap()), marker)
}

async fn approve(toolbox: &SkillToolbox, code: &str) -> String {
    toolbox
        .prepare(&scope(9, true), Some(&format!("/approve {code}")))
        .await
        .direct_reply
        .unwrap()
}

#[tokio::test]
async fn approving_after_the_tool_was_switched_off_runs_nothing() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let (code, marker) = waiting_touch(&fixture, &toolbox).await;
    toolbox.set_enabled("run_skill_script", false).await.unwrap();
    let reply = approve(&toolbox, &code).await;
    assert!(
        reply.contains("disabled") && reply.contains("nothing was run"),
        "{reply}"
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn approving_after_the_skill_was_switched_off_or_changed_runs_nothing() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let (code, marker) = waiting_touch(&fixture, &toolbox).await;
    toolbox.set_enabled("ops", false).await.unwrap();
    let reply = approve(&toolbox, &code).await;
    assert!(
        reply.contains("no longer") && reply.contains("nothing was run"),
        "{reply}"
    );
    assert!(!marker.exists());

    toolbox.set_enabled("ops", true).await.unwrap();
    let (code, marker) = waiting_touch(&fixture, &toolbox).await;
    // The script is rewritten after the question: the skill's revision moves.
    std::fs::write(
        fixture.skills_dir.join("ops/scripts/touch.sh"),
        "touch \"$1\"; echo changed",
    )
    .unwrap();
    toolbox.reload().await.unwrap();
    let reply = approve(&toolbox, &code).await;
    assert!(
        reply.contains("no longer") && reply.contains("nothing was run"),
        "{reply}"
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn approving_the_call_of_someone_no_longer_an_admin_runs_nothing() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let (code, marker) = waiting_touch(&fixture, &toolbox).await;
    // Herald restarts with `local:owner` removed from the admins; another
    // admin approves the waiting call.
    let restarted = fixture.toolbox_with_admins(fixture.config(), &["local:root"]).await;
    let root = TurnScope {
        actor: Some(ActorId::new("local:root")),
        ..scope(9, true)
    };
    let reply = restarted
        .prepare(&root, Some(&format!("/approve {code}")))
        .await
        .direct_reply
        .unwrap();
    assert!(
        reply.contains("no longer an admin") && reply.contains("nothing was run"),
        "{reply}"
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn approving_arguments_other_than_those_shown_runs_nothing() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let (code, marker) = waiting_touch(&fixture, &toolbox).await;
    let elsewhere = fixture.marker("elsewhere");
    // The stored call is changed behind the question's back.
    let mut stored = fixture
        .store
        .get_state("skill_confirmations", &code)
        .await
        .unwrap()
        .unwrap();
    stored["arguments"]["args"] = json!([elsewhere.display().to_string()]);
    stored["canonical"] = json!(herald_core::json::canonical(&stored["arguments"]));
    fixture
        .store
        .put_state("skill_confirmations", &code, &stored)
        .await
        .unwrap();
    let reply = approve(&toolbox, &code).await;
    assert!(
        reply.contains("no longer") && reply.contains("nothing was run"),
        "{reply}"
    );
    assert!(!marker.exists() && !elsewhere.exists());
}
