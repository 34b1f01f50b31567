//! The Discord adapter's gateway connection against the fake Discord
//! (REST API and gateway WebSocket), with a sink that records what it is
//! handed: identify, heartbeats, resumes after a lost connection or a
//! RECONNECT, a store that stalls, and the close codes that mean a setting
//! is wrong.

#![cfg(feature = "discord")]

use std::sync::Arc;
use std::time::Duration;

use herald_channels::discord::{self, DiscordConfig};
use herald_core::{ChannelError, ConversationKind, InboundSink};
use herald_testkit::FakePlatform;
use herald_testkit::discord::FakeDiscord;
use tokio_util::sync::CancellationToken;

mod common;
use common::{Recorder, WAIT, local_limiter};

/// GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT.
const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15);

struct Running {
    sink: Arc<Recorder>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), ChannelError>>,
}

impl Running {
    async fn stop(self) -> Result<(), ChannelError> {
        self.shutdown.cancel();
        self.task.await.expect("the ingress task ends")
    }

    /// What the channel ended with by itself.
    async fn ended(self) -> Result<(), ChannelError> {
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the channel gives up")
            .expect("the ingress task ends")
    }

    fn texts(&self) -> Vec<String> {
        self.sink.messages().into_iter().map(|m| m.text).collect()
    }
}

fn start(fake: &FakeDiscord) -> Running {
    start_with(&fake.channel_yaml())
}

/// With `channels.discord` written as `yaml` (indented as the fake writes it).
fn start_with(yaml: &str) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let yaml = yaml.replace("\n    ", "\n");
    let config: DiscordConfig = serde_yaml::from_str(yaml.trim_start()).expect("config parses");
    let parts = discord::build(&config, None, None, local_limiter(), &Default::default()).expect("the channel builds");
    let sink = Arc::new(Recorder::default());
    let shutdown = CancellationToken::new();
    let (task_sink, task_shutdown) = (sink.clone() as Arc<dyn InboundSink>, shutdown.clone());
    let ingress = parts.ingress.clone();
    let task = tokio::spawn(async move { ingress.run(task_sink, task_shutdown).await });
    Running { sink, shutdown, task }
}

/// Herald connected, with `first` (a DM from the admin) handed over.
async fn answering(fake: &FakeDiscord, first: &str) -> Running {
    let running = start(fake);
    online(fake).await;
    fake.send_dm(&fake.admin(), first).await;
    running.sink.wait_for(1).await;
    running
}

async fn online(fake: &FakeDiscord) {
    assert!(fake.wait_for_sessions(1, WAIT).await, "Herald opens a gateway session");
}

async fn until(what: &str, done: impl FnMut() -> bool) {
    until_within(what, WAIT, done).await;
}

