//! Telegram update -> [`InboundMessage`]. Pure: no I/O, no clock.
//!
//! Ids, as Herald writes them:
//! - conversation `telegram:<chat_id>`, or `telegram:<chat_id>/<message_thread_id>`
//!   for a forum topic; actor `telegram:<user_id>`;
//! - platform message id `<chat_id>:<message_id>` (Telegram's message ids
//!   count per chat, so the chat makes them unique for deduplication), and
//!   `<chat_id>:<message_id>:edit:<edit_date>` for an edit Herald handles.
//!
//! An album (several photos or files sent together) comes as one message
//! per file sharing a `media_group_id`; [`group_albums`] makes them one
//! message, named by its first part, so the album gets one answer.

use super::config::ChatSelector;
use super::model::{
    FileObject, GROUP_ANONYMOUS_ID, Message, MessageEntity, TELEGRAM_SERVICE_ID, Update, UpdateKind, User,
};
use herald_core::{
    ActorId, Attachment, AttachmentKind, ChannelName, ConversationId, ConversationKind, ConversationRef,
    InboundMessage, Sender,
};

pub const CHANNEL: &str = "telegram";

/// Who the bot is, from `getMe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotIdentity {
    pub id: u64,
    pub username: String,
}

/// The configuration that decides what is for Herald.
#[derive(Clone, Debug, Default)]
pub struct PayloadRules {
    pub respond_in: Vec<ChatSelector>,
    pub handle_edits: bool,
}

/// What an update is to Herald.
#[derive(Clone, Debug, PartialEq)]
pub enum Classified {
    Message(Box<InboundMessage>),
    /// Not a message for Herald; the reason is for debug logs.
    Ignored(&'static str),
}

pub fn classify(update: &Update, bot: &BotIdentity, rules: &PayloadRules) -> Classified {
    let (message, edited) = match &update.kind {
        UpdateKind::Message(message) => (message, false),
        UpdateKind::EditedMessage(message) if rules.handle_edits => (message, true),
        UpdateKind::EditedMessage(_) => return Classified::Ignored("an edit"),
        UpdateKind::ChannelPost => return Classified::Ignored("a channel post"),
        UpdateKind::Undecodable(_) => return Classified::Ignored("a message that did not decode"),
        UpdateKind::Other => return Classified::Ignored("not a message"),
    };
    match inbound(message, edited, bot, rules) {
        Ok(inbound) => Classified::Message(Box::new(inbound)),
        Err(reason) => Classified::Ignored(reason),
    }
}

fn inbound(
    message: &Message,
    edited: bool,
    bot: &BotIdentity,
    rules: &PayloadRules,
) -> Result<InboundMessage, &'static str> {
    let kind = if message.chat.is_private() {
        ConversationKind::Direct
    } else if message.chat.is_group() {
        ConversationKind::Group
    } else {
        return Err("not a private chat or group");
    };
    if message.is_service() {
        return Err("a service message");
    }
    let sender = sender(message, bot)?;
    let attachments = attachments(message);
    // A photo or a voice note without a caption is a message all the same.
    let (text, entities) = match (message.text.as_deref(), message.caption.as_deref()) {
        (Some(text), _) => (text, &message.entities[..]),
        (None, Some(caption)) => (caption, &message.caption_entities[..]),
        (None, None) if !attachments.is_empty() => ("", &[][..]),
        (None, None) => return Err("no text"),
    };
    let chat = message.chat.id.to_string();
    let thread = message
        .is_topic_message
        .then_some(message.message_thread_id)
        .flatten()
        .map(|t| t.to_string());
    // In a forum topic every message "replies" to the topic's first message;
    // that is threading, not a reply.
    let reply = message
        .reply_to_message
        .as_deref()
        .filter(|reply| !(message.is_topic_message && message.message_thread_id == Some(reply.message_id)));
    let replies_to_bot = reply
        .and_then(|reply| reply.from.as_ref())
        .is_some_and(|from| from.id == bot.id);
    let listed = rules.respond_in.iter().any(|s| s.matches(&chat, thread.as_deref()));
    let mentions_bot = kind == ConversationKind::Direct || listed || replies_to_bot || mentions(text, entities, bot);
    let conversation_id = match &thread {
        Some(thread) => format!("{CHANNEL}:{chat}/{thread}"),
        None => format!("{CHANNEL}:{chat}"),
    };
    let mut platform_message_id = format!("{chat}:{}", message.message_id);
    let mut received_at = unix_time(message.date);
    if edited && let Some(edit_date) = message.edit_date {
        platform_message_id = format!("{platform_message_id}:edit:{edit_date}");
        received_at = unix_time(edit_date);
    }
    Ok(InboundMessage {
        conversation: ConversationRef {
            id: ConversationId::new(conversation_id),
            channel: ChannelName::new(CHANNEL),
            kind,
            chat: chat.clone(),
            thread,
        },
        sender,
        text: without_bot_address(text, &bot.username),
        platform_message_id,
        reply_to: reply.map(|reply| format!("{chat}:{}", reply.message_id)),
        mentions_bot,
        received_at,
        attachments,
    })
}

