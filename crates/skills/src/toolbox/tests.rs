//! The toolbox as the agent uses it: what a turn offers, and what a call does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{
    ActorId, ConversationStore, ManualClock, Outbound, TaskId, ToolCall, ToolOutput, Toolbox, TurnPreparation,
    TurnScope,
};
use serde_json::{Value, json};

use super::*;
use crate::registry::{Policy, SkillContext, SkillSpec};
use crate::test_support::{MemoryStore, RecordingChannel, conversation, write_skill};
use crate::{Autonomy, SkillName};

struct Fixture {
    _dir: tempfile::TempDir,
    skills_dir: std::path::PathBuf,
    store: Arc<MemoryStore>,
    channel: Arc<RecordingChannel>,
    effects: Arc<AtomicUsize>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let skills_dir = dir.path().join("skills");
        std::fs::create_dir_all(&skills_dir).unwrap();
        Self {
            _dir: dir,
            skills_dir,
            store: Arc::new(MemoryStore::default()),
            channel: Arc::new(RecordingChannel::new("local")),
            effects: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn with_example_skills(self) -> Self {
        write_skill(
            &self.skills_dir,
            "notes",
            "Keep short notes.",
            "NOTES BODY: write bullet points.",
        );
        write_skill(
            &self.skills_dir,
            "weather",
            "Weather reports.",
            "WEATHER BODY: ask wttr.in.",
        );
        let ops = self.skills_dir.join("ops");
        std::fs::create_dir_all(ops.join("scripts")).unwrap();
        std::fs::write(
            ops.join("SKILL.md"),
            "---\nname: ops\ndescription: Server chores.\nmetadata:\n  elevated: 'true'\n---\nOPS BODY",
        )
        .unwrap();
        std::fs::write(ops.join("scripts/touch.sh"), "touch \"$1\"; echo touched").unwrap();
        self
    }

    fn config(&self) -> SkillsConfig {
        SkillsConfig {
            dirs: vec![self.skills_dir.clone()],
            rescan_every: Duration::ZERO,
            install_dir: Some(self.skills_dir.clone()),
            ..SkillsConfig::default()
        }
    }

    async fn toolbox(&self) -> SkillToolbox {
        self.toolbox_with(self.config()).await
    }

    async fn toolbox_with(&self, config: SkillsConfig) -> SkillToolbox {
        SkillToolbox::builder(config, Arc::clone(&self.store) as Arc<dyn ConversationStore>, 10_000)
            .outbound(Outbound::new().with(Arc::clone(&self.channel) as Arc<dyn herald_core::ChannelOutbound>))
            .skill(Arc::new(CountingEffect {
                spec: SkillSpec {
                    name: SkillName::new("charge_card").unwrap(),
                    description: "Charges a card (test).".into(),
                    parameters: json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}),
                    policy: Policy {
                        side_effect: true,
                        ..Policy::default()
                    },
                },
                count: Arc::clone(&self.effects),
            }))
            .skill(Arc::new(CountingEffect {
                spec: SkillSpec {
                    name: SkillName::new("reboot").unwrap(),
                    description: "Reboots (test).".into(),
                    parameters: json!({"type": "object"}),
                    policy: Policy {
                        elevated: true,
                        ..Policy::default()
                    },
                },
                count: Arc::clone(&self.effects),
            }))
            .build()
            .await
            .unwrap()
    }
}

/// A core skill whose effect is counting.
struct CountingEffect {
    spec: SkillSpec,
    count: Arc<AtomicUsize>,
}

#[async_trait]
impl crate::CoreSkill for CountingEffect {
    fn spec(&self) -> &SkillSpec {
        &self.spec
    }

    async fn invoke(&self, _: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(ToolOutput::ok(format!("effect #{n} with {arguments}")))
    }
}

