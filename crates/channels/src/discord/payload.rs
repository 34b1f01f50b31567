//! Discord events to Herald's normalized message. Pure: the adapter passes
//! the message as the gateway delivered it ([`super::model::Message`]),
//! where it was posted (looked up once per channel) and what it knows about
//! the bot.
//!
//! Conversations: a DM is `discord:<dm channel id>`; a guild channel is
//! `discord:<channel id>`; a thread is `discord:<parent id>/<thread id>`.
//! Senders are `discord:<user id>`.

use std::collections::HashSet;

use herald_core::{
    ActorId, Attachment, ChannelName, ConversationId, ConversationKind, ConversationRef, InboundMessage, Sender,
    Timestamp,
};

pub use super::model::ChannelObject;
use super::model::{INLINE_REPLY, Message, REGULAR};

pub const CHANNEL: &str = "discord";

/// Where a message was posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Direct { channel: u64 },
    Channel { channel: u64 },
    Thread { parent: u64, thread: u64 },
}

impl Place {
    pub fn conversation(self) -> ConversationRef {
        let channel = ChannelName::new(CHANNEL);
        let (id, kind, chat, thread) = match self {
            Place::Direct { channel } => (format!("{CHANNEL}:{channel}"), ConversationKind::Direct, channel, None),
            Place::Channel { channel } => (format!("{CHANNEL}:{channel}"), ConversationKind::Group, channel, None),
            Place::Thread { parent, thread } => (
                format!("{CHANNEL}:{parent}/{thread}"),
                ConversationKind::Group,
                parent,
                Some(thread.to_string()),
            ),
        };
        ConversationRef {
            id: ConversationId::new(id),
            channel,
            kind,
            chat: chat.to_string(),
            thread,
        }
    }

    /// Whether `respond_in` lists this channel (or a thread's parent).
    fn listed_in(self, respond_in: &HashSet<u64>) -> bool {
        match self {
            Place::Direct { .. } => false,
            Place::Channel { channel } => respond_in.contains(&channel),
            Place::Thread { parent, thread } => respond_in.contains(&parent) || respond_in.contains(&thread),
        }
    }
}

/// Discord's channel types that are threads (announcement, public, private).
const THREAD_TYPES: [u8; 3] = [10, 11, 12];
/// DM and group DM.
const DIRECT_TYPES: [u8; 2] = [1, 3];

impl ChannelObject {
    pub fn place(&self) -> Place {
        match (self.kind, self.parent_id) {
            (kind, Some(parent)) if THREAD_TYPES.contains(&kind) => Place::Thread {
                parent,
                thread: self.id,
            },
            (kind, _) if DIRECT_TYPES.contains(&kind) => Place::Direct { channel: self.id },
            _ => Place::Channel { channel: self.id },
        }
    }
}

/// Messages Herald never reads: its own, other bots', webhooks', and system
/// messages (joins, pins, boosts). Decidable before looking anything up.
pub fn is_for_herald(message: &Message, bot_id: u64) -> bool {
    let from_person = !message.author.bot && !message.author.system && message.webhook_id.is_none();
    let authored_by_bot = message.author.id == bot_id;
    let conversational = matches!(message.kind, REGULAR | INLINE_REPLY);
    from_person && !authored_by_bot && conversational
}

/// Whether a message was written in a DM (Discord sends no guild id there).
pub fn is_direct(message: &Message) -> bool {
    message.guild_id.is_none()
}

/// The text without the bot's own mention (`<@ID>` or the legacy `<@!ID>`).
fn without_bot_mention(content: &str, bot_id: u64) -> String {
    content
        .replace(&format!("<@{bot_id}>"), "")
        .replace(&format!("<@!{bot_id}>"), "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn received_at(message: &Message) -> Timestamp {
    chrono::DateTime::parse_from_rfc3339(&message.timestamp)
        .map(|at| at.with_timezone(&chrono::Utc))
        .unwrap_or_else(|_| chrono::Utc::now())
}

/// The normalized message, or `None` when there is nothing for Herald in it.
pub fn inbound(message: &Message, place: Place, bot_id: u64, respond_in: &HashSet<u64>) -> Option<InboundMessage> {
    if !is_for_herald(message, bot_id) {
        return None;
    }
    let text = without_bot_mention(&message.content, bot_id);
    let attachments: Vec<Attachment> = message
        .attachments
        .iter()
        .map(|a| Attachment {
            name: a.filename.clone(),
            content_type: a
                .content_type
                .clone()
                .unwrap_or_else(|| "application/octet-stream".into()),
            size: a.size,
            source: Some(a.url.clone()),
            ..Attachment::default()
        })
        .collect();
    if text.is_empty() && attachments.is_empty() {
        return None;
    }
    let mentioned = message.mentions.iter().any(|user| user.id == bot_id);
    let replied_to_bot = message
        .referenced_message
        .as_ref()
        .is_some_and(|replied| replied.author.id == bot_id);
    let mentions_bot = match place {
        Place::Direct { .. } => true,
        _ => mentioned || replied_to_bot || place.listed_in(respond_in),
    };
    let display_name = message
        .member
        .as_ref()
        .and_then(|member| member.nick.clone())
        .or_else(|| message.author.global_name.clone())
        .unwrap_or_else(|| message.author.username.clone());
    Some(InboundMessage {
        conversation: place.conversation(),
        sender: Sender {
            id: ActorId::on(&ChannelName::new(CHANNEL), message.author.id),
            display_name,
        },
        text,
        platform_message_id: message.id.to_string(),
        reply_to: message
            .message_reference
            .as_ref()
            .and_then(|reference| reference.message_id)
            .map(|id| id.to_string()),
        mentions_bot,
        received_at: received_at(message),
        attachments,
    })
}

#[cfg(test)]
mod tests;
