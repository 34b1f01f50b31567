//! A fake Discord on 127.0.0.1: the REST API under `/api/v10` and the
//! gateway websocket, so Herald's Discord adapter (REST requests built by
//! serenity, its own gateway client) runs against it unchanged apart from
//! its base URL.
//!
//! The world is small and fixed: one bot user, two people (an admin and a
//! stranger), one guild with a text channel and a public thread in it, and a
//! DM channel per person. A test injects messages as people would write them
//! ([`FakePlatform`]); the fake dispatches them as `MESSAGE_CREATE` to every
//! identified gateway session, and records what the bot posts.
//!
//! Architecture invariant: what the fake sends is shaped as Discord documents
//! it (user, channel and message objects, gateway opcodes and close codes,
//! `X-RateLimit-*` headers, the 429 body), and what Discord refuses the fake
//! refuses: a wrong token, a message over 2000 characters or empty, a reply
//! to an unknown message, a request before a 429's `retry_after` passed or on
//! an exhausted bucket (the last two are also recorded as violations).
//! The bot's messages can be edited (`PATCH`, in `edits`); for every message
//! it creates or edits the fake records whom it pings ([`mentions`]).

mod buckets;
mod control;
mod edits;
mod gateway;
pub mod mentions;
mod rest;
pub mod uploads;
pub mod wire;
pub mod zlib;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use buckets::Buckets;
pub use buckets::{BucketRule, RateHeaders, Verdict};
pub use edits::{BotMessage, Edit};
use gateway::SessionStart;
use wire::{ChannelRecord, MessageRecord, UserRecord};

use crate::platform::{FakePlatform, FakeUser, GroupTarget, SentMessage, Stamped};

/// The bot token the fake accepts unless told otherwise.
pub const DEFAULT_TOKEN: &str = "fake-discord-bot-token";

const BOT_ID: &str = "1100000000000000001";
const APPLICATION_ID: &str = "1100000000000000002";
const GUILD_ID: &str = "1200000000000000001";
const TEXT_CHANNEL_ID: &str = "1200000000000000010";
/// A second guild, on the other shard of two: `(id >> 22) % 2` is 0 here
/// and 1 for [`GUILD_ID`].
const SECOND_GUILD_ID: &str = "1200000000004194305";
const SECOND_CHANNEL_ID: &str = "1200000000004194320";
const THREAD_ID: &str = "1200000000000000011";
const ADMIN_ID: &str = "1300000000000000001";
const STRANGER_ID: &str = "1300000000000000002";

/// How long an injected message waits for the bot to be connected.
const WAIT_FOR_BOT: Duration = Duration::from_secs(30);

/// What goes down one gateway connection.
#[derive(Debug)]
enum Outgoing {
    Frame(String),
    Close(u16, &'static str),
}

/// A gateway session: what Discord keeps so a connection can RESUME.
struct Session {
    intents: u64,
    seq: u64,
    /// Every dispatch of the session by sequence number, for replay on RESUME.
    sent: Vec<(u64, String)>,
    /// The live connection, if one is attached.
    connection: Option<(u64, mpsc::UnboundedSender<Outgoing>)>,
    /// `[shard_id, num_shards]` as IDENTIFY gave it (`[0, 1]` without).
    shard: [u64; 2],
}

/// One IDENTIFY as the fake received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identify {
    pub token: String,
    pub intents: u64,
    pub shard: Option<[u64; 2]>,
}

/// One REST request as the fake received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestRequest {
    pub method: String,
    pub path: String,
    pub status: u16,
}