/// A Bot API time (Unix seconds); one out of range reads as the epoch.
fn unix_time(seconds: i64) -> herald_core::Timestamp {
    chrono::DateTime::from_timestamp(seconds, 0).unwrap_or_default()
}

/// The person behind a message; bots (Herald included) and Telegram's own
/// service account are not people Herald answers.
fn sender(message: &Message, bot: &BotIdentity) -> Result<Sender, &'static str> {
    let from: &User = message.from.as_ref().ok_or("no sender")?;
    if from.id == bot.id {
        return Err("the bot's own message");
    }
    // An anonymous group admin writes as the group itself. Only the id is
    // compared, never the names the account shows.
    if from.id == GROUP_ANONYMOUS_ID
        && let Some(chat) = &message.sender_chat
    {
        return Ok(Sender {
            id: ActorId::on(&ChannelName::new(CHANNEL), chat.id),
            display_name: chat.title.as_deref().unwrap_or("anonymous admin").to_owned(),
        });
    }
    if from.id == TELEGRAM_SERVICE_ID {
        return Err("a message from Telegram's service account");
    }
    if from.is_bot {
        return Err("another bot's message");
    }
    Ok(Sender {
        id: ActorId::on(&ChannelName::new(CHANNEL), from.id),
        display_name: from.full_name(),
    })
}

fn mentions(text: &str, entities: &[MessageEntity], bot: &BotIdentity) -> bool {
    let handle = format!("@{}", bot.username);
    entities.iter().any(|entity| match entity.kind.as_str() {
        "mention" => entity_text(text, entity).is_some_and(|t| t.eq_ignore_ascii_case(&handle)),
        "text_mention" => entity.user.as_ref().is_some_and(|user| user.id == bot.id),
        "bot_command" => entity_text(text, entity)
            .and_then(|t| t.rsplit_once('@'))
            .is_some_and(|(_, name)| name.eq_ignore_ascii_case(&bot.username)),
        _ => false,
    })
}

/// The part of `text` an entity marks. Telegram counts its offset and length
/// in UTF-16 code units; an entity that does not start and end on character
/// boundaries inside the text marks nothing.
fn entity_text<'a>(text: &'a str, entity: &MessageEntity) -> Option<&'a str> {
    let end = entity.offset.checked_add(entity.length)?;
    let (mut start_byte, mut end_byte) = (None, None);
    let mut utf16 = 0;
    for (byte, c) in text.char_indices().chain([(text.len(), '\0')]) {
        if utf16 == entity.offset {
            start_byte = Some(byte);
        }
        if utf16 >= end {
            end_byte = (utf16 == end).then_some(byte);
            break;
        }
        utf16 += c.len_utf16();
    }
    text.get(start_byte?..end_byte?)
}

/// Drops a leading `@botname` and the `@botname` of `/command@botname`, so
/// Herald sees what was said to it.
pub fn without_bot_address(text: &str, username: &str) -> String {
    let handle = format!("@{username}");
    let trimmed = text.trim_start();
    if let Some(head) = trimmed.get(..handle.len())
        && head.eq_ignore_ascii_case(&handle)
    {
        let rest = &trimmed[handle.len()..];
        if rest.is_empty() || rest.starts_with(|c: char| c.is_whitespace() || matches!(c, ',' | ':')) {
            return rest.trim_start_matches([',', ':']).trim_start().to_owned();
        }
    }
    if trimmed.starts_with('/') {
        let (first, rest) = trimmed.split_once(char::is_whitespace).unwrap_or((trimmed, ""));
        if let Some((command, name)) = first.split_once('@')
            && name.eq_ignore_ascii_case(username)
        {
            return if rest.is_empty() {
                command.to_owned()
            } else {
                format!("{command} {rest}")
            };
        }
    }
    text.to_owned()
}

/// The size Telegram stated, or 0 (unknown) when it did not: `file_size`
/// is optional in the Bot API. An unknown size is fetched, and the cap
/// applies to the bytes.
pub(super) fn claimed_size(file_size: Option<u64>) -> u64 {
    file_size.unwrap_or(0)
}

