//! Slack events to Herald's normalized message. Pure: the event, the bot's
//! identity and the configuration in, an [`InboundMessage`] or nothing out.
//!
//! One person's message can arrive twice: as `message` (the bot reads the
//! channel) and as `app_mention` (it is mentioned), each with its own
//! `event_id`, and either may be retried. Both carry the message's channel
//! and `ts`, so the platform message id is `{channel}:{ts}` and the queue's
//! dedup key answers it once.

use chrono::DateTime;
use herald_core::{
    ActorId, Attachment, AttachmentKind, ChannelName, ConversationId, ConversationKind, ConversationRef,
    InboundMessage, Sender, Timestamp,
};
use slack_morphism::events::{SlackEventCallbackBody, SlackMessageEventType, SlackPushEventCallback};

use super::CHANNEL;

/// Who Herald is on Slack, from `auth.test`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot user (`U…`) that people mention.
    pub user_id: String,
    /// The bot (`B…`) its own messages carry.
    pub bot_id: Option<String>,
}

/// Which messages in shared channels Herald answers without a mention.
#[derive(Clone, Debug, Default)]
pub struct Addressing {
    pub respond_in: Vec<String>,
}

/// The fields of a person's message, whichever event carried it.
struct Fields<'a> {
    channel: &'a str,
    user: &'a str,
    text: &'a str,
    ts: &'a str,
    thread_ts: Option<&'a str>,
    kind: ConversationKind,
    /// `app_mention` says so by its type.
    mentioned: bool,
    /// Files shared with the message (`subtype: file_share`).
    files: Vec<Attachment>,
}

/// The normalized message for `callback`, or `None` when it is not a person
/// writing: the bot's own posts, other bots, edits, joins and other events.
pub fn inbound(
    callback: &SlackPushEventCallback,
    bot: &BotIdentity,
    addressing: &Addressing,
    now: Timestamp,
) -> Option<InboundMessage> {
    let fields = match &callback.event {
        SlackEventCallbackBody::Message(event) => {
            let written_by_person = match &event.subtype {
                None => true,
                // A thread reply also sent to the channel, and a message with
                // files, are still a person writing.
                Some(SlackMessageEventType::ThreadBroadcast | SlackMessageEventType::FileShare) => true,
                Some(_) => false,
            };
            if !written_by_person || event.sender.bot_id.is_some() {
                return None;
            }
            let channel = event.origin.channel.as_ref()?.0.as_str();
            let is_direct = match &event.origin.channel_type {
                Some(channel_type) => channel_type.0 == "im",
                None => channel.starts_with('D'),
            };
            Fields {
                channel,
                user: event.sender.user.as_ref()?.0.as_str(),
                text: event.content.as_ref()?.text.as_deref().unwrap_or_default(),
                ts: event.origin.ts.0.as_str(),
                thread_ts: event.origin.thread_ts.as_ref().map(|t| t.0.as_str()),
                kind: if is_direct {
                    ConversationKind::Direct
                } else {
                    ConversationKind::Group
                },
                mentioned: false,
                files: event
                    .content
                    .as_ref()
                    .and_then(|content| content.files.as_deref())
                    .map(files)
                    .unwrap_or_default(),
            }
        }
        SlackEventCallbackBody::AppMention(event) => Fields {
            channel: event.channel.0.as_str(),
            user: event.user.0.as_str(),
            text: event.content.text.as_deref().unwrap_or_default(),
            ts: event.origin.ts.0.as_str(),
            thread_ts: event.origin.thread_ts.as_ref().map(|t| t.0.as_str()),
            kind: ConversationKind::Group,
            mentioned: true,
            files: Vec::new(),
        },
        _ => return None,
    };
    if fields.user == bot.user_id {
        return None;
    }
    let mentioned = fields.mentioned || mentions(fields.text, &bot.user_id);
    let text = clean_text(fields.text, &bot.user_id);
    if text.is_empty() && fields.files.is_empty() {
        return None;
    }
    let channel_name = ChannelName::new(CHANNEL);
    // A reply in a thread belongs to the thread's conversation; Herald's
    // answer goes in the same thread. A message at the top of a channel
    // starts a thread under it: the answer goes there, and the replies in
    // it are the same conversation. (DMs stay one conversation.)
    let thread = match (fields.thread_ts, fields.kind) {
        (Some(thread), _) => Some(thread),
        (None, ConversationKind::Group) => Some(fields.ts),
        (None, ConversationKind::Direct) => None,
    };
    let id = match thread {
        Some(thread) => format!("{CHANNEL}:{}/{thread}", fields.channel),
        None => format!("{CHANNEL}:{}", fields.channel),
    };
    Some(InboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new(id),
            channel: channel_name.clone(),
            kind: fields.kind,
            chat: fields.channel.to_owned(),
            thread: thread.map(str::to_owned),
        },
        sender: Sender {
            id: ActorId::on(&channel_name, fields.user),
            display_name: fields.user.to_owned(),
        },
        text,
        platform_message_id: message_id(fields.channel, fields.ts),
        reply_to: thread
            .filter(|t| *t != fields.ts)
            .map(|t| message_id(fields.channel, t)),
        mentions_bot: match fields.kind {
            ConversationKind::Direct => true,
            ConversationKind::Group => mentioned || addressing.respond_in.iter().any(|c| c == fields.channel),
        },
        received_at: ts_time(fields.ts).unwrap_or(now),
        attachments: fields.files,
    })
}