struct State {
    token: String,
    bot: UserRecord,
    people: Vec<UserRecord>,
    channels: HashMap<String, ChannelRecord>,
    dm_by_user: HashMap<String, String>,
    messages: Vec<MessageRecord>,
    /// Where each message id is in `messages`, so lookups stay cheap when a
    /// benchmark fills the channels.
    message_index: HashMap<String, usize>,
    /// User messages as they were dispatched to the bot.
    delivered_stamps: Vec<Stamped>,
    /// Messages the bot created, stamped when their request arrived.
    sent_stamps: Vec<Stamped>,
    sent: Vec<SentMessage>,
    sent_ids: Vec<String>,
    /// Files the bot uploaded with its messages.
    uploads: Vec<crate::platform::Upload>,
    /// Messages created with `enforce_nonce`, by nonce, with when.
    nonces: HashMap<String, (MessageRecord, std::time::Instant)>,
    /// Faults for the next create-message requests.
    faults: crate::faults::Faults,
    typing: Vec<String>,
    requests: Vec<RestRequest>,
    identifies: Vec<Identify>,
    /// When each IDENTIFY arrived, in the order of `identifies`.
    identify_times: Vec<std::time::Instant>,
    /// The next this many IDENTIFYs are answered with op 9 (not
    /// resumable): an invalid-session storm.
    refuse_identifies: usize,
    session_start: SessionStart,
    /// The shard count `GET /gateway/bot` recommends.
    recommended_shards: u32,
    /// Connections that asked for `compress=zlib-stream`.
    compressed_connections: usize,
    heartbeats: usize,
    /// Heartbeats go unanswered while this is set, as on a connection that
    /// died half-way (a "zombie").
    heartbeats_unanswered: bool,
    resumes: usize,
    buckets: Buckets,
    message_rule: BucketRule,
    /// Every channel's bucket for editing messages (its own route).
    edit_rule: BucketRule,
    /// Accepted edits, in order.
    edits: Vec<Edit>,
    /// Whom the bot's messages pinged (see `mentions`), in order.
    pings: Vec<String>,
    typing_rule: BucketRule,
    other_rule: BucketRule,
    sessions: HashMap<String, Session>,
    heartbeat_interval_ms: u64,
    /// The "Message Content Intent" switch of the developer portal.
    message_content_allowed: bool,
    next_snowflake: u64,
    next_connection: u64,
    gateway_url: String,
    /// Attachment bytes on the CDN, by attachment id.
    cdn: HashMap<String, Vec<u8>>,
    cdn_downloads: Vec<String>,
}

impl State {
    fn snowflake(&mut self) -> String {
        self.next_snowflake += 1;
        self.next_snowflake.to_string()
    }

    fn person(&self, id: &str) -> Option<&UserRecord> {
        self.people.iter().find(|p| p.id == id)
    }

    fn dm_channel(&mut self, user: &UserRecord) -> String {
        if let Some(id) = self.dm_by_user.get(&user.id) {
            return id.clone();
        }
        let id = self.snowflake();
        self.channels.insert(
            id.clone(),
            ChannelRecord {
                id: id.clone(),
                kind: wire::DM,
                name: String::new(),
                guild_id: None,
                parent_id: None,
                recipient: Some(user.clone()),
            },
        );
        self.dm_by_user.insert(user.id.clone(), id.clone());
        id
    }