/// The album the update's message is part of (`media_group_id`).
pub fn album_of(update: &Update) -> Option<&str> {
    match &update.kind {
        UpdateKind::Message(message) | UpdateKind::EditedMessage(message) => message.media_group_id.as_deref(),
        _ => None,
    }
}

/// Where the album the last of `updates` belongs to begins (`updates.len()`
/// when the last is in no album): its other parts may still be on their
/// way, so a poll may hand over what comes before it and wait a moment.
pub fn album_tail(updates: &[Update]) -> usize {
    let Some(group) = updates.last().and_then(album_of) else {
        return updates.len();
    };
    updates
        .iter()
        .position(|update| album_of(update) == Some(group))
        .unwrap_or(updates.len())
}

/// Messages in order, each with the album it is part of; the parts of an
/// album (the same conversation and `media_group_id`) become one message at
/// the place of its first part: its files in order, the first caption as
/// its text, named by its first part's id (the lowest, so the same album
/// is the same message however often Telegram sends it).
pub fn group_albums(messages: Vec<(Option<String>, InboundMessage)>) -> Vec<InboundMessage> {
    let mut grouped: Vec<InboundMessage> = Vec::with_capacity(messages.len());
    let mut albums: Vec<(String, usize)> = Vec::new();
    for (album, message) in messages {
        let Some(album) = album else {
            grouped.push(message);
            continue;
        };
        let key = album_key(&message, &album);
        match albums.iter().find(|(k, _)| *k == key) {
            Some((_, at)) => {
                let first = &mut grouped[*at];
                if message_number(&message) < message_number(first) {
                    first.platform_message_id = message.platform_message_id.clone();
                    first.received_at = message.received_at;
                }
                if first.text.trim().is_empty() {
                    first.text = message.text;
                }
                first.mentions_bot |= message.mentions_bot;
                first.reply_to = first.reply_to.take().or(message.reply_to);
                first.attachments.extend(message.attachments);
            }
            None => {
                albums.push((key, grouped.len()));
                grouped.push(message);
            }
        }
    }
    grouped
}

/// What names an album: its `media_group_id` within its conversation.
pub fn album_key(message: &InboundMessage, media_group_id: &str) -> String {
    format!("{}/{media_group_id}", message.conversation.id)
}

/// The message number in `<chat>:<message_id>`, for ordering album parts.
fn message_number(message: &InboundMessage) -> i64 {
    message
        .platform_message_id
        .split(':')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(i64::MAX)
}

/// Files that came with the message, with the `file_id` the gateway
/// fetches them by (`getFile`); the largest size of a photo. A photo, a
/// voice note and a video note have no name of their own (Telegram gives
/// none), and a photo no type: Telegram serves every size as JPEG.
fn attachments(message: &Message) -> Vec<Attachment> {
    let file = |name: &str, content_type: &str, file_id: &str, file_size: Option<u64>, kind| Attachment {
        name: name.to_owned(),
        content_type: content_type.to_owned(),
        size: claimed_size(file_size),
        source: Some(file_id.to_owned()),
        kind: Some(kind),
        ..Attachment::default()
    };
    let named = |object: &FileObject, name: &str, content_type: &str, kind| {
        file(
            object.file_name.as_deref().unwrap_or(name),
            object.mime_type.as_deref().unwrap_or(content_type),
            &object.file_id,
            object.file_size,
            kind,
        )
    };
    let mut found = Vec::new();
    if let Some(document) = &message.document {
        found.push(named(
            document,
            "document",
            "application/octet-stream",
            AttachmentKind::Document,
        ));
    }
    if let Some(largest) = message
        .photo
        .iter()
        .max_by_key(|p| u64::from(p.width) * u64::from(p.height))
    {
        found.push(file(
            "photo.jpg",
            "image/jpeg",
            &largest.file_id,
            largest.file_size,
            AttachmentKind::Photo,
        ));
    }
    if let Some(voice) = &message.voice {
        let content_type = voice.mime_type.as_deref().unwrap_or("audio/ogg");
        found.push(file(
            "voice.ogg",
            content_type,
            &voice.file_id,
            voice.file_size,
            AttachmentKind::Voice,
        ));
    }
    if let Some(audio) = &message.audio {
        found.push(named(audio, "audio", "audio/mpeg", AttachmentKind::Audio));
    }
    if let Some(video) = &message.video {
        found.push(named(video, "video.mp4", "video/mp4", AttachmentKind::Video));
    }
    if let Some(note) = &message.video_note {
        found.push(file(
            "video_note.mp4",
            "video/mp4",
            &note.file_id,
            note.file_size,
            AttachmentKind::Video,
        ));
    }
    found
}

#[cfg(test)]
mod tests;
