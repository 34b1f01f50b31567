//! Messages after they were posted: `chat.update` as Slack answers it, the
//! record of every edit, and the formatting check of every text the bot
//! writes (through [`super::mrkdwn`]), so a test of streamed answers can
//! assert on what people saw at the end and on the way there.
//!
//! Architecture invariant: like Slack, the fake never refuses a text for its
//! formatting; it records findings and mentions beside the message.

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::mrkdwn;
use super::state::{PostVerdict, State};
use super::web::{MAX_TEXT_CHARS, ok, rate_limited, refuse, text_argument};
use super::wire::{self, Author, MessageFields};
use super::{BOT_USER_ID, FakeSlack, Shared};
use axum::response::Response;

/// A message in a conversation, as the fake keeps it.
#[derive(Clone, Debug)]
pub(crate) struct StoredMessage {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub text: String,
    /// Written with the bot token: the only messages `chat.update` may change.
    pub by_bot: bool,
}

/// One of the bot's messages as it reads now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotMessage {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    /// The `text` as the bot last wrote it (mrkdwn).
    pub text: String,
    /// What a person sees: [`mrkdwn::visible_text`] of `text`.
    pub rendered: String,
    /// How many times `chat.update` changed it.
    pub edits: usize,
}

/// One accepted `chat.update`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub channel: String,
    pub ts: String,
    /// The new text (mrkdwn).
    pub text: String,
    /// When the request arrived, on the process's monotonic clock.
    pub at: std::time::Instant,
}

impl State {
    /// Keeps a message so `chat.update` can find it and tell whose it is.
    pub(crate) fn remember(&mut self, channel: &str, ts: &str, thread_ts: Option<&str>, text: &str, by_bot: bool) {
        self.message_index
            .insert((channel.to_owned(), ts.to_owned()), self.messages.len());
        self.messages.push(StoredMessage {
            channel: channel.to_owned(),
            ts: ts.to_owned(),
            thread_ts: thread_ts.map(str::to_owned),
            text: text.to_owned(),
            by_bot,
        });
    }

    /// Checks a text the bot wrote: findings and notifying mentions are recorded.
    pub(crate) fn check_format(&mut self, method: &str, channel: &str, ts: &str, text: &str) {
        let check = mrkdwn::check(text);
        self.format_findings.extend(
            check
                .findings
                .into_iter()
                .map(|finding| format!("{method} in {channel} (ts {ts}): {finding}")),
        );
        self.mentions.extend(check.mentions);
    }
}

/// `chat.update`: `channel`, `ts`, and the new `text` (or `blocks`).
pub(super) fn update_message(shared: &Shared, arguments: &Map<String, Value>, arrived: std::time::Instant) -> Response {
    let text = text_argument(arguments, "text").unwrap_or_default().to_owned();
    let has_blocks = arguments.get("blocks").is_some_and(|b| !b.is_null());
    let mut state = shared.lock();
    // Unlike `chat.postMessage`, a user id does not name a DM here.
    let Some(channel) = text_argument(arguments, "channel")
        .filter(|c| state.conversations.contains_key(*c))
        .map(str::to_owned)
    else {
        return refuse("channel_not_found");
    };
    let ts = text_argument(arguments, "ts").unwrap_or_default().to_owned();
    let Some(&index) = state.message_index.get(&(channel.clone(), ts.clone())) else {
        return refuse("message_not_found");
    };
    if !state.messages[index].by_bot {
        return refuse("cant_update_message");
    }
    if text.is_empty() && !has_blocks {
        return refuse("no_text");
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return refuse("msg_too_long");
    }
    if let PostVerdict::RateLimited { retry_after_secs } = state.judge_update(Instant::now()) {
        return rate_limited(retry_after_secs);
    }
    let previous = std::mem::replace(&mut state.messages[index].text, text.clone());
    let thread_ts = state.messages[index].thread_ts.clone();
    state.check_format("chat.update", &channel, &ts, &text);
    state.edits.push(Edit {
        channel: channel.clone(),
        ts: ts.clone(),
        text: text.clone(),
        at: arrived,
    });
    // The moment of the edit, in the message timestamps' clock.
    let edited_ts = state.next_ts();
    if state.options.echo_own_messages {
        let fields = MessageFields {
            channel: &channel,
            channel_type: if channel.starts_with('D') { "im" } else { "channel" },
            ts: &ts,
            thread_ts: thread_ts.as_deref(),
            parent_user_id: None,
            text: &text,
            author: Author::OwnBot,
        };
        let event = wire::message_changed_event(&fields, &previous, &edited_ts);
        shared.deliver_locked(&mut state, event);
    }
    drop(state);
    shared.changed();
    let mut message = wire::posted_message(&text, &ts, thread_ts.as_deref());
    message["edited"] = json!({"user": BOT_USER_ID, "ts": edited_ts});
    ok(json!({
        "channel": channel,
        "ts": ts,
        "text": text,
        "message": message,
    }))
}

impl FakeSlack {
    /// The bot's messages as they read now, in the order they were posted:
    /// each `chat.postMessage` (and [`crate::FakePlatform::send_own_message`])
    /// with the text of its last `chat.update`.
    pub fn bot_messages(&self) -> Vec<BotMessage> {
        let state = self.shared.lock();
        state
            .messages
            .iter()
            .filter(|m| m.by_bot)
            .map(|m| BotMessage {
                channel: m.channel.clone(),
                ts: m.ts.clone(),
                thread_ts: m.thread_ts.clone(),
                text: m.text.clone(),
                rendered: mrkdwn::visible_text(&m.text),
                edits: state
                    .edits
                    .iter()
                    .filter(|e| e.channel == m.channel && e.ts == m.ts)
                    .count(),
            })
            .collect()
    }

    /// Every accepted `chat.update`, in order.
    pub fn edits(&self) -> Vec<Edit> {
        self.shared.lock().edits.clone()
    }

    /// Where the texts the bot wrote (posted or updated) break Slack's
    /// escaping rules: each says the method, channel, ts and the place.
    /// Slack shows such a text, but not as written.
    pub fn format_findings(&self) -> Vec<String> {
        self.shared.lock().format_findings.clone()
    }

    /// Who the bot's texts would notify (`here`, `channel`, `everyone`,
    /// `subteam:S…`, `user:U…`), in order; a mention written into an edit
    /// counts too.
    pub fn mentions(&self) -> Vec<String> {
        self.shared.lock().mentions.clone()
    }

    /// The next `count` `chat.update`s are answered with a 429 asking for
    /// `retry_after` (workspace-wide, as Slack limits the method).
    pub fn throttle_updates(&self, count: usize, retry_after: std::time::Duration) {
        self.shared.lock().update_throttle = (count > 0).then_some(super::state::Throttle {
            remaining: count,
            retry_after,
        });
    }
}
