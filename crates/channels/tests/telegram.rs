//! The Telegram adapter against the fake Bot API: polling with offsets kept
//! in the real SQLite store, the webhook server, and the outbound path.

#![cfg(feature = "telegram")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use herald_channels::Built;
use herald_channels::telegram::{self, TelegramConfig};
use herald_core::{
    Admission, ConversationStore, Enqueued, InboundMessage, InboundSink, ManualClock, OutboundMessage, StoreError,
    TaskId,
};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::telegram::{BOT_ID, FORUM_CHAT, FakeTelegram};
use herald_testkit::{FakePlatform, GroupTarget};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Records what the adapter hands over; can refuse the first few.
struct RecordingSink {
    accepted: Mutex<Vec<InboundMessage>>,
    refuse: Mutex<usize>,
    count: watch::Sender<usize>,
}

impl RecordingSink {
    fn new(refuse: usize) -> Arc<Self> {
        Arc::new(Self {
            accepted: Mutex::new(Vec::new()),
            refuse: Mutex::new(refuse),
            count: watch::channel(0).0,
        })
    }

    async fn wait_for(&self, count: usize) -> Vec<InboundMessage> {
        let mut seen = self.count.subscribe();
        let waited = tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|n| *n >= count)).await;
        assert!(
            waited.is_ok(),
            "only {} of {count} messages arrived",
            *self.count.borrow()
        );
        self.texts_and_all().1
    }

    fn texts_and_all(&self) -> (Vec<String>, Vec<InboundMessage>) {
        let all = self.accepted.lock().unwrap().clone();
        (all.iter().map(|m| m.text.clone()).collect(), all)
    }
}

#[async_trait]
impl InboundSink for RecordingSink {
    async fn accept(&self, message: InboundMessage) -> Result<Admission, StoreError> {
        {
            let mut refuse = self.refuse.lock().unwrap();
            if *refuse > 0 {
                *refuse -= 1;
                return Err(StoreError::Unavailable("database is locked".into()));
            }
        }
        let mut accepted = self.accepted.lock().unwrap();
        accepted.push(message);
        self.count.send_replace(accepted.len());
        Ok(Admission::Queued(Enqueued::New(TaskId(accepted.len() as i64))))
    }
}

async fn store(dir: &tempfile::TempDir) -> Arc<dyn ConversationStore> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let storage = Storage::connect(
        &StorageConfig {
            url: format!("sqlite://{}", dir.path().join("herald.db").display()).into(),
            ..StorageConfig::default()
        },
        &QueueConfig::default(),
        Arc::new(ManualClock::new(chrono::Utc::now())),
    )
    .await
    .unwrap();
    storage.migrate().await.unwrap();
    storage.conversations()
}

fn config(yaml: &str) -> TelegramConfig {
    serde_yaml::from_str(yaml).unwrap_or_else(|err| panic!("{err}\n{yaml}"))
}

fn local_limiter() -> Arc<dyn herald_core::SendLimiter> {
    Arc::new(herald_core::LocalLimiter::new(
        Arc::new(herald_core::SteadyClock::new()),
    ))
}

fn build(yaml: &str, store: Arc<dyn ConversationStore>) -> Built {
    telegram::build(&config(yaml), Some(store), local_limiter(), &Default::default()).expect("valid telegram config")
}

/// Runs the ingress in the background until the returned token is cancelled.
fn run(channel: &Built, sink: Arc<RecordingSink>) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let ingress = channel.ingress.clone();
    let token = stop.clone();
    let handle = tokio::spawn(async move {
        ingress.run(sink, token).await.expect("ingress runs until stopped");
    });
    (stop, handle)
}