/// A message's files, with the `url_private` the gateway fetches them by
/// (with the bot token). Slack's file objects state a size that
/// slack-morphism does not read, so the caps apply while downloading.
fn files(files: &[slack_morphism::prelude::SlackFile]) -> Vec<Attachment> {
    files
        .iter()
        .map(|file| {
            let content_type = file
                .mimetype
                .as_ref()
                .map_or_else(|| "application/octet-stream".to_owned(), |m| m.0.clone());
            let kind = match content_type.split('/').next() {
                Some("image") => AttachmentKind::Photo,
                Some("audio") => AttachmentKind::Audio,
                Some("video") => AttachmentKind::Video,
                _ => AttachmentKind::Document,
            };
            Attachment {
                name: file.name.clone().unwrap_or_else(|| "file".into()),
                content_type,
                size: 0,
                source: file.url_private.as_ref().map(ToString::to_string),
                kind: Some(kind),
                ..Attachment::default()
            }
        })
        .collect()
}

/// A Slack message's id across channels: `ts` is unique only within one.
pub fn message_id(channel: &str, ts: &str) -> String {
    format!("{channel}:{ts}")
}

/// `1515449522.000016` as a time; `None` for a `ts` that is not one, such as
/// one too large to count in microseconds.
fn ts_time(ts: &str) -> Option<Timestamp> {
    let (seconds, micros) = ts.split_once('.')?;
    let micros = seconds
        .parse::<i64>()
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(micros.parse::<i64>().ok()?)?;
    DateTime::from_timestamp_micros(micros)
}

/// Whether `text` mentions `user` (`<@U123>` or the older `<@U123|name>`).
fn mentions(text: &str, user: &str) -> bool {
    text.contains(&format!("<@{user}>")) || text.contains(&format!("<@{user}|"))
}

/// The text as the person meant it: the mention of the bot removed, and
/// Slack's escapes of `&`, `<` and `>` undone.
fn clean_text(text: &str, bot_user: &str) -> String {
    let mut text = text.replace(&format!("<@{bot_user}>"), "");
    let legacy = format!("<@{bot_user}|");
    while let Some(start) = text.find(&legacy) {
        match text[start..].find('>') {
            Some(end) => text.replace_range(start..start + end + 1, ""),
            None => break,
        }
    }
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests;
