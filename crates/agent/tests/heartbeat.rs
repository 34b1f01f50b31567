//! Heartbeat turns through the real worker, store and model client: an
//! acknowledgement is silent on every path and leaves no history, an alert
//! reaches the target without the token, a failure sends nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use herald_agent::worker::Finish;
use herald_agent::{Agent, AgentConfig, AgentParts, TaskFinished, TurnLimits, WorkerPool};
use herald_core::{
    ActorId, Admins, ChannelError, ChannelName, ChannelOutbound, ClaimFilter, ConversationId, ConversationKind,
    ConversationRef, InboundMessage, InstructionOrigin, NewTask, Outbound, OutboundMessage, Role, Sender, SentMessage,
    SystemClock, TaskPayload, ToolCall, ToolOutput, ToolSpec, Toolbox, TurnPreparation, TurnScope,
};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::{Reply, ScriptedModel};
use serde_json::json;

/// A reply that takes long enough for a message's turn to show the typing
/// indicator.
fn thinking(reply: Reply) -> Reply {
    Reply::Delayed(Duration::from_millis(800), Box::new(reply))
}

#[derive(Default)]
struct Recorder {
    sent: Mutex<Vec<String>>,
}

#[async_trait]
impl ChannelOutbound for Recorder {
    fn channel(&self) -> ChannelName {
        ChannelName::new("test")
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let mut sent = self.sent.lock().unwrap();
        sent.push(message.text.clone());
        Ok(SentMessage {
            platform_message_ids: vec![sent.len().to_string()],
        })
    }

    async fn typing(&self, _conversation: &ConversationRef) -> Result<Option<Duration>, ChannelError> {
        self.sent.lock().unwrap().push("<typing>".into());
        Ok(Some(Duration::from_secs(5)))
    }
}

/// A `send_message` tool that sends through the same outbound path the
/// skill registry's does.
struct SendMessage {
    outbound: Outbound,
}

#[async_trait]
impl Toolbox for SendMessage {
    async fn prepare(&self, _scope: &TurnScope, _user_text: Option<&str>) -> TurnPreparation {
        TurnPreparation {
            tools: vec![ToolSpec {
                name: "send_message".into(),
                description: "Send a message now".into(),
                parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            }],
            ..TurnPreparation::default()
        }
    }

    async fn invoke(&self, scope: &TurnScope, call: &ToolCall, _occurrence: u32) -> ToolOutput {
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        let text = args["text"].as_str().unwrap_or_default().to_owned();
        match self
            .outbound
            .send_in_turn(
                scope,
                &OutboundMessage {
                    conversation: scope.conversation.clone(),
                    text: text.clone(),
                    reply_to: None,
                    idempotency_key: None,
                    files: Vec::new(),
                },
            )
            .await
        {
            Ok(_) => ToolOutput {
                content: "sent".into(),
                is_error: false,
                delivered_to_conversation: Some(text),
            },
            Err(err) => ToolOutput::error(err.to_string()),
        }
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    storage: Storage,
    model: ScriptedModel,
    recorder: Arc<Recorder>,
    agent: Arc<Agent>,
}

async fn harness(ack_max_chars: usize) -> Harness {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let storage_config = StorageConfig {
        url: format!("sqlite://{}", dir.path().join("h.db").display()).into(),
        ..StorageConfig::default()
    };
    let storage = Storage::connect(&storage_config, &QueueConfig::default(), Arc::new(SystemClock))
        .await
        .unwrap();
    storage.migrate().await.unwrap();
    let model = ScriptedModel::start().await;
    let llm = herald_llm::LlmConfig {
        base_url: model.base_url(),
        max_retries: 0,
        ..Default::default()
    };
    let recorder = Arc::new(Recorder::default());
    let outbound = Outbound::new().with(recorder.clone());
    let agent = Agent::new(AgentParts {
        queue: storage.queue(),
        conversations: storage.conversations(),
        outbound: outbound.clone(),
        model: herald_llm::model_from_config(&llm).unwrap(),
        toolbox: Arc::new(SendMessage { outbound }),
        admins: Admins::new([ActorId::new("test:owner")]),
        config: AgentConfig::default(),
        limits: TurnLimits::default(),
        lease: Duration::from_secs(60),
        heartbeat_ack_max_chars: ack_max_chars,
        stream_replies: false,
        attachments: None,
        fetcher: None,
    });
    Harness {
        _dir: dir,
        storage,
        model,
        recorder,
        agent: Arc::new(agent),
    }
}

fn target() -> ConversationRef {
    ConversationRef {
        id: ConversationId::new("test:owner"),
        channel: ChannelName::new("test"),
        kind: ConversationKind::Direct,
        chat: "owner".into(),
        thread: None,
    }
}

fn heartbeat_task(key: &str) -> NewTask {
    NewTask {
        payload: TaskPayload::Instruction {
            conversation: target(),
            instruction: "Check the list. Answer HEARTBEAT_OK if nothing needs attention.\n- [ ] backups".into(),
            actor: Some(ActorId::new("test:owner")),
            origin: InstructionOrigin::Heartbeat,
        },
        dedup_key: Some(key.into()),
        priority: 2,
        not_before: None,
    }
}

impl Harness {
    async fn serve(&self, task: NewTask) -> TaskFinished {
        let mut finished = self.agent.subscribe();
        let id = self.storage.queue().enqueue(task).await.unwrap().task_id();
        let pool = WorkerPool::start(self.agent.clone(), ClaimFilter::any(), 1);
        let event = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let event = finished.recv().await.unwrap();
                if event.task == id {
                    return event;
                }
            }
        })
        .await
        .expect("the task finished");
        pool.shutdown(Duration::from_secs(5)).await;
        event
    }

    fn sent(&self) -> Vec<String> {
        self.recorder.sent.lock().unwrap().clone()
    }

    async fn history(&self) -> Vec<(Role, String)> {
        let entries = self.storage.conversations().history(&target().id, 50).await.unwrap();
        entries.into_iter().map(|e| (e.role, e.text)).collect()
    }
}

