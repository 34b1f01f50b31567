//! What every fake chat platform offers a test, so one conformance suite runs
//! against Telegram, Discord and Slack alike.
//!
//! A fake speaks its platform's real wire protocol to Herald; this trait is
//! the control side a test uses: inject events as a user would cause them,
//! read what the bot sent, and make the platform throttle.

use std::time::{Duration, Instant};

use async_trait::async_trait;

/// A person on the fake platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeUser {
    /// The platform's stable user id (Herald's actor id is `channel:id`).
    pub id: String,
    pub name: String,
}

/// A message the bot sent, as the platform stored it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMessage {
    pub chat: String,
    /// Thread, topic or `thread_ts` it was posted in.
    pub thread: Option<String>,
    /// The text as the platform shows it (Telegram: with a `parse_mode`,
    /// the markup removed).
    pub text: String,
    /// The message it replies to, where the platform has replies.
    pub reply_to: Option<String>,
    /// The `parse_mode` the text was sent with (Telegram only).
    pub parse_mode: Option<String>,
    /// The formatting the platform made of the text: Telegram's
    /// `MessageEntity` objects; empty elsewhere.
    pub entities: Vec<serde_json::Value>,
    /// The text exactly as the bot sent it, markup included.
    pub raw: String,
}

/// A file the bot uploaded, as the platform received it.
#[derive(Clone, PartialEq, Eq)]
pub struct Upload {
    pub chat: String,
    /// Thread, topic or `thread_ts` it was posted in.
    pub thread: Option<String>,
    /// The file name the bot gave.
    pub name: String,
    /// The type the bot gave, where the platform takes one.
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
    /// Text sent with the file (a caption, a message's content, a comment).
    pub text: Option<String>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("chat", &self.chat)
            .field("thread", &self.thread)
            .field("name", &self.name)
            .field("content_type", &self.content_type)
            .field("bytes", &self.bytes.len())
            .field("text", &self.text)
            .finish()
    }
}

/// Where a group message is posted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupTarget {
    pub chat: String,
    pub thread: Option<String>,
}

/// One message crossing the fake's edge, with the moment it did: a user's
/// message made available to the bot, or a send of the bot arriving. For
/// latency measurements (`herald-bench`); tests assert on [`SentMessage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamped {
    /// On the process's monotonic clock.
    pub at: Instant,
    pub chat: String,
    pub text: String,
}

#[async_trait]
pub trait FakePlatform: Send + Sync {
    /// Herald's channel name: `telegram`, `discord`, `slack`.
    fn channel(&self) -> &'static str;

    /// The body of this channel's entry under `channels:` in herald.yaml,
    /// pointing Herald at this fake (YAML, indented by four spaces).
    fn channel_yaml(&self) -> String;

    /// The platform's message length limit, in its own unit.
    fn message_limit(&self) -> usize;

    /// Length of a text in the platform's unit.
    fn measure(&self, text: &str) -> usize {
        text.chars().count()
    }

    /// A user whose actor id is listed as an admin in tests.
    fn admin(&self) -> FakeUser;

    /// Another user, not an admin.
    fn stranger(&self) -> FakeUser;

    /// The bot itself, as the platform names the author of its messages.
    fn bot(&self) -> FakeUser;

    /// The direct-message chat between `user` and the bot.
    fn dm_chat(&self, user: &FakeUser) -> String;

    /// A group (with a thread, where the platform has threads) that tests post in.
    fn group(&self) -> GroupTarget;

    /// `user` writes `text` to the bot directly. Returns the message id.
    async fn send_dm(&self, user: &FakeUser, text: &str) -> String;

    /// `user` writes `text` in `target`, mentioning the bot or not.
    async fn send_group(&self, user: &FakeUser, target: &GroupTarget, text: &str, mention: bool) -> String;

    /// The platform reports a message the bot itself wrote, as platforms do.
    async fn send_own_message(&self, target: &GroupTarget, text: &str);

    /// Everything the bot sent so far, in the order the platform accepted it.
    fn sent(&self) -> Vec<SentMessage>;

    /// Every file the bot uploaded so far, in order.
    fn uploads(&self) -> Vec<Upload> {
        Vec::new()
    }

    /// Waits until the bot sent at least `count` messages, or `timeout` passes.
    async fn wait_for_sent(&self, count: usize, timeout: Duration) -> Vec<SentMessage>;

    /// The next `count` send requests are refused with 429 and `retry_after`.
    fn throttle_next(&self, count: usize, retry_after: Duration);

    /// Requests that broke the platform's rules: a send before `retry_after`
    /// passed, or above the platform's enforced rate.
    fn violations(&self) -> Vec<String>;

    /// The bot's process was killed and another one is starting. A platform
    /// whose rules depend on what the client was told (Discord's rate-limit
    /// headers) forgets that, because the new process cannot know it.
    fn client_restarted(&self) {}

    /// Each user message as it was made available to the bot (queued for
    /// `getUpdates`, dispatched on the gateway, pushed as an envelope), in
    /// order, with the text as the user wrote it.
    fn delivered_stamps(&self) -> Vec<Stamped> {
        Vec::new()
    }

    /// Each send the platform accepted, stamped when its request arrived,
    /// in the order of [`FakePlatform::sent`].
    fn sent_stamps(&self) -> Vec<Stamped> {
        Vec::new()
    }
}