#[tokio::test]
async fn polled_messages_are_accepted_then_confirmed_and_a_restart_resumes() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let ada = fake.admin();
    let sink = RecordingSink::new(0);
    let channel = build(&fake.channel_yaml(), store.clone());
    let (stop, handle) = run(&channel, sink.clone());

    fake.send_dm(&ada, "first").await;
    fake.send_group(&ada, &fake.group(), "in the topic", true).await;
    let seen = sink.wait_for(2).await;
    assert_eq!(seen[0].conversation.id.as_str(), "telegram:1001");
    assert_eq!(seen[0].sender.id.as_str(), "telegram:1001");
    let topic = fake.forum_topic();
    assert_eq!(
        seen[1].conversation.id.as_str(),
        format!("telegram:{FORUM_CHAT}/{topic}")
    );
    assert_eq!(seen[1].text, "in the topic");
    assert!(seen[1].mentions_bot);
    // The next poll confirms both.
    assert!(
        fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0)
            .await
    );
    let stored = store.get_state("telegram", &format!("offset:{BOT_ID}")).await.unwrap();
    assert!(stored.is_some(), "the offset is kept in the store");
    stop.cancel();
    handle.await.unwrap();
    assert!(
        fake.calls()
            .starts_with(&["getme".to_owned(), "getwebhookinfo".to_owned(), "getupdates".to_owned()])
    );
    assert_eq!(fake.allowed_updates(), Some(vec!["message".to_owned()]));

    // While Herald is down, more arrives; a new process picks up only that.
    fake.send_dm(&ada, "while down").await;
    let restarted = build(&fake.channel_yaml(), store.clone());
    let (stop, handle) = run(&restarted, sink.clone());
    let seen = sink.wait_for(3).await;
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[2].text, "while down");
    assert!(
        fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0)
            .await
    );
    assert!(fake.deliveries().values().all(|n| *n == 1), "{:?}", fake.deliveries());
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_webhook_set_behind_herald_s_back_is_removed_and_polling_goes_on() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sink = RecordingSink::new(0);
    let yaml = fake.channel_yaml().replace("poll_timeout: 10s", "poll_timeout: 1s");
    let channel = build(&yaml, store(&dir).await);
    let (stop, handle) = run(&channel, sink.clone());
    fake.send_dm(&fake.admin(), "one").await;
    sink.wait_for(1).await;
    // An unreachable webhook: nothing is pushed, and getUpdates gets 409.
    fake.set_webhook("http://127.0.0.1:9/unreachable", None);
    assert!(
        fake.wait_until(Duration::from_secs(10), |f| f.webhook().is_none())
            .await
    );
    fake.send_dm(&fake.admin(), "two").await;
    sink.wait_for(2).await;
    assert_eq!(sink.texts_and_all().0, ["one", "two"]);
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn an_update_the_store_refused_stays_unconfirmed_until_accepted() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sink = RecordingSink::new(2);
    let channel = build(&fake.channel_yaml(), store(&dir).await);
    let (stop, handle) = run(&channel, sink.clone());
    fake.send_dm(&fake.admin(), "keep me").await;
    let seen = sink.wait_for(1).await;
    assert_eq!(sink.texts_and_all().0, ["keep me"]);
    assert_eq!(seen.len(), 1);
    assert!(
        fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0)
            .await
    );
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn edits_joins_bots_and_own_messages_never_reach_the_sink() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sink = RecordingSink::new(0);
    let channel = build(&fake.channel_yaml(), store(&dir).await);
    let (stop, handle) = run(&channel, sink.clone());
    let ada = fake.admin();
    let id: i32 = fake.send_dm(&ada, "original").await.parse().unwrap();
    fake.edit_dm(&ada, id, "edited");
    fake.join(&fake.stranger(), &fake.plain_group());
    fake.send_from_other_bot(&fake.group(), "beep");
    fake.send_own_message(&fake.group(), "my own words").await;
    fake.send_dm(&ada, "last").await;
    sink.wait_for(2).await;
    assert!(
        fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0)
            .await
    );
    assert_eq!(sink.texts_and_all().0, ["original", "last"]);
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_message_that_does_not_decode_is_passed_over_and_the_poll_goes_on() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sink = RecordingSink::new(0);
    let channel = build(&fake.channel_yaml(), store(&dir).await);
    let (stop, handle) = run(&channel, sink.clone());
    let ada = fake.admin();
    // A message whose fields are not what the Bot API documents (its id a
    // string, no chat): one such update must not hold the ones after it.
    fake.push_update("message", serde_json::json!({"message_id": "seven", "date": "today"}));
    fake.send_dm(&ada, "after the odd one").await;
    sink.wait_for(1).await;
    assert!(
        fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0)
            .await,
        "both updates are confirmed"
    );
    assert_eq!(sink.texts_and_all().0, ["after the odd one"]);
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn replies_are_chunked_into_the_topic_and_typing_shows_there() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sink = RecordingSink::new(0);
    let channel = build(&fake.channel_yaml(), store(&dir).await);
    let (stop, handle) = run(&channel, sink.clone());
    let asked = fake
        .send_group(&fake.admin(), &fake.group(), "long one please", true)
        .await;
    let inbound = sink.wait_for(1).await.remove(0);
    let lasts = channel.outbound.typing(&inbound.conversation).await.unwrap();
    assert_eq!(lasts, Some(Duration::from_secs(5)), "Telegram shows it for 5 s");
    let text = "word ".repeat(2000);
    let sent = channel
        .outbound
        .send(&OutboundMessage {
            conversation: inbound.conversation.clone(),
            text: text.clone(),
            reply_to: Some(inbound.platform_message_id.clone()),
            idempotency_key: None,
            files: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(sent.platform_message_ids.len(), 3);
    let posted = fake.sent();
    let topic = Some(fake.forum_topic().to_string());
    assert!(
        posted
            .iter()
            .all(|m| m.chat == FORUM_CHAT.to_string() && m.thread == topic)
    );
    assert!(posted.iter().all(|m| fake.measure(&m.text) <= 4096));
    assert_eq!(posted[0].reply_to.as_deref(), Some(asked.as_str()));
    let joined: Vec<&str> = posted.iter().flat_map(|m| m.text.split_whitespace()).collect();
    assert_eq!(joined.len(), 2000, "every word arrives once, in order");
    assert_eq!(fake.chat_actions().len(), 1);
    assert_eq!(fake.chat_actions()[0].thread, topic);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn a_429_is_waited_out_for_retry_after() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let channel = build(&fake.channel_yaml(), store(&dir).await);
    let sink = RecordingSink::new(0);
    let (stop, handle) = run(&channel, sink.clone());
    fake.send_dm(&fake.admin(), "hi").await;
    let inbound = sink.wait_for(1).await.remove(0);
    fake.throttle_next(1, Duration::from_secs(1));
    let started = tokio::time::Instant::now();
    channel
        .outbound
        .send(&OutboundMessage {
            conversation: inbound.conversation,
            text: "after the wait".into(),
            reply_to: None,
            idempotency_key: None,
            files: Vec::new(),
        })
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(fake.sent().len(), 1);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn probe_names_the_bot_and_a_wrong_token_stops_the_ingress() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let channel = build(&fake.channel_yaml(), store.clone());
    assert_eq!(
        channel.ingress.probe().await.unwrap(),
        format!("@herald_test_bot (id {BOT_ID})")
    );

    let wrong = fake
        .channel_yaml()
        .replace(&fake.token(), "7100200300:AAE-not-the-token");
    let channel = build(&wrong, store);
    let err = channel.ingress.probe().await.unwrap_err().to_string();
    assert!(!err.contains("not-the-token"), "{err}");
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        channel.ingress.run(RecordingSink::new(0), CancellationToken::new()),
    )
    .await
    .expect("a wrong token ends the ingress at once");
    assert!(result.is_err());
}

