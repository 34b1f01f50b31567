//! The agent loop against the real SQLite store and the scripted model over
//! HTTP, through the real model client.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use herald_agent::{Agent, AgentConfig, AgentParts, TaskFinished, TurnLimits, WorkerPool};
use herald_core::{
    ActorId, Admins, ChannelError, ChannelName, ChannelOutbound, ClaimFilter, ConversationId, ConversationKind,
    ConversationRef, InboundMessage, NewHistoryEntry, NewTask, Outbound, OutboundMessage, Role, Sender, SentMessage,
    SystemClock, ToolCall, ToolOutput, ToolSpec, Toolbox, TurnPreparation, TurnScope,
};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::openai::{tool_names, tool_results};
use herald_testkit::{Reply, ScriptedModel};
use serde_json::json;

/// A channel that keeps what it was asked to send.
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
}

/// One real tool: a weather table.
#[derive(Default)]
struct Weather {
    calls: AtomicU32,
}

#[async_trait]
impl Toolbox for Weather {
    async fn prepare(&self, _scope: &TurnScope, _user_text: Option<&str>) -> TurnPreparation {
        TurnPreparation {
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Current weather in a city".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            }],
            ..TurnPreparation::default()
        }
    }

    async fn invoke(&self, _scope: &TurnScope, call: &ToolCall, _occurrence: u32) -> ToolOutput {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        match args["city"].as_str() {
            Some("Oslo") => ToolOutput::ok("sunny, 21°C"),
            // A tool that answers with far more than any prompt can hold.
            Some("Everywhere") => ToolOutput::ok(format!("BEGIN {} END", "rain ".repeat(600_000))),
            Some(city) => ToolOutput::ok(format!("no data for {city}")),
            None => ToolOutput::error("`city` is required"),
        }
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    storage: Storage,
    model: ScriptedModel,
    recorder: Arc<Recorder>,
    weather: Arc<Weather>,
    agent: Arc<Agent>,
}

async fn harness(limits: TurnLimits) -> Harness {
    harness_with_lease(limits, Duration::from_secs(60)).await
}

async fn harness_with_lease(limits: TurnLimits, lease: Duration) -> Harness {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let storage_config = StorageConfig {
        url: format!("sqlite://{}", dir.path().join("h.db").display()).into(),
        ..StorageConfig::default()
    };
    let queue_config = QueueConfig {
        lease,
        ..QueueConfig::default()
    };
    let storage = Storage::connect(&storage_config, &queue_config, Arc::new(SystemClock))
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
    let weather = Arc::new(Weather::default());
    let agent = Arc::new(Agent::new(AgentParts {
        queue: storage.queue(),
        conversations: storage.conversations(),
        outbound: Outbound::new().with(recorder.clone()),
        model: herald_llm::model_from_config(&llm).unwrap(),
        toolbox: weather.clone(),
        admins: Admins::default(),
        config: AgentConfig::default(),
        limits,
        lease,
        heartbeat_ack_max_chars: herald_core::heartbeat::DEFAULT_ACK_MAX_CHARS,
        stream_replies: false,
        attachments: None,
        fetcher: None,
    }));
    Harness {
        _dir: dir,
        storage,
        model,
        recorder,
        weather,
        agent,
    }
}

fn message(text: &str, id: &str) -> InboundMessage {
    InboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new("test:1"),
            channel: ChannelName::new("test"),
            kind: ConversationKind::Direct,
            chat: "1".into(),
            thread: None,
        },
        sender: Sender {
            id: ActorId::new("test:ann"),
            display_name: "Ann".into(),
        },
        text: text.into(),
        platform_message_id: id.into(),
        reply_to: None,
        mentions_bot: true,
        received_at: chrono::Utc::now(),
        attachments: Vec::new(),
    }
}

