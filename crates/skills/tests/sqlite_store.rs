//! The registry's persistence against the real SQLite store, across a
//! simulated restart (a new `Storage` and a new toolbox on the same file).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use herald_core::{
    ActorId, ChannelError, ChannelName, ChannelOutbound, ConversationId, ConversationKind, ConversationRef,
    InboundMessage, MessageFile, NewTask, Outbound, OutboundMessage, Sender, SentMessage, SystemClock, TaskId,
    ToolCall, Toolbox, TurnScope,
};
use herald_skills::{SkillToolbox, SkillsConfig};
use herald_store::{QueueConfig, Storage, StorageConfig};
use serde_json::json;

#[derive(Default)]
struct Recorder {
    sent: Mutex<Vec<OutboundMessage>>,
}

#[async_trait]
impl ChannelOutbound for Recorder {
    fn channel(&self) -> ChannelName {
        ChannelName::new("local")
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        self.sent.lock().unwrap().push(message.clone());
        Ok(SentMessage {
            platform_message_ids: vec!["1".into()],
        })
    }
}

impl Recorder {
    fn texts(&self) -> Vec<String> {
        self.sent.lock().unwrap().iter().map(|m| m.text.clone()).collect()
    }
}

struct Site {
    dir: tempfile::TempDir,
    recorder: Arc<Recorder>,
}

impl Site {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("skills/notes");
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::write(
            notes.join("SKILL.md"),
            "---\nname: notes\ndescription: Keep notes.\n---\nNOTES BODY",
        )
        .unwrap();
        Self {
            dir,
            recorder: Arc::new(Recorder::default()),
        }
    }

    fn skills_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("skills")
    }

    /// A fresh process: new connections, new toolbox, nothing in memory.
    async fn start(&self) -> (Storage, SkillToolbox) {
        let storage = StorageConfig {
            url: format!("sqlite://{}", self.dir.path().join("herald.db").display()).into(),
            ..StorageConfig::default()
        };
        let storage = Storage::connect(&storage, &QueueConfig::default(), Arc::new(SystemClock))
            .await
            .unwrap();
        storage.migrate().await.unwrap();
        let config = SkillsConfig {
            dirs: vec![self.skills_dir()],
            rescan_every: std::time::Duration::ZERO,
            ..SkillsConfig::default()
        };
        let toolbox = SkillToolbox::builder(config, storage.conversations(), 20_000)
            .admins(herald_core::Admins::new([ActorId::new("local:owner")]))
            .outbound(Outbound::new().with(Arc::clone(&self.recorder) as Arc<dyn ChannelOutbound>))
            .files(storage.files())
            .build()
            .await
            .unwrap();
        (storage, toolbox)
    }
}

fn conversation(id: &str) -> ConversationRef {
    ConversationRef {
        id: ConversationId::new(id),
        channel: ChannelName::new("local"),
        kind: ConversationKind::Direct,
        chat: id.trim_start_matches("local:").into(),
        thread: None,
    }
}

/// A turn in `local:owner`: the configured admin's, or a guest's.
fn scope(task: i64, admin: bool) -> TurnScope {
    TurnScope {
        task: TaskId(task),
        conversation: conversation("local:owner"),
        actor: Some(ActorId::new(if admin { "local:owner" } else { "local:guest" })),
        is_admin: admin,
        reply_to: None,
        origin: herald_core::TurnOrigin::Person,
        files: Vec::new(),
    }
}

fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