    fn last_message_in(&self, channel: &str) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.channel_id == channel)
            .map(|m| m.id.as_str())
    }

    fn message(&self, id: &str) -> Option<&MessageRecord> {
        self.message_index.get(id).and_then(|index| self.messages.get(*index))
    }

    /// Stores a message (a user's or the bot's) so replies can refer to it.
    fn add_message(&mut self, record: MessageRecord) {
        self.message_index.insert(record.id.clone(), self.messages.len());
        self.messages.push(record);
    }

    /// How many sessions have a live, identified connection.
    fn online(&self) -> usize {
        self.sessions.values().filter(|s| s.connection.is_some()).count()
    }

    /// Sends `event` (`MESSAGE_CREATE`, `MESSAGE_UPDATE`) for `record` to
    /// every connected session that asked for it, blanking the content
    /// where Discord would.
    fn dispatch_message(&mut self, record: &MessageRecord, event: &str) {
        let referenced = record.reference.as_ref().and_then(|id| self.message(id)).cloned();
        let is_dm = record.guild_id.is_none();
        let mentions_bot = record.mentions.iter().any(|u| u.id == self.bot.id);
        let bot_id = self.bot.id.clone();
        // Discord sends a guild's events to one shard, DMs to shard 0.
        let guild: u64 = record.guild_id.as_deref().and_then(|g| g.parse().ok()).unwrap_or(0);
        for session in self.sessions.values_mut() {
            let [shard, shards] = session.shard;
            if (guild >> 22) % shards.max(1) != shard {
                continue;
            }
            let wanted = if is_dm {
                wire::INTENT_DIRECT_MESSAGES
            } else {
                wire::INTENT_GUILD_MESSAGES
            };
            if session.intents & wanted == 0 {
                continue;
            }
            let mut data = wire::message_create(record, referenced.as_ref());
            // Without the message content intent, Discord still sends the
            // content of DMs and of messages that mention the bot (and the
            // bot's own), and blanks it elsewhere.
            let content_visible = session.intents & wire::INTENT_MESSAGE_CONTENT != 0
                || is_dm
                || mentions_bot
                || record.author.id == bot_id;
            if !content_visible {
                data["content"] = "".into();
            }
            session.seq += 1;
            let frame = wire::dispatch(session.seq, event, data).to_string();
            session.sent.push((session.seq, frame.clone()));
            if let Some((_, connection)) = &session.connection {
                let _ = connection.send(Outgoing::Frame(frame));
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// How many messages the bot sent; watched by `wait_for_sent`.
    sent_count: watch::Sender<usize>,
    /// How many sessions are connected and identified.
    online: watch::Sender<usize>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish_online(&self) {
        let online = self.lock().online();
        self.online.send_replace(online);
    }
}

/// The running fake; dropping it stops both servers.
pub struct FakeDiscord {
    shared: Arc<Shared>,
    rest_addr: SocketAddr,
    gateway_addr: SocketAddr,
    stops: Vec<oneshot::Sender<()>>,
}

impl std::fmt::Debug for FakeDiscord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDiscord")
            .field("rest", &self.rest_addr)
            .field("gateway", &self.gateway_addr)
            .finish_non_exhaustive()
    }
}

fn person(id: &str, username: &str) -> UserRecord {
    UserRecord {
        id: id.into(),
        username: username.into(),
        bot: false,
    }
}

