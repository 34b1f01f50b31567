//! A fake Telegram Bot API on 127.0.0.1: `getMe`, `getWebhookInfo`,
//! `setWebhook`, `deleteWebhook`, `getUpdates` (long polling with offset
//! confirmation), `sendMessage` and `editMessageText` with their
//! `parse_mode` ([`entities`]), `sendChatAction`, `sendDocument`, `getFile`
//! and the file endpoint ([`files`]), with a control side for tests.
//!
//! One bot (Herald) knows two people, an admin and a stranger, and sits in a
//! forum supergroup with one topic and in a plain group. People write to it
//! in private chats and in those groups; the updates wait in a queue until
//! Herald confirms them with a higher `offset`, exactly as on Telegram, or
//! are POSTed to the webhook Herald registered.
//!
//! Architecture invariant: the fake refuses what the Bot API refuses: a
//! wrong token (401), unknown chats, topics and reply targets, empty or
//! over-long texts, markup that does not parse, edits of messages that are
//! not the bot's or that change nothing, `getUpdates` while a webhook is set or while another
//! poll is waiting (409), and sends above the per-chat, per-group or per-bot
//! rate or before a given `retry_after` passed (429, recorded as
//! violations). It deviates in one place, as a local Bot API server does:
//! webhooks may be plain HTTP on the loopback interface.

pub mod entities;
pub mod files;
mod messages;
mod server;
mod state;
pub mod uploads;
mod webhook;
pub mod wire;

#[cfg(test)]
mod format_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use messages::{BotMessage, Edit};
pub use state::{ChatAction, Webhook, WebhookAttempt};
use state::{State, unix_now};
use wire::{ChatInfo, ChatKind, MessageFields, UserInfo};

use crate::platform::{FakePlatform, FakeUser, GroupTarget, SentMessage, Stamped, Upload};

pub const BOT_ID: i64 = 7_100_200_300;
pub const BOT_USERNAME: &str = "herald_test_bot";
/// A token in the Bot API's `<bot id>:<secret>` shape.
pub const TOKEN: &str = "7100200300:AAE-fake-token-for-herald-tests-0123";
/// The forum supergroup the bot is in.
pub const FORUM_CHAT: i64 = -1_001_500_000_001;
/// A plain (non-forum) group the bot is in.
pub const PLAIN_GROUP: i64 = -4_001_000_002;

/// How strict the fake is. Rates are `(count, per)`; `None` enforces nothing.
#[derive(Clone, Debug)]
pub struct FakeTelegramOptions {
    pub token: String,
    pub bot_id: i64,
    pub bot_username: String,
    pub bot_name: String,
    /// Sends per chat (Telegram: about one per second).
    pub per_chat: Option<(u32, Duration)>,
    /// Sends per group chat, on top of `per_chat` (Telegram: 20 per minute).
    pub per_group: Option<(u32, Duration)>,
    /// Sends by the bot in all (Telegram: about 30 per second).
    pub per_bot: Option<(u32, Duration)>,
    /// Longest text `sendMessage` accepts, in UTF-16 units.
    pub message_limit: usize,
    /// The longest a `getUpdates` is held, whatever `timeout` asks.
    pub max_poll: Duration,
}

impl FakeTelegramOptions {
    /// Telegram's documented rates: slow, for tests of the real defaults.
    pub fn realistic() -> Self {
        Self {
            per_chat: Some((1, Duration::from_secs(1))),
            per_group: Some((20, Duration::from_secs(60))),
            per_bot: Some((30, Duration::from_secs(1))),
            ..Self::default()
        }
    }

    /// No rate enforced at all, for benchmarks that measure Herald, not the limits.
    pub fn unthrottled() -> Self {
        Self {
            per_chat: None,
            per_group: None,
            per_bot: None,
            ..Self::default()
        }
    }
}

