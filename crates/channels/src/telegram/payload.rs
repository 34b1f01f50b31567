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

use herald_core::{
    ActorId, Attachment, AttachmentKind, ChannelName, ConversationId, ConversationKind, ConversationRef,
    InboundMessage, Sender,
};
use teloxide::types::{Message, MessageEntity, MessageEntityKind, MessageKind, Update, UpdateKind, User};

use super::config::ChatSelector;

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
        UpdateKind::ChannelPost(_) | UpdateKind::EditedChannelPost(_) => return Classified::Ignored("a channel post"),
        _ => return Classified::Ignored("not a message"),
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
    } else if message.chat.is_group() || message.chat.is_supergroup() {
        ConversationKind::Group
    } else {
        return Err("not a private chat or group");
    };
    if !matches!(message.kind, MessageKind::Common(_)) {
        return Err("a service message");
    }
    let sender = sender(message, bot)?;
    let attachments = attachments(message);
    // A photo or a voice note without a caption is a message all the same.
    let (text, entities) = match (message.text(), message.caption()) {
        (Some(text), _) => (text, message.entities().unwrap_or_default()),
        (None, Some(caption)) => (caption, message.caption_entities().unwrap_or_default()),
        (None, None) if !attachments.is_empty() => ("", &[][..]),
        (None, None) => return Err("no text"),
    };
    let chat = message.chat.id.0.to_string();
    let thread = message
        .is_topic_message
        .then_some(message.thread_id)
        .flatten()
        .map(|t| t.0.0.to_string());
    // In a forum topic every message "replies" to the topic's first message;
    // that is threading, not a reply.
    let reply = message
        .reply_to_message()
        .filter(|reply| !(message.is_topic_message && message.thread_id.is_some_and(|t| t.0 == reply.id)));
    let replies_to_bot = reply
        .and_then(|reply| reply.from.as_ref())
        .is_some_and(|from| from.id.0 == bot.id);
    let listed = rules.respond_in.iter().any(|s| s.matches(&chat, thread.as_deref()));
    let mentions_bot = kind == ConversationKind::Direct || listed || replies_to_bot || mentions(text, entities, bot);
    let conversation_id = match &thread {
        Some(thread) => format!("{CHANNEL}:{chat}/{thread}"),
        None => format!("{CHANNEL}:{chat}"),
    };
    let mut platform_message_id = format!("{chat}:{}", message.id.0);
    let mut received_at = message.date;
    if edited && let Some(edit_date) = message.edit_date() {
        platform_message_id = format!("{platform_message_id}:edit:{}", edit_date.timestamp());
        received_at = *edit_date;
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
        reply_to: reply.map(|reply| format!("{chat}:{}", reply.id.0)),
        mentions_bot,
        received_at,
        attachments,
    })
}

/// The person behind a message; bots (Herald included) and Telegram's own
/// service account are not people Herald answers.
fn sender(message: &Message, bot: &BotIdentity) -> Result<Sender, &'static str> {
    let from: &User = message.from.as_ref().ok_or("no sender")?;
    if from.id.0 == bot.id {
        return Err("the bot's own message");
    }
    // An anonymous group admin writes as the group itself. Only the id is
    // compared: `User::is_anonymous` and `User::is_telegram` also assert
    // (in debug builds) the names Telegram gives these accounts, and an
    // update is not to panic Herald whatever its names say.
    if from.id.is_anonymous()
        && let Some(chat) = &message.sender_chat
    {
        return Ok(Sender {
            id: ActorId::on(&ChannelName::new(CHANNEL), chat.id.0),
            display_name: chat.title().unwrap_or("anonymous admin").to_owned(),
        });
    }
    if from.id.is_telegram() {
        return Err("a message from Telegram's service account");
    }
    if from.is_bot {
        return Err("another bot's message");
    }
    Ok(Sender {
        id: ActorId::on(&ChannelName::new(CHANNEL), from.id.0),
        display_name: from.full_name(),
    })
}

