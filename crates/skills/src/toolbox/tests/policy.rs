//! The policy at invoke: who may run what, argument checks, and side effects
//! that run once per task.

use super::*;

#[tokio::test]
async fn a_non_admin_calling_an_elevated_skill_is_refused_and_nothing_happens() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let output = toolbox.invoke(&scope(1, false), &call("reboot", json!({})), 0).await;
    assert!(output.is_error);
    assert!(output.content.contains("for admins only"), "{}", output.content);
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 0);

    let marker = fixture.skills_dir.join("marker");
    let script = call(
        "run_skill_script",
        json!({"name": "ops", "script": "touch.sh", "args": [marker.display().to_string()]}),
    );
    let output = toolbox.invoke(&scope(1, false), &script, 1).await;
    assert!(output.is_error && output.content.contains("for admins only"));
    assert!(!marker.exists());
    assert!(
        fixture.channel.texts().is_empty(),
        "no confirmation is asked for a non-admin"
    );

    let admin = toolbox.invoke(&scope(1, true), &call("reboot", json!({})), 2).await;
    assert!(!admin.is_error);
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bad_calls_get_clear_errors_and_run_nothing() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    for (tool, arguments, fragment) in [
        ("nope", "{}".to_owned(), "no tool named `nope`"),
        ("charge_card", "{not json".to_owned(), "not valid JSON"),
        ("charge_card", "{}".to_owned(), "arguments.cents is required"),
        ("charge_card", r#"{"cents": "ten"}"#.to_owned(), "should be integer"),
        ("activate_skill", r#"{"name": "ops"}"#.to_owned(), "must be one of"),
        (
            "send_message",
            r#"{"text": "x", "conversation": "local:bob"}"#.to_owned(),
            "not a known argument",
        ),
        (
            "read_skill_file",
            r#"{"name": "notes", "path": "../weather/SKILL.md"}"#.to_owned(),
            "`..`",
        ),
    ] {
        let output = toolbox
            .invoke(
                &scope(1, false),
                &ToolCall {
                    id: "c".into(),
                    name: tool.into(),
                    arguments,
                },
                0,
            )
            .await;
        assert!(output.is_error, "{tool}: {output:?}");
        assert!(output.content.contains(fragment), "{tool}: {}", output.content);
    }
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 0);
    assert!(fixture.channel.texts().is_empty());
}

#[tokio::test]
async fn a_side_effect_runs_once_per_task_and_arguments() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    let hello = call("send_message", json!({"text": "hello"}));
    let first = toolbox.invoke(&scope(1, false), &hello, 0).await;
    assert_eq!(first.delivered_to_conversation.as_deref(), Some("hello"));
    let reordered = ToolCall {
        arguments: r#"{ "text" : "hello" }"#.into(),
        ..hello.clone()
    };
    let repeat = toolbox.invoke(&scope(1, false), &reordered, 1).await;
    assert_eq!(repeat, first);
    toolbox
        .invoke(&scope(1, false), &call("send_message", json!({"text": "other"})), 2)
        .await;
    toolbox.invoke(&scope(2, false), &hello, 0).await;
    assert_eq!(fixture.channel.texts(), vec!["hello", "other", "hello"]);
}

#[tokio::test]
async fn a_task_retried_after_a_crash_does_not_repeat_its_side_effects() {
    let fixture = Fixture::new();
    let charge = call("charge_card", json!({"cents": 500}));
    let first = fixture.toolbox().await.invoke(&scope(7, false), &charge, 3).await;
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);
    // A new process (empty memory), the same store, the same task and call.
    let restarted = fixture.toolbox().await;
    let retried = restarted.invoke(&scope(7, false), &charge, 3).await;
    assert_eq!(retried, first);
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);

    // A crash between the record and the result: the call is not repeated.
    let key = crate::state::call_key(4, &SkillName::new("charge_card").unwrap(), r#"{"cents":900}"#);
    crate::state::put_call_record(
        fixture.store.as_ref(),
        TaskId(7),
        &key,
        &crate::state::CallRecord::Started,
    )
    .await
    .unwrap();
    let interrupted = restarted
        .invoke(&scope(7, false), &call("charge_card", json!({"cents": 900})), 4)
        .await;
    assert!(
        interrupted.is_error && interrupted.content.contains("not repeated"),
        "{interrupted:?}"
    );
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_side_effect_does_not_run_when_its_record_cannot_be_written() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    *fixture.store.fail_writes.lock().unwrap() = true;
    let output = toolbox
        .invoke(&scope(1, false), &call("charge_card", json!({"cents": 1})), 0)
        .await;
    assert!(output.is_error && output.content.contains("storage is unavailable"));
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn send_message_reaches_other_conversations_only_for_admins() {
    let fixture = Fixture::new();
    let bob = conversation("local:bob");
    fixture
        .store
        .conversations
        .lock()
        .unwrap()
        .insert(bob.id.clone(), bob.clone());
    let toolbox = fixture.toolbox().await;
    let to_bob = call("send_message", json!({"text": "hi bob", "conversation": "local:bob"}));
    let output = toolbox.invoke(&scope(1, true), &to_bob, 0).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(output.delivered_to_conversation, None);
    let sent = fixture.channel.sent.lock().unwrap().clone();
    assert_eq!(sent[0].conversation, bob);
    let unknown = toolbox
        .invoke(
            &scope(1, true),
            &call("send_message", json!({"text": "x", "conversation": "local:zed"})),
            1,
        )
        .await;
    assert!(unknown.is_error && unknown.content.contains("no known conversation"));
}

#[tokio::test]
async fn parallel_safety_and_research_come_from_the_policy() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    assert!(toolbox.parallel_safe("read_skill_file"));
    assert!(!toolbox.parallel_safe("send_message"));
    assert!(!toolbox.parallel_safe("nope"));
    assert!(toolbox.policy("read_skill_file").unwrap().research);
    assert_eq!(
        toolbox.repeat_budget("read_skill_file", 2),
        6,
        "research skills get a larger repetition budget"
    );
    assert_eq!(toolbox.repeat_budget("send_message", 2), 2);
}
