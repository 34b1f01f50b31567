//! The Slack adapter against the fake Slack: Socket Mode and the Events API
//! in, `chat.postMessage` out, with a sink that records what it is handed.

#![cfg(feature = "slack")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use herald_channels::slack::{self, SlackConfig};
use herald_core::{ChannelError, ChannelOutbound, ConversationKind, InboundSink, OutboundMessage};
use herald_testkit::slack::{BOT_TOKEN, FakeSlack, FakeSlackOptions, GENERAL, SIGNING_SECRET, signature};
use herald_testkit::{FakePlatform, GroupTarget};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod common;
use common::{Recorder, WAIT, local_limiter};

fn options() -> FakeSlackOptions {
    FakeSlackOptions {
        channel_rate: Some((20, Duration::from_secs(1))),
        ack_timeout: Duration::from_millis(500),
        push_retry_delays: vec![Duration::from_millis(50), Duration::from_millis(50)],
        ..FakeSlackOptions::default()
    }
}

fn config(yaml: &str) -> SlackConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    serde_yaml::from_str(yaml.replace("\n    ", "\n").trim_start_matches("    ")).expect("config parses")
}

struct Running {
    sink: Arc<Recorder>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), ChannelError>>,
    outbound: Arc<dyn ChannelOutbound>,
}

impl Running {
    async fn stop(self) -> Result<(), ChannelError> {
        self.shutdown.cancel();
        self.task.await.expect("the ingress task ends")
    }
}

fn start(yaml: &str) -> Running {
    let parts = slack::build(&config(yaml), local_limiter(), &Default::default()).expect("the channel builds");
    let sink = Arc::new(Recorder::default());
    let shutdown = CancellationToken::new();
    let ingress = parts.ingress.clone();
    let (task_sink, task_shutdown) = (sink.clone() as Arc<dyn InboundSink>, shutdown.clone());
    let task = tokio::spawn(async move { ingress.run(task_sink, task_shutdown).await });
    Running {
        sink,
        shutdown,
        task,
        outbound: parts.outbound,
    }
}