/// Rows: what the model does, what reaches the target, what history keeps.
#[tokio::test]
async fn acknowledgements_are_silent_on_every_path_and_alerts_arrive_without_the_token() {
    let send = |text: &str| Reply::tool_call("send_message", json!({ "text": text }));
    for (what, replies, sent, kept) in [
        (
            "a bare acknowledgement",
            vec![Reply::text("HEARTBEAT_OK")],
            &[][..],
            &[][..],
        ),
        (
            "an acknowledgement with a short note and markup",
            vec![Reply::text("**HEARTBEAT_OK** — backups ran, queue is empty.")],
            &[][..],
            &[][..],
        ),
        (
            "an acknowledgement sent through send_message, then as the answer",
            vec![send("HEARTBEAT_OK"), Reply::text("HEARTBEAT_OK")],
            &[][..],
            &[][..],
        ),
        ("an empty answer", vec![Reply::text("   ")], &[][..], &[][..]),
        (
            "an alert as the answer",
            vec![Reply::text("The nightly backup did not run.")],
            &["The nightly backup did not run."][..],
            &["The nightly backup did not run."][..],
        ),
        (
            "an alert with the token inside it",
            vec![Reply::text("Disk is at 95%. HEARTBEAT_OK for the rest.")],
            &["Disk is at 95%. for the rest."][..],
            &["Disk is at 95%. for the rest."][..],
        ),
        (
            "an alert sent through send_message, then an acknowledgement",
            vec![
                send("HEARTBEAT_OK Disk is at 95% and rising fast on the database host."),
                Reply::text("HEARTBEAT_OK"),
            ],
            &["Disk is at 95% and rising fast on the database host."][..],
            &["Disk is at 95% and rising fast on the database host."][..],
        ),
        (
            "a note longer than ack_max_chars (40) is an alert",
            vec![Reply::text(
                "HEARTBEAT_OK, but the certificate for example.org expires in 3 days.",
            )],
            &["but the certificate for example.org expires in 3 days."][..],
            &["but the certificate for example.org expires in 3 days."][..],
        ),
    ] {
        let h = harness(40).await;
        for (index, reply) in replies.into_iter().enumerate() {
            h.model.push(match index {
                0 => thinking(reply),
                _ => reply,
            });
        }
        let finished = h.serve(heartbeat_task("heartbeat:1")).await;
        assert_eq!(finished.outcome, Finish::Done, "{what}");
        assert_eq!(
            h.sent(),
            sent,
            "{what}: no typing indicator, no token, no empty message"
        );
        let kept: Vec<(Role, String)> = kept.iter().map(|t| (Role::Assistant, (*t).to_owned())).collect();
        assert_eq!(h.history().await, kept, "{what}: the checklist prompt is never kept");
    }
}

#[tokio::test]
async fn a_failed_heartbeat_sends_nothing_and_is_not_retried() {
    let h = harness(300).await;
    h.model.set_fallback(|_| Reply::error(500, "model crashed"));
    let finished = h.serve(heartbeat_task("heartbeat:2")).await;
    assert_eq!(finished.outcome, Finish::Dead);
    assert!(h.sent().is_empty(), "no failure notice either: {:?}", h.sent());
    assert_eq!(h.model.requests().len(), 1, "given up at once, not held in backoff");
    let stats = h.storage.queue().stats().await.unwrap();
    assert_eq!((stats.queued, stats.dead), (0, 1));
    assert!(h.history().await.is_empty());
}

#[tokio::test]
async fn the_rule_is_for_heartbeats_only() {
    let h = harness(300).await;
    h.model.push(thinking(Reply::text("HEARTBEAT_OK")));
    let message = InboundMessage {
        conversation: target(),
        sender: Sender {
            id: ActorId::new("test:owner"),
            display_name: "Owner".into(),
        },
        text: "What do you answer when all is fine?".into(),
        platform_message_id: "m1".into(),
        reply_to: None,
        mentions_bot: true,
        received_at: chrono::Utc::now(),
        attachments: Vec::new(),
    };
    h.serve(NewTask::message(message)).await;
    assert_eq!(h.sent(), ["<typing>", "HEARTBEAT_OK"]);
}