impl FakeDiscord {
    /// Starts the REST API and the gateway on ports the OS picks.
    pub async fn start() -> Self {
        let rest = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the fake REST API");
        let gateway = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the fake gateway");
        let rest_addr = rest.local_addr().expect("REST address");
        let gateway_addr = gateway.local_addr().expect("gateway address");
        let mut channels = HashMap::new();
        channels.insert(
            TEXT_CHANNEL_ID.to_owned(),
            ChannelRecord {
                id: TEXT_CHANNEL_ID.into(),
                kind: wire::GUILD_TEXT,
                name: "general".into(),
                guild_id: Some(GUILD_ID.into()),
                parent_id: None,
                recipient: None,
            },
        );
        channels.insert(
            SECOND_CHANNEL_ID.to_owned(),
            ChannelRecord {
                id: SECOND_CHANNEL_ID.into(),
                kind: wire::GUILD_TEXT,
                name: "elsewhere".into(),
                guild_id: Some(SECOND_GUILD_ID.into()),
                parent_id: None,
                recipient: None,
            },
        );
        channels.insert(
            THREAD_ID.to_owned(),
            ChannelRecord {
                id: THREAD_ID.into(),
                kind: wire::PUBLIC_THREAD,
                name: "herald-thread".into(),
                guild_id: Some(GUILD_ID.into()),
                parent_id: Some(TEXT_CHANNEL_ID.into()),
                recipient: None,
            },
        );
        let state = State {
            token: DEFAULT_TOKEN.into(),
            bot: UserRecord {
                id: BOT_ID.into(),
                username: "herald".into(),
                bot: true,
            },
            people: vec![person(ADMIN_ID, "alice"), person(STRANGER_ID, "bob")],
            channels,
            dm_by_user: HashMap::new(),
            messages: Vec::new(),
            message_index: HashMap::new(),
            delivered_stamps: Vec::new(),
            cdn: HashMap::new(),
            cdn_downloads: Vec::new(),
            sent_stamps: Vec::new(),
            sent: Vec::new(),
            sent_ids: Vec::new(),
            uploads: Vec::new(),
            nonces: HashMap::new(),
            faults: Default::default(),
            typing: Vec::new(),
            requests: Vec::new(),
            identifies: Vec::new(),
            identify_times: Vec::new(),
            refuse_identifies: 0,
            session_start: SessionStart {
                total: 1000,
                remaining: 1000,
                reset_after: Duration::from_secs(86_400),
                resets_at: std::time::Instant::now() + Duration::from_secs(86_400),
                max_concurrency: 1,
                last_identify: HashMap::new(),
            },
            recommended_shards: 1,
            compressed_connections: 0,
            heartbeats: 0,
            heartbeats_unanswered: false,
            resumes: 0,
            buckets: Buckets::new(50),
            message_rule: BucketRule {
                limit: 5,
                window: Duration::from_secs(1),
                hash: "80c17d2f203122d936070c88c8d10f33".into(),
            },
            edit_rule: BucketRule {
                limit: 5,
                window: Duration::from_secs(5),
                hash: "a5e7d3c1b9f8e6d4c2b0a9f7e5d3c1b8".into(),
            },
            edits: Vec::new(),
            pings: Vec::new(),
            typing_rule: BucketRule {
                limit: 5,
                window: Duration::from_secs(5),
                hash: "f3f5b3c7d2a1e6b84c0d9e7a1b2c3d4e".into(),
            },
            other_rule: BucketRule {
                limit: 50,
                window: Duration::from_secs(1),
                hash: "d2d4b0f9a8e7c6b5a4938271605f4e3d".into(),
            },
            sessions: HashMap::new(),
            heartbeat_interval_ms: 41_250,
            message_content_allowed: true,
            next_snowflake: 1_400_000_000_000_000_000,
            next_connection: 0,
            gateway_url: format!("ws://{gateway_addr}"),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            sent_count: watch::Sender::new(0),
            online: watch::Sender::new(0),
        });
        let stops = vec![
            rest::serve(rest, shared.clone()),
            gateway::serve(gateway, shared.clone()),
        ];
        Self {
            shared,
            rest_addr,
            gateway_addr,
            stops,
        }
    }

    /// `author` replies in `target` to the message `reply_to` (the bot's,
    /// typically), without mentioning anyone.
    pub async fn send_reply(&self, author: &FakeUser, target: &GroupTarget, text: &str, reply_to: &str) -> String {
        let channel = target.thread.clone().unwrap_or_else(|| target.chat.clone());
        self.inject(
            &author.id,
            &channel,
            text.to_owned(),
            Vec::new(),
            Some(reply_to.to_owned()),
        )
        .await
    }

    /// The ids of the messages the bot posted, in the order of [`FakePlatform::sent`].
    pub fn sent_ids(&self) -> Vec<String> {
        self.shared.lock().sent_ids.clone()
    }

    /// `user` sends a DM without waiting for the bot: what Discord keeps
    /// for a session while its connection is down, to replay on RESUME.
    pub fn send_dm_while_away(&self, user: &FakeUser, text: &str) -> String {
        let channel = self.dm_chat(user);
        self.store_and_dispatch(&user.id, &channel, text.to_owned(), Vec::new(), None, Vec::new())
    }

    async fn wait_for_bot(&self) {
        let mut online = self.shared.online.subscribe();
        let _ = tokio::time::timeout(WAIT_FOR_BOT, online.wait_for(|n| *n > 0)).await;
    }

    /// Stores a message by `author_id` in `channel` and dispatches it. A
    /// test's message is written "while Herald runs": it waits (up to 30 s)
    /// for a connected session first.
    async fn inject(
        &self,
        author_id: &str,
        channel: &str,
        content: String,
        mentions: Vec<UserRecord>,
        reference: Option<String>,
    ) -> String {
        self.inject_with(author_id, channel, content, mentions, reference, Vec::new())
            .await
    }

    async fn inject_with(
        &self,
        author_id: &str,
        channel: &str,
        content: String,
        mentions: Vec<UserRecord>,
        reference: Option<String>,
        attachments: Vec<Value>,
    ) -> String {
        self.wait_for_bot().await;
        self.store_and_dispatch(author_id, channel, content, mentions, reference, attachments)
    }

    fn store_and_dispatch(
        &self,
        author_id: &str,
        channel: &str,
        content: String,
        mentions: Vec<UserRecord>,
        reference: Option<String>,
        attachments: Vec<Value>,
    ) -> String {
        let mut state = self.shared.lock();
        let author = if author_id == state.bot.id {
            state.bot.clone()
        } else {
            state
                .person(author_id)
                .cloned()
                .unwrap_or_else(|| person(author_id, &format!("user{author_id}")))
        };
        let guild_id = state.channels.get(channel).and_then(|c| c.guild_id.clone());
        let record = MessageRecord {
            id: state.snowflake(),
            channel_id: channel.to_owned(),
            guild_id,
            author,
            content,
            mentions,
            reference,
            timestamp: now_iso8601(),
            attachments,
            edited_timestamp: None,
        };
        state.add_message(record.clone());
        state.dispatch_message(&record, "MESSAGE_CREATE");
        if record.author.id != state.bot.id {
            state.delivered_stamps.push(Stamped {
                at: std::time::Instant::now(),
                chat: record.channel_id.clone(),
                text: record.content.clone(),
            });
        }
        record.id
    }
}