#[tokio::test]
async fn socket_mode_hands_over_dms_and_mentions_once_and_acks_them() {
    let fake = FakeSlack::start_with(options()).await;
    let running = start(&fake.channel_yaml());
    assert!(fake.wait_until(WAIT, |f| f.connections() == 1).await, "Herald connects");
    let admin = fake.admin();
    let ts = fake.send_dm(&admin, "hello there").await;
    let target = fake.group();
    fake.send_group(&fake.stranger(), &target, "not for you", false).await;
    fake.send_group(&fake.stranger(), &target, "what's the time?", true)
        .await;
    let messages = running.sink.wait_for(3).await;
    let dm = &messages[0];
    assert_eq!(dm.conversation.id.as_str(), format!("slack:{}", fake.dm_chat(&admin)));
    assert_eq!(dm.conversation.kind, ConversationKind::Direct);
    assert_eq!(dm.sender.id.as_str(), "slack:U0ADMIN001");
    assert_eq!(dm.sender.display_name, "Ada Lovelace");
    assert_eq!(dm.platform_message_id, format!("{}:{ts}", fake.dm_chat(&admin)));
    assert!(!messages[1].mentions_bot);
    let mention = &messages[2];
    assert!(mention.mentions_bot);
    assert_eq!(mention.text, "what's the time?");
    assert_eq!(mention.conversation.thread, target.thread);
    assert_eq!(mention.conversation.chat, GENERAL);
    // Every envelope (the app_mention and its message event included) is acked.
    assert!(fake.wait_until(WAIT, |f| f.unacked() == 0).await);
    assert_eq!(
        running.sink.messages().len(),
        3,
        "the app_mention's twin is not handed over again"
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn envelopes_that_arrive_together_are_stored_together_in_order_and_acked_only_after() {
    let fake = FakeSlack::start_with(FakeSlackOptions {
        ack_timeout: Duration::from_secs(60),
        ..options()
    })
    .await;
    let running = start(&fake.channel_yaml());
    assert!(fake.wait_until(WAIT, |f| f.connections() == 1).await);
    let admin = fake.admin();
    fake.send_dm(&admin, "first").await;
    running.sink.wait_for(1).await;
    assert!(fake.wait_until(WAIT, |f| f.unacked() == 0).await);

    // The queue stalls; what Slack sends meanwhile waits unacknowledged.
    let stalled = running.sink.gate.write().await;
    fake.send_dm(&admin, "while stalled").await;
    let mut sent = vec!["first".to_owned(), "while stalled".to_owned()];
    for n in 0..10 {
        let text = format!("burst {n}");
        fake.send_dm(&admin, &text).await;
        sent.push(text);
    }
    // An app_mention and its message event, the same message twice.
    fake.send_group(&fake.stranger(), &fake.group(), "and a mention", true)
        .await;
    sent.push("and a mention".into());
    fake.send_slash_command(&admin, GENERAL, "/herald", "status");
    // Herald has read what came while the queue stalled and waits to hand
    // it over (the first hand-over was "first"); the rest are given time to
    // reach its socket before the store recovers.
    let handed = tokio::time::timeout(WAIT, async {
        while running.sink.handovers.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    handed.await.expect("a hand-over waits at the stalled queue");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.unacked(), 14, "nothing is acknowledged before the queue has it");
    drop(stalled);

    let messages = running.sink.wait_for(sent.len()).await;
    let texts: Vec<_> = messages.iter().map(|m| m.text.clone()).collect();
    assert_eq!(texts, sent, "in Slack's order, each once");
    assert!(
        fake.wait_until(WAIT, |f| f.unacked() == 0).await,
        "every envelope is acknowledged"
    );
    assert!(
        fake.dropped().is_empty(),
        "the slash command was acknowledged, not left to fail"
    );
    assert_eq!(
        running.sink.calls.load(Ordering::SeqCst),
        sent.len(),
        "the mention's twin is not handed over again"
    );
    let batches = running.sink.batches.lock().unwrap().clone();
    assert!(
        batches.iter().any(|&n| n > 1),
        "envelopes read together are handed over together: {batches:?}"
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn the_bots_own_and_other_bots_messages_never_reach_the_sink() {
    let fake = FakeSlack::start_with(options()).await;
    let running = start(&fake.channel_yaml());
    assert!(fake.wait_until(WAIT, |f| f.connections() == 1).await);
    let target = fake.group();
    fake.send_own_message(&target, "I said this").await;
    fake.send_bot_message(&target, "<@U0HERALD01> build passed");
    fake.send_event(
        json!({"type": "member_joined_channel", "user": "U0NEW00001", "channel": GENERAL,
        "channel_type": "C", "team": "T0HERALD01"}),
    );
    fake.send_dm(&fake.admin(), "after them").await;
    let messages = running.sink.wait_for(1).await;
    assert!(fake.wait_until(WAIT, |f| f.unacked() == 0).await);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].text, "after them");
    assert_eq!(running.sink.calls.load(Ordering::SeqCst), 1);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn an_event_the_queue_could_not_take_is_not_acked_and_comes_again() {
    let fake = FakeSlack::start_with(options()).await;
    let running = start(&fake.channel_yaml());
    running.sink.failures.store(1, Ordering::SeqCst);
    assert!(fake.wait_until(WAIT, |f| f.connections() == 1).await);
    fake.send_dm(&fake.admin(), "keep me").await;
    let messages = running.sink.wait_for(1).await;
    assert_eq!(messages[0].text, "keep me");
    assert_eq!(running.sink.calls.load(Ordering::SeqCst), 2, "refused once, then taken");
    assert!(fake.wait_until(WAIT, |f| f.unacked() == 0).await);
    running.stop().await.unwrap();
}

/// How many Socket Mode URLs Herald asked for (`apps.connections.open`).
fn connections_opened(fake: &FakeSlack) -> usize {
    fake.calls().iter().filter(|m| *m == "apps.connections.open").count()
}

#[tokio::test]
async fn a_refreshed_connection_is_reopened_and_events_keep_coming() {
    let fake = FakeSlack::start_with(options()).await;
    let running = start(&fake.channel_yaml());
    assert!(fake.wait_until(WAIT, |f| f.connections() == 1).await);
    fake.send_dm(&fake.admin(), "before").await;
    running.sink.wait_for(1).await;
    let opened = connections_opened(&fake);
    fake.request_reconnect("refresh_requested");
    assert!(
        fake.wait_until(WAIT, |f| connections_opened(f) > opened && f.connections() == 1)
            .await
    );
    fake.send_dm(&fake.admin(), "after").await;
    let messages = running.sink.wait_for(2).await;
    assert_eq!(messages[1].text, "after");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn two_connections_by_default_so_a_lost_or_refreshed_one_never_leaves_none_open() {
    let fake = FakeSlack::start_with(options()).await;
    let yaml = fake.channel_yaml().replace("    socket_connections: 1\n", "");
    let running = start(&yaml);
    assert!(
        fake.wait_until(WAIT, |f| f.connections() == 2).await,
        "Herald opens two Socket Mode connections by default"
    );
    fake.watch_open_connections();
    // One connection is lost without warning; a message sent at once still
    // has a connection to come on.
    fake.drop_oldest_connection();
    fake.send_dm(&fake.admin(), "while one is down").await;
    assert_eq!(running.sink.wait_for(1).await[0].text, "while one is down");
    assert!(
        fake.wait_until(WAIT, |f| f.connections() == 2).await,
        "the lost one is replaced"
    );
    // Slack refreshes each connection on its own schedule.
    let opened = connections_opened(&fake);
    fake.request_reconnect_oldest("refresh_requested");
    assert!(
        fake.wait_until(WAIT, |f| connections_opened(f) > opened && f.connections() == 2)
            .await
    );
    fake.send_dm(&fake.admin(), "after the refresh").await;
    assert_eq!(running.sink.wait_for(2).await[1].text, "after the refresh");
    assert!(fake.wait_until(WAIT, |f| f.unacked() == 0).await);
    assert_eq!(fake.fewest_open_connections(), Some(1), "never none open");
    assert_eq!(running.sink.calls.load(Ordering::SeqCst), 2, "each handed over once");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn what_slack_sends_on_a_connection_it_is_replacing_is_acknowledged_there() {
    let fake = FakeSlack::start_with(FakeSlackOptions {
        // Slack's own patience: an envelope left unacknowledged on a
        // closing connection would come back three seconds later.
        ack_timeout: Duration::from_secs(3),
        refresh_grace: Duration::from_secs(2),
        ..options()
    })
    .await;
    let running = start(&fake.channel_yaml());
    assert!(fake.wait_until(WAIT, |f| f.connections() == 1).await);
    fake.request_reconnect("warning");
    // Slack goes on sending on the old connection until it closes it.
    fake.send_dm(&fake.admin(), "in the gap").await;
    let messages = running.sink.wait_for(1).await;
    assert_eq!(messages[0].text, "in the gap");
    assert!(fake.wait_until(WAIT, |f| f.unacked() == 0).await);
    let waits = fake.ack_waits();
    assert_eq!(waits.len(), 1);
    assert!(waits[0] < Duration::from_secs(1), "acknowledged after {waits:?}");
    // The replacement was opened meanwhile; the old one is closed by Slack.
    assert!(
        fake.wait_until(WAIT, |f| connections_opened(f) == 2 && f.connections() == 1)
            .await
    );
    fake.send_dm(&fake.admin(), "after").await;
    let messages = running.sink.wait_for(2).await;
    assert_eq!(messages[1].text, "after");
    assert_eq!(running.sink.calls.load(Ordering::SeqCst), 2, "each handed over once");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn replies_go_to_the_thread_in_chunks_and_wait_out_a_429() {
    let fake = FakeSlack::start_with(options()).await;
    let running = start(&fake.channel_yaml());
    let target: GroupTarget = fake.group();
    let conversation = herald_core::ConversationRef {
        id: herald_core::ConversationId::new(format!("slack:{GENERAL}/{}", target.thread.clone().unwrap())),
        channel: herald_core::ChannelName::new("slack"),
        kind: ConversationKind::Group,
        chat: GENERAL.into(),
        thread: target.thread.clone(),
    };
    fake.throttle_next(1, Duration::from_secs(1));
    let text = "word ".repeat(1700);
    let sent = running
        .outbound
        .send(&OutboundMessage {
            conversation,
            text: format!("{text}\n\na < b & c"),
            reply_to: Some("C0GENERAL1:1.000001".into()),
            idempotency_key: None,
            files: Vec::new(),
        })
        .await
        .expect("delivered");
    let posts = fake.sent();
    assert_eq!(sent.platform_message_ids.len(), posts.len());
    assert!(posts.len() >= 3, "{} posts", posts.len());
    assert!(posts.iter().all(|p| p.thread == target.thread && p.chat == GENERAL));
    assert!(posts.iter().all(|p| p.text.chars().count() <= fake.message_limit()));
    assert!(posts.last().unwrap().text.ends_with("a &lt; b &amp; c"));
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    running.stop().await.unwrap();
}

#[tokio::test]
async fn wrong_tokens_stop_the_channel_and_probe_names_the_bot() {
    let fake = FakeSlack::start_with(options()).await;
    let good = slack::build(&config(&fake.channel_yaml()), local_limiter(), &Default::default()).unwrap();
    let description = good.ingress.probe().await.expect("the probe passes");
    assert!(
        description.contains("herald (U0HERALD01) in Herald Fake"),
        "{description}"
    );
    let wrong_bot = fake.channel_yaml().replace(BOT_TOKEN, "xoxb-wrong");
    let err = start(&wrong_bot).task.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("invalid_auth"), "{err}");
    let wrong_app = fake.channel_yaml().replace("xapp-1-A0HERALD01", "xapp-1-WRONG");
    let err = start(&wrong_app).task.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("app_token"), "{err}");
}

fn free_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

#[tokio::test]
async fn the_events_api_checks_signatures_answers_the_challenge_and_dedupes_retries() {
    let fake = FakeSlack::start_with(options()).await;
    let listen = free_port();
    let running = start(&fake.events_channel_yaml(listen));
    fake.set_events_url(format!("http://{listen}/slack/events"));
    // Herald binds its endpoint after auth.test; ask until it answers.
    let mut challenge = None;
    for _ in 0..100 {
        challenge = fake
            .verify_url("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
            .await;
        if challenge.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        challenge,
        Some((200, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into()))
    );
    let body = fake.event_callback_body(json!({"type": "message", "channel": "D0ADMIN001", "user": "U0ADMIN001",
        "text": "forged", "ts": "1700000000.000001", "channel_type": "im"}));
    let now = chrono::Utc::now().timestamp() as u64;
    let forged = fake
        .push_raw(&body, now, &signature("not-the-secret", now, &body))
        .await;
    assert_eq!(forged.map(|(status, _)| status), Some(401));
    let stale = now - 301;
    let replayed = fake
        .push_raw(&body, stale, &signature(SIGNING_SECRET, stale, &body))
        .await;
    assert_eq!(replayed.map(|(status, _)| status), Some(401));
    assert!(running.sink.messages().is_empty());
    // The first delivery finds the queue down: Herald answers 500 and Slack retries.
    running.sink.failures.store(1, Ordering::SeqCst);
    fake.send_group(&fake.stranger(), &fake.group(), "over http", true)
        .await;
    let messages = running.sink.wait_for(1).await;
    assert_eq!(messages[0].text, "over http");
    assert!(
        fake.wait_until(WAIT, |f| f
            .push_log()
            .iter()
            .any(|p| p.retry_num > 0 && p.status == Some(200)))
            .await,
        "{:?}",
        fake.push_log()
    );
    assert!(fake.wait_until(WAIT, |f| f.push_log().len() >= 3).await);
    assert_eq!(
        running.sink.messages().len(),
        1,
        "the app_mention and message twins and the retry make one message"
    );
    running.stop().await.unwrap();
}
