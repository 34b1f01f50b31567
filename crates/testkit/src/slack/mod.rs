//! A fake Slack workspace on 127.0.0.1: the Web API (`auth.test`,
//! `apps.connections.open`, `chat.postMessage`, `users.info`), a Socket Mode
//! WebSocket server, and an Events API pusher, with a control side for tests.
//! `chat.update` edits the bot's messages; every text the bot writes is
//! checked as Slack reads mrkdwn ([`mrkdwn`]), and the findings recorded.
//!
//! One bot (Herald) is installed in one workspace with one public channel,
//! `#general`, that has a thread in it. People write to the bot in DMs
//! (`message` events with `channel_type: im`) and in the channel (`message`,
//! plus `app_mention` when they mention the bot, as Slack sends both). What
//! the bot posts comes back as a `message` event with its `bot_id`, as it
//! does on Slack.
//!
//! Architecture invariant: the fake refuses what Slack refuses: wrong or
//! missing tokens, the wrong token type for a method, unknown channels,
//! sends above the per-channel rate, sends before a `Retry-After` passed, and
//! Socket Mode envelopes left unacknowledged are sent again.

mod edits;
pub mod files;
pub mod mrkdwn;
mod push;
mod socket;
mod state;
pub mod uploads;
mod web;
pub mod wire;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

pub use edits::{BotMessage, Edit};
pub use push::signature;
pub use state::PushAttempt;
use state::{Frame, State, Throttle, unix_seconds};
use wire::{Author, MessageFields};

use crate::platform::{FakePlatform, FakeUser, GroupTarget, SentMessage, Stamped};

pub const TEAM_ID: &str = "T0HERALD01";
pub const TEAM_NAME: &str = "Herald Fake";
pub const APP_ID: &str = "A0HERALD01";
pub const BOT_USER_ID: &str = "U0HERALD01";
pub const BOT_ID: &str = "B0HERALD01";
pub const BOT_NAME: &str = "herald";
/// The bot token (`xoxb-`): Web API calls.
pub const BOT_TOKEN: &str = "xoxb-4242-1717-herald-fake-bot-token";
/// The app-level token (`xapp-`, scope `connections:write`): Socket Mode.
pub const APP_TOKEN: &str = "xapp-1-A0HERALD01-4242-herald-fake-app-token";
/// The signing secret the Events API pusher signs with (Slack's documentation example).
pub const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// `#general`, where the bot is a member.
pub const GENERAL: &str = "C0GENERAL1";

/// How strict and how patient the fake is.
#[derive(Clone, Debug)]
pub struct FakeSlackOptions {
    /// Posts the fake accepts per channel: `(count, per)`. Slack allows about
    /// one message per second per channel; `None` enforces nothing.
    pub channel_rate: Option<(u32, Duration)>,
    /// `chat.update`s the fake accepts per workspace: `(count, per)`. The
    /// method is Tier 3 (about 50 a minute); `None` enforces nothing.
    pub update_rate: Option<(u32, Duration)>,
    /// How long a Socket Mode envelope waits for its ack before it is resent.
    pub ack_timeout: Duration,
    /// How often an envelope (or an Events API push) is retried before Slack gives up.
    pub max_retries: u32,
    /// Waits before each Events API retry (Slack: at once, after 1 and 5 minutes).
    pub push_retry_delays: Vec<Duration>,
    /// How long a Request URL has to answer a push.
    pub push_timeout: Duration,
    /// Whether the bot's own posts come back as `message` events.
    pub echo_own_messages: bool,
    /// The scopes the bot token was granted; `None`: every scope. A Web API
    /// method the token lacks the scope for answers `missing_scope` with
    /// the scope `needed`, as Slack does.
    pub scopes: Option<Vec<String>>,
    /// How long a connection told to `disconnect` stays open (and is sent
    /// envelopes) before the fake closes it, as Slack closes a refreshed
    /// connection a few seconds after warning of it.
    pub refresh_grace: Duration,
    /// Events API mode: Herald listens here, the fake pushes to
    /// `http://{listen}/slack/events`, and `channel_yaml()` says so.
    pub events_listen: Option<SocketAddr>,
}