impl FakeDiscord {
    /// The next create-message requests meet these faults, one each.
    pub fn inject_message_faults(&self, faults: impl IntoIterator<Item = crate::faults::Fault>) {
        self.shared.lock().faults.add("create_message", faults);
    }
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        let state = self.shared.lock();
        for session in state.sessions.values() {
            if let Some((_, connection)) = &session.connection {
                let _ = connection.send(Outgoing::Close(1001, "fake stopped"));
            }
        }
    }
}

fn now_iso8601() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string()
}

#[async_trait]
impl FakePlatform for FakeDiscord {
    fn channel(&self) -> &'static str {
        "discord"
    }

    fn channel_yaml(&self) -> String {
        format!("    token: {}\n    api_url: {}\n", self.token(), self.api_url())
    }

    fn message_limit(&self) -> usize {
        2000
    }

    fn admin(&self) -> FakeUser {
        FakeUser {
            id: ADMIN_ID.into(),
            name: "alice".into(),
        }
    }

    fn bot(&self) -> FakeUser {
        FakeUser {
            id: BOT_ID.into(),
            name: "herald".into(),
        }
    }

    fn stranger(&self) -> FakeUser {
        FakeUser {
            id: STRANGER_ID.into(),
            name: "bob".into(),
        }
    }

    fn dm_chat(&self, user: &FakeUser) -> String {
        let mut state = self.shared.lock();
        let record = state
            .person(&user.id)
            .cloned()
            .unwrap_or_else(|| person(&user.id, &user.name));
        state.dm_channel(&record)
    }

    fn group(&self) -> GroupTarget {
        GroupTarget {
            chat: TEXT_CHANNEL_ID.into(),
            thread: Some(THREAD_ID.into()),
        }
    }

    async fn send_dm(&self, user: &FakeUser, text: &str) -> String {
        let channel = self.dm_chat(user);
        self.inject(&user.id, &channel, text.to_owned(), Vec::new(), None).await
    }

    async fn send_group(&self, user: &FakeUser, target: &GroupTarget, text: &str, mention: bool) -> String {
        let channel = target.thread.clone().unwrap_or_else(|| target.chat.clone());
        let bot = self.shared.lock().bot.clone();
        let (content, mentions) = if mention {
            (format!("<@{}> {text}", bot.id), vec![bot])
        } else {
            (text.to_owned(), Vec::new())
        };
        self.inject(&user.id, &channel, content, mentions, None).await
    }

    async fn send_own_message(&self, target: &GroupTarget, text: &str) {
        let channel = target.thread.clone().unwrap_or_else(|| target.chat.clone());
        self.inject(BOT_ID, &channel, text.to_owned(), Vec::new(), None).await;
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
        self.shared.lock().buckets.force(count, retry_after);
    }

    fn violations(&self) -> Vec<String> {
        self.shared.lock().buckets.violations().to_vec()
    }

    fn client_restarted(&self) {
        self.shared.lock().buckets.client_restarted();
    }

    fn delivered_stamps(&self) -> Vec<Stamped> {
        self.shared.lock().delivered_stamps.clone()
    }

    fn sent_stamps(&self) -> Vec<Stamped> {
        self.shared.lock().sent_stamps.clone()
    }
}