#[tokio::test]
async fn the_gateway_session_identifies_heartbeats_and_hands_over_what_is_for_herald_in_order() {
    let fake = FakeDiscord::start().await;
    fake.set_heartbeat_interval(Duration::from_millis(50));
    let running = start(&fake);
    online(&fake).await;
    let identifies = fake.identifies();
    assert_eq!(identifies.len(), 1);
    assert_eq!(identifies[0].intents, INTENTS);
    assert_eq!(identifies[0].token, fake.token(), "the bare token, without `Bot `");

    let (admin, stranger, group) = (fake.admin(), fake.stranger(), fake.group());
    fake.send_dm(&admin, "hello there").await;
    fake.send_group(&stranger, &group, "not for you", false).await;
    fake.send_group(&stranger, &group, "what's the time?", true).await;
    fake.send_own_message(&group, "the bot's own words").await;
    fake.send_dm(&admin, "and one more").await;
    let messages = running.sink.wait_for(4).await;
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        ["hello there", "not for you", "what's the time?", "and one more"]
    );
    assert_eq!(messages[0].conversation.kind, ConversationKind::Direct);
    assert_eq!(messages[0].sender.id.as_str(), format!("discord:{}", admin.id));
    assert!(!messages[1].mentions_bot);
    assert!(messages[2].mentions_bot);
    assert_eq!(
        messages[2].conversation.thread, group.thread,
        "the thread is its own conversation"
    );
    until("heartbeats", || fake.heartbeats() >= 3).await;
    assert_eq!(fake.resumes(), 0);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_lost_connection_resumes_and_what_it_missed_arrives_once_in_order() {
    let fake = FakeDiscord::start().await;
    let running = answering(&fake, "before").await;
    let admin = fake.admin();

    fake.close_connections(4000);
    // Written while Herald reconnects: the resumed session's replay or the
    // new connection brings each, depending on when it was written; either
    // way once, and in order. (The fake's own test covers the replay.)
    for n in 0..5 {
        fake.send_dm(&admin, &format!("meanwhile {n}")).await;
    }
    fake.send_dm(&admin, "after").await;
    running.sink.wait_for(7).await;
    until("the resume to be counted", || fake.resumes() == 1).await;
    assert_eq!(
        running.texts(),
        [
            "before",
            "meanwhile 0",
            "meanwhile 1",
            "meanwhile 2",
            "meanwhile 3",
            "meanwhile 4",
            "after"
        ]
    );
    assert_eq!(
        running.sink.calls.load(std::sync::atomic::Ordering::SeqCst),
        7,
        "nothing handed over twice"
    );
    assert_eq!(fake.identifies().len(), 1, "the session was resumed, not opened anew");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn reconnect_asked_by_the_gateway_resumes_the_session() {
    let fake = FakeDiscord::start().await;
    let running = answering(&fake, "one").await;
    let admin = fake.admin();
    fake.request_reconnect();
    until("the resume", || fake.resumes() == 1).await;
    fake.send_dm(&admin, "two").await;
    running.sink.wait_for(2).await;
    assert_eq!(running.texts(), ["one", "two"]);
    assert_eq!(fake.identifies().len(), 1);
    running.stop().await.unwrap();
}

/// A 9 MiB frame (Discord's dispatches are kilobytes; the WebSocket
/// library would take 64 MiB) is not read: the connection is dropped and
/// the session resumed, and what comes after arrives.
#[tokio::test]
async fn an_oversize_gateway_frame_is_refused_and_the_session_resumed() {
    let fake = FakeDiscord::start().await;
    let running = answering(&fake, "one").await;
    let admin = fake.admin();
    let padding = "x".repeat(9 * 1024 * 1024);
    fake.send_raw_frame(&format!(
        r#"{{"op":0,"t":"GUILD_UPDATE","s":null,"d":{{"padding":"{padding}"}}}}"#
    ));
    until("a resume after the oversize frame", || fake.resumes() == 1).await;
    fake.send_dm(&admin, "two").await;
    running.sink.wait_for(2).await;
    assert_eq!(running.texts(), ["one", "two"]);
    assert_eq!(fake.identifies().len(), 1, "resumed, not opened anew");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_connection_whose_heartbeats_go_unanswered_is_replaced_and_the_session_resumed() {
    let fake = FakeDiscord::start().await;
    fake.set_heartbeat_interval(Duration::from_millis(50));
    let running = answering(&fake, "one").await;
    let admin = fake.admin();
    fake.answer_heartbeats(false);
    until("a resume after the silent heartbeats", || fake.resumes() >= 1).await;
    fake.answer_heartbeats(true);
    fake.send_dm(&admin, "two").await;
    running.sink.wait_for(2).await;
    assert_eq!(running.texts(), ["one", "two"]);
    assert_eq!(fake.identifies().len(), 1, "resumed, not opened anew");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_stalled_store_keeps_the_session_alive_and_then_takes_the_burst_together() {
    let fake = FakeDiscord::start().await;
    fake.set_heartbeat_interval(Duration::from_millis(50));
    let running = answering(&fake, "first").await;
    let admin = fake.admin();

    let stalled = running.sink.gate.write().await;
    let mut sent = vec!["first".to_owned()];
    for n in 0..12 {
        let text = format!("burst {n}");
        fake.send_dm(&admin, &text).await;
        sent.push(text);
    }
    let beats = fake.heartbeats();
    until("heartbeats while the store is stalled", || {
        fake.heartbeats() >= beats + 3
    })
    .await;
    assert_eq!(
        running.sink.messages().len(),
        1,
        "nothing is taken while the store is stalled"
    );
    drop(stalled);
    running.sink.wait_for(sent.len()).await;
    assert_eq!(running.texts(), sent, "in the gateway's order");
    let batches = running.sink.batches.lock().unwrap().clone();
    assert!(
        batches.iter().any(|&n| n > 1),
        "what arrived while the store was stalled is handed over together: {batches:?}"
    );
    assert_eq!(fake.resumes(), 0, "the connection was never lost");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_refused_intent_or_token_ends_the_channel_with_the_setting_to_fix() {
    let fake = FakeDiscord::start().await;
    fake.allow_message_content(false);
    let running = start(&fake);
    let Err(ChannelError::Fatal(reason)) = running.ended().await else {
        panic!("a disallowed intent is fatal");
    };
    assert!(
        reason.contains("MESSAGE CONTENT") && reason.contains("developer portal"),
        "{reason}"
    );
    assert_eq!(fake.identifies().len(), 1, "identified once, not again and again");

    // The gateway refusing the token on a live connection (Discord's 4004).
    let fake = FakeDiscord::start().await;
    let running = start(&fake);
    online(&fake).await;
    fake.close_connections(4004);
    let Err(ChannelError::Fatal(reason)) = running.ended().await else {
        panic!("4004 is fatal");
    };
    assert!(reason.contains("channels.discord.token"), "{reason}");

    // A token REST refuses never reaches the gateway.
    let fake = FakeDiscord::start().await;
    let running = start_with(&fake.channel_yaml().replace(&fake.token(), "another-token"));
    let ended = running.ended().await;
    assert!(
        matches!(&ended, Err(ChannelError::Fatal(reason)) if reason.contains("channels.discord.token")),
        "{ended:?}"
    );
}

#[tokio::test]
async fn a_session_the_gateway_no_longer_knows_is_opened_anew() {
    let fake = FakeDiscord::start().await;
    let running = answering(&fake, "one").await;
    let admin = fake.admin();
    // 4009 (session timed out): resuming is pointless, Herald identifies.
    fake.close_connections(4009);
    until("a second IDENTIFY", || fake.identifies().len() == 2).await;
    online(&fake).await;
    fake.send_dm(&admin, "two").await;
    running.sink.wait_for(2).await;
    assert_eq!(running.texts(), ["one", "two"]);
    assert_eq!(fake.resumes(), 0);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_resume_the_gateway_refuses_is_followed_by_a_new_session() {
    let fake = FakeDiscord::start().await;
    let running = answering(&fake, "one").await;
    let admin = fake.admin();
    // The session is gone on Discord's side: the RESUME gets op 9 (false),
    // and after the one to five seconds Discord asks for, a new IDENTIFY.
    fake.expire_sessions();
    until("a second IDENTIFY", || fake.identifies().len() == 2).await;
    online(&fake).await;
    fake.send_dm(&admin, "two").await;
    running.sink.wait_for(2).await;
    assert_eq!(running.texts(), ["one", "two"]);
    assert_eq!(fake.resumes(), 0, "the refused RESUME is not counted");
    running.stop().await.unwrap();
}

/// Waits up to `within` for `done`.
async fn until_within(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(within, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for {what}");
}

#[tokio::test]
async fn shards_identify_five_seconds_apart_in_each_bucket_and_each_gets_its_guilds() {
    let fake = FakeDiscord::start().await;
    // Four shards, two identify buckets: shards 0 and 1 may identify at
    // once, 2 and 3 only five seconds after them.
    fake.set_recommended_shards(4);
    fake.set_session_start_limit(1000, 1000, Duration::from_secs(86_400), 2);
    let running = start(&fake);
    until_within("four shards", Duration::from_secs(20), || {
        fake.connected_shards().len() == 4
    })
    .await;
    assert_eq!(fake.connected_shards(), [[0, 4], [1, 4], [2, 4], [3, 4]]);
    let identifies = fake.identifies();
    let times = fake.identify_times();
    let at = |shard: u64| {
        let index = identifies.iter().position(|i| i.shard == Some([shard, 4])).unwrap();
        times[index]
    };
    for (first, second) in [(0, 2), (1, 3)] {
        let gap = at(second).duration_since(at(first));
        assert!(
            gap >= Duration::from_secs(5),
            "shards {first} and {second} share a bucket: {gap:?}"
        );
    }
    assert!(
        at(1).duration_since(at(0)) < Duration::from_secs(5) || at(0).duration_since(at(1)) < Duration::from_secs(5),
        "shards of different buckets do not wait for each other"
    );
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(fake.session_starts_remaining(), 996);

    // A DM arrives on shard 0, the guild's messages on their shard: each once.
    let admin = fake.admin();
    fake.send_dm(&admin, "direct").await;
    fake.send_group(&admin, &fake.group(), "in the guild", true).await;
    fake.send_group(&admin, &fake.second_guild_channel(), "in the other guild", true)
        .await;
    running.sink.wait_for(3).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut texts = running.texts();
    texts.sort();
    assert_eq!(texts, ["direct", "in the guild", "in the other guild"]);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn an_almost_spent_session_start_budget_is_waited_out_not_spent() {
    let fake = FakeDiscord::start().await;
    // 50 of 1,000 left is what Herald keeps back; the budget resets in 3 s.
    fake.set_session_start_limit(1000, 50, Duration::from_secs(3), 1);
    let started = std::time::Instant::now();
    let running = start(&fake);
    until_within("an IDENTIFY after the reset", Duration::from_secs(15), || {
        !fake.identifies().is_empty()
    })
    .await;
    let waited = fake.identify_times()[0].duration_since(started);
    assert!(
        waited >= Duration::from_millis(2_500),
        "identified {waited:?} after the start"
    );
    online(&fake).await;
    fake.send_dm(&fake.admin(), "after the reset").await;
    running.sink.wait_for(1).await;
    assert_eq!(fake.session_starts_remaining(), 999);
    assert_eq!(fake.violations(), Vec::<String>::new());
    running.stop().await.unwrap();
}

#[tokio::test]
async fn an_invalid_session_storm_is_met_with_waits_that_double() {
    let fake = FakeDiscord::start().await;
    fake.refuse_next_identifies(2);
    let running = start(&fake);
    until_within("the third IDENTIFY", Duration::from_secs(30), || {
        fake.identifies().len() == 3
    })
    .await;
    online(&fake).await;
    let times = fake.identify_times();
    let (first, second) = (times[1].duration_since(times[0]), times[2].duration_since(times[1]));
    assert!(first >= Duration::from_secs(5), "{first:?}");
    assert!(
        second >= Duration::from_secs(10),
        "the second wait doubles the first: {second:?}"
    );
    fake.send_dm(&fake.admin(), "through the storm").await;
    running.sink.wait_for(1).await;
    assert_eq!(fake.identifies().len(), 3, "no IDENTIFY more than the storm asked for");
    assert_eq!(fake.violations(), Vec::<String>::new());
    running.stop().await.unwrap();
}

#[tokio::test]
async fn frames_come_zlib_compressed_unless_switched_off() {
    let fake = FakeDiscord::start().await;
    let running = answering(&fake, "squeezed").await;
    assert_eq!(fake.compressed_connections(), 1);
    running.stop().await.unwrap();

    let fake = FakeDiscord::start().await;
    let running = start_with(&format!("{}    compress: false\n", fake.channel_yaml()));
    online(&fake).await;
    fake.send_dm(&fake.admin(), "plain").await;
    running.sink.wait_for(1).await;
    assert_eq!(fake.compressed_connections(), 0);
    assert_eq!(running.texts(), ["plain"]);
    running.stop().await.unwrap();
}