impl Default for FakeSlackOptions {
    fn default() -> Self {
        Self {
            channel_rate: Some((1, Duration::from_secs(1))),
            update_rate: Some((50, Duration::from_secs(60))),
            ack_timeout: Duration::from_secs(3),
            max_retries: 3,
            push_retry_delays: vec![Duration::ZERO, Duration::from_secs(60), Duration::from_secs(300)],
            push_timeout: Duration::from_secs(3),
            echo_own_messages: true,
            scopes: None,
            refresh_grace: Duration::from_secs(2),
            events_listen: None,
        }
    }
}

impl FakeSlackOptions {
    /// Slack's behaviour with a send rate of 20 per second per channel, so a
    /// burst of replies in one conversation takes seconds, not a minute.
    pub fn quick() -> Self {
        Self {
            channel_rate: Some((20, Duration::from_secs(1))),
            ..Self::default()
        }
    }
}

/// What the servers share.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// How many messages the bot posted; watched by `wait_for_sent`.
    sent_count: watch::Sender<usize>,
    /// Bumped on every change a test may wait for (acks, connections, pushes).
    changes: watch::Sender<u64>,
    /// Wakes the redelivery timer when a new ack deadline is set.
    wake: Notify,
    socket_addr: SocketAddr,
    push: mpsc::UnboundedSender<Value>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Wraps `event` in an `event_callback` and delivers it by Socket Mode,
    /// or by the Events API once a Request URL is set. Returns the event id.
    fn deliver_locked(&self, state: &mut State, event: Value) -> String {
        let event_id = state.next_event_id();
        let payload = wire::event_callback(event, &event_id, unix_seconds());
        if state.events_url.is_some() {
            let _ = self.push.send(payload);
        } else {
            state.enqueue_envelope("events_api", payload, Instant::now());
            self.wake.notify_one();
        }
        event_id
    }
}

/// The running fake; dropping it stops its servers and closes its sockets.
pub struct FakeSlack {
    shared: Arc<Shared>,
    http_addr: SocketAddr,
    stop: watch::Sender<bool>,
    admin: FakeUser,
    stranger: FakeUser,
    thread_ts: String,
}

impl std::fmt::Debug for FakeSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSlack")
            .field("http", &self.http_addr)
            .finish_non_exhaustive()
    }
}

impl FakeSlack {
    /// Starts with Slack's own limits.
    pub async fn start() -> Self {
        Self::start_with(FakeSlackOptions::default()).await
    }

    /// Starts with [`FakeSlackOptions::quick`]: what the conformance suite runs against.
    pub async fn start_quick() -> Self {
        Self::start_with(FakeSlackOptions::quick()).await
    }

    /// Starts in Events API mode with quick rates, Herald listening on `listen`.
    pub async fn start_events(listen: SocketAddr) -> Self {
        Self::start_with(FakeSlackOptions {
            events_listen: Some(listen),
            ..FakeSlackOptions::quick()
        })
        .await
    }