impl Default for FakeTelegramOptions {
    /// Rates twenty times Telegram's per chat, so a burst test takes seconds;
    /// [`FakeTelegram::channel_yaml`] configures Herald with the same rates.
    fn default() -> Self {
        Self {
            token: TOKEN.into(),
            bot_id: BOT_ID,
            bot_username: BOT_USERNAME.into(),
            bot_name: "Herald".into(),
            per_chat: Some((20, Duration::from_secs(1))),
            per_group: Some((20, Duration::from_secs(1))),
            per_bot: Some((60, Duration::from_secs(1))),
            message_limit: 4096,
            max_poll: Duration::from_secs(50),
        }
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    token: String,
    /// Bumped when updates arrive, a webhook is set, or a new poll starts.
    poke: watch::Sender<u64>,
    sent_count: watch::Sender<usize>,
    /// Bumped by each accepted `editMessageText`.
    edit_count: watch::Sender<usize>,
    webhook_attempts: watch::Sender<usize>,
    files: Mutex<files::Shelf>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running fake; dropping it stops it.
pub struct FakeTelegram {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    forum_topic: i32,
}

/// The same window, as Herald's configuration writes it.
fn rate_text((count, per): (u32, Duration)) -> String {
    match per.as_millis() {
        1_000 => format!("{count}/s"),
        60_000 => format!("{count}/m"),
        3_600_000 => format!("{count}/h"),
        millis => format!("{count}/{millis}ms"),
    }
}

impl FakeTelegram {
    pub async fn start() -> Self {
        Self::start_with(FakeTelegramOptions::default()).await
    }

    pub async fn start_with(options: FakeTelegramOptions) -> Self {
        let token = options.token.clone();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(options)),
            token,
            poke: watch::channel(0).0,
            sent_count: watch::channel(0).0,
            edit_count: watch::channel(0).0,
            webhook_attempts: watch::channel(0).0,
            files: Mutex::default(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake telegram");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = watch::channel(false);
        let app = axum::Router::new()
            .fallback(server::handle)
            // Uploads may be as large as the Bot API takes, with the form around them.
            .layer(axum::extract::DefaultBodyLimit::max(
                uploads::MAX_UPLOAD_BYTES + 1024 * 1024,
            ))
            .with_state(shared.clone());
        let mut serve_stop = stopped.clone();
        tokio::spawn(async move {
            let _ = axum::serve(crate::no_delay(listener), app)
                .with_graceful_shutdown(async move {
                    let _ = serve_stop.changed().await;
                })
                .await;
        });
        tokio::spawn(webhook::pusher(shared.clone(), stopped));
        let mut fake = Self {
            shared,
            addr,
            stop,
            forum_topic: 0,
        };
        fake.add_fixtures();
        fake
    }

    fn add_fixtures(&mut self) {
        let admin = self.admin();
        for user in [&admin, &self.stranger()] {
            self.add_user(user);
        }
        let mut state = self.shared.lock();
        for chat in [
            ChatInfo {
                id: FORUM_CHAT,
                kind: ChatKind::Supergroup {
                    title: "Herald Lab".into(),
                    forum: true,
                },
            },
            ChatInfo {
                id: PLAIN_GROUP,
                kind: ChatKind::Group {
                    title: "Plain Group".into(),
                },
            },
        ] {
            state.chats.insert(chat.id, chat);
        }
        // A couple of older messages, so topic ids look like Telegram's.
        for _ in 0..5 {
            state.next_message_id(FORUM_CHAT);
        }
        drop(state);
        self.forum_topic = self.create_topic(FORUM_CHAT, "Bots", &admin);
    }

    /// `http://127.0.0.1:PORT`, Herald's `channels.telegram.api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn token(&self) -> String {
        self.shared.token.clone()
    }

    pub fn bot_username(&self) -> String {
        self.shared.lock().options.bot_username.clone()
    }

    /// The topic of the forum supergroup that [`FakePlatform::group`] names.
    pub fn forum_topic(&self) -> i32 {
        self.forum_topic
    }

    /// The plain group (no topics) the bot is in.
    pub fn plain_group(&self) -> GroupTarget {
        GroupTarget {
            chat: PLAIN_GROUP.to_string(),
            thread: None,
        }
    }

    pub fn add_user(&self, user: &FakeUser) {
        let info = person(user);
        self.shared.lock().users.insert(info.id, info);
    }

    /// Opens a forum topic in `chat`; returns its `message_thread_id`.
    pub fn create_topic(&self, chat: i64, name: &str, creator: &FakeUser) -> i32 {
        let mut state = self.shared.lock();
        let chat_info = state.chats.get(&chat).cloned().expect("known chat");
        let thread = state.next_message_id(chat);
        let message = wire::topic_created(&chat_info, thread, &person(creator), unix_now(), name);
        state.remember(chat, thread, &message);
        state.topics.insert((chat, thread), name.to_owned());
        thread
    }

    /// Adds any update, e.g. `("my_chat_member", {...})`; returns its id.
    pub fn push_update(&self, kind: &str, payload: Value) -> u32 {
        let id = self.shared.lock().push_update(kind, payload);
        self.shared.poke.send_modify(|n| *n += 1);
        id
    }

    /// Builds, stores and queues a text message; returns its message id.
    fn post(&self, from: &UserInfo, chat: i64, thread: Option<i32>, text: &str, entities: Vec<Value>) -> i32 {
        self.post_reply(from, chat, thread, text, entities, None)
    }

    fn post_reply(
        &self,
        from: &UserInfo,
        chat: i64,
        thread: Option<i32>,
        text: &str,
        mut entities: Vec<Value>,
        reply_to: Option<i32>,
    ) -> i32 {
        let mut state = self.shared.lock();
        let chat_info = state.chats.get(&chat).cloned().expect("known chat");
        if let Some(command) = text.split_whitespace().next().filter(|w| w.starts_with('/')) {
            entities.insert(0, wire::entity("bot_command", 0, command));
        }
        // In a topic every message replies to the topic's first message
        // unless it replies to another one, as Telegram threads them.
        let reply = reply_to.or(thread).and_then(|id| state.message(chat, id).cloned());
        let message_id = state.next_message_id(chat);
        let message = MessageFields {
            message_id,
            from,
            chat: &chat_info,
            date: unix_now(),
            text,
            entities,
            thread,
            reply_to: reply,
        }
        .json();
        state.remember(chat, message_id, &message);
        state.push_update("message", message);
        state.delivered_stamps.push(Stamped {
            at: std::time::Instant::now(),
            chat: chat.to_string(),
            text: text.to_owned(),
        });
        drop(state);
        self.shared.poke.send_modify(|n| *n += 1);
        message_id
    }

    fn ensure_private_chat(&self, user: &FakeUser) -> i64 {
        let info = person(user);
        let mut state = self.shared.lock();
        state.users.insert(info.id, info.clone());
        state.chats.entry(info.id).or_insert(ChatInfo {
            id: info.id,
            kind: ChatKind::Private(info.clone()),
        });
        info.id
    }

    /// `user` replies in `target` to message `reply_to` (e.g. one of the bot's).
    pub fn send_group_reply(&self, user: &FakeUser, target: &GroupTarget, text: &str, reply_to: i32) -> String {
        let (chat, thread) = target_ids(target);
        self.post_reply(&person(user), chat, thread, text, Vec::new(), Some(reply_to))
            .to_string()
    }

    /// Another bot (not Herald) writes in `target`, mentioning Herald.
    pub fn send_from_other_bot(&self, target: &GroupTarget, text: &str) -> String {
        let other = UserInfo {
            id: 6_000_000_001,
            first_name: "Other Bot".into(),
            username: Some("other_helper_bot".into()),
            is_bot: true,
        };
        let (chat, thread) = target_ids(target);
        let (text, entities) = self.mentioning(text);
        self.post(&other, chat, thread, &text, entities).to_string()
    }

    /// `user` edits message `message_id` of the private chat with the bot.
    pub fn edit_dm(&self, user: &FakeUser, message_id: i32, text: &str) -> u32 {
        let chat = self.ensure_private_chat(user);
        let mut state = self.shared.lock();
        let chat_info = state.chats.get(&chat).cloned().expect("known chat");
        let mut message = MessageFields {
            message_id,
            from: &person(user),
            chat: &chat_info,
            date: unix_now() - 5,
            text,
            entities: Vec::new(),
            thread: None,
            reply_to: None,
        }
        .json();
        message["edit_date"] = json!(unix_now());
        state.remember(chat, message_id, &message);
        let id = state.push_update("edited_message", message);
        drop(state);
        self.shared.poke.send_modify(|n| *n += 1);
        id
    }

    /// `user` joins `target`: a `new_chat_members` service message.
    pub fn join(&self, user: &FakeUser, target: &GroupTarget) -> u32 {
        let (chat, _) = target_ids(target);
        let mut state = self.shared.lock();
        let chat_info = state.chats.get(&chat).cloned().expect("known chat");
        let message_id = state.next_message_id(chat);
        let message = wire::new_chat_member(message_id, &chat_info, &person(user), unix_now());
        state.remember(chat, message_id, &message);
        let id = state.push_update("message", message);
        drop(state);
        self.shared.poke.send_modify(|n| *n += 1);
        id
    }

    fn mentioning(&self, text: &str) -> (String, Vec<Value>) {
        let mention = format!("@{}", self.bot_username());
        let entities = vec![wire::entity("mention", 0, &mention)];
        (format!("{mention} {text}"), entities)
    }

    /// Methods called so far, lower-cased (`getme`, `getupdates`, ...).
    pub fn calls(&self) -> Vec<String> {
        self.shared.lock().calls.clone()
    }

    pub fn chat_actions(&self) -> Vec<ChatAction> {
        self.shared.lock().chat_actions.clone()
    }

    /// The full `Message` objects returned to the bot's sends.
    pub fn sent_json(&self) -> Vec<Value> {
        self.shared.lock().sent_json.clone()
    }

    /// How many times each update was handed to the bot.
    pub fn deliveries(&self) -> BTreeMap<u32, u32> {
        self.shared.lock().deliveries.clone()
    }

    /// Updates not yet confirmed.
    pub fn pending_updates(&self) -> usize {
        self.shared.lock().pending_count()
    }

    pub fn allowed_updates(&self) -> Option<Vec<String>> {
        self.shared.lock().allowed_updates.clone()
    }

    /// Sets a webhook as another client's `setWebhook` would.
    pub fn set_webhook(&self, url: &str, secret: Option<&str>) {
        self.shared.lock().webhook = Some(Webhook {
            url: url.to_owned(),
            secret: secret.map(str::to_owned),
        });
        self.shared.poke.send_modify(|n| *n += 1);
    }

    pub fn webhook(&self) -> Option<Webhook> {
        self.shared.lock().webhook.clone()
    }

    pub fn webhook_log(&self) -> Vec<WebhookAttempt> {
        self.shared.lock().webhook_log.clone()
    }

    /// Waits until `check` holds (it is tried whenever something happens),
    /// or `timeout` passes; returns whether it held.
    pub async fn wait_until(&self, timeout: Duration, check: impl Fn(&FakeTelegram) -> bool) -> bool {
        let mut poked = self.shared.poke.subscribe();
        let mut sent = self.shared.sent_count.subscribe();
        let mut edited = self.shared.edit_count.subscribe();
        let mut pushed = self.shared.webhook_attempts.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if check(self) {
                return true;
            }
            tokio::select! {
                _ = poked.changed() => {}
                _ = sent.changed() => {}
                _ = edited.changed() => {}
                _ = pushed.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = tokio::time::sleep_until(deadline) => return check(self),
            }
        }
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn person(user: &FakeUser) -> UserInfo {
    UserInfo {
        id: user.id.parse().expect("Telegram user ids are integers"),
        first_name: user.name.clone(),
        username: Some(user.name.to_ascii_lowercase().replace(' ', "_")),
        is_bot: false,
    }
}

fn target_ids(target: &GroupTarget) -> (i64, Option<i32>) {
    (
        target.chat.parse().expect("Telegram chat ids are integers"),
        target
            .thread
            .as_ref()
            .map(|t| t.parse().expect("thread ids are integers")),
    )
}

impl FakeTelegram {
    /// The next calls of `method` (case-insensitive: `sendMessage`,
    /// `getUpdates`) get these faults instead of an answer, one each.
    pub fn inject_faults(&self, method: &str, faults: impl IntoIterator<Item = crate::faults::Fault>) {
        self.shared.lock().faults.add(&method.to_ascii_lowercase(), faults);
    }

    /// Faults injected and not yet answered.
    pub fn faults_pending(&self) -> usize {
        self.shared.lock().faults.remaining()
    }
}

#[async_trait]
impl FakePlatform for FakeTelegram {
    fn channel(&self) -> &'static str {
        "telegram"
    }

    fn channel_yaml(&self) -> String {
        let state = self.shared.lock();
        let mut yaml = format!(
            "    token: \"{}\"\n    api_url: \"{}\"\n    poll_timeout: 10s\n",
            self.shared.token,
            self.api_url()
        );
        let rates = [
            ("per_chat", state.options.per_chat),
            ("per_group", state.options.per_group),
            ("per_bot", state.options.per_bot),
        ];
        yaml.push_str("    rate_limits:\n");
        for (key, rate) in rates {
            let text = rate.map_or_else(|| "off".to_owned(), rate_text);
            yaml.push_str(&format!("      {key}: {text}\n"));
        }
        yaml
    }

    fn message_limit(&self) -> usize {
        self.shared.lock().options.message_limit
    }

    fn measure(&self, text: &str) -> usize {
        wire::utf16_len(text)
    }

    fn admin(&self) -> FakeUser {
        FakeUser {
            id: "1001".into(),
            name: "Ada".into(),
        }
    }

    fn bot(&self) -> FakeUser {
        FakeUser {
            id: BOT_ID.to_string(),
            name: self.bot_username(),
        }
    }

    fn stranger(&self) -> FakeUser {
        FakeUser {
            id: "2002".into(),
            name: "Sam".into(),
        }
    }

    fn dm_chat(&self, user: &FakeUser) -> String {
        user.id.clone()
    }

    fn group(&self) -> GroupTarget {
        GroupTarget {
            chat: FORUM_CHAT.to_string(),
            thread: Some(self.forum_topic.to_string()),
        }
    }

    async fn send_dm(&self, user: &FakeUser, text: &str) -> String {
        let chat = self.ensure_private_chat(user);
        self.post(&person(user), chat, None, text, Vec::new()).to_string()
    }

    async fn send_group(&self, user: &FakeUser, target: &GroupTarget, text: &str, mention: bool) -> String {
        let (chat, thread) = target_ids(target);
        let (text, entities) = if mention {
            self.mentioning(text)
        } else {
            (text.to_owned(), Vec::new())
        };
        self.post(&person(user), chat, thread, &text, entities).to_string()
    }

    /// Telegram does not send a bot its own messages; the fake does (with a
    /// mention of the bot, so only the own-message rule can stop an answer)
    /// to prove Herald would ignore them.
    async fn send_own_message(&self, target: &GroupTarget, text: &str) {
        let bot = self.shared.lock().bot.clone();
        let (chat, thread) = target_ids(target);
        let (text, entities) = self.mentioning(text);
        self.post(&bot, chat, thread, &text, entities);
    }

    fn sent(&self) -> Vec<SentMessage> {
        self.shared.lock().sent.clone()
    }

    fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }

    async fn wait_for_sent(&self, count: usize, timeout: Duration) -> Vec<SentMessage> {
        let mut sent = self.shared.sent_count.subscribe();
        let _ = tokio::time::timeout(timeout, sent.wait_for(|n| *n >= count)).await;
        self.sent()
    }

    fn throttle_next(&self, count: usize, retry_after: Duration) {
        self.shared.lock().throttle_next(count, retry_after);
    }

    fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    fn delivered_stamps(&self) -> Vec<Stamped> {
        self.shared.lock().delivered_stamps.clone()
    }

    fn sent_stamps(&self) -> Vec<Stamped> {
        self.shared.lock().sent_stamps.clone()
    }
}