fn mentions(text: &str, entities: &[MessageEntity], bot: &BotIdentity) -> bool {
    let handle = format!("@{}", bot.username);
    entities.iter().any(|entity| match &entity.kind {
        MessageEntityKind::Mention => entity_text(text, entity).is_some_and(|t| t.eq_ignore_ascii_case(&handle)),
        MessageEntityKind::TextMention { user } => user.id.0 == bot.id,
        MessageEntityKind::BotCommand => entity_text(text, entity)
            .and_then(|t| t.rsplit_once('@'))
            .is_some_and(|(_, name)| name.eq_ignore_ascii_case(&bot.username)),
        _ => false,
    })
}

/// The part of `text` an entity marks. Telegram counts its offset and length
/// in UTF-16 code units; an entity that does not start and end on character
/// boundaries inside the text marks nothing. (teloxide's `MessageEntityRef`
/// panics on such an entity instead.)
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
/// is optional in the Bot API, and teloxide reads a missing one as
/// `u32::MAX`, which would look like a 4 GB file. An unknown size is
/// fetched, and the cap applies to the bytes.
pub(super) fn claimed_size(meta: &teloxide::types::FileMeta) -> u64 {
    match meta.size {
        u32::MAX => 0,
        size => u64::from(size),
    }
}

/// The album the update's message is part of (`media_group_id`).
pub fn album_of(update: &Update) -> Option<&str> {
    match &update.kind {
        UpdateKind::Message(message) | UpdateKind::EditedMessage(message) => {
            message.media_group_id().map(|group| group.0.as_str())
        }
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

/// A type Telegram named, or `default`.
fn mime(mime: Option<&impl ToString>, default: &str) -> String {
    mime.map_or_else(|| default.to_owned(), ToString::to_string)
}

/// Files that came with the message, with the `file_id` the gateway
/// fetches them by (`getFile`); the largest size of a photo.
fn attachments(message: &Message) -> Vec<Attachment> {
    let file =
        |name: String, content_type: String, meta: &teloxide::types::FileMeta, kind: AttachmentKind| Attachment {
            name,
            content_type,
            size: claimed_size(meta),
            source: Some(meta.id.0.clone()),
            kind: Some(kind),
            ..Attachment::default()
        };
    let mut found = Vec::new();
    if let Some(document) = message.document() {
        found.push(file(
            document.file_name.clone().unwrap_or_else(|| "document".into()),
            mime(document.mime_type.as_ref(), "application/octet-stream"),
            &document.file,
            AttachmentKind::Document,
        ));
    }
    if let Some(largest) = message
        .photo()
        .and_then(|sizes| sizes.iter().max_by_key(|p| u64::from(p.width) * u64::from(p.height)))
    {
        found.push(file(
            "photo.jpg".into(),
            "image/jpeg".into(),
            &largest.file,
            AttachmentKind::Photo,
        ));
    }
    if let Some(voice) = message.voice() {
        found.push(file(
            "voice.ogg".into(),
            mime(voice.mime_type.as_ref(), "audio/ogg"),
            &voice.file,
            AttachmentKind::Voice,
        ));
    }
    if let Some(audio) = message.audio() {
        found.push(file(
            audio.file_name.clone().unwrap_or_else(|| "audio".into()),
            mime(audio.mime_type.as_ref(), "audio/mpeg"),
            &audio.file,
            AttachmentKind::Audio,
        ));
    }
    if let Some(video) = message.video() {
        found.push(file(
            video.file_name.clone().unwrap_or_else(|| "video.mp4".into()),
            mime(video.mime_type.as_ref(), "video/mp4"),
            &video.file,
            AttachmentKind::Video,
        ));
    }
    if let Some(note) = message.video_note() {
        found.push(file(
            "video_note.mp4".into(),
            "video/mp4".into(),
            &note.file,
            AttachmentKind::Video,
        ));
    }
    found
}

#[cfg(test)]
mod tests;