    pub async fn start_with(options: FakeSlackOptions) -> Self {
        let http = TcpListener::bind("127.0.0.1:0").await.expect("bind the fake Web API");
        let sockets = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Socket Mode server");
        let http_addr = http.local_addr().expect("local address");
        let socket_addr = sockets.local_addr().expect("local address");
        let (push, pushes) = mpsc::unbounded_channel();
        let events_url = options
            .events_listen
            .map(|listen| format!("http://{listen}/slack/events"));
        let mut state = State::new(options);
        state.events_url = events_url;
        let admin = FakeUser {
            id: "U0ADMIN001".into(),
            name: "Ada Lovelace".into(),
        };
        let stranger = FakeUser {
            id: "U0STRANGR1".into(),
            name: "Sam Stranger".into(),
        };
        state.add_user(&admin);
        state.add_user(&stranger);
        state.conversations.insert(GENERAL.into(), state::Conversation::Channel);
        let thread_ts = state.next_ts();
        state.remember(GENERAL, &thread_ts, None, "Welcome to #general", false);
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            sent_count: watch::Sender::new(0),
            changes: watch::Sender::new(0),
            wake: Notify::new(),
            socket_addr,
            push,
        });
        let (stop, stopped) = watch::channel(false);
        let router = web::router(shared.clone())
            .merge(files::router(shared.clone()))
            .merge(uploads::router(shared.clone()));
        let mut http_stopped = stopped.clone();
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = http_stopped.wait_for(|s| *s).await;
            };
            let _ = axum::serve(crate::no_delay(http), router)
                .with_graceful_shutdown(shutdown)
                .await;
        });
        tokio::spawn(socket::serve(sockets, shared.clone(), stopped.clone()));
        tokio::spawn(socket::redeliver(shared.clone(), stopped.clone()));
        tokio::spawn(push::worker(shared.clone(), pushes, stopped));
        Self {
            shared,
            http_addr,
            stop,
            admin,
            stranger,
            thread_ts,
        }
    }

    /// `http://127.0.0.1:PORT/api`: Herald's `channels.slack.api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.http_addr)
    }

    /// From now on events are POSTed to `url` (the Events API) instead of
    /// going over Socket Mode.
    pub fn set_events_url(&self, url: impl Into<String>) {
        self.shared.lock().events_url = Some(url.into());
    }

    /// This fake's `channels.slack` entry for Events API mode, with Herald
    /// listening on `listen` (YAML, indented by four spaces).
    pub fn events_channel_yaml(&self, listen: SocketAddr) -> String {
        format!(
            "    mode: events\n    listen: {listen}\n    bot_token: {BOT_TOKEN}\n    signing_secret: {SIGNING_SECRET}\n    api_url: {}\n{}",
            self.api_url(),
            self.rate_yaml()
        )
    }

    fn rate_yaml(&self) -> String {
        let Some((count, per)) = self.shared.lock().options.channel_rate else {
            return String::new();
        };
        let rate = match per.as_secs() {
            3600 => format!("{count}/h"),
            60 => format!("{count}/m"),
            _ => format!("{}/s", (f64::from(count) / per.as_secs_f64()).floor().max(1.0)),
        };
        format!("    rate_limits:\n      per_chat: {rate}\n      per_group: {rate}\n")
    }

    /// Another integration posts in `target` as a legacy bot (`subtype: bot_message`).
    pub fn send_bot_message(&self, target: &GroupTarget, text: &str) -> String {
        let mut state = self.shared.lock();
        let ts = state.next_ts();
        let fields = MessageFields {
            channel: &target.chat,
            channel_type: "channel",
            ts: &ts,
            thread_ts: target.thread.as_deref(),
            parent_user_id: target.thread.as_ref().map(|_| self.admin.id.as_str()),
            text,
            author: Author::OtherBot {
                bot_id: "B0OTHERBOT".into(),
                username: "deploy-bot".into(),
            },
        };
        let event = wire::message_event(&fields, "");
        self.shared.deliver_locked(&mut state, event);
        state.remember(&target.chat, &ts, target.thread.as_deref(), text, false);
        ts
    }

    /// Delivers any event (the inner `event` object) as Slack would. Returns its event id.
    pub fn send_event(&self, event: Value) -> String {
        let mut state = self.shared.lock();
        self.shared.deliver_locked(&mut state, event)
    }

    /// `user` runs the slash command `command` (`/herald`) with `text` in
    /// `channel`; Socket Mode delivers it as a `slash_commands` envelope.
    pub fn send_slash_command(&self, user: &FakeUser, channel: &str, command: &str, text: &str) {
        let mut state = self.shared.lock();
        let trigger = state.next_uuid();
        let payload = wire::slash_command(&user.id, &user.name, channel, command, text, &trigger);
        state.enqueue_envelope("slash_commands", payload, Instant::now());
        self.shared.wake.notify_one();
    }

    /// Web API calls received, by method name, in order.
    pub fn calls(&self) -> Vec<String> {
        self.shared.lock().calls.clone()
    }

    /// Envelope ids acknowledged so far.
    pub fn acked(&self) -> Vec<String> {
        self.shared.lock().acked.clone()
    }

    /// How long each acknowledged envelope waited for its ack (from its
    /// first send), in the order they were acknowledged.
    pub fn ack_waits(&self) -> Vec<Duration> {
        self.shared.lock().ack_waits.clone()
    }

    /// Makes `users.info` take `delay` to answer, as Slack's Tier 4 method
    /// may under load.
    pub fn set_users_info_delay(&self, delay: Duration) {
        self.shared.lock().users_info_delay = delay;
    }

    /// Envelopes not acknowledged yet.
    pub fn unacked(&self) -> usize {
        self.shared.lock().envelopes.len()
    }

    /// Events Slack gave up on after its retries.
    pub fn dropped(&self) -> Vec<Value> {
        self.shared.lock().dropped.clone()
    }

    /// Every Events API request made so far.
    pub fn push_log(&self) -> Vec<PushAttempt> {
        self.shared.lock().push_log.clone()
    }

    /// The next Web API calls of `method` (`chat.postMessage`,
    /// `apps.connections.open`) get these faults instead of an answer, one each.
    pub fn inject_faults(&self, method: &str, faults: impl IntoIterator<Item = crate::faults::Fault>) {
        self.shared.lock().faults.add(method, faults);
    }

    /// Faults injected and not yet answered.
    pub fn faults_pending(&self) -> usize {
        self.shared.lock().faults.remaining()
    }

    /// Open Socket Mode connections.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections.len()
    }

    /// Sends `disconnect` (`refresh_requested`, `warning`, …) on every open
    /// connection, as Slack does before it recycles one.
    /// The connections stay open, and are sent envelopes, for
    /// `refresh_grace`; then the fake closes them.
    pub fn request_reconnect(&self, reason: &str) {
        let frame = wire::disconnect(reason).to_string();
        let (writers, grace) = {
            let state = self.shared.lock();
            let writers: Vec<_> = state.connections.values().cloned().collect();
            (writers, state.options.refresh_grace)
        };
        for writer in &writers {
            let _ = writer.send(Frame::Text(frame.clone()));
        }
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            for writer in writers {
                let _ = writer.send(Frame::Close);
            }
        });
    }

    /// Closes the oldest Socket Mode connection without warning, as a
    /// network failure or a Slack server going away does.
    pub fn drop_oldest_connection(&self) {
        if let Some(writer) = self.shared.lock().connections.values().next() {
            let _ = writer.send(Frame::Close);
        }
    }

    /// Sends `disconnect` on the oldest connection only, as Slack refreshes
    /// each connection on its own schedule; it is closed after
    /// `refresh_grace`.
    pub fn request_reconnect_oldest(&self, reason: &str) {
        let frame = wire::disconnect(reason).to_string();
        let (writer, grace) = {
            let state = self.shared.lock();
            (state.connections.values().next().cloned(), state.options.refresh_grace)
        };
        let Some(writer) = writer else { return };
        let _ = writer.send(Frame::Text(frame));
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let _ = writer.send(Frame::Close);
        });
    }

    /// From now on, keeps the fewest Socket Mode connections open at any
    /// moment ([`FakeSlack::fewest_open_connections`]).
    pub fn watch_open_connections(&self) {
        let mut state = self.shared.lock();
        state.fewest_open = Some(state.connections.len());
    }

    /// The fewest connections open at once since
    /// [`FakeSlack::watch_open_connections`]; `None` before it.
    pub fn fewest_open_connections(&self) -> Option<usize> {
        self.shared.lock().fewest_open
    }

    /// Closes every Socket Mode connection without warning.
    pub fn drop_connections(&self) {
        for writer in self.shared.lock().connections.values() {
            let _ = writer.send(Frame::Close);
        }
    }

    /// Waits until `check` holds for the fake, or `timeout` passes; returns whether it held.
    pub async fn wait_until(&self, timeout: Duration, check: impl Fn(&FakeSlack) -> bool) -> bool {
        let mut changes = self.shared.changes.subscribe();
        tokio::time::timeout(timeout, async {
            loop {
                if check(self) {
                    return;
                }
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .is_ok()
    }

    fn user_message(&self, user: &FakeUser, target: (&str, &str, Option<&str>), text: &str, mention: bool) -> String {
        let (channel, channel_type, thread_ts) = target;
        let mut state = self.shared.lock();
        state.add_user(user);
        let ts = state.next_ts();
        let client_msg_id = state.next_uuid();
        let text = if mention {
            format!("<@{BOT_USER_ID}> {text}")
        } else {
            text.to_owned()
        };
        let fields = MessageFields {
            channel,
            channel_type,
            ts: &ts,
            thread_ts,
            parent_user_id: thread_ts.map(|_| self.admin.id.as_str()),
            text: &text,
            author: Author::User(user.id.clone()),
        };
        if mention && channel_type != "im" {
            let event = wire::app_mention_event(&fields, &user.id, &client_msg_id);
            self.shared.deliver_locked(&mut state, event);
        }
        let event = wire::message_event(&fields, &client_msg_id);
        self.shared.deliver_locked(&mut state, event);
        state.remember(channel, &ts, thread_ts, &text, false);
        state.delivered_stamps.push(Stamped {
            at: std::time::Instant::now(),
            chat: channel.to_owned(),
            text,
        });
        ts
    }
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.drop_connections();
        let _ = self.stop.send(true);
    }
}

#[async_trait]
impl FakePlatform for FakeSlack {
    fn channel(&self) -> &'static str {
        "slack"
    }

    fn channel_yaml(&self) -> String {
        // The lock is released before `events_channel_yaml` takes it again.
        let events_listen = self.shared.lock().options.events_listen;
        if let Some(listen) = events_listen {
            return self.events_channel_yaml(listen);
        }
        format!(
            "    bot_token: {BOT_TOKEN}\n    app_token: {APP_TOKEN}\n    api_url: {}\n    socket_connections: 1\n{}",
            self.api_url(),
            self.rate_yaml()
        )
    }

    /// Slack takes up to 40,000 characters but shows about 4,000 before it
    /// truncates; Herald must keep each message under that.
    fn message_limit(&self) -> usize {
        4000
    }

    fn admin(&self) -> FakeUser {
        self.admin.clone()
    }

    fn bot(&self) -> FakeUser {
        FakeUser {
            id: BOT_USER_ID.into(),
            name: BOT_NAME.into(),
        }
    }

    fn stranger(&self) -> FakeUser {
        self.stranger.clone()
    }

    fn dm_chat(&self, user: &FakeUser) -> String {
        let mut state = self.shared.lock();
        state.add_user(user);
        state.dm_channel(&user.id)
    }

    fn group(&self) -> GroupTarget {
        GroupTarget {
            chat: GENERAL.into(),
            thread: Some(self.thread_ts.clone()),
        }
    }

    async fn send_dm(&self, user: &FakeUser, text: &str) -> String {
        let channel = self.dm_chat(user);
        self.user_message(user, (&channel, "im", None), text, false)
    }

    async fn send_group(&self, user: &FakeUser, target: &GroupTarget, text: &str, mention: bool) -> String {
        self.user_message(user, (&target.chat, "channel", target.thread.as_deref()), text, mention)
    }

    async fn send_own_message(&self, target: &GroupTarget, text: &str) {
        let mut state = self.shared.lock();
        let ts = state.next_ts();
        let fields = MessageFields {
            channel: &target.chat,
            channel_type: if target.chat.starts_with('D') { "im" } else { "channel" },
            ts: &ts,
            thread_ts: target.thread.as_deref(),
            parent_user_id: target.thread.as_ref().map(|_| self.admin.id.as_str()),
            text,
            author: Author::OwnBot,
        };
        let event = wire::message_event(&fields, "");
        self.shared.deliver_locked(&mut state, event);
        state.remember(&target.chat, &ts, target.thread.as_deref(), text, true);
    }

    fn sent(&self) -> Vec<SentMessage> {
        self.shared.lock().sent.clone()
    }

    fn uploads(&self) -> Vec<crate::platform::Upload> {
        self.shared.lock().uploads.clone()
    }

    async fn wait_for_sent(&self, count: usize, timeout: Duration) -> Vec<SentMessage> {
        let mut sent = self.shared.sent_count.subscribe();
        let _ = tokio::time::timeout(timeout, sent.wait_for(|n| *n >= count)).await;
        self.sent()
    }

    fn throttle_next(&self, count: usize, retry_after: Duration) {
        self.shared.lock().throttle = (count > 0).then_some(Throttle {
            remaining: count,
            retry_after,
        });
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

#[cfg(test)]
mod tests;
