//! The policy at invoke: who may run what, argument checks, and side effects
//! that run once per task.

use super::*;

#[tokio::test]
async fn a_non_admin_calling_an_elevated_skill_is_refused_and_nothing_happens() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let output = toolbox.invoke(&scope(1, false), &call("reboot", json!({})), 1).await;
    assert!(output.is_error);
    assert!(output.content.contains("for admins only"), "{}", output.content);
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 0);

    let marker = fixture.marker("marker");
    let script = touch(&marker);
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
    let first = toolbox.invoke(&scope(1, false), &hello, 1).await;
    assert_eq!(first.delivered_to_conversation.as_deref(), Some("hello"));
    let reordered = ToolCall {
        arguments: r#"{ "text" : "hello" }"#.into(),
        ..hello.clone()
    };
    let repeat = toolbox.invoke(&scope(1, false), &reordered, 2).await;
    assert_eq!(repeat, first);
    toolbox
        .invoke(&scope(1, false), &call("send_message", json!({"text": "other"})), 1)
        .await;
    toolbox.invoke(&scope(2, false), &hello, 1).await;
    assert_eq!(fixture.channel.texts(), vec!["hello", "other", "hello"]);
}

#[tokio::test]
async fn a_task_retried_after_a_crash_does_not_repeat_its_side_effects() {
    let fixture = Fixture::new();
    let charge = call("charge_card", json!({"cents": 500}));
    let first = fixture.toolbox().await.invoke(&scope(7, false), &charge, 1).await;
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);
    // A new process (empty memory), the same store, the same task and call.
    let restarted = fixture.toolbox().await;
    let retried = restarted.invoke(&scope(7, false), &charge, 1).await;
    assert_eq!(retried, first);
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);

    // A crash between the record and the result: the call is not repeated.
    let key = crate::state::call_key(&SkillName::new("charge_card").unwrap(), r#"{"cents":900}"#, 1);
    crate::state::put_call_record(
        fixture.store.as_ref(),
        TaskId(7),
        &key,
        &crate::state::CallRecord::Started,
    )
    .await
    .unwrap();
    let interrupted = restarted
        .invoke(&scope(7, false), &call("charge_card", json!({"cents": 900})), 1)
        .await;
    assert!(
        interrupted.is_error && interrupted.content.contains("not repeated"),
        "{interrupted:?}"
    );
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);
}

/// The model sends A then B; Herald dies; on the retry it sends B then A.
/// Both are named by the same occurrence (the first of each) whatever the
/// order, so neither goes out again, and each kept its own idempotency key
/// (Discord's nonce) the first time.
#[tokio::test]
async fn side_effects_retried_in_another_order_do_not_run_again() {
    let fixture = Fixture::new();
    let a = call("send_message", json!({"text": "A"}));
    let b = call("send_message", json!({"text": "B"}));
    let first = fixture.toolbox().await;
    let sent_a = first.invoke(&scope(3, false), &a, 1).await;
    let sent_b = first.invoke(&scope(3, false), &b, 1).await;
    let keys: Vec<Option<String>> = fixture
        .channel
        .sent
        .lock()
        .unwrap()
        .iter()
        .map(|m| m.idempotency_key.clone())
        .collect();
    assert!(
        keys[0].is_some() && keys[0] != keys[1],
        "A and B need their own keys: {keys:?}"
    );

    let restarted = fixture.toolbox().await;
    assert_eq!(restarted.invoke(&scope(3, false), &b, 1).await, sent_b);
    assert_eq!(restarted.invoke(&scope(3, false), &a, 1).await, sent_a);
    assert_eq!(fixture.channel.texts(), vec!["A", "B"]);
}

/// A repeated identical call is answered from the first, in memory; its
/// occurrence gets a durable record too, so a process that looks that
/// occurrence up first does not run the effect again.
#[tokio::test]
async fn every_occurrence_answered_from_the_first_has_its_own_record() {
    let fixture = Fixture::new();
    let charge = call("charge_card", json!({"cents": 500}));
    let toolbox = fixture.toolbox().await;
    let first = toolbox.invoke(&scope(8, false), &charge, 1).await;
    assert_eq!(toolbox.invoke(&scope(8, false), &charge, 2).await, first);
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);
    let records = fixture.store.list_state("skill_calls:8").await.unwrap();
    assert_eq!(records.len(), 2, "{records:?}");

    let restarted = fixture.toolbox().await;
    assert_eq!(restarted.invoke(&scope(8, false), &charge, 2).await, first);
    assert_eq!(restarted.invoke(&scope(8, false), &charge, 3).await, first);
    assert_eq!(fixture.effects.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_side_effect_does_not_run_when_its_record_cannot_be_written() {
    let fixture = Fixture::new();
    let toolbox = fixture.toolbox().await;
    *fixture.store.fail_writes.lock().unwrap() = true;
    let output = toolbox
        .invoke(&scope(1, false), &call("charge_card", json!({"cents": 1})), 1)
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
    let output = toolbox.invoke(&scope(1, true), &to_bob, 1).await;
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

#[tokio::test]
async fn each_script_call_of_a_task_keeps_its_own_receipt() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.autonomous_toolbox().await;
    for marker in ["first", "second"] {
        let output = toolbox
            .invoke(&scope(4, true), &touch(&fixture.marker(marker)), 1)
            .await;
        assert!(!output.is_error, "{output:?}");
        assert!(fixture.marker(marker).exists());
    }
    let receipts = fixture.store.list_state("skill_receipts:local:alice").await.unwrap();
    assert_eq!(receipts.len(), 2, "{receipts:?}");
}

/// A script that prints 3 MB: the model gets a result of a sane size, and
/// what the store keeps of the call is small, the cut marked.
#[tokio::test]
async fn a_loud_script_costs_kilobytes_in_the_store_and_the_prompt() {
    let fixture = Fixture::new().with_example_skills();
    std::fs::write(
        fixture.skills_dir.join("ops/scripts/loud.sh"),
        "echo START; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END-OF-OUTPUT",
    )
    .unwrap();
    let toolbox = fixture.autonomous_toolbox().await;
    let output = toolbox
        .invoke(
            &scope(6, true),
            &call("run_skill_script", json!({"name": "ops", "script": "loud.sh"})),
            1,
        )
        .await;
    assert!(
        output.content.len() <= 16 * 1024,
        "{} bytes for the model",
        output.content.len()
    );
    assert!(
        output.content.contains("START") && output.content.contains("left out"),
        "{}",
        &output.content[..200]
    );

    let receipts = fixture.store.list_state("skill_receipts:local:alice").await.unwrap();
    let stored = receipts[0].1["output"].as_str().unwrap();
    assert!(
        stored.len() <= 16 * 1024,
        "{} bytes of output in the receipt",
        stored.len()
    );
    assert!(stored.contains("left out"));
    assert_eq!(receipts[0].1["output_truncated"], json!(true));
    let records = fixture.store.list_state("skill_calls:6").await.unwrap();
    let recorded = records[0].1["content"].as_str().unwrap();
    assert!(
        recorded.len() <= 16 * 1024,
        "{} bytes of output in the call record",
        recorded.len()
    );
    assert!(recorded.contains("START") && recorded.contains("left out"));
}