fn prompt_of(preparation: &herald_core::TurnPreparation) -> String {
    preparation
        .sections
        .iter()
        .map(|s| s.text.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn switches_and_active_skills_survive_a_restart() {
    let site = Site::new();
    let (storage, toolbox) = site.start().await;
    let reply = toolbox.prepare(&scope(1, true), Some("/skills disable notes")).await;
    assert_eq!(reply.direct_reply.as_deref(), Some("Skill `notes` is disabled."));
    storage.close().await;

    let (storage, toolbox) = site.start().await;
    let listing = toolbox.list(true);
    assert_eq!(
        listing.iter().find(|e| e.name.as_str() == "notes").unwrap().state(),
        "disabled"
    );
    toolbox.set_enabled("notes", true).await.unwrap();
    assert!(prompt_of(&toolbox.prepare(&scope(2, false), Some("$notes please")).await).contains("NOTES BODY"));
    storage.close().await;

    let (_storage, toolbox) = site.start().await;
    let preparation = toolbox.prepare(&scope(3, false), Some("more")).await;
    assert!(
        prompt_of(&preparation).contains("NOTES BODY"),
        "the active set was kept"
    );
}

#[tokio::test]
async fn a_message_is_not_sent_twice_when_a_task_is_retried_after_a_crash() {
    let site = Site::new();
    let hello = call("send_message", json!({"text": "hello once"}));
    let (storage, toolbox) = site.start().await;
    let first = toolbox.invoke(&scope(42, false), &hello, 1).await;
    assert!(!first.is_error, "{first:?}");
    // The process dies before the task completes; the queue hands the task
    // out again and the model makes the same call.
    drop(toolbox);
    storage.close().await;

    let (_storage, toolbox) = site.start().await;
    let retried = toolbox.invoke(&scope(42, false), &hello, 1).await;
    assert_eq!(retried, first);
    assert_eq!(site.recorder.texts(), vec!["hello once"]);
}

#[tokio::test]
async fn admins_reach_conversations_the_store_knows() {
    let site = Site::new();
    let (storage, toolbox) = site.start().await;
    let bob = conversation("local:bob");
    storage
        .queue()
        .enqueue(NewTask::message(InboundMessage {
            conversation: bob.clone(),
            sender: Sender {
                id: ActorId::new("local:bob"),
                display_name: "Bob".into(),
            },
            text: "hi".into(),
            platform_message_id: "m1".into(),
            reply_to: None,
            mentions_bot: false,
            received_at: chrono::Utc::now(),
            attachments: Vec::new(),
        }))
        .await
        .unwrap();
    let to_bob = call(
        "send_message",
        json!({"text": "hello bob", "conversation": "local:bob"}),
    );
    let output = toolbox.invoke(&scope(1, true), &to_bob, 1).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(site.recorder.sent.lock().unwrap()[0].conversation, bob);
    let refused = toolbox.invoke(&scope(2, false), &to_bob, 1).await;
    assert!(refused.is_error);
    assert_eq!(site.recorder.texts().len(), 1);
}

#[tokio::test]
async fn a_confirmation_asked_before_a_restart_can_be_approved_after_it() {
    let site = Site::new();
    let scripts = site.skills_dir().join("notes/scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::write(
        scripts.join("hello.sh"),
        "echo \"hello $1\"; cat \"$HERALD_FILES_DIR/note.txt\"",
    )
    .unwrap();
    let (storage, toolbox) = site.start().await;
    // The turn answers a message that came with a file.
    let file = storage
        .files()
        .put("text/plain", b"FROM THE MESSAGE", chrono::Utc::now())
        .await
        .unwrap();
    let asking = TurnScope {
        files: vec![MessageFile {
            name: "note.txt".into(),
            file,
        }],
        ..scope(5, true)
    };
    let run = call(
        "run_skill_script",
        json!({"name": "notes", "script": "hello.sh", "args": ["world"]}),
    );
    let waiting = toolbox.invoke(&asking, &run, 1).await;
    assert!(waiting.content.contains("Not run yet"), "{waiting:?}");
    let question = site.recorder.texts().pop().unwrap();
    assert!(
        question.contains("Files of the message, given to it: \"note.txt\""),
        "{question}"
    );
    let code: String = question.split("/approve ").nth(1).unwrap().chars().take(6).collect();
    storage.close().await;

    let (storage, toolbox) = site.start().await;
    let approved = toolbox
        .prepare(&scope(6, true), Some(&format!("/approve {code}")))
        .await;
    let reply = approved.direct_reply.unwrap();
    assert!(reply.contains("hello world"), "{reply}");
    assert!(
        reply.contains("FROM THE MESSAGE"),
        "the approved call has the files of the message that asked for it: {reply}"
    );
    let receipts =
        herald_core::ConversationStore::list_state(storage.conversations().as_ref(), "skill_receipts:local:owner")
            .await
            .unwrap();
    assert_eq!(receipts.len(), 1);
    assert!(
        receipts[0].0.starts_with("5:run_skill_script:") && receipts[0].0.ends_with(":1"),
        "a receipt is named by its task and call, not a position: {}",
        receipts[0].0
    );
}

#[tokio::test]
async fn messages_sent_in_one_order_are_not_sent_again_when_the_retry_sends_them_in_another() {
    let site = Site::new();
    let a = call("send_message", json!({"text": "first A"}));
    let b = call("send_message", json!({"text": "then B"}));
    let (storage, toolbox) = site.start().await;
    let sent_a = toolbox.invoke(&scope(43, false), &a, 1).await;
    let sent_b = toolbox.invoke(&scope(43, false), &b, 1).await;
    drop(toolbox);
    storage.close().await;

    let (_storage, toolbox) = site.start().await;
    assert_eq!(toolbox.invoke(&scope(43, false), &b, 1).await, sent_b);
    assert_eq!(toolbox.invoke(&scope(43, false), &a, 1).await, sent_a);
    assert_eq!(site.recorder.texts(), vec!["first A", "then B"]);
}