impl Harness {
    /// Queues `text`, serves it with a worker pool, and waits until it is finished.
    async fn exchange(&self, text: &str, id: &str) -> TaskFinished {
        let mut finished = self.agent.subscribe();
        let task = self
            .storage
            .queue()
            .enqueue(NewTask::message(message(text, id)))
            .await
            .unwrap()
            .task_id();
        let pool = WorkerPool::start(self.agent.clone(), ClaimFilter::any(), 2);
        let event = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let event = finished.recv().await.unwrap();
                if event.task == task {
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
}

#[tokio::test]
async fn a_tool_call_round_trip_reaches_the_user() {
    let h = harness(TurnLimits::default()).await;
    h.model.push(Reply::tool_call("get_weather", json!({"city": "Oslo"})));
    h.model.push(Reply::text("It is sunny in Oslo, 21°C."));
    h.exchange("weather in Oslo?", "m1").await;

    assert_eq!(h.sent(), ["It is sunny in Oslo, 21°C."]);
    let requests = h.model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(tool_names(&requests[0]), ["get_weather"]);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1, "sunny, 21°C", "the tool's output went back to the model");
    // History keeps what the user said and the final answer, not the tool chatter.
    let history = h
        .storage
        .conversations()
        .history(&ConversationId::new("test:1"), 10)
        .await
        .unwrap();
    let lines: Vec<_> = history.iter().map(|e| (e.role, e.text.as_str())).collect();
    assert_eq!(
        lines,
        [
            (Role::User, "weather in Oslo?"),
            (Role::Assistant, "It is sunny in Oslo, 21°C.")
        ]
    );
}

#[tokio::test]
async fn a_bad_tool_call_is_an_error_for_the_model_not_a_crash() {
    let h = harness(TurnLimits::default()).await;
    h.model.push(Reply::tool_call("get_weather", json!({})));
    h.model.push(Reply::text("Which city?"));
    h.exchange("weather?", "m1").await;
    assert_eq!(h.sent(), ["Which city?"]);
    let results = tool_results(&h.model.requests()[1]);
    assert!(results[0].1.starts_with("error:"), "{results:?}");
}

#[tokio::test]
async fn repeated_identical_calls_are_stopped_and_an_answer_demanded() {
    let h = harness(TurnLimits::default()).await;
    // The third identical call is refused; the model then answers.
    for _ in 0..3 {
        h.model.push(Reply::tool_call("get_weather", json!({"city": "Oslo"})));
    }
    h.model.set_fallback(|_| Reply::text("Sunny."));
    h.exchange("weather?", "m1").await;
    assert_eq!(
        h.weather.calls.load(Ordering::SeqCst),
        2,
        "the third identical call did not run"
    );
    let requests = h.model.requests();
    let last = requests.last().unwrap();
    assert!(last.get("tools").is_none(), "the last call offered no tools: {last}");
    assert_eq!(h.sent().last().map(String::as_str), Some("Sunny."));
}

#[tokio::test]
async fn the_iteration_limit_ends_tool_use() {
    let h = harness(TurnLimits {
        max_tool_iterations: 3,
        ..TurnLimits::default()
    })
    .await;
    for city in ["A", "B", "C", "D", "E"] {
        h.model.push(Reply::tool_call("get_weather", json!({ "city": city })));
    }
    h.model.set_fallback(|_| Reply::text("Done looking."));
    h.exchange("weather everywhere", "m1").await;
    assert_eq!(h.weather.calls.load(Ordering::SeqCst), 3);
    let requests = h.model.requests();
    assert_eq!(requests.len(), 4, "three tool rounds and one final call");
    assert!(requests[3].get("tools").is_none());
}

#[tokio::test]
async fn a_turn_recorded_before_a_crash_is_delivered_without_asking_the_model_again() {
    let h = harness(TurnLimits::default()).await;
    let queue = h.storage.queue();
    queue.enqueue(NewTask::message(message("hello", "m1"))).await.unwrap();
    // A worker got as far as recording the turn, then died.
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    let entries = [
        NewHistoryEntry {
            role: Role::User,
            actor: None,
            text: "hello".into(),
        },
        NewHistoryEntry {
            role: Role::Assistant,
            actor: None,
            text: "recorded answer".into(),
        },
    ];
    h.storage
        .conversations()
        .record_turn(&ConversationId::new("test:1"), lease.task.id, &entries)
        .await
        .unwrap();
    h.agent.serve(lease).await;
    assert_eq!(h.sent(), ["recorded answer"]);
    assert!(h.model.requests().is_empty(), "the model was not asked again");
    assert_eq!(queue.pending(&ClaimFilter::any()).await.unwrap(), 0);
}

#[tokio::test]
async fn a_redelivered_platform_event_is_answered_once() {
    let h = harness(TurnLimits::default()).await;
    h.exchange("hi", "same-id").await;
    let again = h
        .storage
        .queue()
        .enqueue(NewTask::message(message("hi", "same-id")))
        .await
        .unwrap();
    assert!(matches!(again, herald_core::Enqueued::Duplicate(_)));
    assert_eq!(h.sent(), ["echo: hi"]);
}

/// A worker whose lease was taken from it (it stalled past the lease, and
/// the task went to another worker) stops its turn and sends nothing: the
/// new holder answers, not both.
#[tokio::test]
async fn a_worker_that_lost_its_lease_sends_nothing() {
    let h = harness_with_lease(TurnLimits::default(), Duration::from_millis(600)).await;
    h.model.push(Reply::Hang);
    let queue = h.storage.queue();
    queue.enqueue(NewTask::message(message("hello", "m1"))).await.unwrap();
    let lease = queue.claim(&ClaimFilter::any()).await.unwrap().unwrap();
    let agent = h.agent.clone();
    let turn = tokio::spawn(async move { agent.serve(lease).await });
    h.model.wait_for_requests(1).await;

    // Another worker's claim after the lease ran out, as the store sees it.
    let database = h._dir.path().join("h.db");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", database.display()))
        .await
        .unwrap();
    sqlx::query("UPDATE tasks SET lease_token = 'another-worker'")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    tokio::time::timeout(Duration::from_secs(10), turn)
        .await
        .expect("the turn stopped once its lease was found lost")
        .unwrap();
    h.model.release();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(h.sent().is_empty(), "a worker without its lease sent {:?}", h.sent());
    assert_eq!(
        queue.pending(&ClaimFilter::any()).await.unwrap(),
        1,
        "the task stays with its new holder"
    );
}

#[tokio::test]
async fn a_huge_tool_result_is_cut_to_its_share_of_the_prompt_budget() {
    let h = harness(TurnLimits {
        window: std::sync::Arc::new(herald_agent::ContextWindow::new(4096)),
        ..TurnLimits::default()
    })
    .await;
    h.model
        .push(Reply::tool_call("get_weather", json!({"city": "Everywhere"})));
    h.model.push(Reply::text("Rain, everywhere."));
    h.exchange("weather everywhere?", "m1").await;
    assert_eq!(h.sent(), ["Rain, everywhere."]);

    let requests = h.model.requests();
    let result = &tool_results(&requests[1])[0].1;
    assert!(
        result.starts_with("BEGIN ") && result.ends_with(" END"),
        "start and end are kept"
    );
    assert!(result.contains("characters cut to fit"), "the cut is said");
    // 3 MB of output; the whole request stays within a 4,096-token window.
    let sent = requests[1].to_string().len();
    assert!(sent < 4096 * 3, "the request was {sent} bytes");
}

/// A turn waiting on the model holds no worker: ten conversations whose
/// answers the model holds back are all at the model at once (the pool used
/// to serve four at a time, and this waited forever for the fifth), and all
/// ten are answered when it lets go.
#[tokio::test]
async fn conversations_waiting_on_a_slow_model_do_not_hold_up_each_other() {
    let h = harness(TurnLimits::default()).await;
    let mut finished = h.agent.subscribe();
    for chat in 0..10 {
        h.model.push(Reply::Hang);
        let mut message = message(&format!("question {chat}"), &format!("m{chat}"));
        message.conversation.id = ConversationId::new(format!("test:{chat}"));
        message.conversation.chat = chat.to_string();
        h.storage.queue().enqueue(NewTask::message(message)).await.unwrap();
    }
    let pool = WorkerPool::start(h.agent.clone(), ClaimFilter::any(), 10);
    tokio::time::timeout(Duration::from_secs(30), h.model.wait_for_requests(10))
        .await
        .expect("all ten conversations reach the model while it holds every answer");
    h.model.release();
    for _ in 0..10 {
        let event = tokio::time::timeout(Duration::from_secs(30), finished.recv())
            .await
            .expect("every held turn finishes")
            .unwrap();
        assert_eq!(event.outcome, herald_agent::Finish::Done);
    }
    pool.shutdown(Duration::from_secs(5)).await;
    let mut sent = h.sent();
    sent.sort();
    assert_eq!(sent.len(), 10, "{sent:?}");
}