fn scope(task: i64, admin: bool) -> TurnScope {
    TurnScope {
        task: TaskId(task),
        conversation: conversation("local:alice"),
        actor: Some(ActorId::new("local:alice")),
        is_admin: admin,
        reply_to: None,
        origin: herald_core::TurnOrigin::Person,
    }
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

fn tool_names(preparation: &TurnPreparation) -> Vec<&str> {
    preparation.tools.iter().map(|t| t.name.as_str()).collect()
}

fn prompt(preparation: &TurnPreparation) -> String {
    preparation
        .sections
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn activate_enum(preparation: &TurnPreparation) -> Vec<String> {
    let tool = preparation.tools.iter().find(|t| t.name == "activate_skill").unwrap();
    tool.parameters["properties"]["name"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

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
        .invoke(&scope(1, false), &call("activate_skill", json!({"name": "notes"})), 0)
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
    let count = crate::builtins::MAX_NAME_ENUM + 36;
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
        .invoke(&scope(3, false), &call("activate_skill", json!({"name": "notes"})), 0)
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

fn code_in(text: &str) -> String {
    let after = text.split("/approve ").nth(1).unwrap();
    after.chars().take(6).collect()
}

#[tokio::test]
async fn a_dangerous_skill_waits_for_an_admins_approval() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    let marker = fixture.skills_dir.join("marker");
    let script = call(
        "run_skill_script",
        json!({"name": "ops", "script": "touch.sh", "args": [marker.display().to_string()]}),
    );
    let waiting = toolbox.invoke(&scope(1, true), &script, 0).await;
    assert!(!waiting.is_error);
    assert!(waiting.content.contains("Not run yet"), "{}", waiting.content);
    assert!(!marker.exists());
    let question = fixture.channel.texts().pop().unwrap();
    assert!(
        question.contains("run_skill_script") && question.contains("/approve"),
        "{question}"
    );
    let code = code_in(&question);
    // The same call again does not ask twice.
    toolbox.invoke(&scope(1, true), &script, 0).await;
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
    let marker = fixture.skills_dir.join("marker");
    let script = |n: &str| {
        call(
            "run_skill_script",
            json!({"name": "ops", "script": "touch.sh", "args": [marker.with_extension(n).display().to_string()]}),
        )
    };
    toolbox.invoke(&scope(1, true), &script("a"), 0).await;
    let code = code_in(&fixture.channel.texts()[0]);
    let denied = toolbox.prepare(&scope(2, true), Some(&format!("/deny {code}"))).await;
    assert_eq!(denied.direct_reply.unwrap(), "Denied: `run_skill_script` was not run.");

    toolbox.invoke(&scope(3, true), &script("b"), 0).await;
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
    let toolbox = fixture
        .toolbox_with(SkillsConfig {
            autonomy: Autonomy::Full,
            ..fixture.config()
        })
        .await;
    let marker = fixture.skills_dir.join("marker");
    let output = toolbox
        .invoke(
            &scope(1, true),
            &call(
                "run_skill_script",
                json!({"name": "ops", "script": "touch.sh", "args": [marker.display().to_string()]}),
            ),
            0,
        )
        .await;
    assert!(!output.is_error && output.content.starts_with("exit 0"), "{output:?}");
    assert!(marker.exists());
    assert!(fixture.channel.texts().is_empty());
}

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
    let source_dir = tempfile::tempdir().unwrap();
    let source = write_skill(source_dir.path(), "jokes", "Tells jokes.", "JOKES BODY");
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
async fn an_elevated_skill_active_in_a_group_is_not_shown_to_others_and_stays_active() {
    let fixture = Fixture::new().with_example_skills();
    let toolbox = fixture.toolbox().await;
    assert!(prompt(&toolbox.prepare(&scope(1, true), Some("$ops")).await).contains("OPS BODY"));
    assert!(!prompt(&toolbox.prepare(&scope(2, false), Some("hi")).await).contains("OPS BODY"));
    assert!(prompt(&toolbox.prepare(&scope(3, true), Some("hi")).await).contains("OPS BODY"));
    std::fs::remove_dir_all(fixture.skills_dir.join("ops")).unwrap();
    toolbox.reload().await.unwrap();
    toolbox.prepare(&scope(4, true), Some("hi")).await;
    let stored = crate::state::active(fixture.store.as_ref(), &conversation("local:alice").id)
        .await
        .unwrap();
    assert!(stored.is_empty(), "a removed skill leaves the active set: {stored:?}");
}