/// One raw HTTP POST; returns the status code.
async fn post(addr: std::net::SocketAddr, path: &str, secret: Option<&str>, body: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(secret) = secret {
        request.push_str(&format!("X-Telegram-Bot-Api-Secret-Token: {secret}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn webhook_mode_registers_checks_the_secret_and_accepts_pushed_updates() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let listen = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let yaml = format!(
        "{}    mode: webhook\n    webhook:\n      listen: \"{listen}\"\n      url: \"http://{listen}/telegram/hook\"\n      secret: \"hook-secret_42-long-enough-to-guard-0123\"\n",
        fake.channel_yaml()
    );
    let sink = RecordingSink::new(0);
    let channel = build(&yaml, store(&dir).await);
    let (stop, handle) = run(&channel, sink.clone());
    assert!(fake.wait_until(Duration::from_secs(5), |f| f.webhook().is_some()).await);
    let hook = fake.webhook().unwrap();
    assert_eq!(hook.url, format!("http://{listen}/telegram/hook"));
    assert_eq!(hook.secret.as_deref(), Some("hook-secret_42-long-enough-to-guard-0123"));

    fake.send_dm(&fake.admin(), "pushed to me").await;
    let seen = sink.wait_for(1).await;
    assert_eq!(seen[0].text, "pushed to me");
    assert!(
        fake.wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0)
            .await
    );

    let update = r#"{"update_id":1,"message":{"message_id":9,"from":{"id":66,"is_bot":false,"first_name":"Eve"},"chat":{"id":66,"first_name":"Eve","type":"private"},"date":1735689600,"text":"forged"}}"#;
    assert_eq!(post(listen, "/telegram/hook", None, update).await, 401);
    assert_eq!(post(listen, "/telegram/hook", Some("guess"), update).await, 401);
    assert_eq!(
        post(
            listen,
            "/telegram/hook",
            Some("hook-secret_42-long-enough-to-guard-0123"),
            update
        )
        .await,
        200
    );
    let seen = sink.wait_for(2).await;
    assert_eq!(sink.texts_and_all().0, ["pushed to me", "forged"]);
    assert_eq!(seen[1].sender.id.as_str(), "telegram:66");
    assert!(
        !fake.calls().contains(&"getupdates".to_owned()),
        "webhook mode never polls"
    );
    stop.cancel();
    handle.await.unwrap();
}

#[tokio::test]
async fn without_a_configured_secret_a_random_one_guards_the_webhook() {
    let fake = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let listen = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let yaml = format!(
        "{}    mode: webhook\n    webhook:\n      listen: \"{listen}\"\n      url: \"http://{listen}/telegram/hook\"\n",
        fake.channel_yaml()
    );
    let sink = RecordingSink::new(0);
    let channel = build(&yaml, store(&dir).await);
    let (stop, handle) = run(&channel, sink.clone());
    assert!(fake.wait_until(Duration::from_secs(5), |f| f.webhook().is_some()).await);
    let secret = fake.webhook().unwrap().secret.expect("a secret was registered");
    assert!(secret.len() >= 32, "{secret}");

    let update = r#"{"update_id":1,"message":{"message_id":9,"from":{"id":66,"is_bot":false,"first_name":"Eve"},"chat":{"id":66,"first_name":"Eve","type":"private"},"date":1735689600,"text":"forged"}}"#;
    assert_eq!(post(listen, "/telegram/hook", None, update).await, 401);
    assert_eq!(post(listen, "/telegram/hook", Some(""), update).await, 401);
    assert_eq!(post(listen, "/telegram/hook", Some(&secret), update).await, 200);
    assert_eq!(sink.wait_for(1).await[0].text, "forged");
    stop.cancel();
    handle.await.unwrap();
}

#[test]
fn group_targets_name_the_forum_topic() {
    // The conformance suite posts in `group()`: a forum topic, so replies
    // must carry message_thread_id.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let fake = FakeTelegram::start().await;
        let GroupTarget { chat, thread } = fake.group();
        assert_eq!(chat, FORUM_CHAT.to_string());
        assert_eq!(thread, Some(fake.forum_topic().to_string()));
    });
}
