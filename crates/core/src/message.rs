//! The normalized message: what every channel adapter turns a platform event
//! into, and what every reply is turned back from.

use serde::{Deserialize, Serialize};

use crate::ids::{ActorId, ChannelName, ConversationId};
use crate::time::Timestamp;

/// Whether a conversation is one person talking to Herald or a shared room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationKind {
    Direct,
    Group,
}

/// Where a conversation lives on its platform: enough for the channel adapter
/// to send a reply there without looking anything up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRef {
    pub id: ConversationId,
    pub channel: ChannelName,
    pub kind: ConversationKind,
    /// The platform's chat, channel or mailbox address.
    pub chat: String,
    /// Thread, topic or `thread_ts`, when the conversation is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

/// Who sent a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    pub id: ActorId,
    pub display_name: String,
}

/// A file that came with a message.
///
/// The adapter fills in what the platform says (name, type, size) and where
/// the platform serves the file (`source`: a Telegram `file_id`, a Discord CDN
/// URL, a Slack `url_private`; or the bytes themselves, for a mail's MIME
/// part). After access control the gateway fetches it within the caps and
/// stores it content-addressed before the message is queued: `file` names the
/// stored bytes, or `not_fetched` says why there are none, so what the model
/// is told never depends on a download at turn time. The queue keeps only
/// this reference, never the bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub name: String,
    /// The type the platform claimed; the stored file's type is what its
    /// bytes are (`file`'s), which may differ.
    pub content_type: String,
    /// The size the platform claimed, in bytes (0 when it did not say).
    pub size: u64,
    /// Where the platform serves the file; what it means is the channel's
    /// business. Kept on the queue until the turn fetches the file, dropped
    /// once it is stored or described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// What kind of file the platform says this is, where it says more than
    /// a type (a voice note rather than any audio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AttachmentKind>,
    /// The stored file, when it was fetched and kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<crate::files::FileRef>,
    /// Why the file was not fetched or kept (over a cap, a type not allowed,
    /// a timeout, bytes that are not what they claim): told to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_fetched: Option<String>,
    /// The bytes, when the channel already has them (a mail's MIME part);
    /// never queued.
    #[serde(skip)]
    pub inline: Option<crate::files::InlineBytes>,
}

impl Attachment {
    /// Named by the platform, let in by the gateway, not fetched yet: the
    /// worker fetches it at turn time.
    pub fn is_waiting(&self) -> bool {
        self.source.is_some() && self.file.is_none() && self.not_fetched.is_none()
    }
}

/// What a platform says a file is, beyond its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    Photo,
    Voice,
    Audio,
    Video,
    Document,
    Sticker,
}

/// One message from a person, as every channel normalizes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundMessage {
    pub conversation: ConversationRef,
    pub sender: Sender,
    pub text: String,
    /// The platform id of this message: with the channel, the dedup key.
    pub platform_message_id: String,
    /// The platform id of the message this one replies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Whether the message mentions Herald (or replies to one of its messages).
    #[serde(default)]
    pub mentions_bot: bool,
    pub received_at: Timestamp,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

impl InboundMessage {
    /// The key under which a redelivered platform event is recognised.
    pub fn dedup_key(&self) -> String {
        format!("{}:{}", self.conversation.channel, self.platform_message_id)
    }
}

/// A reply on its way to a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundMessage {
    pub conversation: ConversationRef,
    pub text: String,
    /// The platform message to reply to, where the platform supports replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// The same for every try of the same reply (a task's reply slot). A
    /// platform with idempotent sends (Discord's enforced nonce) posts a
    /// reply once however often it is tried after an unknown outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Files sent with the reply (a script's output), after its text. Never
    /// serialized: an outbound message is sent, not queued.
    #[serde(skip)]
    pub files: Vec<OutboundFile>,
}

/// A file on its way to a conversation, with its bytes (read from the file
/// store by whoever attached it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundFile {
    /// The file name people see.
    pub name: String,
    pub content_type: String,
    pub bytes: crate::files::InlineBytes,
}

impl OutboundFile {
    pub fn size(&self) -> u64 {
        self.bytes.0.len() as u64
    }
}

/// A byte count as people read it: `40 MB`, `512 KB`, `12 bytes`.
pub fn human_size(bytes: u64) -> String {
    const KB: u64 = 1024;
    const MB: u64 = 1024 * KB;
    if bytes >= MB {
        format!("{:.1} MB", bytes as f64 / MB as f64).replace(".0 ", " ")
    } else if bytes >= KB {
        format!("{} KB", bytes.div_ceil(KB))
    } else {
        format!("{bytes} bytes")
    }
}
